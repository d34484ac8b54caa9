#pragma once
/// \file
/// The local backend: runs all P rank programs of an ir::program inside one
/// process, one std::thread per rank, on real data of any element type. It is
/// the reference executor for tests and tools, so it favours checking over
/// speed: programs are bounds-checked once at construction, waits time out with
/// a collc::error instead of hanging, and an exception in any rank thread
/// (including one thrown by the operator) stops the others and reaches the
/// caller.
///
///   collc::ir::program prog = ...;                      // e.g. from collc::algo::lower
///   std::vector<std::vector<double>> send(P, std::vector<double>(n, 1.0)), recv(P, std::vector<double>(n));
///   collc::local::execute(prog, send, recv, collc::plus{});      // recv[r] = sum over ranks
///   collc::local::execute(prog, recv, recv, collc::plus{});      // in place: send and recv are the same memory
///
/// Semantics are those of include/collc/ir/program.hpp:
///  - shm: one buffer of program.shm_count elements per rank; scratch likewise,
///    private to the rank. Both live as long as the runner, so later executions
///    see what earlier ones left there (this is what the cross-execution waits
///    protect). They start filled with a 0xA5 byte pattern, not zero, so a
///    program that reads memory it never wrote gets visibly wrong results.
///  - flags: one std::atomic<int64_t> per (rank, flag), each on its own cache
///    line. signal = fetch_add(1, release). wait = acquire loads until the flag
///    reaches epoch * signals_per_execution(peer, flag) + value, where epoch is
///    the number of executions this runner has completed before the current
///    one; it spins briefly, then yields, so P threads on fewer cores progress.
///  - send/recv: per (source, destination, tag) FIFO mailboxes under a mutex
///    and condition variable. send copies the data (buffered), so fence has
///    nothing to complete and is a no-op.
///  - Several executions run back to back with NO barrier between them (see
///    runner::run): a fast rank may start execution e+1 while a slow one is
///    still in execution e, exactly as with a persistent plan, so programs whose
///    cross-execution waits are missing can fail here.
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ops.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace collc::local {

/// How long a wait or recv may block before it throws errc::timeout: the
/// environment variable COLLC_TIMEOUT in seconds (may be fractional; `inf`:
/// never), as the MPI backend reads it, otherwise 30 s. A value that is not
/// a positive number is errc::invalid_argument naming it (it fell back to
/// 30 s without a word).
inline std::chrono::milliseconds default_timeout() {
  const char* s = std::getenv("COLLC_TIMEOUT");
  if (s == nullptr || *s == '\0') return std::chrono::seconds(30);
  const std::string_view v(s);
  double seconds = -1;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
  if (ec != std::errc{} || ptr != v.data() + v.size() || !(seconds > 0))
    throw error(errc::invalid_argument,
                "COLLC_TIMEOUT='" + std::string(v) + "' is not a positive number of seconds (or inf: never)");
  // Never (inf, or more than a century): a century, which deadlines in
  // steady_clock's nanoseconds still hold (milliseconds::max() overflows them).
  constexpr std::chrono::milliseconds never = std::chrono::hours(24 * 365 * 100);
  if (!(seconds * 1000.0 < static_cast<double>(never.count()))) return never;
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

/// Run-time settings of a local runner.
///   collc::local::options opt{.timeout = std::chrono::milliseconds(200)};
struct options {
  std::chrono::milliseconds timeout = default_timeout();  ///< per wait / recv
};

/// Rank r's user buffers for one execution. `send` may be null where the
/// collective has no send buffer (bcast) or the count is 0.
template <class T>
struct rank_buffers {
  const T* send = nullptr;
  T* recv = nullptr;
};

}  // namespace collc::local

namespace collc::detail {

/// Owning, uninitialised storage for n elements of a trivially copyable T
/// (objects are created implicitly by the allocation, [intro.object]/13).
template <class T>
class element_buffer {
 public:
  element_buffer() = default;
  explicit element_buffer(std::size_t n) : n_(n) {
    if (n != 0) p_.reset(static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{alignment})));
  }
  [[nodiscard]] T* data() const noexcept { return p_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return n_; }

 private:
  static constexpr std::size_t alignment = alignof(T) > 64 ? alignof(T) : 64;
  struct deleter {
    void operator()(T* p) const noexcept { ::operator delete (p, std::align_val_t{alignment}); }
  };
  std::unique_ptr<T, deleter> p_;
  std::size_t n_ = 0;
};

