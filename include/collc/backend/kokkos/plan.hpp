#pragma once
/// \file
/// Persistent collective plans over Kokkos::Views, whose copy and reduce
/// steps run as Kokkos kernels on an execution space instance the caller
/// passes with each call. Built on the MPI backend: the same setup, lowering,
/// node segment, signals and messages; only the element kernels differ.
///
///   using exec_space = Kokkos::DefaultHostExecutionSpace;
///   auto p = collc::kokkos::make_allreduce<exec_space, double>(MPI_COMM_WORLD, n);
///   Kokkos::View<double*> x("x", n), y("y", n);
///   p(exec_space(), x, y);              // y = sum over ranks of x
///   p(exec_space(), collc::in_place, y);
///
/// Also make_reduce_scatter, make_allgather, make_reduce and make_bcast, with
/// the counts, trailing arguments (schedule, collc::plan_options, operator)
/// and in-place layouts of collc/plan.hpp. `Op` may be a collc operator, any
/// callable `T(const T&, const T&)`, or a Kokkos reducer type (Kokkos::Sum,
/// Prod, Min, Max, LAnd, LOr, BAnd, BOr), mapped to the collc operator.
///
/// The execution-space contract (docs/kokkos_backend.md explains why):
///  - A call `p(exec, send, recv)` first fences `exec`: work the caller
///    enqueued on `exec` before the call (producing `send`, or still reading
///    `recv`) is complete before anything of the call touches the views.
///    Work on other instances must be fenced by the caller.
///  - Every copy and reduce of the program is a parallel_for over
///    RangePolicy<ExecSpace>(exec, ...), labelled "collc::copy" / "collc::reduce",
///    except in small plans on host execution spaces (inline_plan_v: send and
///    recv of at most inline_bytes), whose copies and reduces run inline on
///    the calling thread: no kernel, and no fence after the entry fence.
///  - `exec` is fenced again wherever data leaves the kernels' order: before
///    each signal to node peers, before each MPI send and recv, and at the end
///    of each execution (chunk). Each of these fences is wrapped in the
///    Kokkos profiling region "collc::fence" so tools (and the tests) see it.
///  - When the call returns (or wait() / a true test() after start()), `recv`
///    holds the result and no collc work on it is pending: it may be read on
///    the host or by any execution space without a further fence. `send` is
///    read only between the call's start and its completion.
///
/// Memory: only memory the host can address, and execution spaces that can
/// access host memory (the node segment is host memory that other processes
/// map). Anything else (a device memory space, whose pointers peers cannot
/// read) is a compile error until a device path (IPC handles) exists.
#if !__has_include(<Kokkos_Core.hpp>)
#error "collc/backend/kokkos/plan.hpp needs Kokkos: link collc::kokkos (find_package(collc COMPONENTS kokkos))"
#endif

#include <Kokkos_Core.hpp>
#include <collc/algo/schedule.hpp>
#include <collc/backend/mpi/engine.hpp>
#include <collc/backend/mpi/plan_core.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace collc::kokkos {

// --- operators -------------------------------------------------------------------

