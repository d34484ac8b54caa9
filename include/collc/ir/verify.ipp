#pragma once
// Definitions of ir/verify.hpp. The verifier is a sequence of small checks
// over one read-only description of the executions (verify/sequence.ipp),
// each in its own file:
//   verify/well_formed.ipp  0. shape, refs, flags, peers (static)
//   verify/matching.ipp     5. sends pair with recvs, waits with signals (static)
//   verify/simulation.ipp   the greedy run of all ranks, which drives
//     verify/memory.ipp     4. races (cells, vector clocks, FastTrack)
//     verify/results.ipp    1-3. contribution, operand order, identical results
//     verify/progress.ipp   5. deadlock report
// over the values of verify/expr_table.ipp.
#include <collc/ir/verify.hpp>

#include <collc/error.hpp>
#include <collc/ir/verify/element_groups.ipp>
#include <collc/ir/verify/matching.ipp>
#include <collc/ir/verify/sequence.ipp>
#include <collc/ir/verify/simulation.ipp>
#include <collc/ir/verify/well_formed.ipp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir {

COLLC_INLINE std::string verify_result::to_string() const {
  if (failed == property::none) return "ok";
  std::string s;
  if (rank >= 0) {
    s = collc::detail::cat("rank ", rank);
    if (index >= 0) s += collc::detail::cat(", instruction ", index);
    if (execution >= 0) s += collc::detail::cat(" (execution ", execution, ')');
    s += ": ";
  }
  s += reason;
  return s;
}

namespace detail::verification {

/// verify_memory_estimate for `programs` as given (no element groups).
COLLC_INLINE std::uint64_t estimate_as_given(const std::vector<const program*>& programs,
                                             const std::vector<std::uint64_t>& runs, const verify_options& o) {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  auto add = [](std::uint64_t a, std::uint64_t b) { return a > max - b ? max : a + b; };
  auto mul = [](std::uint64_t a, std::uint64_t b) { return b != 0 && a > max / b ? max : a * b; };
  std::uint64_t P = 0, flags = 0, executions = 0, recv_n = 0, send_n = 0, shm_n = 0, scratch_n = 0;
  std::uint64_t snapshots = 0, expressions = 0, messages = 0, results = 0;
  for (std::size_t k = 0; k < programs.size(); ++k) {
    const program& q = *programs[k];
    if (q.ranks < 1 || q.ranks > 65536 || q.code.size() != static_cast<std::size_t>(q.ranks)) continue;
    const std::uint64_t runs_k = k < runs.size() ? runs[k] : 0;
    P = std::max<std::uint64_t>(P, static_cast<std::uint64_t>(q.ranks));
    flags = std::max<std::uint64_t>(flags, static_cast<std::uint64_t>(std::max(q.flags, 0)));
    executions = add(executions, runs_k);
    recv_n = std::max<std::uint64_t>(recv_n, q.recv_count());
    send_n = std::max<std::uint64_t>(send_n, q.send_count());
    shm_n = std::max<std::uint64_t>(shm_n, q.shm_count);
    scratch_n = std::max<std::uint64_t>(scratch_n, q.scratch_count);
    std::uint64_t signals = 0, sends = 0, sent = 0, reduced = 0;
    for (const auto& code : q.code)
      for (const auto& ins : code) {
        if (std::holds_alternative<signal>(ins)) ++signals;
        if (const auto* s = std::get_if<send>(&ins)) ++sends, sent = add(sent, s->count);
        if (const auto* d = std::get_if<reduce>(&ins)) reduced = add(reduced, d->count);
      }
    const std::uint64_t P_k = static_cast<std::uint64_t>(q.ranks);
    // Every signal of every execution keeps a snapshot of the signer's clock
    // (6 B per entry: 4, and half as much for the lists' growth).
    snapshots = add(snapshots, mul(mul(runs_k, signals), mul(P_k, 6)));
    // Fresh inputs (bcast: the root's) and one node per reduced element, per
    // execution: 40 B of node info and slack, plus hash slots per node.
    // (Measured against the peak RSS of recursive-exchange allreduces from
    // P = 8 at 1e6 elements to P = 2048 at 16: within 10%.)
    const std::uint64_t leaves = q.coll == collective::bcast ? q.count : mul(P_k, q.send_count());
    expressions = add(expressions, mul(runs_k, add(mul(leaves, 48), mul(reduced, 80))));
    // Messages of one execution in flight: a clock and the values each.
    messages = std::max(messages, add(mul(sends, add(mul(P_k, 4), 96)), mul(sent, 4)));
    // allreduce keeps the result ids of two executions at most for property 3.
    if (q.coll == collective::allreduce)
      results = std::max(results, mul(mul(P_k, q.count), mul(std::min<std::uint64_t>(runs_k, 2), 4)));
  }
  const std::uint64_t per_rank =
      add(add(recv_n, send_n), add(mul(shm_n, static_cast<std::uint64_t>(std::max(o.shm_copies, 1))), scratch_n));
  std::uint64_t bytes = mul(mul(P, per_rank), 24);  // cells (sizeof(cell))
  bytes = add(bytes, mul(mul(P, P), 4));            // the P vector clocks
  bytes = add(bytes, add(snapshots, add(expressions, add(messages, results))));
  // Flag counters and snapshot lists per (rank, flag); signals before each
  // execution; rank states and starts; the execution order.
  bytes = add(bytes, mul(mul(P, flags), add(48, mul(add(executions, programs.size() + 1), 8))));
  bytes = add(bytes, add(mul(P, add(96, mul(add(executions, 1), 8))), mul(executions, 8)));
  return bytes;
}

}  // namespace detail::verification