/// A flag on its own cache line (two, against adjacent-line prefetch), so
/// spinning on one flag does not slow down the rank signalling the next.
struct alignas(128) padded_flag {
  std::atomic<std::int64_t> value{0};
};

/// Thrown inside a rank thread that stops because another rank failed; never
/// reaches the caller (the first real error does).
struct local_aborted {};

inline std::string describe(const ir::ref& r) {
  return collc::detail::cat(ir::to_string(r.buf), "[", r.owner, "]+", r.offset);
}

inline std::string_view instruction_name(const ir::instruction& ins) {
  constexpr std::string_view names[] = {"copy", "reduce", "signal", "wait", "send", "recv", "fence"};
  return names[ins.index()];
}

/// Prefix of every error about instruction `i` of rank `r`.
inline std::string where(int r, std::size_t i, const ir::instruction& ins) {
  return collc::detail::cat("local executor: rank ", r, ", instruction ", i, " (", instruction_name(ins), ")");
}

/// Checks everything about a program that would otherwise corrupt memory or
/// wait on a signal that can never come in this execution: ranks, flags and
/// peers in range, refs within their buffer's capacity and owned by a rank
/// allowed to touch them, no writes into the (const) send buffer, overlaps
/// between a destination and a source of the same buffer only exact, wait
/// values at most the number of signals per execution. It does not prove the
/// program correct (ordering, completeness: that is collc::verify).
inline void validate_for_local(const ir::program& p) {
  auto fail = [](const std::string& msg) { throw collc::error(errc::invalid_argument, msg); };
  if (p.ranks < 1) fail(collc::detail::cat("local executor: program has ", p.ranks, " ranks, need at least 1"));
  if (p.code.size() != static_cast<std::size_t>(p.ranks))
    fail(collc::detail::cat("local executor: program has code for ", p.code.size(), " ranks, expected ", p.ranks));
  if (!p.node_of.empty() && p.node_of.size() != static_cast<std::size_t>(p.ranks))
    fail(collc::detail::cat("local executor: node_of has ", p.node_of.size(), " entries, expected ", p.ranks));
  if (p.flags < 0) fail(collc::detail::cat("local executor: program has ", p.flags, " flags per rank"));
  if (p.coll == collective::reduce || p.coll == collective::bcast)
    if (p.root < 0 || p.root >= p.ranks)
      fail(collc::detail::cat("local executor: root ", p.root, " out of range for ", p.ranks, " ranks"));

  for (int r = 0; r < p.ranks; ++r) {
    const auto& code = p.code[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < code.size(); ++i) {
      const auto& ins = code[i];
      auto check_rank = [&](int q, const char* what) {
        if (q < 0 || q >= p.ranks)
          fail(collc::detail::cat(where(r, i, ins), ": ", what, " ", q, " out of range for ", p.ranks, " ranks"));
      };
      auto check_ref = [&](const ir::ref& x, std::size_t n, const char* role, bool written) {
        check_rank(x.owner, role);
        if (x.buf == ir::buffer::shm ? !p.same_node(x.owner, r) : x.owner != r)
          fail(collc::detail::cat(where(r, i, ins), ": ", role, " ", describe(x),
                                  " belongs to a rank this rank cannot access"));
        if (written && x.buf == ir::buffer::send)
          fail(collc::detail::cat(where(r, i, ins), ": ", role, " ", describe(x), " writes into the send buffer"));
        const std::size_t cap = p.capacity(x.buf);
        if (x.offset > cap || n > cap - x.offset)
          fail(collc::detail::cat(where(r, i, ins), ": ", role, " ", describe(x), " count ", n, " exceeds ",
                                  ir::to_string(x.buf), " capacity ", cap));
      };
      auto check_overlap = [&](const ir::ref& d, const ir::ref& s, std::size_t n, const char* role) {
        if (n == 0 || d.buf != s.buf || d.owner != s.owner || d.offset == s.offset) return;
        if (d.offset < s.offset + n && s.offset < d.offset + n)
          fail(collc::detail::cat(where(r, i, ins), ": dst ", describe(d), " partially overlaps ", role, " ",
                                  describe(s), " (count ", n, ")"));
      };
      auto check_flag = [&](int f) {
        if (f < 0 || f >= p.flags)
          fail(collc::detail::cat(where(r, i, ins), ": flag ", f, " out of range for ", p.flags, " flags"));
      };
      if (const auto* c = std::get_if<ir::copy>(&ins)) {
        check_ref(c->dst, c->count, "dst", true);
        check_ref(c->src, c->count, "src", false);
        check_overlap(c->dst, c->src, c->count, "src");
      } else if (const auto* d = std::get_if<ir::reduce>(&ins)) {
        check_ref(d->dst, d->count, "dst", true);
        check_ref(d->a, d->count, "a", false);
        check_ref(d->b, d->count, "b", false);
        check_overlap(d->dst, d->a, d->count, "a");
        check_overlap(d->dst, d->b, d->count, "b");
      } else if (const auto* s = std::get_if<ir::signal>(&ins)) {
        check_flag(s->flag);
      } else if (const auto* w = std::get_if<ir::wait>(&ins)) {
        check_rank(w->peer, "peer");
        check_flag(w->flag);
        if (!p.same_node(w->peer, r))
          fail(collc::detail::cat(where(r, i, ins), ": peer ", w->peer, " is on another node"));
        const std::int64_t signals = p.signals_per_execution(w->peer, w->flag);
        if (w->value > signals)
          fail(collc::detail::cat(where(r, i, ins), ": waits for signal ", w->value, " of flag ", w->flag, " of rank ",
                                  w->peer, ", which signals it only ", signals, " times per execution"));
      } else if (const auto* sd = std::get_if<ir::send>(&ins)) {
        check_rank(sd->peer, "peer");
        check_ref(sd->src, sd->count, "src", false);
      } else if (const auto* rv = std::get_if<ir::recv>(&ins)) {
        check_rank(rv->peer, "peer");
        check_ref(rv->dst, rv->count, "dst", true);
      }
    }
  }
}

}  // namespace collc::detail

