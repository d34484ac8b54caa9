#pragma once
/// \file
/// The node model the selector aligns factor sets to: the levels of one
/// node's hierarchy (packages, NUMA domains, shared caches, cores, PUs), the
/// caches, and where each of the node's ranks is bound. Standard library
/// only; collc/backend/hwloc/topology.hpp fills it from hwloc, and
/// node_topology::synthetic reads hwloc's synthetic description without hwloc.
///
///   auto epyc = collc::node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
///   epyc.rank_radices(128);  // {16, 4, 2}: ranks per NUMA domain, domains per package, packages
///   epyc.describe();         // "pack:2 numa:4 core:16 pu:1"
///
/// Rank order is what a factor set sees: recursive exchange step i groups
/// ranks at stride r1*..*r(i-1). rank_radices therefore reports the nested
/// blocks of *consecutive* node-local ranks that share an object (a NUMA
/// domain, a package): with compact binding they follow the hardware, with
/// round-robin binding (rank r on package r % 2) or unbound ranks they do not,
/// and the node is reported flat ({L}), which is the truth in rank order.
#include <collc/config.hpp>
#include <collc/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace collc {

/// One level of a node's hierarchy: which object of the level holds each PU.
/// Objects are numbered 0, 1, ... in PU order.
struct topology_level {
  std::string kind;             ///< "pack", "numa", "die", "l3", "l2", "l1", "group", "core" or "pu"
  std::vector<int> of_pu;       ///< of_pu[p]: the object holding PU p
  std::size_t cache_bytes = 0;  ///< caches: bytes of one object (0: not a cache or unknown)

  [[nodiscard]] int objects() const;
  friend bool operator==(const topology_level&, const topology_level&) = default;
};

/// Where a node-local rank may run: the smallest object of the model that
/// holds every PU of its binding. level = -1: the whole node (an unbound rank,
/// or one whose binding is unknown).
struct rank_binding {
  int level = -1;
  int object = 0;
  friend bool operator==(const rank_binding&, const rank_binding&) = default;
};

/// A shared cache: its level (1, 2, 3, ...), size and how many PUs share one.
struct cache_info {
  int depth = 0;
  std::size_t bytes = 0;
  int pus_per_cache = 1;
  friend bool operator==(const cache_info&, const cache_info&) = default;
};

namespace detail {

/// Kinds in the order a tie is decided: when two levels split the PUs the
/// same way, the one listed first is kept (a per-core L2 is the core).
inline constexpr std::string_view level_priority[] = {"pack", "numa", "die", "l3", "l2", "l1", "l4", "l5", "group"};

/// FNV-1a, 64 bit: stable across runs and compilers (std::hash is neither).
std::uint64_t stable_hash64(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull);

/// `v` as 16 lower-case hex digits.
std::string hex64(std::uint64_t v);

}  // namespace detail

/// One node: its hierarchy (outermost level first, PUs last), its caches and
/// the binding of each node-local rank. A plain value: compare, copy, print.
struct node_topology {
  std::vector<topology_level> levels;  ///< outermost first; the last is "pu" with of_pu[p] == p
  std::vector<cache_info> caches;      ///< every cache level found, innermost first
  std::vector<rank_binding> bindings;  ///< per node-local rank; empty: compact (see rank_radices)

  friend bool operator==(const node_topology&, const node_topology&) = default;

  /// No hierarchy: `pus` PUs and nothing between them and the node (the
  /// fallback without hwloc; ranks per node come from the node communicator).
  static node_topology flat(int pus);

  /// Builds a model from levels in any order of discovery (outermost first),
  /// keeping one level per distinct split of the PUs (see detail::level_priority);
  /// "pack", "core" and "pu" are always kept. Used by the synthetic parser and
  /// the hwloc reader so both produce the same model for the same machine.
  static node_topology from_levels(std::vector<topology_level> raw, std::vector<cache_info> caches = {});

