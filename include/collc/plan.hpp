#pragma once
/// \file
/// Persistent collective plans on MPI communicators: build once (setup is a
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
/// advances it without blocking, wait() completes it. Progress between those
/// calls happens only inside them.
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/algo/select.hpp>
#include <collc/backend/mpi/engine.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include <collc/ir/program.hpp>
#include <collc/ir/verify.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace collc {

namespace detail {

template <class X>
std::string type_name() {
  const char* raw = typeid(X).name();
#if __has_include(<cxxabi.h>)
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(raw, nullptr, nullptr, &status), std::free);
  if (status == 0 && d) return d.get();
#endif
  return raw;
}

template <class X>
struct is_static_factors : std::false_type {};
template <int... R>
struct is_static_factors<factors<R...>> : std::true_type {};

/// The schedule a factory was asked for, before the communicator is known.
struct schedule_request {
  enum kind_t : std::uint8_t { by_default, by_factors, explicit_schedule } kind = by_default;
  std::vector<int> factors;
  algo::schedule sched;

  [[nodiscard]] std::string text() const {
    switch (kind) {
      case by_default: return "default";
      case by_factors: return factor_set(std::span<const int>(factors)).to_string();
      case explicit_schedule: return sched.to_string();
    }
    return "?";
  }
};

/// The settings a factory collected from its trailing arguments.
template <class Op>
struct factory_args {
  schedule_request sched;
  plan_options options;
  Op op{};
  int seen_sched = 0, seen_options = 0, seen_op = 0;

  template <class A>
  void take(A&& a) {
    using X = std::remove_cvref_t<A>;
    if constexpr (is_static_factors<X>::value || std::is_same_v<X, factor_set>) {
      ++seen_sched;
      sched.kind = schedule_request::by_factors;
      const factor_set fs(a);
      sched.factors.assign(fs.begin(), fs.end());
    } else if constexpr (std::is_same_v<X, algo::schedule>) {
      ++seen_sched;
      sched.kind = schedule_request::explicit_schedule;
      sched.sched = a;
    } else if constexpr (std::is_same_v<X, plan_options>) {
      ++seen_options;
      options = a;
    } else if constexpr (std::is_same_v<X, Op>) {
      ++seen_op;
      op = std::forward<A>(a);
    } else {
      static_assert(sizeof(X) == 0,
                    "collc::make_*: a trailing argument must be a factor set (collc::factors<...>, "
                    "collc::factor_set), a collc::algo::schedule, collc::plan_options, or the operator");
    }
  }
};

/// The schedule a plan gets by default (no override): on one node the
/// measured rule (default_schedule: fastest here and free to compute, so a
/// later plan sets up in microseconds; it knows oversubscription through
/// `node_cores`), across nodes the cost-model selector, which the simple rule
/// cannot match at scale.
inline algo::schedule default_for(collective coll, int P, std::size_t bytes, bool commutative,
                                  const std::vector<int>& node_of, int node_cores) {
  bool one_node = true;
  for (int n : node_of) one_node = one_node && n == node_of.front();
  return one_node ? algo::default_schedule(coll, P, bytes, commutative, node_of, node_cores)
                  : algo::select(coll, P, bytes, commutative, node_of);
}

/// The schedule for `req` on `P` program ranks: validated, the family decided.
inline algo::schedule resolve_schedule(const schedule_request& req, collective coll, int P, std::size_t bytes,
                                       bool commutative, const std::vector<int>& node_of, int node_cores = 0) {
  if (req.kind == schedule_request::explicit_schedule) {
    if (req.sched.fam == algo::family::cyclic_shift && !commutative && reduces(coll))
      throw error(errc::not_commutative,
                  "schedule " + req.sched.to_string() + " is a cyclic shift, which needs a commutative operator");
    return req.sched;
  }
  if (req.kind == schedule_request::by_default) {
    // Expert overrides first (COLLC_ALGO / COLLC_FACTORS, like MPICH CVARs;
    // they must be set alike on every rank), then default_for.
    if (auto chosen = algo::override_from_env(coll, P, commutative)) return *chosen;
    return default_for(coll, P, bytes, commutative, node_of, node_cores);
  }
  // A factor set: recursive exchange if it fits P exactly, else cyclic shift.
  const factor_set fs(std::span<const int>(req.factors));
  const auto rec = validate(fs, P, coll, schedule_kind::recursive);
  if (rec.ok) return algo::schedule::recursive(fs);
  const auto cyc = validate(fs, P, coll, schedule_kind::cyclic);
  if (cyc.ok) {
    if (!commutative && reduces(coll))
      throw error(errc::not_commutative, "factor set " + fs.to_string() + " is a cyclic shift for " +
                                             std::to_string(P) +
                                             " ranks, which needs a commutative operator (this operator is not; "
                                             "declare is_commutative or use a factor set whose product is " +
                                             std::to_string(P) + ")");
    return algo::schedule::cyclic(fs);
  }
  throw error(rec.code, std::string(rec.message()) + " (and as a cyclic shift: " + std::string(cyc.message()) + ")");
}

}  // namespace detail