namespace collc::local {

/// A program bound to in-process memory: shm, scratch, flags and mailboxes
/// persist between executions, so running it repeatedly exercises the
/// program's cross-execution protocol (waits with value <= 0) like a
/// persistent plan would. Build once, run many times:
///
///   collc::local::runner<std::int64_t> run(prog);            // Op defaults to collc::plus
///   run(send, recv);                                           // one execution
///   run.run(sends, recvs);                                     // sends[e][r]: several, back to back
///
/// If an execution fails (timeout, operator exception, mismatch), the error is
/// rethrown to the caller and the runner's protocol state is reset: flags
/// zero, mailboxes empty, executions() == 0 (shm and scratch keep their bytes).
/// A runner is movable, not copyable, and must not run from two threads at once.
template <element T, class Op = plus>
requires reduction_op<Op, T>
class runner {
 public:
  /// Validates `prog` (errc::invalid_argument naming the rank, instruction and
  /// offending value; errc::not_commutative for a commutative-only program
  /// with an operator that is not collc::commutative) and allocates its memory.
  explicit runner(ir::program prog, Op op = {}, options opt = {}) : s_(std::make_unique<state>()) {
    detail::validate_for_local(prog);
    if (prog.commutative_only && !commutative_v<Op>)
      throw collc::error(errc::not_commutative,
                         collc::detail::cat("local executor: program \"", prog.name,
                                            "\" is correct only for commutative operators, and the "
                                            "operator does not declare collc::commutative"));
    s_->prog = std::move(prog);
    s_->op = std::move(op);
    s_->opt = opt;
    const auto& p = s_->prog;
    const auto ranks = static_cast<std::size_t>(p.ranks);
    const auto flags = static_cast<std::size_t>(p.flags);
    // Signals per execution, once: the wait threshold needs it on every wait.
    s_->signals.assign(ranks * flags, 0);
    for (int r = 0; r < p.ranks; ++r)
      for (const auto& ins : p.code[static_cast<std::size_t>(r)])
        if (const auto* sg = std::get_if<ir::signal>(&ins))
          ++s_->signals[static_cast<std::size_t>(r) * flags + sg->flag];
    s_->flags = std::make_unique<detail::padded_flag[]>(ranks * flags);
    for (std::size_t r = 0; r < ranks; ++r) {
      s_->shm.emplace_back(p.shm_count);
      s_->scratch.emplace_back(p.scratch_count);
      if (p.shm_count) std::memset(static_cast<void*>(s_->shm.back().data()), 0xA5, p.shm_count * sizeof(T));
      if (p.scratch_count)
        std::memset(static_cast<void*>(s_->scratch.back().data()), 0xA5, p.scratch_count * sizeof(T));
    }
    s_->mail = std::make_unique<mailbox[]>(ranks);
  }

