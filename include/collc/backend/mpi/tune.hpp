#pragma once
/// \file
/// Measured autotuning: time the selector's best candidates on the real
/// communicator within a time budget, agree on the winner across ranks, and
/// remember it in the wisdom file (COLLC_WISDOM). Built on the public plan
/// API (plan.hpp) only.
///
///   auto r = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, n);  // collective call
///   auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, n, r.chosen);
///   // or in one step:
///   auto q = collc::make_tuned<double>(collective::allreduce, MPI_COMM_WORLD, n);
///
/// Order of precedence: an expert override (COLLC_ALGO / COLLC_FACTORS) is
/// used as is; else a wisdom entry for this key (collective, element size,
/// operator, P, node shape, count range, machine fingerprint); else the
/// candidates are measured and the winner is written to the wisdom file.
///
/// Measuring: every candidate's plan is built up front (same order on every
/// rank) and run once; then rounds of `iters` back-to-back calls per
/// candidate, the candidates in alternating order (A B C, C B A, ...), a
/// barrier before each batch; the time of a batch is the maximum over ranks,
/// so every rank holds the same numbers. The winner has the lowest median;
/// rank 0 broadcasts it all the same. Rounds continue while the budget lasts
/// (at least options.min_rounds). The machine may be noisy: medians and
/// alternation keep one slow moment from deciding.
///
/// The node model: with hwloc (COLLC_HAS_HWLOC) the node of rank 0 and the
/// binding of each of its ranks; without, a flat node. Its fingerprint (rank
/// 0's, broadcast) keys the wisdom.
#include <collc/algo/select.hpp>
#include <collc/backend/mpi/plan.hpp>
#include <collc/error.hpp>
#include <collc/ops.hpp>
#include <collc/topology.hpp>
#include <collc/wisdom.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace collc {

/// Knobs of collc::tune.
struct tune_options {
  double budget_s = 0.5;              ///< measurement time, all candidates together
  std::size_t top = 4;                ///< the selector's best this many are measured (0: all)
  bool selector = true;               ///< measure the selector's candidates (false: only default and extra)
  std::vector<algo::schedule> extra;  ///< measured too (if valid for the call)
  int min_rounds = 3;                 ///< alternating rounds at least (medians need several)
  int max_rounds = 25;
  bool use_wisdom = true;                            ///< read / write the wisdom file
  std::optional<std::filesystem::path> wisdom_file;  ///< default: COLLC_WISDOM (none: no wisdom)
  bool honour_overrides = true;                      ///< COLLC_ALGO / COLLC_FACTORS win
  algo::select_options select{};
  plan_options plan{};
};

/// One measured candidate.
struct tune_measurement {
  algo::schedule sched;
  double predicted_s = 0;       ///< the selector's prediction
  double median_s = 0;          ///< median over rounds of (batch time / iters), max over ranks
  std::vector<double> samples;  ///< per round
};

/// What collc::tune decided and how.
struct tune_result {
  algo::schedule chosen;
  enum class origin : std::uint8_t { measured, wisdom, override_env, single_rank } from = origin::measured;
  std::vector<tune_measurement> measured;  ///< in candidate order (empty unless measured)
  double setup_s = 0;                      ///< wall time of the tune call (max over ranks)
};

/// Where a communicator's ranks live, as a plan numbers them.
struct comm_layout {
  int size = 1;
  int nodes = 1;
  int ranks_per_node = 1;    ///< 0: nodes of different sizes
  std::vector<int> node_of;  ///< per program rank; empty when one node
  node_topology node;        ///< rank 0's node, bindings of its ranks (flat without hwloc)
  std::string fingerprint;   ///< node.fingerprint(), agreed (rank 0's)
};

namespace mpi {

void tune_check(int rc, const char* call);

/// Completes `req`, a collective of the blocking API's or the tuner's own on
/// `comm`, giving started plans turns while it waits (engine::give_turns): a
/// rank that completes its started plans in another order than its peers
/// may wait in one of them before it comes here, as engine::agree allows for.
/// No time limit, as the blocking collective it replaces.
void complete_giving_turns(MPI_Request& req, MPI_Comm comm);

/// MPI_Barrier, MPI_Bcast of one int and of a string, and the maximum over
/// `comm`, each through complete_giving_turns.
void barrier(MPI_Comm comm);
void bcast_int(MPI_Comm comm, int& v);
std::string bcast_string(MPI_Comm comm, std::string s);

int comm_rank_of(MPI_Comm comm);

void print_warnings(MPI_Comm comm, const std::vector<std::string>& warnings);

/// A non-commutative operator for probing the placement of order-sensitive plans.
struct placement_probe_op {
  char operator()(char a, char) const { return a; }
};

/// Builds a plan of collective `c` on `comm` (public factories only).
template <class T, class Op, class... A>
plan<T, Op> make_for(collective c, MPI_Comm comm, std::size_t count, int root, Op op, A&&... args) {
  // The reductions only where Op reduces T: collc::bcast / collc::allgather of
  // a type without + (plus) instantiate this too and did not compile.
  switch (c) {
    case collective::allreduce:
      if constexpr (reduction_op<Op, T>)
        return make_allreduce<T, Op>(comm, count, std::move(op), std::forward<A>(args)...);
      break;
    case collective::reduce_scatter:
      if constexpr (reduction_op<Op, T>)
        return make_reduce_scatter<T, Op>(comm, count, std::move(op), std::forward<A>(args)...);
      break;
    case collective::reduce:
      if constexpr (reduction_op<Op, T>)
        return make_reduce<T, Op>(comm, count, root, std::move(op), std::forward<A>(args)...);
      break;
    case collective::allgather:
      if constexpr (std::is_same_v<Op, plus>) return make_allgather<T>(comm, count, std::forward<A>(args)...);
      break;
    case collective::bcast:
      if constexpr (std::is_same_v<Op, plus>) return make_bcast<T>(comm, count, root, std::forward<A>(args)...);
      break;
  }
  if (reduces(c))
    throw error(errc::invalid_argument,
                std::string(to_string(c)) + " needs an operator callable as T(const T&, const T&)");
  throw error(errc::invalid_argument, std::string(to_string(c)) + " takes no operator (use collc::plus)");
}

}  // namespace mpi