/// A persistent collective on an MPI communicator; see the file comment.
/// `T`: any trivially copyable type. `Op`: collc's named operators or any
/// callable `T(const T&, const T&)`; commutative only if collc::commutative_v<Op>.
template <class T, class Op = plus>
class plan {
  static_assert(std::is_trivially_copyable_v<T>, "collc::plan: T must be trivially copyable");

 public:
  plan(plan&&) noexcept = default;
  plan& operator=(plan&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      e_ = std::move(o.e_);
      op_ = std::move(o.op_);
      sched_ = std::move(o.sched_);
    }
    return *this;
  }
  ~plan() { finish_quietly(); }

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
    (void)engine();
    (*this)(in_place, std::span<T>(buf, buf ? in_place_count() : 0));
  }

  /// Starts an execution (see the file comment for how far it runs).
  void start(std::span<const T> send, std::span<T> recv) {
    start_impl(send.data(), send.size(), recv.data(), recv.size());
  }
  void start(const T* send, T* recv) {
    (void)engine();
    const bool root_only = kind() == collective::reduce && !is_root();
    start_impl(send, send_count(), recv, root_only && recv == nullptr ? 0 : recv_count());
  }
  void start(in_place_t, std::span<T> buf) {
    const collective c = engine().shape().coll;
    guarded_check([&] { check("in-place", buf.data(), buf.size(), in_place_count()); });
    T* b = buf.data();
    switch (c) {
      case collective::allreduce: e_->begin(b, b, true, false); break;
      case collective::reduce_scatter: e_->begin(b, b, true, false); break;
      case collective::allgather: e_->begin(b + static_cast<std::size_t>(e_->rank()) * count(), b, true, false); break;
      case collective::reduce:
        if (is_root())
          e_->begin(b, b, true, false);
        else
          e_->begin(b, nullptr, false, true);
        break;
      case collective::bcast: e_->begin(nullptr, b, false, false); break;
    }
    e_->template advance<T>(op_, false);
  }
  void start(in_place_t, T* buf) {
    (void)engine();
    start(in_place, std::span<T>(buf, buf ? in_place_count() : 0));
  }
  void start(std::span<T> buf) { start(in_place, buf); }

  /// Completes the execution begun by start().
  void wait() {
    engine().template advance<T>(op_, true);
    e_->acknowledge();
  }
  /// Advances without blocking; true once the execution is complete (which
  /// also ends it, as wait() would).
  bool test() {
    const bool done = engine().template advance<T>(op_, false);
    if (done) e_->acknowledge();
    return done;
  }

  // --- what was built -------------------------------------------------------------

  [[nodiscard]] collective kind() const noexcept { return e_->shape().coll; }
  /// Elements per rank (allreduce, reduce, bcast) or per block (reduce_scatter, allgather).
  [[nodiscard]] std::size_t count() const noexcept { return e_->shape().count; }
  [[nodiscard]] int root() const noexcept { return e_->shape().root; }
  [[nodiscard]] int ranks() const noexcept { return e_->size(); }
  /// Elements expected in send / recv / an in-place buffer on this rank.
  [[nodiscard]] std::size_t send_count() const noexcept {
    return kind() == collective::reduce_scatter ? count() * static_cast<std::size_t>(ranks())
           : kind() == collective::bcast        ? 0
                                                : count();
  }
  [[nodiscard]] std::size_t recv_count() const noexcept {
    return kind() == collective::allgather ? count() * static_cast<std::size_t>(ranks()) : count();
  }
  [[nodiscard]] std::size_t in_place_count() const noexcept { return std::max(send_count(), recv_count()); }
  /// The schedule that was lowered (after default selection).
  [[nodiscard]] const algo::schedule& schedule() const noexcept { return sched_; }
  /// "recexch{-2,2}"-style name of the schedule.
  [[nodiscard]] std::string schedule_name() const { return sched_.to_string(); }
  /// Human-readable plan name with its id and signature (used in error messages).
  [[nodiscard]] const std::string& name() const noexcept { return e_->name(); }
  /// Chunk size in elements (per rank or per block) and executions per call.
  [[nodiscard]] std::size_t chunk_elements() const noexcept { return e_->chunk_count(); }
  [[nodiscard]] std::size_t executions_per_call() const noexcept { return e_->executions_per_call(); }
  /// This rank's node-segment slot (flags + shm), scratch and staging bytes:
  /// each at most options.chunk_bytes (+ the flag lines), whatever the count.
  [[nodiscard]] std::size_t shm_bytes_per_rank() const noexcept { return e_->shm_bytes(); }
  [[nodiscard]] std::size_t scratch_bytes_per_rank() const noexcept { return e_->scratch_bytes(); }
  [[nodiscard]] std::size_t stage_bytes_per_rank() const noexcept { return e_->stage_bytes(); }
  /// The lowered programs (chunk, then tail if any), in program ranks.
  [[nodiscard]] const std::vector<ir::program>& programs() const noexcept { return e_->programs(); }
  /// Program rank of this rank and the communicator rank of each program rank.
  [[nodiscard]] int program_rank() const noexcept { return e_->program_rank(); }
  [[nodiscard]] const std::vector<int>& comm_of_program() const noexcept { return e_->placement().comm_of_prog; }
  [[nodiscard]] const std::vector<int>& node_of_program() const noexcept { return e_->placement().node_of; }
  /// Whether some program of this rank sends or receives messages (inter-node path).
  [[nodiscard]] bool uses_messages() const noexcept { return e_->sends_messages(); }

  /// Built by the make_* factories.
  plan(std::unique_ptr<detail::engine> e, Op op, algo::schedule s)
      : e_(std::move(e)), op_(std::move(op)), sched_(std::move(s)) {}

 private:
  /// The engine; a moved-from plan has none and says so.
  detail::engine& engine() const {
    if (!e_) throw error(errc::invalid_argument, "collc::plan: used after being moved from (it holds no plan)");
    return *e_;
  }

  /// Argument checks of a call: a failure abandons the call (engine::abandon),
  /// so its peers fail at once naming this rank instead of timing out.
  template <class F>
  void guarded_check(F&& checks) {
    try {
      checks();
    } catch (const error& e) {
      e_->abandon(e);
      throw;
    }
  }

  void start_impl(const T* send, std::size_t send_size, T* recv, std::size_t recv_size) {
    if (engine().shape().coll == collective::bcast)
      throw error(errc::invalid_argument, e_->name() + ": bcast takes one buffer: p(buf)");
    const bool root_only = kind() == collective::reduce && !is_root();
    guarded_check([&] {
      check("send", send, send_size, send_count());
      if (!root_only || recv_size != 0) check("recv", recv, recv_size, recv_count());
    });
    if (!root_only) {
      const auto* s = reinterpret_cast<const std::byte*>(send);
      const auto* r = reinterpret_cast<const std::byte*>(recv);
      const std::size_t sb = send_size * sizeof(T), rb = recv_size * sizeof(T);
      if (sb != 0 && rb != 0 && s < r + rb && r < s + sb)
        guarded_check([&] {
          throw error(errc::invalid_argument, e_->name() + ": send [" + address(s) + ", +" + std::to_string(sb) +
                                                  " B) overlaps recv [" + address(r) + ", +" + std::to_string(rb) +
                                                  " B); use collc::in_place for in-place execution");
        });
    }
    e_->begin(send, root_only ? nullptr : recv, false, root_only);
    e_->template advance<T>(op_, false);
  }

  [[nodiscard]] bool is_root() const noexcept { return e_->rank() == root(); }

  void check(const char* what, const T* data, std::size_t size, std::size_t expected) const {
    if (size != expected)
      throw error(errc::invalid_argument, e_->name() + ": " + what + " buffer has " + std::to_string(size) +
                                              " elements, the plan needs " + std::to_string(expected));
    if (expected > 0 && data == nullptr)
      throw error(errc::invalid_argument,
                  e_->name() + ": " + what + " buffer is null with count " + std::to_string(expected));
  }
  static std::string address(const void* p) {
    char text[32];
    std::snprintf(text, sizeof(text), "%p", p);
    return text;
  }

  // A call still running when the plan goes away is completed (peers need
  // this rank's part); errors cannot be reported from a destructor.
  void finish_quietly() noexcept {
    if (e_ && e_->active() && !e_->failed()) try {
        e_->template advance<T>(op_, true);
      } catch (...) {
      }
  }

  std::unique_ptr<detail::engine> e_;
  Op op_;
  algo::schedule sched_;
};

