#pragma once
/// \file
/// The one plan core: what every typed plan over the MPI engine shares, so
/// collc::plan<T, Op> (plan.hpp) and collc::kokkos::plan (backend/kokkos) are
/// thin wrappers that differ only in how buffers are given and which kernel
/// policy runs the element work (engine.hpp: kernel_policy).
///
///  - the factories' arguments: check_plan_args() decides at compile time
///    what the argument types alone decide (at most one schedule, options and
///    operator; an operator that is not the plan's Op names the fix), and
///    plan_args collects the values;
///  - plan_core<T, Op>: counts per collective (MPI's meaning), MPI's in-place
///    layout, the argument checks of a call (a failed check abandons the call,
///    so peers fail at once naming this rank instead of timing out), start /
///    test / wait and the completion of a call still running when the plan
///    goes away.
#include <collc/algo/schedule.hpp>
#include <collc/backend/mpi/build.hpp>
#include <collc/backend/mpi/engine.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace collc::mpi {

/// The demangled name of X (signatures agreed at setup, error messages).
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

/// What a factory's trailing argument is, from its type alone.
enum class plan_arg_kind { schedule, options, op, other_operator, unknown };

template <class T, class Op, class A>
consteval plan_arg_kind plan_arg_kind_of() {
  using X = std::remove_cvref_t<A>;
  if constexpr (is_static_factors<X>::value || std::is_same_v<X, factor_set> || std::is_same_v<X, algo::schedule>)
    return plan_arg_kind::schedule;
  else if constexpr (std::is_same_v<X, plan_options>)
    return plan_arg_kind::options;
  else if constexpr (std::is_same_v<X, Op>)
    return plan_arg_kind::op;
  else if constexpr (std::is_invocable_v<const X&, const T&, const T&>)
    return plan_arg_kind::other_operator;
  else
    return plan_arg_kind::unknown;
}

/// The compile-time rules of a factory's trailing arguments (each message
/// says the fix; the compiler's note below it names the types involved).
template <class T, class Op, class... A>
consteval bool check_plan_args() {
  constexpr auto count = []([[maybe_unused]] plan_arg_kind k) {
    return ((plan_arg_kind_of<T, Op, A>() == k ? 1 : 0) + ... + 0);
  };
  static_assert(count(plan_arg_kind::other_operator) == 0,
                "collc::make_*: this operator is not the plan's Op. Name the operator as the second template "
                "argument: collc::make_allreduce<double, collc::max>(comm, n) (an operator object may follow: "
                "..., collc::max{}); the instantiation below names the type given and the plan's Op");
  static_assert(count(plan_arg_kind::unknown) == 0,
                "collc::make_*: a trailing argument must be a schedule (collc::factors<...>, collc::factor_set, "
                "collc::algo::schedule), collc::plan_options, or the plan's operator (an object of type Op)");
  static_assert(
      count(plan_arg_kind::schedule) <= 1 && count(plan_arg_kind::options) <= 1 && count(plan_arg_kind::op) <= 1,
      "collc::make_*: at most one schedule, one collc::plan_options and one operator");
  return true;
}

/// The values a factory collected from its trailing arguments (their types
/// were checked by check_plan_args).
template <class Op>
struct plan_args {
  schedule_request sched;
  plan_options options;
  Op op{};

  template <class A>
  void take(A&& a) {
    using X = std::remove_cvref_t<A>;
    if constexpr (is_static_factors<X>::value || std::is_same_v<X, factor_set>) {
      sched.kind = schedule_request::by_factors;
      const factor_set fs(a);
      sched.factors.assign(fs.begin(), fs.end());
    } else if constexpr (std::is_same_v<X, algo::schedule>) {
      sched.kind = schedule_request::explicit_schedule;
      sched.sched = a;
    } else if constexpr (std::is_same_v<X, plan_options>) {
      options = a;
    } else if constexpr (std::is_same_v<X, Op>) {
      op = std::forward<A>(a);
    }
  }
};

/// How a wrapper names its buffers in errors: "send buffer has 3 elements"
/// (collc::plan) or "send View has 3 elements" (collc::kokkos::plan).
struct buffer_words {
  const char* noun = "buffer";               ///< after "send" / "recv" / "in-place"
  const char* unset = "is null with count";  ///< a missing buffer, followed by the count needed
  const char* one_buffer = "p(buf)";         ///< bcast's call form
};

/// A persistent collective over the MPI engine: see the file comment.
template <class T, class Op>
class plan_core {
  static_assert(std::is_trivially_copyable_v<T>, "collc plans: T must be trivially copyable");

 public:
  plan_core(built_plan b, Op op) : e_(std::move(b.e)), op_(std::move(op)), sched_(std::move(b.sched)) {}
  plan_core(plan_core&&) noexcept = default;
  plan_core& operator=(plan_core&&) noexcept = default;