/// The collc operator for `Op`: Kokkos reducer types map to collc's named
/// operators (same result for every pair of values); anything else is itself.
/// Example: `std::is_same_v<collc::kokkos::op_t<Kokkos::Sum<double>>, collc::plus>`.
template <class Op>
struct op_of {
  using type = Op;
  using scalar = void;  ///< a reducer's value type; void for anything else
};
template <class S, class Sp>
struct op_of<Kokkos::Sum<S, Sp>> {
  using type = plus;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::Prod<S, Sp>> {
  using type = prod;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::Min<S, Sp>> {
  using type = min;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::Max<S, Sp>> {
  using type = max;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::LAnd<S, Sp>> {
  using type = logical_and;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::LOr<S, Sp>> {
  using type = logical_or;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::BAnd<S, Sp>> {
  using type = bit_and;
  using scalar = S;
};
template <class S, class Sp>
struct op_of<Kokkos::BOr<S, Sp>> {
  using type = bit_or;
  using scalar = S;
};
template <class Op>
using op_t = typename op_of<std::remove_cvref_t<Op>>::type;
/// Whether `Op` may reduce a plan of T: a Kokkos reducer only for its own
/// value type (Kokkos::Sum<int> on a plan of double is a slip: the sum would
/// be of doubles), anything else always (reduction_op checks it).
template <class Op, class T>
inline constexpr bool reducer_fits_v =
    std::is_void_v<typename op_of<std::remove_cvref_t<Op>>::scalar> ||
    std::is_same_v<std::remove_cv_t<typename op_of<std::remove_cvref_t<Op>>::scalar>, T>;

// --- what a plan accepts ------------------------------------------------------------

/// Execution spaces whose kernels can read and write host memory (the node
/// segment and the scratch of a plan live there).
template <class ExecSpace>
inline constexpr bool host_capable_v =
    Kokkos::is_execution_space<ExecSpace>::value&& Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;

/// Execution spaces that run on the host threads (Serial, OpenMP, Threads):
/// their kernels' memory is host memory.
template <class ExecSpace>
inline constexpr bool host_execution_v = std::is_same_v<typename ExecSpace::memory_space, Kokkos::HostSpace>;

/// Bytes of send and of recv up to which a plan on a host execution space
/// runs its copies and reduces inline on the calling thread. A kernel launch
/// and its fence cost more than such a copy: with one double per rank
/// (examples/kokkos_cg) a parallel_for-based plan was slower than
/// MPI_Allreduce at P = 1 and 2 (13.9 against 13.6 us per CG iteration at
/// P = 1). A page is a few hundred nanoseconds of memcpy, below any launch.
inline constexpr std::size_t inline_bytes = 4096;

namespace detail {
template <class V>
constexpr bool is_view_v = Kokkos::is_view<std::remove_cvref_t<V>>::value;

template <class V, bool = is_view_v<V>>
struct view_traits {
  static constexpr bool rank1 = false;
  static constexpr bool host_memory = false;
  template <class>
  static constexpr bool holds = false;
  template <class>
  static constexpr bool reachable_from = false;
};
template <class V>
struct view_traits<V, true> {
  using view = std::remove_cvref_t<V>;
  static constexpr bool rank1 = static_cast<int>(view::rank) == 1;
  static constexpr bool host_memory =
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename view::memory_space>::accessible;
  template <class T>
  static constexpr bool holds = std::is_same_v<std::remove_const_t<typename view::value_type>, T>;
  template <class ExecSpace>
  static constexpr bool reachable_from = Kokkos::SpaceAccessibility<ExecSpace, typename view::memory_space>::accessible;
};
}  // namespace detail

/// Whether a plan on `ExecSpace` over `T` takes `V` as a buffer (`Writable`:
/// as a receive or in-place buffer): a rank-1 View of T in memory the host
/// and `ExecSpace` can both access. Contiguity is checked at run time.
template <class V, class ExecSpace, class T, bool Writable>
inline constexpr bool accepts_view_v =
    detail::is_view_v<V>&& detail::view_traits<V>::rank1&& detail::view_traits<V>::template holds<T>&&
        detail::view_traits<V>::host_memory&& detail::view_traits<V>::template reachable_from<ExecSpace> &&
    (!Writable || !std::is_const_v<typename std::remove_cvref_t<V>::value_type>);

namespace detail {

/// The static checks behind accepts_view_v, one message each.
template <class V, class ExecSpace, class T, bool Writable>
constexpr void check_view() {
  static_assert(is_view_v<V>, "collc::kokkos::plan: buffers must be Kokkos::Views");
  if constexpr (is_view_v<V>) {
    using view = std::remove_cvref_t<V>;
    static_assert(view_traits<V>::rank1, "collc::kokkos::plan: buffers must be rank-1 Views (T*)");
    static_assert(view_traits<V>::template holds<T>, "collc::kokkos::plan: the View's value type must be the plan's T");
    static_assert(!Writable || !std::is_const_v<typename view::value_type>,
                  "collc::kokkos::plan: a receive or in-place View must not be const");
    static_assert(view_traits<V>::host_memory,
                  "collc::kokkos::plan: the View's memory space is not host-accessible; device memory needs a "
                  "device path (IPC handles), which collc does not have yet: deep_copy into a HostSpace View");
    static_assert(view_traits<V>::template reachable_from<ExecSpace>,
                  "collc::kokkos::plan: the execution space cannot access the View's memory space");
  }
}

/// Element kernels of the MPI engine's interpreter (see detail::host_kernels)
/// as Kokkos kernels on one execution space instance.
template <class T>
struct copy_kernel {
  T* dst;
  const T* src;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { dst[i] = src[i]; }
};
/// dst may alias a or b element for element: each i reads its operands before writing.
template <class T, class Op>
struct reduce_kernel {
  T* dst;
  const T* a;
  const T* b;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { dst[i] = op(a[i], b[i]); }
};

/// Fences `exec` inside the profiling region "collc::fence" (Kokkos 3.4's
/// Serial fence emits no tool event of its own; the region makes every fence
/// collc takes visible to tools).
template <class ExecSpace>
void fence(const ExecSpace& exec) {
  Kokkos::Profiling::pushRegion("collc::fence");
  exec.fence();
  Kokkos::Profiling::popRegion();
}

template <class ExecSpace>
struct exec_kernels {
  ExecSpace exec;
  /// Copies and reduces run on the calling thread (a small plan on a host
  /// space, see inline_bytes): nothing is ever enqueued, so nothing to fence.
  bool on_host_thread = false;

  template <class T>
  void copy(T* dst, const T* src, std::size_t n) const {
    if (n == 0 || dst == src) return;
    if (on_host_thread) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];  // as copy_kernel, element by element
      return;
    }
    Kokkos::parallel_for("collc::copy", policy(n), copy_kernel<T>{dst, src});
  }
  template <class T, class Op>
  void reduce(T* dst, const T* a, const T* b, std::size_t n, const Op& op) const {
    if (n == 0) return;
    if (on_host_thread) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = op(a[i], b[i]);
      return;
    }
    Kokkos::parallel_for("collc::reduce", policy(n), reduce_kernel<T, Op>{dst, a, b, op});
  }
  void sync() const {
    if (!on_host_thread) fence(exec);
  }

 private:
  [[nodiscard]] Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>> policy(std::size_t n) const {
    return {exec, 0, static_cast<std::int64_t>(n)};
  }
};

}  // namespace detail

/// A persistent collective over Kokkos::Views on an MPI communicator, run on
/// an `ExecSpace` instance given per call; see the file comment for the
/// ordering contract. Example:
///   auto p = collc::kokkos::make_allreduce<Kokkos::Serial, double>(comm, 2);
///   p(Kokkos::Serial(), local, global);
template <class ExecSpace, class T, class Op = plus>
class plan : public mpi::plan_facts<T, Op> {
  static_assert(host_capable_v<ExecSpace>,
                "collc::kokkos::plan: ExecSpace must be a Kokkos execution space that can access HostSpace; "
                "device execution spaces need a device path (IPC handles), which collc does not have yet");
  static_assert(std::is_trivially_copyable_v<T>, "collc::kokkos::plan: T must be trivially copyable");

 public:
  using execution_space = ExecSpace;
  using value_type = T;

  // A moved-from plan holds no plan and no call: its exec_ is reset (a moved
  // std::optional stays engaged, and wait()/test() would then run on the null
  // engine).
  plan(plan&& o) noexcept : mpi::plan_facts<T, Op>(std::move(o)), exec_(std::exchange(o.exec_, std::nullopt)) {}
  plan& operator=(plan&& o) noexcept {
    if (this != &o) {
      finish_quietly();
      core_ = std::move(o.core_);
      exec_ = std::exchange(o.exec_, std::nullopt);
    }
    return *this;
  }
  ~plan() { finish_quietly(); }

  // --- execution ----------------------------------------------------------------

  /// Blocking: `p(exec, send, recv)`. At a non-root of reduce, `recv` may be
  /// an empty View.
  template <class SendView, class RecvView>
  requires(detail::is_view_v<SendView>&& detail::is_view_v<RecvView>) void operator()(const ExecSpace& exec,
                                                                                      const SendView& send,
                                                                                      const RecvView& recv) {
    start(exec, send, recv);
    wait();
  }
  /// In place, MPI's layout per collective (see collc/backend/mpi/plan.hpp); bcast: its only buffer.
  template <class View>
  void operator()(const ExecSpace& exec, in_place_t, const View& buf) {
    start(exec, in_place, buf);
    wait();
  }
  template <class View>
  requires detail::is_view_v<View>
  void operator()(const ExecSpace& exec, const View& buf) { (*this)(exec, in_place, buf); }

  /// Starts a call: fences `exec`, then runs until the first wait for a peer.
  template <class SendView, class RecvView>
  requires(detail::is_view_v<SendView>&& detail::is_view_v<RecvView>) void start(const ExecSpace& exec,
                                                                                 const SendView& send,
                                                                                 const RecvView& recv) {
    detail::check_view<SendView, ExecSpace, T, false>();
    detail::check_view<RecvView, ExecSpace, T, true>();
    const T* s = nullptr;
    T* r = nullptr;
    (void)core_.get("collc::kokkos::plan");
    core_.guarded([&] {
      s = contiguous("send", send);
      r = contiguous("recv", recv);
    });
    begin(exec, [&] {
      core_.begin(s, send.extent(0), r, recv.extent(0), words, [&] {
        std::string text = "send View \"";
        text += send.label();
        text += "\" overlaps recv View \"";
        text += recv.label();
        text += "\"";
        return text;
      });
    });
  }
  template <class View>
  void start(const ExecSpace& exec, in_place_t, const View& buf) {
    detail::check_view<View, ExecSpace, T, true>();
    T* b = nullptr;
    (void)core_.get("collc::kokkos::plan");
    core_.guarded([&] { b = contiguous("in-place", buf); });
    begin(exec, [&] { core_.begin_in_place(b, buf.extent(0), words); });
  }
  template <class View>
  requires detail::is_view_v<View>
  void start(const ExecSpace& exec, const View& buf) { start(exec, in_place, buf); }

  /// Completes the call begun by start(); `recv` is then ready (no pending work).
  void wait() {
    (void)core_.get("collc::kokkos::plan");  // a moved-from plan says so, as collc::plan does
    if (!exec_) return;
    advance(true);
    core_.acknowledge();
  }
  /// Advances without blocking; true once the call is complete.
  bool test() {
    (void)core_.get("collc::kokkos::plan");
    if (!exec_) return true;
    return fenced([&] { return core_.test(kernels()); });
  }

  // --- what was built -------------------------------------------------------------

  // (and plan_facts, backend/mpi/plan_core.hpp: kind, count, root, ranks, the
  // counts, schedule, name, chunking, programs, program_rank, uses_messages)
  [[nodiscard]] std::string describe() const { return core_.get("collc::kokkos::plan").describe(); }
  /// Whether this plan's copies and reduces run inline on the calling thread
  /// (a host execution space, send and recv of at most inline_bytes each).
  [[nodiscard]] bool runs_inline() const {
    return host_execution_v<ExecSpace> && std::max(this->send_count(), this->recv_count()) * sizeof(T) <= inline_bytes;
  }

  /// Built by the make_* factories below.
  explicit plan(mpi::plan_core<T, Op> core) : mpi::plan_facts<T, Op>(std::move(core)) {}

 private:
  using mpi::plan_facts<T, Op>::core_;
  static constexpr mpi::buffer_words words{"View", "is unallocated, the plan needs", "p(exec, buf)"};

  // The fence on entry is the contract's first point: the caller's earlier
  // work on `exec` is done before the host, MPI or a kernel touches the views.
  template <class Begin>
  void begin(const ExecSpace& exec, Begin&& begin_core) {
    (void)core_.get("collc::kokkos::plan");
    detail::fence(exec);
    // Other plans' waits must be able to advance this call (engine::progress):
    // MPI lets ranks complete started collectives in different orders, so
    // rank 0 may wait for plan A while rank 1 waits for plan B. Set per call,
    // since the kernels run on this call's instance.
    core_.let_other_waits_advance(detail::exec_kernels<ExecSpace>{exec, runs_inline()});
    begin_core();
    exec_ = exec;
    advance(false);
  }

  bool advance(bool block) {
    return fenced([&] { return core_.advance(block, kernels()); });
  }

  /// Runs `step` (a step of the call); if it throws, fences first so that no
  /// collc kernel is left running on the user's views.
  template <class Step>
  bool fenced(Step step) {
    try {
      return step();
    } catch (...) {
      exec_->fence();
      throw;
    }
  }

  template <class View>
  T* contiguous(const char* what, const View& v) const {
    const std::size_t n = v.extent(0);
    if (n > 1 && (!v.span_is_contiguous() || v.stride(0) != 1))
      throw error(errc::invalid_argument, this->name() + ": " + what + " View \"" + v.label() +
                                              "\" is not contiguous (stride " + std::to_string(v.stride(0)) +
                                              "); collc takes contiguous rank-1 Views: deep_copy into one first");
    return const_cast<T*>(v.data());
  }

  void finish_quietly() noexcept {
    if (core_.valid() && exec_) core_.finish_quietly(kernels());
  }

  [[nodiscard]] detail::exec_kernels<ExecSpace> kernels() const { return {*exec_, runs_inline()}; }

  std::optional<ExecSpace> exec_;
};

// --- factories (collective over comm, like collc::make_*) ----------------------------

/// Allreduce of `count` elements per rank. Example:
///   auto p = collc::kokkos::make_allreduce<Kokkos::Serial, double, Kokkos::Max<double>>(comm, n);
template <class ExecSpace, class T, class Op = plus, class... A>
plan<ExecSpace, T, op_t<Op>> make_allreduce(MPI_Comm comm, std::size_t count, A&&... args) {
  static_assert(reducer_fits_v<Op, T>,
                "collc::kokkos::make_allreduce: the Kokkos reducer's value type is not T; use the reducer of T (e.g. "
                "Kokkos::Sum<T>)");
  static_assert(reduction_op<op_t<Op>, T>,
                "collc::kokkos::make_allreduce: Op must be callable as T(const T&, const T&) or a Kokkos reducer");
  return plan<ExecSpace, T, op_t<Op>>(
      mpi::make_core<T, op_t<Op>>(collective::allreduce, comm, count, 0, std::forward<A>(args)...));
}
/// Reduce_scatter_block: send holds P blocks of `count`. Example:
///   auto p = collc::kokkos::make_reduce_scatter<Kokkos::Serial, long>(comm, 4);  p(exec, send /* 4P */, recv /* 4 */);
template <class ExecSpace, class T, class Op = plus, class... A>
plan<ExecSpace, T, op_t<Op>> make_reduce_scatter(MPI_Comm comm, std::size_t count, A&&... args) {
  static_assert(reducer_fits_v<Op, T>,
                "collc::kokkos::make_reduce_scatter: the Kokkos reducer's value type is not T; use the reducer of T "
                "(e.g. Kokkos::Sum<T>)");
  static_assert(reduction_op<op_t<Op>, T>,
                "collc::kokkos::make_reduce_scatter: Op must be callable as T(const T&, const T&) or a Kokkos reducer");
  return plan<ExecSpace, T, op_t<Op>>(
      mpi::make_core<T, op_t<Op>>(collective::reduce_scatter, comm, count, 0, std::forward<A>(args)...));
}
/// Allgather of `count` elements per rank into P blocks. Example:
///   auto p = collc::kokkos::make_allgather<Kokkos::Serial, int>(comm, 2);  p(exec, mine /* 2 */, all /* 2P */);
template <class ExecSpace, class T, class... A>
plan<ExecSpace, T> make_allgather(MPI_Comm comm, std::size_t count, A&&... args) {
  return plan<ExecSpace, T>(mpi::make_core<T, plus>(collective::allgather, comm, count, 0, std::forward<A>(args)...));
}
/// Reduce of `count` elements to `root`. Example:
///   auto p = collc::kokkos::make_reduce<Kokkos::Serial, double, collc::min>(comm, n, 0);  p(exec, x, y);
template <class ExecSpace, class T, class Op = plus, class... A>
plan<ExecSpace, T, op_t<Op>> make_reduce(MPI_Comm comm, std::size_t count, int root, A&&... args) {
  static_assert(reducer_fits_v<Op, T>,
                "collc::kokkos::make_reduce: the Kokkos reducer's value type is not T; use the reducer of T (e.g. "
                "Kokkos::Sum<T>)");
  static_assert(reduction_op<op_t<Op>, T>,
                "collc::kokkos::make_reduce: Op must be callable as T(const T&, const T&) or a Kokkos reducer");
  return plan<ExecSpace, T, op_t<Op>>(
      mpi::make_core<T, op_t<Op>>(collective::reduce, comm, count, root, std::forward<A>(args)...));
}
/// Broadcast of `count` elements from `root`. Example:
///   auto p = collc::kokkos::make_bcast<Kokkos::Serial, char>(comm, 64, 0);  p(exec, buf);
template <class ExecSpace, class T, class... A>
plan<ExecSpace, T> make_bcast(MPI_Comm comm, std::size_t count, int root, A&&... args) {
  return plan<ExecSpace, T>(mpi::make_core<T, plus>(collective::bcast, comm, count, root, std::forward<A>(args)...));
}

/// Any collective by value (what the tests use to cover all five alike).
template <class ExecSpace, class T, class Op = plus, class... A>
plan<ExecSpace, T, op_t<Op>> make_plan(collective coll, MPI_Comm comm, std::size_t count, int root, A&&... args) {
  static_assert(reducer_fits_v<Op, T>,
                "collc::kokkos::make_plan: the Kokkos reducer's value type is not T; use the reducer of T (e.g. "
                "Kokkos::Sum<T>)");
  return plan<ExecSpace, T, op_t<Op>>(mpi::make_core<T, op_t<Op>>(coll, comm, count, root, std::forward<A>(args)...));
}

}  // namespace collc::kokkos