  [[nodiscard]] const ir::program& program() const noexcept { return s_->prog; }
  /// Executions completed since construction (or since the last failure).
  [[nodiscard]] std::int64_t executions() const noexcept { return s_->done; }

  /// Runs buffers.size() / P executions back to back; buffers[e * P + r] are
  /// rank r's buffers in execution e. Each rank thread goes through all its
  /// executions without waiting for the other ranks in between. The caller
  /// guarantees the pointers cover send_count() / recv_count() elements.
  void run(std::span<const rank_buffers<T>> buffers) {
    const auto ranks = static_cast<std::size_t>(s_->prog.ranks);
    if (buffers.size() % ranks != 0)
      throw collc::error(errc::invalid_argument,
                         collc::detail::cat("local executor: ", buffers.size(), " rank buffers is not a multiple of ",
                                            ranks, " ranks"));
    const std::size_t executions = buffers.size() / ranks;
    if (executions == 0) return;
    std::vector<std::thread> threads;
    threads.reserve(ranks);
    try {
      for (std::size_t r = 0; r < ranks; ++r)
        threads.emplace_back([this, r, executions, buffers] { rank_main(static_cast<int>(r), executions, buffers); });
    } catch (...) {  // could not start every thread: stop the started ones
      fail(std::current_exception());
    }
    for (auto& t : threads) t.join();
    if (!s_->first_error) check_mailboxes_empty();
    if (s_->first_error) {
      const std::exception_ptr e = s_->first_error;
      reset();
      std::rethrow_exception(e);
    }
    s_->done += static_cast<std::int64_t>(executions);
  }

  /// One execution: send[r] and recv[r] are rank r's buffers. For in-place
  /// allreduce pass the same vectors as send and recv. For bcast the root's
  /// data is in recv[root] on entry and `send` may be empty.
  void operator()(std::span<const std::vector<T>> send, std::span<std::vector<T>> recv) {
    std::vector<rank_buffers<T>> b;
    bind(send, recv, 0, b);
    run(b);
  }

