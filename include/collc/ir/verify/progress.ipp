#pragma once
// Property 5 at run time (deadlock): where each rank stands in the greedy
// run, and, when no rank can move, the report of who waits for whom.
#include <collc/ir/verify.hpp>

#include <collc/ir/verify/sequence.ipp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir::detail::verification {

/// Where a rank is: execution and instruction, or done.
struct rank_state {
  int execution = 0;
  std::ptrdiff_t pc = -1;  // -1: at the caller's boundary before `execution`
  bool finished = false;
};

/// A send its receiver has not yet received (verify.hpp, "Sends").
struct unreceived_send {
  int to = 0, tag = 0;
  std::ptrdiff_t pc = 0;
  int execution = 0;
};

/// A stuck run: every unfinished rank waits at instruction pc of its
/// execution, or at its end (pc = the program's length) for its sends.
/// `flag_count` holds the signals so far per (rank, flag); `unreceived`
/// each rank's sends not yet received, oldest first.
struct stuck_run {
  const sequence& s;
  const std::vector<rank_state>& states;
  const std::vector<std::int64_t>& flag_count;
  const std::vector<std::vector<unreceived_send>>& unreceived;

  [[nodiscard]] const rank_state& of(int r) const { return states[static_cast<std::size_t>(r)]; }
  [[nodiscard]] bool at_end(int r) const {
    return static_cast<std::size_t>(of(r).pc) == s.code_of(r, of(r).execution).size();
  }
  [[nodiscard]] const instruction& blocked_at(int r) const {
    return s.code_of(r, of(r).execution)[static_cast<std::size_t>(of(r).pc)];
  }
  /// Rank r waits for its sends to be received (at a fence or at the end).
  [[nodiscard]] bool completing_sends(int r) const { return at_end(r) || std::holds_alternative<fence>(blocked_at(r)); }
  [[nodiscard]] const unreceived_send& oldest_send(int r) const {
    return unreceived[static_cast<std::size_t>(r)].front();
  }

  /// The earliest execution a rank is stuck in.
  [[nodiscard]] int blocked_execution() const {
    int e = s.executions;
    for (const auto& st : states)
      if (!st.finished) e = std::min(e, st.execution);
    return e;
  }

  [[nodiscard]] std::string where_is(int q) const {
    const auto& st = of(q);
    if (st.finished) return cat("rank ", q, " has finished");
    if (at_end(q)) return cat("rank ", q, " is itself blocked at the end of execution ", st.execution);
    return cat("rank ", q, " is itself blocked at instruction ", st.pc, " (execution ", st.execution, ')');
  }

  /// The rank a blocked rank r waits for (its wait's or recv's peer).
  [[nodiscard]] int blocker(int r) const {
    if (completing_sends(r)) return oldest_send(r).to;
    const instruction& ins = blocked_at(r);
    if (const auto* w = std::get_if<wait>(&ins)) return w->peer;
    return std::get<recv>(ins).peer;
  }

  /// Why blocked rank r cannot proceed.
  [[nodiscard]] std::string blocked_reason(int r) const {
    if (completing_sends(r)) {
      const unreceived_send& u = oldest_send(r);
      return cat(at_end(r) ? "the end of the execution" : "a fence", " completes its send to rank ", u.to, " tag ",
                 u.tag, " (instruction ", u.pc, ", execution ", u.execution,
                 ") only once that rank receives it (a large message is sent by rendezvous), but ", where_is(u.to));
    }
    const instruction& ins = blocked_at(r);
    if (const auto* w = std::get_if<wait>(&ins))
      return cat("waits for rank ", w->peer, " flag ", w->flag, " >= ", s.threshold(*w, of(r).execution), " (reached ",
                 flag_count[s.flag_slot(w->peer, w->flag)], "), but ", where_is(w->peer));
    const auto& v = std::get<recv>(ins);
    if (of(v.peer).finished) return cat("recv from rank ", v.peer, " tag ", v.tag, " has no matching send");
    return cat("recv from rank ", v.peer, " tag ", v.tag, " waits for a message not yet sent, and ", where_is(v.peer));
  }

  /// Reports the lowest blocked rank and the chain of ranks it waits for.
  /// With sends and recvs matched and waits within the signals of an
  /// execution (both checked statically), a blocked rank never waits for a
  /// finished one, so the chain ends in a cycle.
  [[nodiscard]] verify_result report() const {
    int blocked = 0, primary = -1;
    for (int r = 0; r < s.ranks; ++r) {
      if (of(r).finished) continue;
      ++blocked;
      if (primary < 0) primary = r;
    }
    std::string why = blocked_reason(primary);
    std::vector<int> seen(static_cast<std::size_t>(s.ranks), 0);
    std::string chain = cat("rank ", primary);
    int hops = 0;
    for (int q = primary; !of(q).finished && !seen[static_cast<std::size_t>(q)];) {
      seen[static_cast<std::size_t>(q)] = 1;
      q = blocker(q);
      if (++hops > 8) {
        chain += " -> ...";
        break;
      }
      chain += cat(" -> rank ", q);
    }
    why += cat("; ", blocked, " rank(s) blocked, waiting in a chain ", chain);
    return violation(property::deadlock, primary, of(primary).pc, of(primary).execution, std::move(why));
  }
};

}  // namespace collc::ir::detail::verification
