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

  [[nodiscard]] int objects() const {
    int n = 0;
    for (int o : of_pu) n = std::max(n, o + 1);
    return n;
  }
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

inline int priority_of(std::string_view kind) {
  for (std::size_t i = 0; i < std::size(level_priority); ++i)
    if (level_priority[i] == kind) return static_cast<int>(i);
  return static_cast<int>(std::size(level_priority));
}

/// FNV-1a, 64 bit: stable across runs and compilers (std::hash is neither).
inline std::uint64_t stable_hash64(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string hex64(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

/// Canonical kind for a synthetic-description token, or "" if unknown.
inline std::string canonical_kind(std::string_view t) {
  std::string k(t);
  for (char& c : k) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (k == "pack" || k == "package" || k == "socket") return "pack";
  if (k == "numa" || k == "node" || k == "numanode") return "numa";
  if (k == "die") return "die";
  if (k == "group" || k == "group0") return "group";
  if (k == "core") return "core";
  if (k == "pu" || k == "thread") return "pu";
  for (char d : {'1', '2', '3', '4', '5'}) {
    const std::string base = std::string("l") + d;
    if (k == base || k == base + "d" || k == base + "u" || k == base + "cache" || k == base + "dcache" ||
        k == base + "ucache")
      return base;
  }
  return "";
}

inline bool same_partition(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.size() != b.size()) return false;
  // Object numbers are in PU order, so equal partitions have equal numbers.
  return a == b;
}

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
  static node_topology flat(int pus) {
    if (pus < 1)
      throw error(errc::invalid_argument, "node_topology::flat: pus must be >= 1, got " + std::to_string(pus));
    node_topology t;
    topology_level pu{"pu", {}, 0};
    for (int p = 0; p < pus; ++p) pu.of_pu.push_back(p);
    t.levels.push_back(std::move(pu));
    return t;
  }

  /// Builds a model from levels in any order of discovery (outermost first),
  /// keeping one level per distinct split of the PUs (see detail::level_priority);
  /// "pack", "core" and "pu" are always kept. Used by the synthetic parser and
  /// the hwloc reader so both produce the same model for the same machine.
  static node_topology from_levels(std::vector<topology_level> raw, std::vector<cache_info> caches = {}) {
    if (raw.empty() || raw.back().kind != "pu")
      throw error(errc::invalid_argument, "node_topology: the last level must be \"pu\"");
    const std::size_t pus = raw.back().of_pu.size();
    for (const auto& l : raw) {
      if (l.of_pu.size() != pus)
        throw error(errc::invalid_argument, "node_topology: level '" + l.kind + "' covers " +
                                                std::to_string(l.of_pu.size()) + " PUs, the node has " +
                                                std::to_string(pus));
      int next = 0;  // objects must be numbered in PU order: 0, then 0 or 1, ...
      for (int o : l.of_pu) {
        if (o < 0 || o > next)
          throw error(errc::invalid_argument,
                      "node_topology: level '" + l.kind + "' does not number its objects in PU order");
        if (o == next) ++next;
      }
    }
    node_topology t;
    t.caches = std::move(caches);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      const auto& l = raw[i];
      const bool always = l.kind == "pack" || l.kind == "core" || l.kind == "pu";
      if (!always) {
        if (l.objects() <= 1) continue;  // the whole node
        bool beaten = false;
        for (std::size_t j = 0; j < raw.size() && !beaten; ++j) {
          if (j == i || !detail::same_partition(raw[j].of_pu, l.of_pu)) continue;
          const auto& o = raw[j];
          const bool o_always = o.kind == "pack" || o.kind == "core" || o.kind == "pu";
          const int pi = detail::priority_of(l.kind), pj = detail::priority_of(o.kind);
          beaten = o_always || pj < pi || (pj == pi && j < i);
        }
        if (beaten) continue;
      }
      t.levels.push_back(l);
    }
    return t;
  }

  /// Reads hwloc's synthetic description, e.g. "pack:2 numa:4 core:16 pu:1"
  /// (the paper's EPYC node) or "pack:4 core:72 pu:1" (Grace): blank-separated
  /// `kind:arity` levels, outermost first, each optionally followed by
  /// `(size=32MiB)` for caches (hwloc's units: kB/MB/GB decimal, KiB/MiB/GiB binary); the last level must be the PU
  /// level, as hwloc 2.9 requires. Kinds: pack/package/socket, numa/node, die, group, l1..l5 (also l3d, l3cache, ...),
  /// core, pu/thread.
  static node_topology synthetic(std::string_view text) {
    auto bad = [&](const std::string& why) {
      return error(errc::invalid_argument, "synthetic topology '" + std::string(text) + "': " + why);
    };
    struct token {
      std::string kind;
      long long arity;
      std::size_t size;
    };
    std::vector<token> tokens;
    std::size_t i = 0;
    auto skip_blanks = [&] {
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    };
    skip_blanks();
    while (i < text.size()) {
      const std::size_t blank = std::min(text.find_first_of(" \t\n", i), text.size());
      const std::size_t colon = text.substr(0, blank).find(':', i);
      if (colon == std::string_view::npos)
        throw bad("expected kind:arity at '" + std::string(text.substr(i, blank - i)) + "'");
      const std::string_view name = text.substr(i, colon - i);
      const std::string kind = detail::canonical_kind(name);
      if (kind.empty()) throw bad("unknown level kind '" + std::string(name) + "'");
      i = colon + 1;
      long long arity = 0;
      const std::size_t digits_at = i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9' && arity <= (1 << 20))
        arity = arity * 10 + (text[i++] - '0');
      if (i == digits_at || arity < 1 || arity > (1 << 20))
        throw bad("level '" + std::string(name) + "' needs an arity in [1, 1048576]");
      std::size_t size = 0;
      if (i < text.size() && text[i] == '(') {
        const std::size_t close = text.find(')', i);
        if (close == std::string_view::npos) throw bad("unclosed '(' after level '" + std::string(name) + "'");
        const std::string_view attrs = text.substr(i + 1, close - i - 1);
        if (attrs.starts_with("size=")) size = parse_size(attrs.substr(5), bad);
        i = close + 1;
      }
      if (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n')
        throw bad("unexpected '" + std::string(1, text[i]) + "' after level '" + std::string(name) + "'");
      tokens.push_back({kind, arity, size});
      skip_blanks();
    }
    if (tokens.empty()) throw bad("no levels");
    if (tokens.back().kind != "pu") throw bad("the last level must be pu (hwloc 2.9 wants a PU level last)");
    long long pus = 1;
    for (const auto& t : tokens) {
      pus *= t.arity;
      if (pus > (1 << 20)) throw bad("more than 1048576 PUs");
    }
    std::vector<topology_level> raw;
    std::vector<cache_info> caches;
    long long objects = 1;
    for (const auto& t : tokens) {
      objects *= t.arity;
      const long long per = pus / objects;  // PUs per object of this level
      topology_level l{t.kind, {}, t.size};
      l.of_pu.resize(static_cast<std::size_t>(pus));
      for (long long p = 0; p < pus; ++p) l.of_pu[static_cast<std::size_t>(p)] = static_cast<int>(p / per);
      if (t.kind.size() == 2 && t.kind[0] == 'l') caches.push_back({t.kind[1] - '0', t.size, static_cast<int>(per)});
      raw.push_back(std::move(l));
    }
    std::sort(caches.begin(), caches.end(), [](const cache_info& a, const cache_info& b) { return a.depth < b.depth; });
    return from_levels(std::move(raw), std::move(caches));
  }

  [[nodiscard]] int pus() const { return levels.empty() ? 0 : static_cast<int>(levels.back().of_pu.size()); }

  /// Index of the level of kind `kind`, or -1.
  [[nodiscard]] int level_index(std::string_view kind) const {
    for (std::size_t i = 0; i < levels.size(); ++i)
      if (levels[i].kind == kind) return static_cast<int>(i);
    return -1;
  }

  /// Hwloc's synthetic form when every object of a level has the same number
  /// of children ("pack:2 numa:4 core:16 pu:1"); otherwise object counts per
  /// level ("pack=2 core=6 pu=6"). Cache sizes are not part of it.
  [[nodiscard]] std::string describe() const {
    std::string uniform, totals;
    bool is_uniform = true;
    int parent_objects = 1;
    std::vector<int> parent_of_pu(static_cast<std::size_t>(pus()), 0);
    for (const auto& l : levels) {
      const int n = l.objects();
      // children of each parent object
      std::vector<int> seen(static_cast<std::size_t>(n), -1), kids(static_cast<std::size_t>(parent_objects), 0);
      for (std::size_t p = 0; p < l.of_pu.size(); ++p) {
        const auto o = static_cast<std::size_t>(l.of_pu[p]);
        if (seen[o] < 0) {
          seen[o] = parent_of_pu[p];
          ++kids[static_cast<std::size_t>(parent_of_pu[p])];
        }
      }
      for (int k : kids) is_uniform = is_uniform && k == kids.front();
      if (!uniform.empty()) uniform += ' ', totals += ' ';
      uniform += l.kind + ":" + std::to_string(kids.empty() ? 0 : kids.front());
      totals += l.kind + "=" + std::to_string(n);
      parent_of_pu = l.of_pu;
      parent_objects = n;
    }
    return is_uniform ? uniform : totals;
  }

  /// A short hash of everything a tuned choice depends on: the levels (how
  /// they split the PUs), the caches and the ranks' bindings. Two nodes with
  /// the same fingerprint run the same schedules the same way, as far as
  /// collc can see.
  [[nodiscard]] std::string fingerprint() const {
    std::string s = "collc-node-1;";
    for (const auto& l : levels) {
      s += l.kind + ":" + std::to_string(l.cache_bytes) + "[";
      for (int o : l.of_pu) s += std::to_string(o) + ",";
      s += "]";
    }
    for (const auto& c : caches)
      s += ";L" + std::to_string(c.depth) + "=" + std::to_string(c.bytes) + "/" + std::to_string(c.pus_per_cache);
    s += ";bind";
    for (const auto& b : bindings) s += ":" + std::to_string(b.level) + "." + std::to_string(b.object);
    return detail::hex64(detail::stable_hash64(s));
  }

  /// The binding of a rank that may run on `pus` (logical PU indices): the
  /// smallest object of the model holding all of them.
  [[nodiscard]] rank_binding locate(const std::vector<int>& pu_set) const {
    std::vector<int> in;
    for (int p : pu_set)
      if (p >= 0 && p < pus()) in.push_back(p);
    if (in.empty()) return {};
    for (int k = static_cast<int>(levels.size()) - 1; k >= 0; --k) {
      const auto& of = levels[static_cast<std::size_t>(k)].of_pu;
      const int o = of[static_cast<std::size_t>(in.front())];
      bool all = true;
      for (int p : in) all = all && of[static_cast<std::size_t>(p)] == o;
      if (all) return {k, o};
    }
    return {};
  }

  /// This node with `ranks` ranks bound compactly: rank i on PU i for
  /// ranks <= pus; beyond, blocks of ceil(ranks / pus) consecutive ranks share
  /// a PU (oversubscription).
  [[nodiscard]] node_topology with_compact_ranks(int ranks) const {
    node_topology t = *this;
    t.bindings.clear();
    const int n = pus();
    for (int r = 0; r < ranks; ++r) {
      const int p = ranks <= n ? r : static_cast<int>(static_cast<long long>(r) * n / ranks);
      t.bindings.push_back({static_cast<int>(levels.size()) - 1, p});
    }
    return t;
  }

  /// The hierarchy as seen in rank order: for each level (innermost first)
  /// the largest block of consecutive node-local ranks, dividing `ranks`, that
  /// always lies inside one object of the level. Returns the blocks that grow
  /// (kind, block size), ending with ("node", ranks). Bindings: this->bindings
  /// when it has `ranks` entries, else compact (with_compact_ranks).
  [[nodiscard]] std::vector<std::pair<std::string, int>> rank_blocks(int ranks) const {
    if (ranks < 1) throw error(errc::invalid_argument, "rank_blocks: ranks must be >= 1, got " + std::to_string(ranks));
    if (levels.empty()) return {{"node", ranks}};
    const std::vector<rank_binding> bind =
        bindings.size() == static_cast<std::size_t>(ranks) ? bindings : with_compact_ranks(ranks).bindings;
    // First PU of each object of each level (to find a binding's ancestors).
    std::vector<std::vector<int>> first_pu(levels.size());
    for (std::size_t k = 0; k < levels.size(); ++k) {
      first_pu[k].assign(static_cast<std::size_t>(levels[k].objects()), -1);
      for (std::size_t p = levels[k].of_pu.size(); p-- > 0;)
        first_pu[k][static_cast<std::size_t>(levels[k].of_pu[p])] = static_cast<int>(p);
    }
    auto ancestor = [&](int r, std::size_t k) {  // object of level k holding rank r, or -1
      const rank_binding& b = bind[static_cast<std::size_t>(r)];
      if (b.level < static_cast<int>(k) || b.level >= static_cast<int>(levels.size())) return -1;
      const auto& firsts = first_pu[static_cast<std::size_t>(b.level)];
      if (b.object < 0 || b.object >= static_cast<int>(firsts.size())) return -1;
      return levels[k].of_pu[static_cast<std::size_t>(firsts[static_cast<std::size_t>(b.object)])];
    };
    auto fits = [&](int d, std::size_t k) {  // every block of d ranks inside one level-k object
      for (int lo = 0; lo < ranks; lo += d) {
        const int o = ancestor(lo, k);
        if (o < 0) return false;
        for (int r = lo + 1; r < lo + d; ++r)
          if (ancestor(r, k) != o) return false;
      }
      return true;
    };
    std::vector<std::pair<std::string, int>> out;
    int b = 1;
    for (std::size_t k = levels.size(); k-- > 0;) {
      int best = b;
      for (int d = b * 2; d <= ranks; d += b)
        if (ranks % d == 0 && fits(d, k)) best = d;
      if (best > b) {
        out.emplace_back(levels[k].kind, best);
        b = best;
      }
    }
    if (b < ranks) out.emplace_back("node", ranks);
    return out;
  }

  /// Radices of the rank-order hierarchy, innermost first: the ratios of
  /// consecutive rank_blocks. Their product is `ranks`. For 128 compact ranks
  /// on "pack:2 numa:4 core:16 pu:1": {16, 4, 2}.
  [[nodiscard]] std::vector<int> rank_radices(int ranks) const {
    std::vector<int> out;
    int b = 1;
    for (const auto& [kind, size] : rank_blocks(ranks)) {
      out.push_back(size / b);
      b = size;
    }
    return out;
  }

  /// Bytes of the last-level cache one of `ranks_on_node` compact ranks may
  /// count on (its share of the largest cache it sits in), 0 if unknown.
  [[nodiscard]] std::size_t cache_bytes_per_rank(int ranks_on_node) const {
    if (caches.empty() || ranks_on_node < 1 || pus() < 1) return 0;
    const cache_info& llc = caches.back();
    const double ranks_per_pu = std::max(1.0, static_cast<double>(ranks_on_node) / pus());
    return static_cast<std::size_t>(static_cast<double>(llc.bytes) / (llc.pus_per_cache * ranks_per_pu));
  }

 private:
  template <class Bad>
  static std::size_t parse_size(std::string_view v, Bad& bad) {
    std::size_t i = 0;
    unsigned long long n = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
      n = n * 10 + static_cast<unsigned>(v[i++] - '0');
      if (n > (1ull << 50)) throw bad("cache size '" + std::string(v) + "' is too large");
    }
    if (i == 0) throw bad("cache size '" + std::string(v) + "' is not a number");
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
      throw bad("unknown size unit '" + std::string(v.substr(i)) + "' (kB, MB, GB, KiB, MiB, GiB or none)");
    return static_cast<std::size_t>(n * mul);
  }
};

}  // namespace collc