  /// Checks the sizes of one execution's per-rank vectors (errc::invalid_argument
  /// naming the rank and sizes) and appends their rank_buffers to `out`.
  void bind(std::span<const std::vector<T>> send, std::span<std::vector<T>> recv, std::size_t execution,
            std::vector<rank_buffers<T>>& out) const {
    const auto& p = s_->prog;
    const auto ranks = static_cast<std::size_t>(p.ranks);
    const std::size_t need_send = p.send_count(), need_recv = p.recv_count();
    auto where = [&] { return collc::detail::cat("local executor: execution ", execution, ": "); };
    if (recv.size() != ranks || (send.size() != ranks && !(need_send == 0 && send.empty())))
      throw collc::error(errc::invalid_argument, collc::detail::cat(where(), send.size(), " send and ", recv.size(),
                                                                    " recv buffers for ", ranks, " ranks"));
    for (std::size_t r = 0; r < ranks; ++r) {
      const bool has_send = !send.empty();
      if (has_send && send[r].size() < need_send)
        throw collc::error(errc::invalid_argument, collc::detail::cat(where(), "send buffer of rank ", r, " has ",
                                                                      send[r].size(), " elements, need ", need_send));
      if (recv[r].size() < need_recv)
        throw collc::error(errc::invalid_argument, collc::detail::cat(where(), "recv buffer of rank ", r, " has ",
                                                                      recv[r].size(), " elements, need ", need_recv));
      out.push_back({has_send ? send[r].data() : nullptr, recv[r].data()});
    }
  }

  /// send.size() executions back to back, with fresh buffers each:
  /// send[e][r] and recv[e][r] are rank r's buffers in execution e.
  void run(std::span<const std::vector<std::vector<T>>> send, std::span<std::vector<std::vector<T>>> recv) {
    if (send.size() != recv.size())
      throw collc::error(errc::invalid_argument,
                         collc::detail::cat("local executor: ", send.size(), " executions of send buffers but ",
                                            recv.size(), " of recv buffers"));
    std::vector<rank_buffers<T>> b;
    for (std::size_t e = 0; e < send.size(); ++e) bind(send[e], recv[e], e, b);
    run(b);
  }

 private:
  struct message {
    detail::element_buffer<T> data;
    std::size_t count = 0;
  };
  struct mailbox {
    std::mutex m;
    std::condition_variable cv;
    std::map<std::pair<int, int>, std::deque<message>> queues;  // (source, tag) -> FIFO
  };
  struct state {
    ir::program prog;
    Op op;
    options opt;
    std::vector<std::int64_t> signals;             // [rank * flags + flag]
    std::unique_ptr<detail::padded_flag[]> flags;  // [rank * flags + flag]
    std::vector<detail::element_buffer<T>> shm, scratch;
    std::unique_ptr<mailbox[]> mail;  // [destination rank]
    std::int64_t done = 0;            // completed executions = epoch of the next one
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::exception_ptr first_error;
  };
  std::unique_ptr<state> s_;

