#pragma once
// The greedy run (verify.hpp, "Scheduling"): ranks in turn, each until it
// blocks, executing instructions on the symbolic memory; synchronisation
// (flags, messages) moves vector clocks, the caller runs at each boundary.
// The checks themselves live in memory.ipp (4), results.ipp (1-3) and
// progress.ipp (5).
#include <collc/ir/verify.hpp>

#include <collc/ir/verify/expr_table.ipp>
#include <collc/ir/verify/memory.ipp>
#include <collc/ir/verify/progress.ipp>
#include <collc/ir/verify/results.ipp>
#include <collc/ir/verify/sequence.ipp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir::detail::verification {

class simulation {
 public:
  /// `s` has its signals counted and its clocks laid out.
  explicit simulation(const sequence& s)
      : s_(s),
        exprs_(s.ranks > 0 ? s.ranks : 1, s.o.commutative),
        mem_(s),
        clocks_(s.ranks),
        results_(s, exprs_),
        states_(static_cast<std::size_t>(s.ranks)),
        unreceived_(static_cast<std::size_t>(s.ranks)),
        flag_count_(s.slots(), 0),
        snapshots_(s.slots()) {}

  /// Runs until every rank finished, a race, or no rank can move; returns
  /// the race, else the deadlock or the wrong result that outranks the
  /// other (verify.hpp, "Order of reports"), else success.
  verify_result run() {
    for (;;) {
      bool progress = false, all_done = true;
      for (int r = 0; r < s_.ranks; ++r) {
        if (state(r).finished) continue;
        const step st = run_rank(r);
        if (st == step::failed) return *race_;
        progress = progress || st == step::progressed;
        all_done = all_done && state(r).finished;
      }
      if (all_done) break;
      if (!progress) {
        // A deadlock outranks a wrong result of a later execution.
        const stuck_run stuck{s_, states_, flag_count_, unreceived_};
        if (!deferred_ || deferred_->execution >= stuck.blocked_execution()) return stuck.report();
        break;
      }
    }
    if (deferred_) return *deferred_;
    return {};
  }

 private:
  enum class step { progressed, blocked, failed };

  struct message {
    std::vector<std::uint32_t> values;
    std::vector<tick> vc;
  };

  rank_state& state(int r) { return states_[static_cast<std::size_t>(r)]; }

  /// A race stops the run at rank r's current instruction.
  step race(int r, std::string why) {
    const auto& st = state(r);
    race_ = violation(property::race, r, st.pc, st.execution, std::move(why));
    return step::failed;
  }
  /// Any finding at a boundary: a race stops the run, a wrong result waits
  /// (the first one is kept) in case a race or an earlier deadlock explains it.
  bool note(verify_result f) {
    if (f.failed == property::race) {
      race_ = std::move(f);
      return false;
    }
    if (!deferred_) deferred_ = std::move(f);
    return true;
  }

  // ---- instructions ----------------------------------------------------------

  step exec_copy(int r, const copy& ins, tick now) {
    const std::size_t d = mem_.loc(ins.dst, shm_shift_), src = mem_.loc(ins.src, shm_shift_);
    const tick* v = clocks_.of(r);
    for (std::size_t i = 0; i < ins.count; ++i) {
      if (auto why = mem_.read(src + i, {r, &ins.src, i}, now, v)) return race(r, std::move(*why));
      const std::uint32_t value = mem_[src + i].value;
      if (auto why = mem_.write(d + i, {r, &ins.dst, i}, now, v, value)) return race(r, std::move(*why));
    }
    return step::progressed;
  }
  step exec_reduce(int r, const reduce& ins, tick now) {
    const std::size_t d = mem_.loc(ins.dst, shm_shift_), a = mem_.loc(ins.a, shm_shift_),
                      b = mem_.loc(ins.b, shm_shift_);
    const tick* v = clocks_.of(r);
    for (std::size_t i = 0; i < ins.count; ++i) {
      if (auto why = mem_.read(a + i, {r, &ins.a, i}, now, v)) return race(r, std::move(*why));
      if (auto why = mem_.read(b + i, {r, &ins.b, i}, now, v)) return race(r, std::move(*why));
      const std::uint32_t value = exprs_.node(mem_[a + i].value, mem_[b + i].value);
      if (auto why = mem_.write(d + i, {r, &ins.dst, i}, now, v, value)) return race(r, std::move(*why));
    }
    return step::progressed;
  }
  step exec_signal(int r, const signal& ins) {
    const auto f = s_.flag_slot(r, ins.flag);
    ++flag_count_[f];
    const tick* v = clocks_.of(r);
    snapshots_[f].insert(snapshots_[f].end(), v, v + s_.ranks);
    return step::progressed;
  }
  step exec_wait(int r, const wait& ins, int execution) {
    const std::int64_t t = s_.threshold(ins, execution);
    if (t <= 0) return step::progressed;  // names no signal: nothing to wait for or order
    const auto f = s_.flag_slot(ins.peer, ins.flag);
    if (flag_count_[f] < t) return step::blocked;
    // Synchronises with the t-th signal (and so everything before it), not the latest.
    clocks_.join(r, snapshots_[f].data() + static_cast<std::size_t>(t - 1) * static_cast<std::size_t>(s_.ranks));
    return step::progressed;
  }
  step exec_send(int r, const send& ins, std::ptrdiff_t pc) {
    message m;
    m.values.resize(ins.count);
    const std::size_t src = mem_.loc(ins.src, shm_shift_);
    const tick* v = clocks_.of(r);
    for (std::size_t i = 0; i < ins.count; ++i) {
      if (auto why = mem_.start_send_read(src + i, {r, &ins.src, i}, v)) return race(r, std::move(*why));
      m.values[i] = mem_[src + i].value;
    }
    m.vc.assign(v, v + s_.ranks);
    mem_.note_send(r, src, ins.count, pc, state(r).execution);
    messages_[s_.channel(r, ins.peer, ins.tag)].push_back(std::move(m));
    unreceived_[static_cast<std::size_t>(r)].push_back({ins.peer, ins.tag, pc, state(r).execution});
    return step::progressed;
  }
  step exec_recv(int r, const recv& ins, tick now) {
    auto it = messages_.find(s_.channel(ins.peer, r, ins.tag));
    if (it == messages_.end() || it->second.empty()) return step::blocked;
    message m = std::move(it->second.front());
    it->second.pop_front();
    // Messages of one channel arrive in order: this is the sender's oldest to r with this tag.
    auto& sent = unreceived_[static_cast<std::size_t>(ins.peer)];
    sent.erase(std::find_if(sent.begin(), sent.end(),
                            [&](const unreceived_send& u) { return u.to == r && u.tag == ins.tag; }));
    clocks_.join(r, m.vc.data());
    const std::size_t d = mem_.loc(ins.dst, shm_shift_);
    const tick* v = clocks_.of(r);
    for (std::size_t i = 0; i < ins.count; ++i)
      if (auto why = mem_.write(d + i, {r, &ins.dst, i}, now, v, m.values[i])) return race(r, std::move(*why));
    return step::progressed;
  }

