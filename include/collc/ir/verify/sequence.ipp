#pragma once
// The verifier's shared, read-only context: the sequence of executions it
// runs, what every check needs to know about it, and how a buffer reference
// resolves. Filled in three steps by the driver (verify.ipp): as built, after
// the static checks (count_signals), before the run (lay_out); each check
// only reads it.
#include <collc/ir/verify.hpp>

#include <collc/error.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace collc::ir::detail::verification {

using collc::detail::cat;

using tick = std::uint32_t;          // a rank's logical clock: one tick per instruction
inline constexpr int n_buffers = 4;  // send, recv, shm, scratch: the buffers of one rank

/// What a check found: nothing, or the violation to report.
using finding = std::optional<verify_result>;

COLLC_INLINE verify_result violation(property what, int rank, std::ptrdiff_t index, int execution, std::string why) {
  return verify_result{what, rank, index, execution, std::move(why)};
}

/// "recv[3]", "shm(rank 2)[3..7)": a buffer range as the instruction names it.
COLLC_INLINE std::string name_range(const ref& r, std::size_t count) {
  std::string s{to_string(r.buf)};
  if (r.buf == buffer::shm) s += cat("(rank ", r.owner, ')');
  s += cat('[', r.offset);
  if (count != 1)
    s += cat("..", r.offset + count, ')');
  else
    s += ']';
  return s;
}

/// The executions to run: execution e runs *programs[order[e]]; every program
/// is of the same collective, ranks, root and nodes (check_shape checks it).
struct sequence {
  sequence(std::vector<const program*> ps, std::vector<std::size_t> ord, const verify_options& opt)
      : programs(std::move(ps)),
        order(std::move(ord)),
        o(opt),
        ranks(programs.front()->ranks),
        executions(static_cast<int>(order.size())) {}

  std::vector<const program*> programs;  // distinct programs of the sequence
  std::vector<std::size_t> order;        // [execution] index into programs
  const verify_options& o;
  int ranks;  // of the first program: collective, ranks, root and nodes of all
  int executions;

  // count_signals():
  int flags = 0;                      // the most flags of any program
  std::vector<std::int64_t> signals;  // [program][rank, flag]: signals per execution
  std::vector<std::int64_t> cum;      // [execution][rank, flag]: signals of all earlier executions
  // lay_out():
  std::size_t shm_max = 0;          // the largest shm_count of any program
  std::vector<std::size_t> starts;  // [rank][execution]: see start_of()

  /// The first program: its collective, root and nodes are those of all.
  [[nodiscard]] const program& first() const { return *programs.front(); }
  /// The program execution e runs (the last one for the final boundary).
  [[nodiscard]] const program& at(int e) const {
    return *programs[order[static_cast<std::size_t>(std::min(e, executions - 1))]];
  }
  [[nodiscard]] const rank_program& code_of(int r, int e) const { return at(e).code[static_cast<std::size_t>(r)]; }

  [[nodiscard]] std::size_t slots() const { return static_cast<std::size_t>(ranks) * static_cast<std::size_t>(flags); }
  [[nodiscard]] std::size_t flag_slot(int r, int flag) const {
    return static_cast<std::size_t>(r) * static_cast<std::size_t>(flags) + static_cast<std::size_t>(flag);
  }
  /// The count of peer signals a wait of execution `execution` needs.
  [[nodiscard]] std::int64_t threshold(const wait& w, int execution) const {
    return cum[static_cast<std::size_t>(execution) * slots() + flag_slot(w.peer, w.flag)] + w.value;
  }
  /// The message channel from -> to with `tag`.
  [[nodiscard]] std::uint64_t channel(int from, int to, int tag) const {
    return (static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(ranks) + static_cast<std::uint64_t>(to))
               << 32 |
           static_cast<std::uint32_t>(tag);
  }

  /// First clock of execution e of rank r, minus one: executions before e
  /// took one tick per instruction plus one for the caller's boundary.
  [[nodiscard]] std::size_t start_of(int r, int e) const {
    return starts[static_cast<std::size_t>(r) * static_cast<std::size_t>(executions + 1) + static_cast<std::size_t>(e)];
  }
  [[nodiscard]] tick clock_of(int r, int execution, std::ptrdiff_t pc) const {
    // Execution e of rank r owns clocks S+1 (caller boundary) .. S+1+L, S = start_of(r, e).
    return static_cast<tick>(start_of(r, execution) + 1 + static_cast<std::size_t>(pc + 1));
  }
  /// "rank 5 instruction 20 (execution 0)" for the access at clock k of rank u.
  [[nodiscard]] std::string describe_epoch(int u, tick k) const {
    std::size_t e = 0;
    while (static_cast<int>(e) < executions && start_of(u, static_cast<int>(e) + 1) + 1 <= k) ++e;
    const std::size_t slot = static_cast<std::size_t>(k) - 1 - start_of(u, static_cast<int>(e));
    if (slot == 0) {
      if (e == 0) return cat("rank ", u, "'s caller before execution 0");
      return cat("rank ", u, "'s caller between executions ", e - 1, " and ", e);
    }
    return cat("rank ", u, " instruction ", slot - 1, " (execution ", e, ')');
  }
};

/// program::signals_per_execution for every (rank, flag), in one pass,
/// and the signals of all executions before each execution (cum), which
/// is the base a wait's value counts from (program.hpp's epoch *
/// signals_per_execution + value when every execution runs one program).
/// Needs well-formed programs.
COLLC_INLINE void count_signals(sequence& s) {
  s.flags = 0;
  for (const program* q : s.programs) s.flags = std::max(s.flags, q->flags);
  const std::size_t S = s.slots();
  s.signals.assign(s.programs.size() * S, 0);
  for (std::size_t k = 0; k < s.programs.size(); ++k)
    for (int r = 0; r < s.ranks; ++r)
      for (const auto& ins : s.programs[k]->code[static_cast<std::size_t>(r)])
        if (const auto* g = std::get_if<signal>(&ins)) ++s.signals[k * S + s.flag_slot(r, g->flag)];
  s.cum.assign(static_cast<std::size_t>(s.executions + 1) * S, 0);
  for (int e = 0; e < s.executions; ++e)
    for (std::size_t i = 0; i < S; ++i)
      s.cum[static_cast<std::size_t>(e + 1) * S + i] =
          s.cum[static_cast<std::size_t>(e) * S + i] + s.signals[s.order[static_cast<std::size_t>(e)] * S + i];
}

/// The largest shm of the sequence and the first clock of every (rank, execution).
COLLC_INLINE void lay_out(sequence& s) {
  s.shm_max = 0;
  for (const program* q : s.programs) s.shm_max = std::max(s.shm_max, q->shm_count);
  s.starts.assign(static_cast<std::size_t>(s.ranks) * static_cast<std::size_t>(s.executions + 1), 0);
  for (int r = 0; r < s.ranks; ++r)
    for (int e = 0; e < s.executions; ++e)
      s.starts[static_cast<std::size_t>(r) * static_cast<std::size_t>(s.executions + 1) +
               static_cast<std::size_t>(e + 1)] = s.start_of(r, e) + s.code_of(r, e).size() + 1;
}

/// send aliases recv on rank r (verify_options::in_place).
COLLC_INLINE bool aliased(const program& p, const verify_options& o, int r) {
  if (!o.in_place || p.coll == collective::bcast) return false;
  return p.coll != collective::reduce || r == p.root;
}
/// Where rank r's aliased send starts in its recv.
COLLC_INLINE std::size_t send_shift(const program& p, int r) { return p.in_place_shift(r); }

}  // namespace collc::ir::detail::verification