/// The layout of `comm` for plans whose reduction is order-sensitive
/// (`order_sensitive`: a non-commutative operator) or not, with `options`
/// (pseudo-nodes). Collective over `comm`: builds and frees a one-element
/// plan to read the plan's own placement, and gathers the ranks' bindings.
comm_layout describe_comm(MPI_Comm comm, bool order_sensitive, const plan_options& options = {});

/// The wisdom key of a plan of `c` on `layout` with element type T and operator Op.
template <class T, class Op>
wisdom_key wisdom_key_for(collective c, const comm_layout& layout) {
  wisdom_key k;
  k.coll = c;
  k.elem_size = sizeof(T);
  k.op = reduces(c) ? mpi::type_name<Op>() : "none";
  k.commutative = commutative_v<Op> || !reduces(c);
  k.ranks = layout.size;
  k.nodes = layout.nodes;
  k.ranks_per_node = layout.ranks_per_node;
  k.fingerprint = layout.fingerprint;
  return k;
}

namespace mpi {

/// Rank 0 looks `key` up in the wisdom file; every rank gets the schedule
/// (nullopt on a miss, or when the entry does not parse on this build).
std::optional<algo::schedule> wisdom_lookup(MPI_Comm comm, const std::optional<std::filesystem::path>& file,
                                            const wisdom_key& key, std::size_t count);

/// Rank 0 writes `e` to the wisdom file (warnings printed, errors reported
/// as warnings: wisdom is a cache, never a reason to fail).
void wisdom_store(MPI_Comm comm, const std::optional<std::filesystem::path>& file, const wisdom_entry& e);

double max_over(MPI_Comm comm, double v);

/// Runs `p` once on buffers sized for it.
template <class T, class Op>
void run_plan(plan<T, Op>& p, std::vector<T>& send, std::vector<T>& recv) {
  if (p.kind() == collective::bcast)
    p(std::span<T>(recv.data(), p.recv_count()));
  else
    p(send.data(), recv.data());
}

double median(std::vector<double> v);

}  // namespace mpi