  // --- what was built ---------------------------------------------------------------

  [[nodiscard]] collective kind() const noexcept { return e_->shape().coll; }
  [[nodiscard]] std::size_t count() const noexcept { return e_->shape().count; }
  [[nodiscard]] int root() const noexcept { return e_->shape().root; }
  [[nodiscard]] int ranks() const noexcept { return e_->size(); }
  [[nodiscard]] bool is_root() const noexcept { return e_->rank() == root(); }
  [[nodiscard]] std::size_t send_count() const noexcept {
    return kind() == collective::reduce_scatter ? count() * static_cast<std::size_t>(ranks())
           : kind() == collective::bcast        ? 0
                                                : count();
  }
  [[nodiscard]] std::size_t recv_count() const noexcept {
    return kind() == collective::allgather ? count() * static_cast<std::size_t>(ranks()) : count();
  }
  [[nodiscard]] std::size_t in_place_count() const noexcept { return std::max(send_count(), recv_count()); }
  [[nodiscard]] const algo::schedule& schedule() const noexcept { return sched_; }
  [[nodiscard]] const std::string& name() const noexcept { return e_->name(); }
  [[nodiscard]] const Op& op() const noexcept { return op_; }
  [[nodiscard]] bool valid() const noexcept { return e_ != nullptr; }
  /// The engine of a plan that has one (accessors of a built plan).
  [[nodiscard]] engine& engine_ref() const noexcept { return *e_; }
  /// The engine; a moved-from plan has none and says so.
  [[nodiscard]] engine& get(const char* who) const {
    if (!e_) {
      std::string msg = who;
      msg += ": used after being moved from (it holds no plan)";
      throw error(errc::invalid_argument, msg);
    }
    return *e_;
  }

  // --- one call ------------------------------------------------------------------

  /// Checks and begins a call on send/recv (`recv` may be empty at a
  /// non-root of reduce). `overlap` describes the two buffers when they
  /// overlap (the message differs per wrapper).
  template <class Describe>
  void begin(const T* send, std::size_t send_size, T* recv, std::size_t recv_size, const buffer_words& w,
             Describe&& overlap) {
    // A usage error of the call form, refused before the call takes a number
    // (as before the plan core): the plan stays usable.
    if (kind() == collective::bcast)
      throw error(errc::invalid_argument, name() + ": bcast takes one buffer: " + w.one_buffer);
    const bool root_only = kind() == collective::reduce && !is_root();
    guarded([&] {
      check(w, "send", send, send_size, send_count());
      if (!root_only || recv_size != 0) check(w, "recv", recv, recv_size, recv_count());
    });
    if (!root_only) {
      const auto* s = reinterpret_cast<const std::byte*>(send);
      const auto* r = reinterpret_cast<const std::byte*>(recv);
      const std::size_t sb = send_size * sizeof(T), rb = recv_size * sizeof(T);
      if (sb != 0 && rb != 0 && s < r + rb && r < s + sb)
        guarded([&] {
          std::string msg = name();
          msg += ": ";
          msg += overlap();
          msg += "; use collc::in_place for in-place execution";
          throw error(errc::invalid_argument, msg);
        });
    }
    e_->begin(send, root_only ? nullptr : recv, false, root_only);
  }

  /// Checks and begins an in-place call on `buf` (MPI's layout per collective,
  /// see plan.hpp; bcast: its only buffer).
  void begin_in_place(T* buf, std::size_t size, const buffer_words& w) {
    guarded([&] { check(w, "in-place", buf, size, in_place_count()); });
    switch (kind()) {
      case collective::allreduce:
      case collective::reduce_scatter: e_->begin(buf, buf, true, false); break;
      case collective::allgather:
        e_->begin(buf + static_cast<std::size_t>(e_->rank()) * count(), buf, true, false);
        break;
      case collective::reduce:
        if (is_root())
          e_->begin(buf, buf, true, false);
        else
          e_->begin(buf, nullptr, false, true);
        break;
      case collective::bcast: e_->begin(nullptr, buf, false, false); break;
    }
  }

  /// Runs the call as far as it goes (`block`: to completion); true when complete.
  template <kernel_policy<T, Op> Kernels = host_kernels>
  bool advance(bool block, const Kernels& kernels = {}) {
    return e_->template advance<T>(op_, block, kernels);
  }
  /// Ends a completed call (MPI_Wait's acknowledgement; see engine::pending).
  void acknowledge() noexcept { e_->acknowledge(); }
  /// test(): advances without blocking; a complete call is acknowledged, an
  /// unfinished one gives MPI's progress engine and the other started plans
  /// a turn (engine::progress), as MPI_Test would.
  template <kernel_policy<T, Op> Kernels = host_kernels>
  bool test(const Kernels& kernels = {}) {
    const bool done = advance(false, kernels);
    if (done)
      acknowledge();
    else
      e_->progress();
    return done;
  }

