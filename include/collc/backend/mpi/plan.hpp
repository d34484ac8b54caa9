#pragma once
/// \file
/// Persistent collective plans on MPI communicators (collc::mpi::plan,
/// re-exported as collc::plan with the make_* factories): build once (setup is a
/// collective call on the communicator), execute many times.
///
///   auto p = collc::make_allreduce<double>(comm, n);                      // default schedule
///   auto q = collc::make_allreduce<double, collc::plus>(comm, n, collc::factors<-2, -2, 2, 2>{});
///   p(send, recv);                  // blocking; spans, vectors or pointers
///   p(collc::in_place, buf);        // MPI_IN_PLACE style (also p(buf))
///   p.start(send, recv); /* ... */ p.wait();
///
/// Also make_reduce_scatter (block: `count` elements per block, P blocks in
/// send), make_allgather (P blocks in recv), make_reduce and make_bcast (root).
/// Each factory takes, after its counts, any of (in any order, each at most
/// once): a schedule choice (collc::factors<...>, collc::factor_set, or a
/// collc::algo::schedule), collc::plan_options, and the operator object.
///
/// Semantics, as MPI's: every rank of the communicator builds the same plans
/// in the same order and calls them in the same order; buffers are read when
/// the plan executes (never at setup) and must stay valid from start() to
/// wait(); destroy plans in the same order on every rank, like MPI_Comm_free
/// (the last plan on a communicator frees its shared windows). Errors are collc::error naming the value:
/// bad arguments (invalid_argument), schedules that do not fit (invalid_factor_set,
/// not_commutative), ranks that disagree at setup or call different plans
/// (mismatch), waits longer than COLLC_TIMEOUT (timeout).
///
/// In place, per collective (MPI's layout): allreduce and reduce: `buf` is
/// input and output (reduce: the result at the root); reduce_scatter: `buf`
/// holds the P input blocks and receives the result in its first block;
/// allgather: `buf` holds the P blocks, the rank's own block is its input;
/// bcast always works in place on its one buffer.
///
/// start()/wait() overlap: start() runs the call until it would first block
/// (its copies, reduces and sends up to the first wait for a peer), test()
/// advances it without blocking, wait() completes it. Between those calls a
/// plan advances inside its own calls and inside other plans' waits and
/// unfinished tests (engine::progress), so plans started together (in the
/// same order on every rank) may be completed in any order on each rank, as
/// MPI allows; plans of other communicators get those turns only below
/// MPI_THREAD_MULTIPLE, and a plan whose operator cannot be copied never
/// (complete it in the same order on every rank).
#include <collc/algo/schedule.hpp>
#include <collc/backend/mpi/engine.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/backend/mpi/plan_core.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include <collc/ir/program.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace collc::mpi {

/// A persistent collective on an MPI communicator; see the file comment.
/// `T`: any trivially copyable type. `Op`: collc's named operators or any
/// callable `T(const T&, const T&)`; commutative only if collc::commutative_v<Op>.
/// A thin wrapper of plan_core (plan_core.hpp) with host kernels and
/// pointer / span buffers.
template <class T, class Op = plus>
class plan : public plan_facts<T, Op> {
  static_assert(std::is_trivially_copyable_v<T>, "collc::plan: T must be trivially copyable");

 public:
  plan(plan&&) noexcept = default;
  plan& operator=(plan&& o) noexcept {
    if (this != &o) {
      core_.finish_quietly();
      core_ = std::move(o.core_);
    }
    return *this;
  }
  ~plan() { core_.finish_quietly(); }

  // --- execution ----------------------------------------------------------------

  /// Blocking execution: `p(send, recv)`.
  void operator()(std::span<const T> send, std::span<T> recv) {
    start(send, recv);
    wait();
  }
  void operator()(const T* send, T* recv) {
    start(send, recv);
    wait();
  }
  /// In place (bcast: its only buffer).
  void operator()(in_place_t, std::span<T> buf) {
    start(in_place, buf);
    wait();
  }
  void operator()(std::span<T> buf) { (*this)(in_place, buf); }
  void operator()(in_place_t, T* buf) {
    (void)checked();
    (*this)(in_place, std::span<T>(buf, buf ? core_.in_place_count() : 0));
  }

  /// Starts an execution (see the file comment for how far it runs).
  void start(std::span<const T> send, std::span<T> recv) {
    start_impl(send.data(), send.size(), recv.data(), recv.size());
  }
  void start(const T* send, T* recv) {
    (void)checked();
    const bool root_only = core_.kind() == collective::reduce && !core_.is_root();
    start_impl(send, core_.send_count(), recv, root_only && recv == nullptr ? 0 : core_.recv_count());
  }
  void start(in_place_t, std::span<T> buf) {
    (void)checked();
    core_.begin_in_place(buf.data(), buf.size(), words);
    core_.advance(false);
  }
  void start(in_place_t, T* buf) {
    (void)checked();
    start(in_place, std::span<T>(buf, buf ? core_.in_place_count() : 0));
  }
  void start(std::span<T> buf) { start(in_place, buf); }

  /// Completes the execution begun by start().
  void wait() {
    (void)checked();
    core_.advance(true);
    core_.acknowledge();
  }
  /// Advances without blocking; true once the execution is complete (which
  /// also ends it, as wait() would).
  bool test() {
    (void)checked();
    return core_.test();
  }