  /// Reads hwloc's synthetic description, e.g. "pack:2 numa:4 core:16 pu:1"
  /// (the paper's EPYC node) or "pack:4 core:72 pu:1" (Grace): blank-separated
  /// `kind:arity` levels, outermost first, each optionally followed by
  /// `(size=32MiB)` for caches (hwloc's units: kB/MB/GB decimal, KiB/MiB/GiB binary); the last level must be the PU
  /// level, as hwloc 2.9 requires. Kinds: pack/package/socket, numa/node, die, group, l1..l5 (also l3d, l3cache, ...),
  /// core, pu/thread.
  static node_topology synthetic(std::string_view text);

  [[nodiscard]] int pus() const { return levels.empty() ? 0 : static_cast<int>(levels.back().of_pu.size()); }

  /// Index of the level of kind `kind`, or -1.
  [[nodiscard]] int level_index(std::string_view kind) const;

  /// Hwloc's synthetic form when every object of a level has the same number
  /// of children ("pack:2 numa:4 core:16 pu:1"); otherwise object counts per
  /// level ("pack=2 core=6 pu=6"). Cache sizes are not part of it.
  [[nodiscard]] std::string describe() const;

  /// A short hash of everything a tuned choice depends on: the levels (how
  /// they split the PUs), the caches and the ranks' bindings. Two nodes with
  /// the same fingerprint run the same schedules the same way, as far as
  /// collc can see.
  [[nodiscard]] std::string fingerprint() const;

  /// The binding of a rank that may run on `pus` (logical PU indices): the
  /// smallest object of the model holding all of them.
  [[nodiscard]] rank_binding locate(const std::vector<int>& pu_set) const;

  /// This node with `ranks` ranks bound compactly: rank i on PU i for
  /// ranks <= pus; beyond, blocks of ceil(ranks / pus) consecutive ranks share
  /// a PU (oversubscription).
  [[nodiscard]] node_topology with_compact_ranks(int ranks) const;

  /// The hierarchy as seen in rank order: for each level (innermost first)
  /// the largest block of consecutive node-local ranks, dividing `ranks`, that
  /// always lies inside one object of the level. Returns the blocks that grow
  /// (kind, block size), ending with ("node", ranks). Bindings: this->bindings
  /// when it has `ranks` entries, else compact (with_compact_ranks).
  [[nodiscard]] std::vector<std::pair<std::string, int>> rank_blocks(int ranks) const;

  /// Radices of the rank-order hierarchy, innermost first: the ratios of
  /// consecutive rank_blocks. Their product is `ranks`. For 128 compact ranks
  /// on "pack:2 numa:4 core:16 pu:1": {16, 4, 2}.
  [[nodiscard]] std::vector<int> rank_radices(int ranks) const;

  /// Bytes of the last-level cache one of `ranks_on_node` compact ranks may
  /// count on (its share of the largest cache it sits in), 0 if unknown.
  [[nodiscard]] std::size_t cache_bytes_per_rank(int ranks_on_node) const;

 private:
  template <class Bad>
  static std::size_t parse_size(std::string_view v, Bad& bad) {
    std::size_t i = 0;
    unsigned long long n = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
      n = n * 10 + static_cast<unsigned>(v[i++] - '0');
      if (n > (1ull << 50)) throw bad(detail::cat("cache size '", v, "' is too large"));
    }
    if (i == 0) throw bad(detail::cat("cache size '", v, "' is not a number"));
    std::string unit(v.substr(i));
    for (char& c : unit) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    // hwloc's units: kB, MB, GB are powers of 1000; KiB, MiB, GiB of 1024.
    unsigned long long mul = 1;
    if (unit == "" || unit == "B")
      mul = 1;
    else if (unit == "KB")
      mul = 1000ull;
    else if (unit == "MB")
      mul = 1000ull * 1000;
    else if (unit == "GB")
      mul = 1000ull * 1000 * 1000;
    else if (unit == "KIB")
      mul = 1ull << 10;
    else if (unit == "MIB")
      mul = 1ull << 20;
    else if (unit == "GIB")
      mul = 1ull << 30;
    else
      throw bad(detail::cat("unknown size unit '", v.substr(i), "' (kB, MB, GB, KiB, MiB, GiB or none)"));
    return static_cast<std::size_t>(n * mul);
  }
};

}  // namespace collc

#if COLLC_HEADER_ONLY
#include <collc/topology.ipp>
#endif