  /// Lets other plans' waits advance this plan's calls (engine::progress),
  /// with `kernels` (host kernels by default: collc::plan, whose buffers the
  /// host reads and writes; collc::kokkos::plan passes the kernels of each
  /// call's execution space instance) and a copy of the operator. An
  /// operator that cannot be copied keeps its plan out of other waits.
  template <kernel_policy<T, Op> Kernels = host_kernels>
  void let_other_waits_advance(const Kernels& kernels = {}) {
    if constexpr (std::is_copy_constructible_v<Op>)
      e_->set_stepper([op = op_, kernels](engine& e) { return e.template advance<T>(op, false, kernels); });
  }

  /// A call still running when the plan goes away is completed (peers need
  /// this rank's part); errors cannot be reported from a destructor.
  template <class Kernels = host_kernels>
  void finish_quietly(const Kernels& kernels = {}) noexcept {
    if (e_ && e_->active() && !e_->failed()) try {
        e_->template advance<T>(op_, true, kernels);
      } catch (...) {
      }
  }

  /// Argument checks of a call: a failure abandons the call (engine::abandon),
  /// so its peers fail at once naming this rank instead of timing out.
  template <class F>
  void guarded(F&& checks) {
    try {
      checks();
    } catch (const error& e) {
      e_->abandon(e);
      throw;
    }
  }

 private:
  void check(const buffer_words& w, const char* what, const T* data, std::size_t size, std::size_t expected) const {
    if (size != expected)
      throw error(errc::invalid_argument, collc::detail::cat(name(), ": ", what, " ", w.noun, " has ", size,
                                                             " elements, the plan needs ", expected));
    if (expected > 0 && data == nullptr)
      throw error(errc::invalid_argument,
                  collc::detail::cat(name(), ": ", what, " ", w.noun, " ", w.unset, " ", expected));
  }

  std::unique_ptr<engine> e_;
  Op op_;
  algo::schedule sched_;
};

/// What a built plan says about itself, the same for collc::plan and
/// collc::kokkos::plan: both derive from this and hold their plan_core here.
template <class T, class Op>
class plan_facts {
 public:
  // Each accessor of a moved-from plan throws collc::error (errc::invalid_argument,
  // naming the accessor), as its calls do, instead of reading the engine it gave away.
  [[nodiscard]] collective kind() const { return built("kind()").kind(); }
  /// Elements per rank (allreduce, reduce, bcast) or per block (reduce_scatter, allgather).
  [[nodiscard]] std::size_t count() const { return built("count()").count(); }
  [[nodiscard]] int root() const { return built("root()").root(); }
  [[nodiscard]] int ranks() const { return built("ranks()").ranks(); }
  /// Elements expected in send / recv / an in-place buffer on this rank.
  [[nodiscard]] std::size_t send_count() const { return built("send_count()").send_count(); }
  [[nodiscard]] std::size_t recv_count() const { return built("recv_count()").recv_count(); }
  [[nodiscard]] std::size_t in_place_count() const { return built("in_place_count()").in_place_count(); }
  /// The schedule that was lowered (after default selection).
  [[nodiscard]] const algo::schedule& schedule() const { return built("schedule()").schedule(); }
  /// "recexch{-2,2}"-style name of the schedule.
  [[nodiscard]] std::string schedule_name() const { return built("schedule_name()").schedule().to_string(); }
  /// Human-readable plan name with its id and signature (used in error messages).
  [[nodiscard]] const std::string& name() const { return built("name()").name(); }
  /// Chunk size in elements (per rank or per block) and executions per call.
  [[nodiscard]] std::size_t chunk_elements() const { return engine_of("chunk_elements()").chunk_count(); }
  [[nodiscard]] std::size_t executions_per_call() const {
    return engine_of("executions_per_call()").executions_per_call();
  }
  /// The lowered programs (chunk, then tail if any), in program ranks.
  [[nodiscard]] const std::vector<ir::program>& programs() const { return engine_of("programs()").programs(); }
  /// Program rank of this rank.
  [[nodiscard]] int program_rank() const { return engine_of("program_rank()").program_rank(); }
  /// Whether this rank's programs send or receive messages (the path between nodes).
  [[nodiscard]] bool uses_messages() const { return engine_of("uses_messages()").has_transfers(); }