  // ---- the caller at execution boundaries --------------------------------------

  /// The caller reads rank r's results of execution e-1, then writes inputs for e.
  bool boundary(int r, int e) {
    const tick now = s_.clock_of(r, e, -1);
    tick* v = clocks_.of(r);
    v[r] = now;
    if (e > 0) {
      mem_.complete_sends(r, now, v);  // the end of an execution completes its sends
      if (auto f = results_.check(r, e - 1, now, mem_, v))
        if (!note(std::move(*f))) return false;
    }
    if (e == s_.executions) return true;
    // bcast: the root's data lives in its recv; everything else reads send.
    const program& p = s_.first();
    const bool bcast = p.coll == collective::bcast;
    if (bcast && r != p.root) return true;
    const ref input{bcast ? buffer::recv : buffer::send, r, 0};
    const std::size_t first = mem_.loc(input, shm_shift_);
    for (std::size_t x = 0, n = bcast ? s_.at(e).count : s_.at(e).send_count(); x < n; ++x) {
      const std::uint32_t leaf = exprs_.leaf(r, x, e);
      if (auto why = mem_.write(first + x, {r, &input, x}, now, v, leaf)) {
        race(r, std::move(*why));
        return false;
      }
    }
    return true;
  }

  // ---- the greedy run ----------------------------------------------------------

  /// Rank r runs until it blocks or finishes.
  step run_rank(int r) {
    auto& st = state(r);
    bool moved = false;
    while (!st.finished) {
      const auto& code = s_.code_of(r, st.execution);
      const auto L = static_cast<std::ptrdiff_t>(code.size());
      shm_shift_ = static_cast<std::size_t>(st.execution % s_.o.shm_copies) * s_.shm_max;
      if (st.pc == -1) {
        if (!boundary(r, st.execution)) return step::failed;
        if (st.execution == s_.executions) {
          st.finished = true;
          break;
        }
        st.pc = 0;
        moved = true;
        continue;
      }
      if (st.pc == L) {
        // The engine completes the execution's sends before it returns.
        if (!unreceived_[static_cast<std::size_t>(r)].empty()) return moved ? step::progressed : step::blocked;
        ++st.execution;
        st.pc = -1;
        continue;
      }
      const tick now = s_.clock_of(r, st.execution, st.pc);
      clocks_.of(r)[r] = now;
      const instruction& ins = code[static_cast<std::size_t>(st.pc)];
      step result = step::progressed;
      switch (ins.index()) {
        case 0: result = exec_copy(r, std::get<copy>(ins), now); break;
        case 1: result = exec_reduce(r, std::get<reduce>(ins), now); break;
        case 2: result = exec_signal(r, std::get<signal>(ins)); break;
        case 3: result = exec_wait(r, std::get<wait>(ins), st.execution); break;
        case 4: result = exec_send(r, std::get<send>(ins), st.pc); break;
        case 5: result = exec_recv(r, std::get<recv>(ins), now); break;
        case 6:
          if (!unreceived_[static_cast<std::size_t>(r)].empty()) {
            result = step::blocked;  // a fence completes the rank's sends: each must be received
            break;
          }
          mem_.complete_sends(r, now, clocks_.of(r));
          break;
      }
      if (result == step::failed) return result;
      if (result == step::blocked) return moved ? step::progressed : step::blocked;
      ++st.pc;
      moved = true;
    }
    return moved ? step::progressed : step::blocked;
  }

  const sequence& s_;
  expr_table exprs_;
  memory mem_;
  vector_clocks clocks_;
  result_checker results_;
  std::vector<rank_state> states_;
  std::vector<std::vector<unreceived_send>> unreceived_;  // [rank]: its sends not yet received, oldest first
  std::vector<std::int64_t> flag_count_;                  // signals so far, per (rank, flag)
  std::vector<std::vector<tick>> snapshots_;              // per (rank, flag): the vector clock of each signal
  std::unordered_map<std::uint64_t, std::deque<message>> messages_;
  std::size_t shm_shift_ = 0;              // shm copy of the executing rank's execution
  std::optional<verify_result> race_;      // stops the run
  std::optional<verify_result> deferred_;  // a wrong result, reported unless something explains it
};

}  // namespace collc::ir::detail::verification