namespace detail {

/// An engine set up and built for a request, with the operator and the
/// schedule it runs: the common body of collc's factories and of the other
/// backends' (backend/kokkos); collective over `comm`. `who` names the
/// factory family in error messages ("collc::make_", "collc::kokkos::make_").
template <class Op>
struct built_engine {
  std::unique_ptr<engine> e;
  Op op;
  algo::schedule sched;
};

template <class T, class Op, class... A>
built_engine<Op> build_engine(const char* who, collective coll, MPI_Comm comm, std::size_t count, int root,
                              A&&... args) {
  static_assert(std::is_trivially_copyable_v<T>, "collc::make_*: T must be trivially copyable");
  factory_args<Op> fa;
  (fa.take(std::forward<A>(args)), ...);
  if (fa.seen_sched > 1 || fa.seen_options > 1 || fa.seen_op > 1)
    throw error(errc::invalid_argument,
                who + std::string(to_string(coll)) + ": at most one schedule, one plan_options and one operator");
  plan_shape shape;
  shape.coll = coll;
  shape.count = count;
  shape.root = root;
  shape.elem_size = sizeof(T);
  shape.type_name = type_name<T>();
  shape.op_name = reduces(coll) ? type_name<Op>() : "none";
  shape.commutative = commutative_v<Op>;
  shape.schedule = fa.sched.text();
  auto e = std::make_unique<engine>(comm, shape, resolve(fa.options));
  // Resolution and lowering may throw (a factor set that does not fit P, an
  // override set on one rank only, ...): build() agrees on their outcome, so
  // every rank throws alike instead of leaving the others waiting.
  const auto& map = e->placement();
  const std::vector<int> node_of = map.nodes > 1 ? map.node_of : std::vector<int>{};
  const bool commutative = shape.commutative || !reduces(coll);
  algo::schedule sched;
  e->build(
      [&] {
        sched = resolve_schedule(fa.sched, coll, e->size(), count * sizeof(T), commutative, node_of, e->node_cores());
        return sched.to_string();
      },
      [&](const chunk_request& q) {
        algo::lower_request r;
        r.coll = coll;
        r.ranks = q.ranks;
        r.count = q.count;
        r.root = q.root;
        r.granule = q.granule;
        r.block_stride = q.block_stride;
        r.node_of = q.node_of;
        // COLLC_ENABLE_CHECKS / options.checks: the engine proves the programs
        // it binds, in the order it runs them (engine::verify_runs).
        return algo::lower(sched, r);
      });
  return {std::move(e), std::move(fa.op), std::move(sched)};
}

/// The factories' common body (see the file comment); collective over `comm`.
template <class T, class Op, class... A>
plan<T, Op> make_plan(collective coll, MPI_Comm comm, std::size_t count, int root, A&&... args) {
  auto b = build_engine<T, Op>("collc::make_", coll, comm, count, root, std::forward<A>(args)...);
  return plan<T, Op>(std::move(b.e), std::move(b.op), std::move(b.sched));
}

}  // namespace detail