  /// Refuses this rank's next call with `e`, an argument error that a helper
  /// found before it made the call (collc::reproducible_dot's sizes): the call
  /// is abandoned as after the plan's own argument checks, so the peers,
  /// already in it, fail at once naming this rank instead of waiting for the
  /// timeout. Throws `e`; like any failed call, it leaves the plan unusable.
  [[noreturn]] void refuse_call(const error& e) {
    (void)core_.get("collc plan");
    core_.guarded([&] { throw e; });
    throw e;  // not reached: guarded rethrows
  }

 protected:
  explicit plan_facts(plan_core<T, Op> core) : core_(std::move(core)) {}
  plan_facts(plan_facts&&) noexcept = default;
  plan_facts& operator=(plan_facts&&) noexcept = default;
  ~plan_facts() = default;

  plan_core<T, Op> core_;

  /// The engine; throws for a moved-from plan, naming the accessor (the
  /// message is built only then). The call forms check once (plan::checked)
  /// and then read the core directly.
  engine& engine_of(const char* accessor) const {
    if (!core_.valid()) (void)core_.get((std::string("collc plan ") + accessor).c_str());
    return core_.engine_ref();
  }

 private:
  /// The core of a plan that holds an engine; throws for a moved-from plan.
  const plan_core<T, Op>& built(const char* accessor) const {
    (void)engine_of(accessor);
    return core_;
  }
};

/// Runs `local`, the local part of a helper's call on plan `p` (e.g. the
/// local sum of collc::reproducible_dot); a collc::error in it refuses the
/// call (plan_facts::refuse_call), so the other ranks, already in the
/// collective, fail at once instead of timing out.
template <class Plan, class Local>
auto call_or_refuse(Plan& p, Local&& local) -> decltype(local()) {
  try {
    return local();
  } catch (const error& e) {
    p.refuse_call(e);
  }
}

/// The shape of a plan of T and Op: what every rank agrees on at setup.
template <class T, class Op>
plan_shape shape_of(collective coll, std::size_t count, int root, const schedule_request& sched) {
  plan_shape shape;
  shape.coll = coll;
  shape.count = count;
  shape.root = root;
  shape.elem_size = sizeof(T);
  shape.type_name = type_name<T>();
  shape.op_name = reduces(coll) ? type_name<Op>() : "none";
  shape.commutative = commutative_v<Op>;
  shape.schedule = sched.text();
  return shape;
}

/// What is missing if `op` cannot be called: a null function pointer or an
/// empty std::function (the factories default-construct the operator when
/// none is passed); nullptr if it can.
template <class Op>
const char* missing_operator(const Op& op) {
  if constexpr (std::is_pointer_v<Op> || std::is_member_pointer_v<Op>)
    return op == nullptr ? "a null function pointer" : nullptr;
  else if constexpr (requires { op.target_type(); })  // std::function and its kin
    return static_cast<bool>(op) ? nullptr : "an empty function object";
  else
    return nullptr;
}

/// Throws errc::invalid_argument naming `c` if it is not a collective
/// (an integer cast to the enumeration).
inline void check_known(collective c, const char* who) {
  if (!is_known(c))
    throw error(errc::invalid_argument,
                collc::detail::cat(who, ": collective value ", static_cast<int>(c),
                                   " is none of allreduce, reduce_scatter, allgather, reduce, bcast"));
}

/// The common body of every factory (collc::make_*, collc::kokkos::make_*):
/// checks the argument types, collects the values and builds (collective
/// over `comm`).
template <class T, class Op, class... A>
plan_core<T, Op> make_core(collective coll, MPI_Comm comm, std::size_t count, int root, A&&... args) {
  static_assert(std::is_trivially_copyable_v<T>, "collc::make_*: T must be trivially copyable");
  // Shared memory, scratch and staging place elements at multiples of 64
  // bytes (a cache line) from 64-byte-aligned bases: enough for every type
  // up to alignas(64), not beyond.
  static_assert(alignof(T) <= 64, "collc::make_*: T's alignment exceeds 64 bytes, the alignment of collc's buffers");
  static_assert(check_plan_args<T, Op, A...>());
  check_known(coll, "collc::make_plan");
  plan_args<Op> pa;
  (pa.take(std::forward<A>(args)), ...);
  // Every rank runs the same code, so every rank stops here alike, before setup.
  if (const char* missing = reduces(coll) ? missing_operator(pa.op) : nullptr)
    throw error(
        errc::invalid_argument,
        collc::detail::cat("collc::make_", to_string(coll), ": the operator (", type_name<Op>(), ") is ", missing,
                           "; pass the function, e.g. collc::make_", to_string(coll), "<T, decltype(&f)>(comm, count, ",
                           coll == collective::reduce ? "root, &f)" : "&f)"));
  built_plan b = build_plan(comm, shape_of<T, Op>(coll, count, root, pa.sched), pa.options, pa.sched);
  return plan_core<T, Op>(std::move(b), std::move(pa.op));
}

}  // namespace collc::mpi