COLLC_INLINE std::uint64_t verify_memory_estimate(const std::vector<const program*>& programs,
                                                  const std::vector<std::uint64_t>& runs, const verify_options& o) {
  if (!o.element_groups) return detail::verification::estimate_as_given(programs, runs, o);
  const auto grouped = detail::verification::group_elements(programs);
  return detail::verification::estimate_as_given(grouped.any() ? grouped.pointers() : programs, runs, o);
}

namespace detail::verification {

/// "6.6 GiB"
COLLC_INLINE std::string byte_size(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  for (; v >= 1024 && u + 1 < std::size(units); ++u) v /= 1024;
  const auto tenths = static_cast<std::uint64_t>(v * 10 + 0.5);
  return cat(tenths / 10, '.', tenths % 10, ' ', units[u]);
}

/// A static violation of program k: say which program of the sequence.
COLLC_INLINE verify_result in_sequence(const sequence& s, std::size_t k, verify_result r) {
  if (s.programs.size() > 1) r.reason += cat(" [program ", k, " of the sequence]");
  return r;
}

/// The checks in their order (verify.hpp, "Order of reports"): property 0
/// for every program, then the static pairing of sends and waits, then the
/// run.
/// The static checks (property 0, then the pairing of sends and waits):
/// O(instructions), no element is simulated.
COLLC_INLINE finding check_static(sequence& s) {
  if (s.executions < 1) throw error(errc::invalid_argument, "verify: no execution to run (executions must be >= 1)");
  if (s.o.shm_copies < 1 || s.o.shm_copies > 64)
    throw error(errc::invalid_argument, cat("verify_options::shm_copies is ", s.o.shm_copies, ", must be in [1, 64]"));
  for (std::size_t k = 0; k < s.programs.size(); ++k) {
    if (auto f = check_shape(s, *s.programs[k])) return in_sequence(s, k, std::move(*f));
    if (auto f = check_instructions(s, *s.programs[k])) return in_sequence(s, k, std::move(*f));
  }
  count_signals(s);
  for (std::size_t k = 0; k < s.programs.size(); ++k)
    if (auto f = check_matching(s, k)) return in_sequence(s, k, std::move(*f));
  return std::nullopt;
}

COLLC_INLINE verify_result check_all(std::vector<const program*> ps, std::vector<std::size_t> order,
                                     const verify_options& o) {
  sequence s(std::move(ps), std::move(order), o);
  if (auto f = check_static(s)) return std::move(*f);
  lay_out(s);
  verify_result r = simulation(s).run();
  if (!r && s.programs.size() > 1 && r.execution >= 0)
    r.reason += cat(" [execution ", r.execution, " runs program ", s.order[static_cast<std::size_t>(r.execution)],
                    " of the sequence]");
  return r;
}

/// Runs the checks on a sequence, refusing up front what would exhaust the
/// machine (the simulation holds every element of every rank and a clock
/// per signal), and turning a failed allocation the estimate missed into an
/// error that names the program (`what`).
COLLC_INLINE verify_result run_as_given(std::vector<const program*> ps, std::vector<std::size_t> order,
                                        const verify_options& o, const std::string& what) {
  std::vector<std::uint64_t> runs(ps.size(), 0);
  for (std::size_t k : order) ++runs[k];
  const std::uint64_t need = estimate_as_given(ps, runs, o);
  if (o.memory_limit != 0 && need > o.memory_limit)
    throw error(errc::invalid_argument,
                cat("verify: ", what, " needs an estimated ", byte_size(need),
                    " of memory, more than verify_options::memory_limit (", byte_size(o.memory_limit),
                    "); verify fewer ranks, a smaller count or fewer executions, or raise the limit"));
  try {
    return check_all(std::move(ps), std::move(order), o);
  } catch (const std::bad_alloc&) {
    throw error(errc::invalid_argument,
                cat("verify: out of memory verifying ", what, " (estimated ", byte_size(need), ')'));
  } catch (const std::length_error&) {
    throw error(errc::invalid_argument,
                cat("verify: out of memory verifying ", what, " (estimated ", byte_size(need), ')'));
  }
}

/// run_as_given in element groups (verify.hpp, "Element groups"), which
/// verify iff the programs do. The static checks run on the programs as
/// given first (they are cheap, and a send and a recv of different lengths
/// could group alike). A violation of the grouped run is found again
/// element by element, so that its report names the program's own
/// elements; where that run does not fit (the memory limit, or the
/// allocation fails), the grouped report says how to read it.
COLLC_INLINE verify_result run_within_limit(std::vector<const program*> ps, std::vector<std::size_t> order,
                                            const verify_options& o, const std::string& what) {
  if (!o.element_groups) return run_as_given(std::move(ps), std::move(order), o, what);
  {
    sequence s(ps, order, o);
    if (auto f = check_static(s)) return std::move(*f);
  }
  const grouped_programs grouped = group_elements(ps);
  if (!grouped.any()) return run_as_given(std::move(ps), std::move(order), o, what);
  verify_result r = run_as_given(grouped.pointers(), order, o, what);
  if (r) return r;
  try {
    return run_as_given(std::move(ps), std::move(order), o, what);
  } catch (const error&) {
    r.reason += cat(" [proved ", grouped.how, " of the program]");
    return r;
  }
}

/// "program 'name' (allreduce, 8 ranks, count 16, 2 executions)"
COLLC_INLINE std::string describe(const program& p, std::size_t executions) {
  return cat("program '", p.name, "' (", to_string(p.coll), ", ", p.ranks, " ranks, count ", p.count, ", ", executions,
             " executions)");
}

}  // namespace detail::verification