/// Allreduce of `count` elements per rank. Example:
///   auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 1000);  p(x, y);
template <class T, class Op = plus, class... A>
plan<T, Op> make_allreduce(MPI_Comm comm, std::size_t count, A&&... args) {
  static_assert(reduction_op<Op, T>, "collc::make_allreduce: Op must be callable as T(const T&, const T&)");
  return detail::make_plan<T, Op>(collective::allreduce, comm, count, 0, std::forward<A>(args)...);
}
/// Reduce_scatter_block: send holds P blocks of `count`, rank r receives block r reduced. Example:
///   auto p = collc::make_reduce_scatter<long>(comm, 4);  p(send /* 4P */, recv /* 4 */);
template <class T, class Op = plus, class... A>
plan<T, Op> make_reduce_scatter(MPI_Comm comm, std::size_t count, A&&... args) {
  static_assert(reduction_op<Op, T>, "collc::make_reduce_scatter: Op must be callable as T(const T&, const T&)");
  return detail::make_plan<T, Op>(collective::reduce_scatter, comm, count, 0, std::forward<A>(args)...);
}
/// Allgather of `count` elements per rank into P blocks. Example:
///   auto p = collc::make_allgather<int>(comm, 2);  p(mine /* 2 */, all /* 2P */);
template <class T, class... A>
plan<T> make_allgather(MPI_Comm comm, std::size_t count, A&&... args) {
  return detail::make_plan<T, plus>(collective::allgather, comm, count, 0, std::forward<A>(args)...);
}
/// Reduce of `count` elements to `root`. Example:
///   auto p = collc::make_reduce<double, collc::max>(comm, n, 0);  p(x, y /* significant at root */);
template <class T, class Op = plus, class... A>
plan<T, Op> make_reduce(MPI_Comm comm, std::size_t count, int root, A&&... args) {
  static_assert(reduction_op<Op, T>, "collc::make_reduce: Op must be callable as T(const T&, const T&)");
  return detail::make_plan<T, Op>(collective::reduce, comm, count, root, std::forward<A>(args)...);
}
/// Broadcast of `count` elements from `root`. Example:
///   auto p = collc::make_bcast<char>(comm, 64, 0);  p(buf);
template <class T, class... A>
plan<T> make_bcast(MPI_Comm comm, std::size_t count, int root, A&&... args) {
  return detail::make_plan<T, plus>(collective::bcast, comm, count, root, std::forward<A>(args)...);
}

}  // namespace collc