  // Records the first failure and wakes every blocked rank so it can stop.
  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(s_->error_mutex);
      if (!s_->first_error) s_->first_error = std::move(e);
    }
    s_->failed.store(true, std::memory_order_release);
    for (int r = 0; r < s_->prog.ranks; ++r) {
      std::lock_guard lock(s_->mail[r].m);
      s_->mail[r].cv.notify_all();
    }
  }

  void reset() {
    const auto n = static_cast<std::size_t>(s_->prog.ranks) * static_cast<std::size_t>(s_->prog.flags);
    for (std::size_t i = 0; i < n; ++i) s_->flags[i].value.store(0, std::memory_order_relaxed);
    for (int r = 0; r < s_->prog.ranks; ++r) s_->mail[r].queues.clear();
    s_->done = 0;
    s_->failed.store(false, std::memory_order_relaxed);
    s_->first_error = nullptr;
  }

  // A message left unreceived after every rank finished means sends and recvs
  // do not match; later executions would receive stale data.
  void check_mailboxes_empty() {
    for (int r = 0; r < s_->prog.ranks; ++r)
      for (const auto& [key, q] : s_->mail[r].queues)
        if (!q.empty()) {
          s_->first_error = std::make_exception_ptr(collc::error(
              errc::mismatch, collc::detail::cat("local executor: ", q.size(), " message(s) from rank ", key.first,
                                                 " to rank ", r, " with tag ", key.second, " were never received")));
          return;
        }
  }

  void rank_main(int r, std::size_t executions, std::span<const rank_buffers<T>> buffers) {
    try {
      const auto ranks = static_cast<std::size_t>(s_->prog.ranks);
      for (std::size_t e = 0; e < executions; ++e)
        execute_once(r, s_->done + static_cast<std::int64_t>(e), buffers[e * ranks + static_cast<std::size_t>(r)]);
    } catch (const detail::local_aborted&) {
      // Another rank failed first; its error is the one reported.
    } catch (...) {
      fail(std::current_exception());
    }
  }

  const T* src_ptr(int r, const rank_buffers<T>& b, const ir::ref& x) const {
    switch (x.buf) {
      case ir::buffer::send: return b.send + x.offset;
      case ir::buffer::recv: return b.recv + x.offset;
      case ir::buffer::shm: return s_->shm[static_cast<std::size_t>(x.owner)].data() + x.offset;
      case ir::buffer::scratch: return s_->scratch[static_cast<std::size_t>(r)].data() + x.offset;
    }
    return nullptr;
  }
  // validate_for_local rejects writes into send, so the cast never removes a real const.
  T* dst_ptr(int r, const rank_buffers<T>& b, const ir::ref& x) const { return const_cast<T*>(src_ptr(r, b, x)); }

  // In-place use binds send and recv to the same memory; the program's refs to
  // the two are then only checked symbolically, so check the real ranges.
  static void check_real_overlap(const T* d, const T* s, std::size_t n, int r, std::size_t i,
                                 const ir::instruction& ins) {
    if (n == 0 || d == s) return;
    const std::less<const T*> lt;
    if (lt(d, s + n) && lt(s, d + n))
      throw collc::error(errc::invalid_argument,
                         collc::detail::cat(detail::where(r, i, ins),
                                            ": destination partially overlaps a source in memory "
                                            "(send and recv bound to the same buffer?)"));
  }

  void execute_once(int r, std::int64_t epoch, const rank_buffers<T>& b) {
    const auto& code = s_->prog.code[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < code.size(); ++i) {
      const auto& ins = code[i];
      if (const auto* c = std::get_if<ir::copy>(&ins)) {
        T* d = dst_ptr(r, b, c->dst);
        const T* src = src_ptr(r, b, c->src);
        check_real_overlap(d, src, c->count, r, i, ins);
        detail::copy_elems(d, src, c->count);
      } else if (const auto* rd = std::get_if<ir::reduce>(&ins)) {
        T* d = dst_ptr(r, b, rd->dst);
        const T* a = src_ptr(r, b, rd->a);
        const T* bb = src_ptr(r, b, rd->b);
        check_real_overlap(d, a, rd->count, r, i, ins);
        check_real_overlap(d, bb, rd->count, r, i, ins);
        detail::reduce_into(d, a, bb, rd->count, s_->op);
      } else if (const auto* sg = std::get_if<ir::signal>(&ins)) {
        flag(r, sg->flag).fetch_add(1, std::memory_order_release);
      } else if (const auto* w = std::get_if<ir::wait>(&ins)) {
        wait(r, i, *w, epoch);
      } else if (const auto* sd = std::get_if<ir::send>(&ins)) {
        message m{detail::element_buffer<T>(sd->count), sd->count};
        detail::copy_elems(m.data.data(), src_ptr(r, b, sd->src), sd->count);
        auto& box = s_->mail[sd->peer];
        {
          std::lock_guard lock(box.m);
          box.queues[{r, sd->tag}].push_back(std::move(m));
        }
        box.cv.notify_all();
      } else if (const auto* rv = std::get_if<ir::recv>(&ins)) {
        receive(r, i, *rv, dst_ptr(r, b, rv->dst));
      }
      // fence: sends are buffered and recvs complete when they return.
    }
  }

  std::atomic<std::int64_t>& flag(int r, int f) const {
    return s_
        ->flags[static_cast<std::size_t>(r) * static_cast<std::size_t>(s_->prog.flags) + static_cast<std::size_t>(f)]
        .value;
  }

  void wait(int r, std::size_t i, const ir::wait& w, std::int64_t epoch) {
    const std::int64_t per_execution =
        s_->signals[static_cast<std::size_t>(w.peer) * static_cast<std::size_t>(s_->prog.flags) +
                    static_cast<std::size_t>(w.flag)];
    const std::int64_t target = epoch * per_execution + w.value;
    const auto& f = flag(w.peer, w.flag);
    // A short spin catches a peer that is running right now; after that yield,
    // since there may be many more rank threads than cores.
    for (int spin = 0; spin < 128; ++spin)
      if (f.load(std::memory_order_acquire) >= target) return;
    const auto start = std::chrono::steady_clock::now();
    while (f.load(std::memory_order_acquire) < target) {
      if (s_->failed.load(std::memory_order_acquire)) throw detail::local_aborted{};
      if (std::chrono::steady_clock::now() - start > s_->opt.timeout)
        throw collc::error(
            errc::timeout,
            collc::detail::cat(detail::where(r, i, s_->prog.code[static_cast<std::size_t>(r)][i]), ": flag ", w.flag,
                               " of rank ", w.peer, " is at ", f.load(std::memory_order_acquire), ", waited for ",
                               target, " (execution ", epoch, ", value ", w.value, ") for ", s_->opt.timeout.count(),
                               " ms"));
      std::this_thread::yield();
    }
  }

  void receive(int r, std::size_t i, const ir::recv& rv, T* dst) {
    auto& box = s_->mail[r];
    const auto deadline = std::chrono::steady_clock::now() + s_->opt.timeout;
    std::unique_lock lock(box.m);
    auto& q = box.queues[{rv.peer, rv.tag}];
    while (q.empty()) {
      if (s_->failed.load(std::memory_order_acquire)) throw detail::local_aborted{};
      if (box.cv.wait_until(lock, deadline) == std::cv_status::timeout && q.empty())
        throw collc::error(errc::timeout,
                           collc::detail::cat(detail::where(r, i, s_->prog.code[static_cast<std::size_t>(r)][i]),
                                              ": no message from rank ", rv.peer, " with tag ", rv.tag, " after ",
                                              s_->opt.timeout.count(), " ms"));
    }
    message m = std::move(q.front());
    q.pop_front();
    lock.unlock();
    if (m.count != rv.count)
      throw collc::error(errc::mismatch,
                         collc::detail::cat(detail::where(r, i, s_->prog.code[static_cast<std::size_t>(r)][i]),
                                            ": expects ", rv.count, " elements from rank ", rv.peer, " with tag ",
                                            rv.tag, ", the matching send has ", m.count));
    detail::copy_elems(dst, static_cast<const T*>(m.data.data()), m.count);
  }
};