COLLC_INLINE verify_result verify(const program& p, const verify_options& o) {
  if (o.executions < 1)
    throw error(errc::invalid_argument,
                collc::detail::cat("verify_options::executions is ", o.executions, ", must be at least 1"));
  const auto n = static_cast<std::size_t>(o.executions);
  return detail::verification::run_within_limit({&p}, std::vector<std::size_t>(n, 0), o,
                                                detail::verification::describe(p, n));
}

COLLC_INLINE verify_result verify_sequence(const std::vector<program>& programs, const std::vector<std::size_t>& order,
                                           const verify_options& o) {
  using collc::detail::cat;
  if (programs.empty()) throw error(errc::invalid_argument, "verify_sequence: no programs");
  if (order.empty()) throw error(errc::invalid_argument, "verify_sequence: no execution to run (order is empty)");
  for (std::size_t e = 0; e < order.size(); ++e)
    if (order[e] >= programs.size())
      throw error(errc::invalid_argument, cat("verify_sequence: execution ", e, " runs program ", order[e],
                                              ", but there are ", programs.size()));
  std::vector<const program*> ps;
  for (const auto& p : programs) ps.push_back(&p);
  return detail::verification::run_within_limit(std::move(ps), order, o,
                                                cat("a sequence of ", programs.size(), " programs, first ",
                                                    detail::verification::describe(programs.front(), order.size())));
}

COLLC_INLINE void verify_or_throw(const program& p, const verify_options& o) {
  const verify_result r = verify(p, o);
  if (r) return;
  throw error(errc::verification_failed,
              collc::detail::cat("program '", p.name, "' (", to_string(p.coll), ", ", p.ranks, " ranks) fails ",
                                 to_string(r.failed), ": ", r.to_string()));
}

}  // namespace collc::ir