/// Measures the candidates for collective `c` of `count` elements of T on
/// `comm` and returns the winner (see the file comment). Collective over
/// `comm`: every rank passes the same arguments. `root` for reduce / bcast.
///
///   collc::tune_options o;  o.budget_s = 0.2;  o.top = 6;
///   auto r = collc::tune<float>(collective::allreduce, comm, 1 << 20, o);
template <class T, class Op = plus>
tune_result tune(collective c, MPI_Comm comm, std::size_t count, const tune_options& options = {}, Op op = {},
                 int root = 0) {
  mpi::check_known(c, "collc::tune");  // before any collective: every rank stops here alike
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  tune_result out;
  const bool commutative = commutative_v<Op> || !reduces(c);
  int P = 1;
  mpi::tune_check(MPI_Comm_size(comm, &P), "MPI_Comm_size");
  auto finish = [&] {
    out.setup_s = mpi::max_over(comm, std::chrono::duration<double>(clock::now() - start).count());
    return out;
  };
  if (options.honour_overrides)
    if (auto s = algo::override_from_env(c, P, commutative)) {
      out.chosen = *s;
      out.from = tune_result::origin::override_env;
      return finish();
    }
  if (P == 1) {
    out.chosen = algo::schedule::copy_in();
    out.from = tune_result::origin::single_rank;
    return finish();
  }
  const comm_layout layout = describe_comm(comm, reduces(c) && !commutative, options.plan);
  const wisdom_key key = wisdom_key_for<T, Op>(c, layout);
  const auto file =
      options.use_wisdom ? (options.wisdom_file ? options.wisdom_file : wisdom_path_from_env()) : std::nullopt;
  if (auto s = mpi::wisdom_lookup(comm, file, key, count)) {
    out.chosen = *s;
    out.from = tune_result::origin::wisdom;
    return finish();
  }
  // Candidates: the plan's default (so tuning never does worse than not
  // tuning), the selector's best, then the extras (valid ones only).
  const std::size_t bytes = count * sizeof(T);
  std::vector<std::pair<algo::schedule, double>> picks;
  picks.emplace_back(mpi::default_for(c, P, bytes, commutative, layout.node_of, mpi::online_cores()), 0.0);
  if (options.selector)
    for (const auto& k : algo::candidates(c, P, bytes, commutative, layout.node_of, layout.node, options.select)) {
      if (options.top != 0 && picks.size() > options.top) break;
      if (k.sched == picks.front().first)
        picks.front().second = k.seconds;
      else
        picks.emplace_back(k.sched, k.seconds);
    }
  for (const auto& s : options.extra) {
    bool dup = false;
    for (const auto& [q, t] : picks) dup = dup || q == s;
    if (dup) continue;
    try {
      algo::check_schedule(s, c, P, commutative);
      picks.emplace_back(s, 0.0);
    } catch (const error&) {
    }
  }
  std::vector<plan<T, Op>> plans;
  for (const auto& [s, t] : picks) {
    plans.push_back(mpi::make_for<T, Op>(c, comm, count, root, op, s, options.plan));
    out.measured.push_back({s, t, 0, {}});
  }
  const std::size_t k = plans.size();
  std::vector<T> send(std::max<std::size_t>(plans.front().send_count(), 1)),
      recv(std::max<std::size_t>(plans.front().recv_count(), 1));
  // One untimed call each, then one timed call each for the batch sizes.
  std::vector<double> estimate(k);
  for (std::size_t i = 0; i < k; ++i) mpi::run_plan(plans[i], send, recv);
  for (std::size_t i = 0; i < k; ++i) {
    mpi::barrier(comm);
    const auto t0 = clock::now();
    mpi::run_plan(plans[i], send, recv);
    estimate[i] = mpi::max_over(comm, std::chrono::duration<double>(clock::now() - t0).count());
  }
  const double used = std::chrono::duration<double>(clock::now() - start).count();
  const double left = std::max(options.budget_s - mpi::max_over(comm, used), options.budget_s * 0.25);
  const int rounds_planned = std::max(options.min_rounds, 1);
  std::vector<int> iters(k);
  for (std::size_t i = 0; i < k; ++i) {
    const double per_batch = left / (static_cast<double>(rounds_planned) * static_cast<double>(k));
    iters[i] = static_cast<int>(std::clamp(per_batch / std::max(estimate[i], 1e-7), 1.0, 10000.0));
  }
  const auto measure_start = clock::now();
  for (int round = 0; round < options.max_rounds; ++round) {
    for (std::size_t j = 0; j < k; ++j) {
      // A B C, C B A, B C A, A C B, ...: every candidate runs early and late.
      const std::size_t shift = static_cast<std::size_t>(round / 2) % k;
      const std::size_t i = round % 2 == 0 ? (j + shift) % k : (2 * k - 1 - j + shift) % k;
      mpi::barrier(comm);
      const auto t0 = clock::now();
      for (int it = 0; it < iters[i]; ++it) mpi::run_plan(plans[i], send, recv);
      const double t = std::chrono::duration<double>(clock::now() - t0).count() / iters[i];
      out.measured[i].samples.push_back(mpi::max_over(comm, t));
    }
    // Rank 0's clock decides whether another round fits, for everyone.
    int more = round + 1 < options.min_rounds ||
               std::chrono::duration<double>(clock::now() - measure_start).count() * (round + 2) / (round + 1) <= left;
    mpi::bcast_int(comm, more);
    if (!more) break;
  }
  int best = 0;
  for (std::size_t i = 0; i < k; ++i) {
    out.measured[i].median_s = mpi::median(out.measured[i].samples);
    if (out.measured[i].median_s < out.measured[static_cast<std::size_t>(best)].median_s) best = static_cast<int>(i);
  }
  mpi::bcast_int(comm, best);
  out.chosen = out.measured[static_cast<std::size_t>(best)].sched;
  out.from = tune_result::origin::measured;
  plans.clear();  // collective over the node, same order everywhere
  const auto [lo, hi] = wisdom_count_range(count, sizeof(T));
  wisdom_entry e{key,     lo, hi, out.chosen.to_string(), out.measured[static_cast<std::size_t>(best)].median_s,
                 "tuned", {}};
  mpi::wisdom_store(comm, file, e);
  return finish();
}

/// A plan built with the tuned schedule: tune(), then the factory. Collective.
///
///   auto p = collc::make_tuned<double>(collective::allreduce, comm, n);  p(x, y);
template <class T, class Op = plus>
plan<T, Op> make_tuned(collective c, MPI_Comm comm, std::size_t count, const tune_options& options = {}, Op op = {},
                       int root = 0) {
  const tune_result r = tune<T, Op>(c, comm, count, options, op, root);
  return mpi::make_for<T, Op>(c, comm, count, root, std::move(op), r.chosen, options.plan);
}

}  // namespace collc

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/tune.ipp>
#endif