/// Runs `prog` `executions` times back to back (no barrier in between) on the
/// same buffers with a fresh runner, and returns when all ranks are done. recv[r] receives rank r's result; pass the
/// same vectors as send and recv for in-place allreduce (repeated in-place
/// executions then reduce the previous result again, as repeated MPI calls
/// would). For bcast the root's data is in recv[root] and `send` may be empty.
///
///   collc::local::execute(prog, send, recv, collc::max{});
template <element T, class Op = plus>
requires reduction_op<Op, T>
void execute(const ir::program& prog, std::span<const std::vector<T>> send, std::span<std::vector<T>> recv, Op op = {},
             int executions = 1, options opt = {}) {
  if (executions < 0)
    throw collc::error(errc::invalid_argument,
                       collc::detail::cat("local executor: executions must be >= 0, got ", executions));
  runner<T, Op> run(prog, std::move(op), opt);
  std::vector<rank_buffers<T>> once, all;
  run.bind(send, recv, 0, once);
  for (int e = 0; e < executions; ++e) all.insert(all.end(), once.begin(), once.end());
  run.run(all);
}

/// execute() for vectors of per-rank vectors (lets T be deduced).
template <element T, class Op = plus>
requires reduction_op<Op, T>
void execute(const ir::program& prog, const std::vector<std::vector<T>>& send, std::vector<std::vector<T>>& recv,
             Op op = {}, int executions = 1, options opt = {}) {
  execute(prog, std::span<const std::vector<T>>(send), std::span<std::vector<T>>(recv), std::move(op), executions, opt);
}

}  // namespace collc::local