  // --- what was built (also plan_facts, plan_core.hpp: kind, count, root, ranks,
  // the counts, schedule, name, chunking, programs, program_rank, uses_messages) --

  /// The bound plan as text (engine::describe): placement, layout, chunking, transfers.
  [[nodiscard]] std::string describe() const { return checked().describe(); }
  /// This rank's node-segment slot (flags + shm), scratch and staging bytes:
  /// each at most options.chunk_bytes (+ the flag lines), whatever the count.
  [[nodiscard]] std::size_t shm_bytes_per_rank() const { return this->engine_of("shm_bytes_per_rank()").shm_bytes(); }
  [[nodiscard]] std::size_t scratch_bytes_per_rank() const {
    return this->engine_of("scratch_bytes_per_rank()").scratch_bytes();
  }
  [[nodiscard]] std::size_t stage_bytes_per_rank() const {
    return this->engine_of("stage_bytes_per_rank()").stage_bytes();
  }
  /// The communicator rank and the node of each program rank.
  [[nodiscard]] const std::vector<int>& comm_of_program() const {
    return this->engine_of("comm_of_program()").placement().comm_of_prog;
  }
  [[nodiscard]] const std::vector<int>& node_of_program() const {
    return this->engine_of("node_of_program()").placement().node_of;
  }

  /// Built by the make_* factories.
  explicit plan(plan_core<T, Op> core) : plan_facts<T, Op>(std::move(core)) { core_.let_other_waits_advance(); }

 private:
  using plan_facts<T, Op>::core_;
  static constexpr buffer_words words{"buffer", "is null with count", "p(buf)"};

  /// The engine; a moved-from plan has none and says so.
  mpi::engine& checked() const { return core_.get("collc::plan"); }

  void start_impl(const T* send, std::size_t send_size, T* recv, std::size_t recv_size) {
    (void)checked();
    core_.begin(send, send_size, recv, recv_size, words, [&] {
      std::string s = "send [";
      s += address(send);
      s += ", +";
      s += std::to_string(send_size * sizeof(T));
      s += " B) overlaps recv [";
      s += address(recv);
      s += ", +";
      s += std::to_string(recv_size * sizeof(T));
      s += " B)";
      return s;
    });
    core_.advance(false);
  }

  static std::string address(const void* p) {
    char text[32];
    std::snprintf(text, sizeof(text), "%p", p);
    return text;
  }
};

/// Any collective by value: the factories' common body (also what tests use
/// to cover all five alike); collective over `comm`.
template <class T, class Op, class... A>
plan<T, Op> make_plan(collective coll, MPI_Comm comm, std::size_t count, int root, A&&... args) {
  return plan<T, Op>(make_core<T, Op>(coll, comm, count, root, std::forward<A>(args)...));
}

/// Allreduce of `count` elements per rank. Example:
///   auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 1000);  p(x, y);
template <class T, class Op = plus, class... A>
plan<T, Op> make_allreduce(MPI_Comm comm, std::size_t count, A&&... args) {
  static_assert(reduction_op<Op, T>, "collc::make_allreduce: Op must be callable as T(const T&, const T&)");
  return make_plan<T, Op>(collective::allreduce, comm, count, 0, std::forward<A>(args)...);
}
/// Reduce_scatter_block: send holds P blocks of `count`, rank r receives block r reduced. Example:
///   auto p = collc::make_reduce_scatter<long>(comm, 4);  p(send /* 4P */, recv /* 4 */);
template <class T, class Op = plus, class... A>
plan<T, Op> make_reduce_scatter(MPI_Comm comm, std::size_t count, A&&... args) {
  static_assert(reduction_op<Op, T>, "collc::make_reduce_scatter: Op must be callable as T(const T&, const T&)");
  return make_plan<T, Op>(collective::reduce_scatter, comm, count, 0, std::forward<A>(args)...);
}
/// Allgather of `count` elements per rank into P blocks. Example:
///   auto p = collc::make_allgather<int>(comm, 2);  p(mine /* 2 */, all /* 2P */);
template <class T, class... A>
plan<T> make_allgather(MPI_Comm comm, std::size_t count, A&&... args) {
  return make_plan<T, plus>(collective::allgather, comm, count, 0, std::forward<A>(args)...);
}
/// Reduce of `count` elements to `root`. Example:
///   auto p = collc::make_reduce<double, collc::max>(comm, n, 0);  p(x, y /* significant at root */);
template <class T, class Op = plus, class... A>
plan<T, Op> make_reduce(MPI_Comm comm, std::size_t count, int root, A&&... args) {
  static_assert(reduction_op<Op, T>, "collc::make_reduce: Op must be callable as T(const T&, const T&)");
  return make_plan<T, Op>(collective::reduce, comm, count, root, std::forward<A>(args)...);
}
/// Broadcast of `count` elements from `root`. Example:
///   auto p = collc::make_bcast<char>(comm, 64, 0);  p(buf);
template <class T, class... A>
plan<T> make_bcast(MPI_Comm comm, std::size_t count, int root, A&&... args) {
  return make_plan<T, plus>(collective::bcast, comm, count, root, std::forward<A>(args)...);
}

}  // namespace collc::mpi

namespace collc {
// The public names (design: collc::plan, collc::make_allreduce, ...).
using mpi::make_allgather;
using mpi::make_allreduce;
using mpi::make_bcast;
using mpi::make_reduce;
using mpi::make_reduce_scatter;
using mpi::plan;
}  // namespace collc
