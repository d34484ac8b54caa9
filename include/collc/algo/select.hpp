#pragma once
/// \file
/// Topology-aware default selection: rank candidate schedules with the cost
/// model (algo/cost.hpp), break near-ties with the node hierarchy, and read
/// expert overrides (COLLC_ALGO, COLLC_FACTORS).
///
///   auto node = collc::node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
///   auto s = collc::algo::select(collective::allreduce, 128, 1 << 20, true, {}, node);
///   // recexch{-16,-4,2,4,16}: reduce-scatter inside a NUMA domain first
///   auto top = collc::algo::candidates(collective::allreduce, 8, 4096, true);  // best first, for tuning
///
/// How candidates are generated (pruned enumeration, after Jocksch et al. 2026):
///  - recursive exchange: every ordered factorization of P while there are at
///    most options.max_phases of them, else only those built from the
///    rank-order hierarchy (node_topology::rank_radices, then the number of
///    nodes): the hierarchy itself, every merge of adjacent levels, and the
///    factorizations of the node count. Every split of a phase into
///    reduce-scatter and reduce-exchange steps, except splits whose slice
///    (bytes / product of the reduce-scatter radices) would fall below the
///    64-byte cache line (options.min_slice_bytes).
///  - cyclic shift (commutative operators, or allgather): every cyclic phase
///    while there are at most options.max_cyclic, else repeated radices 2, 3,
///    4, 8, 16 and the node's own hierarchy; each as dissemination and, for
///    allreduce, mirrored reduce-scatter + allgather; the ring.
///  - folded recursive doubling / Rabenseifner for allreduce on P that is not
///    a power of two (the route for a prime P and a non-commutative operator),
///    trees (binomial, 2-ary, 3-ary; one root per package for allreduce,
///    reduce_scatter, allgather), copy-in.
/// Messages above options.chunk_bytes are costed as the plan runs them: a
/// pipeline of chunk-sized executions (cache-sized chunks).
///
/// Ranking: by predicted seconds. The cost model sees nodes, not the levels
/// inside a node (packages, NUMA domains), and it prices every ordering of the
/// same radices on one node alike. So candidates within options.tie_tolerance
/// of the best (10 %) are ordered by the traffic they send across the
/// hierarchy, outermost boundary first (bytes read from another node, then
/// from another package, then from another NUMA domain, ...): the aligned
/// sets of the paper ({-16,-4,-2,...} on a 2x4x16 node) win those ties.
#include <collc/algo/schedule.hpp>
#include <collc/config.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>
#include <collc/ir/cost.hpp>
#include <collc/topology.hpp>

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace collc::algo {

/// Knobs of the selector. The defaults match the MPI plan's own defaults.
struct select_options {
  ir::machine_model model{};                                   ///< calibrate for the machine when possible
  std::size_t chunk_bytes = std::size_t{256} << 10;            ///< plan_options::chunk_bytes: pipeline chunk
  std::size_t min_slice_bytes = 64;                            ///< no reduce-scatter slice below a cache line
  double tie_tolerance = 0.10;                                 ///< relative cost within which the topology decides
  std::size_t max_phases = 256;                                ///< enumerate all recursive phases up to this many
  std::size_t max_cyclic = 1024;                               ///< enumerate all cyclic phases up to this many
  std::size_t refine_top = 8;                                  ///< cheapest candidates re-costed on their programs
  std::size_t refine_max_instructions = std::size_t{1} << 18;  ///< skip re-costing larger programs
};

/// One ranked schedule.
struct candidate {
  schedule sched;
  double seconds = 0;            ///< predicted time of one call (all chunks)
  bool aligned = false;          ///< built from the rank-order hierarchy (node_topology::rank_radices)
  bool refined = false;          ///< seconds from ir::predict on the lowered program, not the closed form
  std::vector<double> crossing;  ///< refined only: bytes crossing each boundary, outermost first
  friend bool operator==(const candidate&, const candidate&) = default;
};

/// Ranked candidate schedules for collective `c` on `P` ranks with `bytes`
/// per rank (per block for reduce_scatter / allgather), best first. `node_of`:
/// node of each program rank (contiguous blocks; empty = one node); `topo`:
/// one node's model with its ranks' bindings (empty = flat). Every candidate
/// is valid for (c, P, commutative); the list is the same on every rank that
/// passes the same arguments. Throws collc::error for P < 1.
///
/// Ranking (see the file comment): closed-form cost for all; the cheapest
/// options.refine_top, and the hierarchy-aligned ones within the tolerance,
/// are re-costed on their lowered programs and come first, ordered by cost
/// with near-ties (options.tie_tolerance) broken by traffic across the
/// hierarchy; the rest follow by closed-form cost.
///
///   for (auto& k : collc::algo::candidates(collective::allreduce, 8, 1 << 16, true)) ...
std::vector<candidate> candidates(collective c, int P, std::size_t bytes, bool commutative,
                                  const std::vector<int>& node_of = {}, const node_topology& topo = {},
                                  const select_options& opt = {});

/// The default choice: candidates(...).front() (see the file comment).
///
///   auto s = collc::algo::select(collective::allreduce, 288, 1 << 20, true, {},
///                                collc::node_topology::synthetic("pack:4 core:72 pu:1"));
schedule select(collective c, int P, std::size_t bytes, bool commutative, const std::vector<int>& node_of = {},
                const node_topology& topo = {}, const select_options& opt = {});

// --- schedules as text, validation, overrides ----------------------------------

/// Reads schedule::to_string()'s form back: "recexch{-2,2}", "recexch{2,2}+fold",
/// "cyclic{2,2,2}", "ring", "tree:binomial", "tree:3", "tree:2x2", "copyin".
/// Throws collc::error(errc::parse_error) naming the text. Syntax only: see
/// check_schedule for the rules.
schedule parse_schedule(std::string_view text);

/// Throws collc::error naming the problem if `s` cannot serve collective `c`
/// on `P` ranks (with a commutative operator or not): the factor-set rules,
/// commutativity (cyclic shift and ring), tree arity / roots, folding limits.
void check_schedule(const schedule& s, collective c, int P, bool commutative);

/// Expert overrides from the environment, like MPICH's CVARs or NCCL_ALGO:
///   COLLC_ALGO     recexch | cyclic | ring | tree[:binomial|K[xR]] | copyin |
///                  rabenseifner | recursive_doubling | a full schedule
///                  ("recexch{-4,4}", "cyclic{2,2,2}", "tree:2x2")
///   COLLC_FACTORS  a factor set, "-4,-2,2,4"; with COLLC_ALGO unset it is
///                  recursive exchange if its product fits P, else cyclic shift
/// Returns nullopt when neither is set. Throws collc::error naming the
/// variable and its value when the override is malformed or does not fit
/// (c, P, commutative).
///
///   // COLLC_FACTORS=-2,-2,2,2 mpiexec -n 4 ./app
///   if (auto s = collc::algo::override_from_env(collective::allreduce, 4, true)) use(*s);
std::optional<schedule> override_from_env(collective c, int P, bool commutative);

/// The schedule factor set `fs`, given for collective `c` on P ranks, names:
/// a recursive exchange when it fits P exactly, else a cyclic shift where
/// that family serves `c` (cyclic_serves). Otherwise throws
/// errc::invalid_factor_set (or overflow) with both reasons, or with why a
/// cyclic shift does not serve `c`. The one rule of make_*'s factor sets and
/// COLLC_FACTORS; the operator's commutativity is the caller's to check.
schedule schedule_of_factor_set(const factor_set& fs, int P, collective c);

/// The part of override_from_env that needs no communicator: the variables'
/// syntax and their combination rules (a factor set that parses, COLLC_ALGO a
/// known word or a schedule that parses, COLLC_FACTORS only with recexch or
/// cyclic). Throws collc::error naming the variable and its value. The
/// interposition library calls it at MPI_Init, where a misspelt COLLC_ALGO
/// would otherwise refuse every plan and send every call to MPI.
void check_override_from_env();

}  // namespace collc::algo

#if COLLC_HEADER_ONLY
#include <collc/algo/select.ipp>
#endif
