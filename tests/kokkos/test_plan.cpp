// Tests for include/collc/backend/kokkos/plan.hpp: the MPI backend's test
// families (every collective, schedule family, count, in place, chunks,
// pseudo-nodes, a custom non-commutative type) through Kokkos::Views on the
// default host execution space, Kokkos reducers as operators, the View
// checks, and the execution-space contract of docs/kokkos_backend.md, observed
// through Kokkos profiling callbacks (kernel launches and collc's fences).
#include "support.hpp"

#include <collc/backend/kokkos/plan.hpp>

#include <algorithm>
#include <string>
#include <vector>

using collc::collective;
using namespace collc_test;

namespace {

template <class T>
Kokkos::View<T*> to_view(const std::vector<T>& v, const std::string& label = "buf") {
  Kokkos::View<T*> out(label, v.size());
  auto h = Kokkos::create_mirror_view(out);
  for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(out, h);
  return out;
}
template <class V>
auto from_view(const V& v) {
  std::vector<std::remove_const_t<typename V::value_type>> out(v.extent(0));
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = h(i);
  return out;
}

/// Runs `p` once on fresh inputs (call number `it`) and compares with the
/// sequential reference; returns "" or a description of the first difference.
template <class T, class Op>
std::string run_once(collc::kokkos::plan<exec_space, T, Op>& p, bool in_place, int it, Op op = {}) {
  const collective c = p.kind();
  const int me = world_rank(), P = world_size();
  const std::size_t n = p.count();
  const int root = p.root();
  const std::vector<T> send = send_data<T>(c, me, P, n, it);
  const std::size_t rn = p.recv_count();
  const T sentinel = input<T>(P + 17, 3, it);
  const exec_space exec;
  std::vector<T> got;
  if (c == collective::bcast) {
    auto buf = to_view(me == root ? send : std::vector<T>(n, sentinel));
    p(exec, buf);
    got = from_view(buf);
  } else if (in_place) {
    std::vector<T> b;
    if (c == collective::allgather) {
      b.assign(rn, sentinel);
      std::copy(send.begin(), send.end(), b.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * n));
    } else {
      b = send;
    }
    auto buf = to_view(b);
    p(exec, collc::in_place, buf);
    got = from_view(buf);
    got.resize(rn);
  } else {
    // The send View is const-valued: the plan only reads it.
    Kokkos::View<const T*> s = to_view(send, "send");
    auto r = to_view(std::vector<T>(rn, sentinel), "recv");
    p(exec, s, r);
    got = from_view(r);
  }
  if (c == collective::reduce && me != root) {
    if (!in_place && mismatches(got, std::vector<T>(rn, sentinel)) != 0) return "reduce wrote a non-root recv View";
    return "";
  }
  const std::vector<T> want = expected<T, Op>(c, me, P, n, root, it, op);
  std::size_t first = 0;
  if (const std::size_t bad = mismatches(got, want, &first); bad != 0)
    return std::string(to_string(c)) + " " + p.schedule_name() + " count " + std::to_string(n) +
           (in_place ? " in place" : "") + ": " + std::to_string(bad) + " wrong elements on rank " +
           std::to_string(me) + ", first at " + std::to_string(first);
  if constexpr (std::is_floating_point_v<T>)
    if ((c == collective::allreduce || c == collective::allgather || c == collective::bcast) &&
        !identical_everywhere(got))
      return std::string(to_string(c)) + " " + p.schedule_name() + ": results differ bitwise between ranks";
  return "";
}

template <class T, class Op = collc::plus, class... A>
void check(collective c, std::size_t n, int root, int calls, A&&... args) {
  auto p = collc::kokkos::make_plan<exec_space, T, Op>(c, MPI_COMM_WORLD, n, root, std::forward<A>(args)...);
  for (int it = 0; it < calls; ++it) {
    const std::string why = run_once<T, Op>(p, it % 2 == 1, it);
    INFO("rank " << world_rank() << ": " << why);
    CHECK(all_ranks(why.empty()));
  }
}

std::vector<std::size_t> counts_for(int P) {
  const auto p = static_cast<std::size_t>(P);
  std::vector<std::size_t> v{0, 1, p > 1 ? p - 1 : 2, p + 3, 1000};
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<collc::algo::schedule> schedules_for(collective c, int P, bool commutative) {
  using collc::factor_set;
  using collc::algo::schedule;
  std::vector<schedule> s;
  const int sign = c == collective::reduce_scatter ? -1 : 1;
  s.push_back(schedule::recursive(factor_set{sign * P}));
  if (P == 4 && c == collective::allreduce) s.push_back(schedule::recursive(factor_set{-2, -2, 2, 2}));
  if (commutative && P >= 3) {
    s.push_back(schedule::cyclic(factor_set{sign * (P - 1), sign * 2}));
    s.push_back(schedule::ring());
  }
  s.push_back(schedule::tree(2));
  s.push_back(schedule::copy_in());
  return s;
}

template <class T, class Op = collc::plus>
void check_families(std::size_t n) {
  const int P = world_size();
  for (collective c : all_collectives) {
    if (!collc::reduces(c) && !std::is_same_v<Op, collc::plus>) continue;
    for (const auto& s : schedules_for(c, P, collc::commutative_v<Op>)) {
      try {
        check<T, Op>(c, n, P - 1, 2, s);
      } catch (const collc::error& e) {
        // Only "this family does not serve this collective / P" may fail setup.
        INFO(to_string(c) << " " << s.to_string() << ": " << e.what());
        CHECK((e.code() == collc::errc::unsupported || e.code() == collc::errc::invalid_factor_set));
      }
    }
  }
}

// --- recording Kokkos events (the contract tests) ----------------------------

struct recorder {
  static inline bool on = false;
  static inline std::vector<std::string> events;  // "k:<label>" or "fence"
  static inline std::vector<std::uint32_t> devices;

  static void begin_for(const char* name, std::uint32_t dev, std::uint64_t* id) {
    *id = 0;
    if (!on) return;
    events.push_back(std::string("k:") + name);
    devices.push_back(dev);
  }
  static void push(const char* name) {
    if (on && std::string(name) == "collc::fence") events.push_back("fence");
  }
  static void pop() {}

  recorder() {
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(&begin_for);
    Kokkos::Tools::Experimental::set_push_region_callback(&push);
    Kokkos::Tools::Experimental::set_pop_region_callback(&pop);
    events.clear();
    devices.clear();
  }
  ~recorder() {
    on = false;
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    Kokkos::Tools::Experimental::set_pop_region_callback(nullptr);
  }
};

/// What the contract says one call does, from this rank's lowered programs
/// (independent of the engine): fences = 1 (entry) + per execution one per
/// signal, send and recv, plus one at its end; kernels >= the copies and
/// reduces of non-zero count (the binder may split one into several runs).
/// A small plan on a host space (send and recv of at most
/// collc::kokkos::inline_bytes, computed here from the counts, not asked from
/// the plan) runs them inline: the entry fence and no kernel.
struct expected_events {
  std::size_t fences = 1, kernels = 0;
  bool inline_small = false;
};
template <class P>
expected_events contract_for(const P& p) {
  expected_events e;
  using elem = typename std::remove_cvref_t<decltype(p)>::value_type;
  const std::size_t bytes = std::max(p.send_count(), p.recv_count()) * sizeof(elem);
  if (collc::kokkos::host_execution_v<exec_space> && bytes <= collc::kokkos::inline_bytes) {
    e.inline_small = true;
    return e;
  }
  const auto& progs = p.programs();
  const std::size_t full = progs.size() > 1 ? p.executions_per_call() - 1 : p.executions_per_call();
  for (std::size_t x = 0; x < p.executions_per_call(); ++x) {
    const auto& code = progs[x < full ? 0 : 1].code[static_cast<std::size_t>(p.program_rank())];
    ++e.fences;
    for (const auto& ins : code) {
      if (std::holds_alternative<collc::ir::signal>(ins) || std::holds_alternative<collc::ir::send>(ins) ||
          std::holds_alternative<collc::ir::recv>(ins))
        ++e.fences;
      if (const auto* c = std::get_if<collc::ir::copy>(&ins); c && c->count > 0) ++e.kernels;
      if (const auto* r = std::get_if<collc::ir::reduce>(&ins); r && r->count > 0) ++e.kernels;
    }
  }
  return e;
}

/// One recorded out-of-place call of `p` checked against the contract;
/// returns "" or what was wrong.
template <class T, class Op>
std::string check_contract(collc::kokkos::plan<exec_space, T, Op>& p, int it) {
  const exec_space exec;
  const int me = world_rank(), P = world_size();
  const collective c = p.kind();
  auto send = to_view(send_data<T>(c, me, P, p.count(), it), "send");
  // bcast: one buffer, the root's data in it.
  Kokkos::View<T*> recv = c == collective::bcast ? send : Kokkos::View<T*>("recv", p.recv_count());
  const expected_events want = contract_for(p);
  std::vector<std::string> events;
  std::vector<std::uint32_t> devices;
  {
    recorder rec;
    recorder::on = true;
    if (c == collective::bcast)
      p(exec, recv);
    else
      p(exec, send, recv);
    recorder::on = false;
    events = recorder::events;
    devices = recorder::devices;
  }
  std::size_t fences = 0, kernels = 0;
  for (const auto& e : events) {
    if (e == "fence")
      ++fences;
    else if (e == "k:collc::copy" || e == "k:collc::reduce")
      ++kernels;
    else
      return "unexpected event " + e;
  }
  const std::string where = std::string(to_string(c)) + " " + p.schedule_name() + " on rank " + std::to_string(me);
  if (events.empty() || events.front() != "fence") return where + ": no fence before the first kernel";
  if (events.back() != "fence") return where + ": the call ended with a kernel pending";
  // Single-node plans re-enter nothing that fences; a recv may fence again when re-entered.
  if (want.inline_small && (fences != 1 || kernels != 0))
    return where + ": a small plan on a host space ran " + std::to_string(kernels) + " kernels and " +
           std::to_string(fences) + " fences (the contract: inline, the entry fence only)";
  if (p.runs_inline() != want.inline_small) return where + ": runs_inline() disagrees with the contract";
  if (!want.inline_small && (p.uses_messages() ? fences < want.fences : fences != want.fences))
    return where + ": " + std::to_string(fences) + " fences, the contract says " + std::to_string(want.fences);
  if (kernels < want.kernels)
    return where + ": " + std::to_string(kernels) + " kernels for " + std::to_string(want.kernels) +
           " copies and reduces";
  const std::uint32_t dev = Kokkos::Tools::Experimental::device_id(exec);
  for (std::uint32_t d : devices)
    if (d != dev) return where + ": a kernel ran on device id " + std::to_string(d) + ", not the given space's";
  const std::vector<T> expect = expected<T, Op>(c, me, P, p.count(), p.root(), it);
  if (!(c == collective::reduce && me != p.root()) && mismatches(from_view(recv), expect) != 0)
    return where + ": wrong result";
  return "";
}

}  // namespace

TEST_CASE("every collective matches the rank-order reference", "[backend][kokkos][plan]") {
  const int P = world_size();
  for (collective c : all_collectives) {
    const int root = P / 2;
    for (std::size_t n : counts_for(P)) {
      INFO(to_string(c) << " count " << n);
      check<std::int64_t>(c, n, root, 3);
      check<double>(c, n, root, 3);
      if (collc::reduces(c))
        check<mat2, mat_mul>(c, n, root, 3);
      else
        check<mat2>(c, n, root, 2);
    }
  }
}

TEST_CASE("the public factories build each collective", "[backend][kokkos][plan]") {
  const int P = world_size(), me = world_rank();
  const std::size_t n = 5;
  const exec_space exec;
  auto ar = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, n);
  auto rs = collc::kokkos::make_reduce_scatter<exec_space, std::int64_t, collc::max>(MPI_COMM_WORLD, n);
  auto ag = collc::kokkos::make_allgather<exec_space, int>(MPI_COMM_WORLD, n);
  auto rd = collc::kokkos::make_reduce<exec_space, double, Kokkos::Min<double>>(MPI_COMM_WORLD, n, P - 1);
  auto bc = collc::kokkos::make_bcast<exec_space, char>(MPI_COMM_WORLD, n, 0);
  CHECK(ar.kind() == collective::allreduce);
  CHECK(rs.send_count() == n * static_cast<std::size_t>(P));
  CHECK(ag.recv_count() == n * static_cast<std::size_t>(P));
  CHECK(rd.root() == P - 1);

  Kokkos::View<std::int64_t*> x("x", n), y("y", n);
  Kokkos::deep_copy(x, me + 1);
  ar(exec, x, y);
  CHECK(from_view(y) == std::vector<std::int64_t>(n, static_cast<std::int64_t>(P) * (P + 1) / 2));

  Kokkos::View<std::int64_t*> blocks("blocks", n * static_cast<std::size_t>(P));
  Kokkos::parallel_for(
      "fill", Kokkos::RangePolicy<exec_space>(exec, 0, blocks.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) { blocks(i) = static_cast<std::int64_t>(i) * (me == 0 ? 2 : 1); });
  rs(exec, blocks, y);  // no fence between the fill and the call: the plan fences exec
  for (std::size_t i = 0; i < n; ++i)
    CHECK(y(i) == static_cast<std::int64_t>(static_cast<std::size_t>(me) * n + i) * 2);  // max(2j, j)

  Kokkos::View<int*> mine("mine", n), all("all", n * static_cast<std::size_t>(P));
  Kokkos::deep_copy(mine, me);
  ag(exec, mine, all);
  for (std::size_t i = 0; i < all.extent(0); ++i) CHECK(all(i) == static_cast<int>(i / n));

  Kokkos::View<double*> d("d", n), r("r", n), none;
  Kokkos::deep_copy(d, static_cast<double>(me));
  Kokkos::deep_copy(r, 42.0);
  if (me == P - 1)
    rd(exec, d, r);
  else
    rd(exec, d, none);  // recv is not significant off the root: may be empty
  CHECK(r(0) == (me == P - 1 ? 0.0 : 42.0));

  Kokkos::View<char*> text("text", n);
  Kokkos::deep_copy(text, me == 0 ? 'x' : '?');
  bc(exec, text);
  CHECK(from_view(text) == std::vector<char>(n, 'x'));
}

TEST_CASE("every schedule family on every collective", "[backend][kokkos][plan][families]") {
  const int P = world_size();
  for (std::size_t n : {static_cast<std::size_t>(P) + 3, std::size_t{700}}) {
    INFO("count " << n);
    check_families<std::int64_t>(n);
    check_families<double>(n);
    check_families<mat2, mat_mul>(n);
  }
}

TEST_CASE("Kokkos reducers map to collc operators", "[backend][kokkos][plan][ops]") {
  using collc::kokkos::op_t;
  static_assert(std::is_same_v<op_t<Kokkos::Sum<double>>, collc::plus>);
  static_assert(std::is_same_v<op_t<Kokkos::Prod<int>>, collc::prod>);
  static_assert(std::is_same_v<op_t<Kokkos::Min<float>>, collc::min>);
  static_assert(std::is_same_v<op_t<Kokkos::Max<long>>, collc::max>);
  static_assert(std::is_same_v<op_t<Kokkos::LAnd<int>>, collc::logical_and>);
  static_assert(std::is_same_v<op_t<Kokkos::LOr<int>>, collc::logical_or>);
  static_assert(std::is_same_v<op_t<Kokkos::BAnd<int>>, collc::bit_and>);
  static_assert(std::is_same_v<op_t<Kokkos::BOr<int>>, collc::bit_or>);
  static_assert(std::is_same_v<op_t<mat_mul>, mat_mul>);  // anything else is itself
  // A reducer of another value type is a compile-time error (it summed as T before, unseen).
  static_assert(collc::kokkos::reducer_fits_v<Kokkos::Sum<double>, double>);
  static_assert(!collc::kokkos::reducer_fits_v<Kokkos::Sum<int>, double>);
  static_assert(!collc::kokkos::reducer_fits_v<Kokkos::Max<float>, double>);
  static_assert(collc::kokkos::reducer_fits_v<collc::plus, double>);

  const int P = world_size(), me = world_rank();
  const exec_space exec;
  // Values whose combination over ranks is known in closed form.
  Kokkos::View<std::int64_t*> x("x", 3), y("y", 3);
  Kokkos::deep_copy(x, me + 1);
  auto run = [&](auto&& p) {
    p(exec, x, y);
    return y(2);
  };
  std::int64_t factorial = 1;
  for (int r = 1; r <= P; ++r) factorial *= r;
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::Sum<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        P * (P + 1) / 2);
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::Prod<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        factorial);
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::Min<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        1);
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::Max<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        P);
  // me + 1 has bit k set on some rank iff k < bit width of P.
  std::int64_t any_bits = 0, all_bits = -1;
  for (int r = 1; r <= P; ++r) any_bits |= r, all_bits &= r;
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::BOr<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        any_bits);
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::BAnd<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        all_bits);
  Kokkos::deep_copy(x, me == P - 1 ? 0 : 5);
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::LAnd<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        0);
  CHECK(run(collc::kokkos::make_allreduce<exec_space, std::int64_t, Kokkos::LOr<std::int64_t>>(MPI_COMM_WORLD, 3)) ==
        (P > 1 ? 1 : 0));
}

namespace {
/// A user element type with a commutative operator declared by the user.
struct stats {
  double sum;
  std::int64_t n;
  double lo, hi;
};
struct merge_stats {
  static constexpr bool is_commutative = true;
  KOKKOS_INLINE_FUNCTION stats operator()(const stats& a, const stats& b) const {
    return {a.sum + b.sum, a.n + b.n, a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? b.hi : a.hi};
  }
};
}  // namespace

TEST_CASE("custom element types in Views", "[backend][kokkos][plan][custom]") {
  const int P = world_size(), me = world_rank();
  const exec_space exec;
  // Non-commutative: every rank order-sensitive schedule, several counts, in place.
  for (std::size_t n : {std::size_t{1}, std::size_t{37}}) {
    check<mat2, mat_mul>(collective::allreduce, n, 0, 2);
    check<mat2, mat_mul>(collective::reduce_scatter, n, 0, 2);
    check<mat2, mat_mul>(collective::reduce, n, P - 1, 2);
  }
  // Commutative user operator on a struct.
  auto p = collc::kokkos::make_allreduce<exec_space, stats, merge_stats>(MPI_COMM_WORLD, 4);
  Kokkos::View<stats*> v("stats", 4);
  for (std::size_t i = 0; i < 4; ++i) v(i) = {static_cast<double>(me) * static_cast<double>(i), 1, 1.0 * me, 1.0 * me};
  p(exec, collc::in_place, v);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(v(i).sum == static_cast<double>(i) * P * (P - 1) / 2);
    CHECK(v(i).n == P);
    CHECK(v(i).lo == 0.0);
    CHECK(v(i).hi == P - 1.0);
  }
}

TEST_CASE("Views of other layouts, subviews and unmanaged memory", "[backend][kokkos][plan][views]") {
  const int P = world_size(), me = world_rank();
  const exec_space exec;
  const std::size_t n = 11;
  auto p = collc::kokkos::make_allreduce<exec_space, double>(MPI_COMM_WORLD, n);
  const auto want = expected<double, collc::plus>(collective::allreduce, me, P, n, 0, 4);
  const auto in = send_data<double>(collective::allreduce, me, P, n, 4);

  Kokkos::View<double*, Kokkos::LayoutLeft> left("left", n);
  for (std::size_t i = 0; i < n; ++i) left(i) = in[i];
  std::vector<double> out(n, 0.0);
  Kokkos::View<double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> unmanaged(out.data(), n);
  p(exec, left, unmanaged);
  CHECK(mismatches(out, want) == 0);

  // A contiguous column of a LayoutLeft matrix (a LayoutStride View of stride 1).
  Kokkos::View<double**, Kokkos::LayoutLeft> m("m", n, 2);
  for (std::size_t i = 0; i < n; ++i) m(i, 1) = in[i];
  auto col = Kokkos::subview(m, Kokkos::ALL, 1);
  p(exec, collc::in_place, col);
  CHECK(mismatches(from_view(col), want) == 0);
}

TEST_CASE("Views the plan cannot take are rejected", "[backend][kokkos][plan][errors]") {
  using collc::kokkos::accepts_view_v;
  static_assert(accepts_view_v<Kokkos::View<double*>, exec_space, double, true>);
  static_assert(accepts_view_v<Kokkos::View<const double*>, exec_space, double, false>);
  static_assert(!accepts_view_v<Kokkos::View<const double*>, exec_space, double, true>);  // recv must be writable
  static_assert(!accepts_view_v<Kokkos::View<double**>, exec_space, double, false>);      // rank 2
  static_assert(!accepts_view_v<Kokkos::View<float*>, exec_space, double, false>);        // another T
  static_assert(!accepts_view_v<std::vector<double>, exec_space, double, false>);         // not a View
  static_assert(collc::kokkos::host_capable_v<exec_space>);
  static_assert(!collc::kokkos::host_capable_v<Kokkos::HostSpace>);  // a memory space is no execution space

  const exec_space exec;
  const std::size_t n = 6;
  Kokkos::View<double**, Kokkos::LayoutRight> m("m", n, 2);
  auto strided = Kokkos::subview(m, Kokkos::ALL, 0);  // stride 2
  Kokkos::View<double*> ok("ok", n), short_view("short", n - 1), unallocated;
  // Each wrong call abandons its call (peers fail at once, as with collc::plan),
  // which leaves that plan unusable: one plan per wrong call, every rank alike.
  auto message = [&](auto&& f) -> std::string {
    auto p = collc::kokkos::make_allreduce<exec_space, double>(MPI_COMM_WORLD, n);
    try {
      f(p);
    } catch (const collc::error& e) {
      return e.code() == collc::errc::invalid_argument ? e.what() : "wrong code";
    }
    return "no error";
  };
  CHECK_THAT(message([&](auto& p) { p(exec, strided, ok); }), Catch::Contains("\"m\" is not contiguous (stride 2)"));
  CHECK_THAT(message([&](auto& p) { p(exec, ok, short_view); }), Catch::Contains("has 5 elements, the plan needs 6"));
  CHECK_THAT(message([&](auto& p) { p(exec, unallocated, ok); }), Catch::Contains("has 0 elements"));
  CHECK_THAT(message([&](auto& p) { p(exec, ok, ok); }), Catch::Contains("overlaps"));
  // A collective value outside the enumeration (make_plan takes it by value) names the value.
  auto bad_collective = [&] {
    return collc::kokkos::make_plan<exec_space, double>(static_cast<collc::collective>(9), MPI_COMM_WORLD, n, 0);
  };
  CHECK_THROWS_WITH(
      bad_collective(),
      "collc::make_plan: collective value 9 is none of allreduce, reduce_scatter, allgather, reduce, bcast");
  // A fresh plan runs.
  auto p = collc::kokkos::make_allreduce<exec_space, double>(MPI_COMM_WORLD, n);
  Kokkos::deep_copy(ok, 1.0);
  p(exec, collc::in_place, ok);
  CHECK(ok(n - 1) == static_cast<double>(world_size()));
}

TEST_CASE("the execution-space contract: fences and kernels", "[backend][kokkos][plan][contract]") {
  const int P = world_size();
  SECTION("one node, every collective") {
    // 100 elements: inline (800 B; allgather's recv 800 B x P up to P = 5);
    // 1000: kernels (8000 B).
    for (collective c : all_collectives)
      for (std::size_t n : {std::size_t{100}, std::size_t{1000}}) {
        auto p = collc::kokkos::make_plan<exec_space, std::int64_t>(c, MPI_COMM_WORLD, n, P / 2);
        CHECK(p.runs_inline() == (n == 100 && p.recv_count() * 8 <= collc::kokkos::inline_bytes &&
                                  p.send_count() * 8 <= collc::kokkos::inline_bytes));
        for (int it = 0; it < 2; ++it) {
          const std::string why = check_contract(p, it);
          INFO(why);
          CHECK(all_ranks(why.empty()));
        }
      }
  }
  SECTION("chunks: a fence at the end of every execution") {
    collc::plan_options o;
    o.chunk_bytes = 1024;
    auto p = collc::kokkos::make_allreduce<exec_space, double>(MPI_COMM_WORLD, 1000, o);
    CHECK(p.executions_per_call() > 2);
    const std::string why = check_contract(p, 1);
    INFO(why);
    CHECK(all_ranks(why.empty()));
  }
  SECTION("pseudo-nodes: fences before sends and receives") {
    collc::plan_options o;
    o.ranks_per_node = 1;
    auto p = collc::kokkos::make_allreduce<exec_space, mat2, mat_mul>(MPI_COMM_WORLD, 64, o);
    CHECK(p.uses_messages() == (P > 1));
    const std::string why = check_contract(p, 2);
    INFO(why);
    CHECK(all_ranks(why.empty()));
  }
  SECTION("the send View is read after the caller's earlier work on exec") {
    // A kernel enqueued on exec right before the call produces the input; the
    // result is read on the host right after it, with no fence by the caller.
    const exec_space exec;
    auto p = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, 5000);
    Kokkos::View<std::int64_t*> x("x", 5000), y("y", 5000);
    for (int it = 1; it <= 3; ++it) {
      const int me = world_rank();
      Kokkos::parallel_for(
          "produce", Kokkos::RangePolicy<exec_space>(exec, 0, 5000),
          KOKKOS_LAMBDA(std::size_t i) { x(i) = static_cast<std::int64_t>(i) * it + me; });
      p(exec, x, y);
      bool ok = true;
      for (std::size_t i = 0; i < 5000; ++i)
        ok = ok && y(i) == static_cast<std::int64_t>(i) * it * P + static_cast<std::int64_t>(P) * (P - 1) / 2;
      CHECK(all_ranks(ok));
    }
  }
}

TEST_CASE("start, test and wait", "[backend][kokkos][plan][nonblocking]") {
  const int P = world_size(), me = world_rank();
  const exec_space exec;
  for (int k : {0, 2}) {
    collc::plan_options o;
    o.ranks_per_node = k;
    auto p = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, 4000, o);
    Kokkos::View<std::int64_t*> x("x", 4000), y("y", 4000);
    Kokkos::deep_copy(x, me + 1);
    p.start(exec, x, y);
    while (!p.test()) {
    }
    CHECK(y(3999) == static_cast<std::int64_t>(P) * (P + 1) / 2);
    p.start(exec, collc::in_place, y);
    p.wait();
    CHECK(y(0) == static_cast<std::int64_t>(P) * P * (P + 1) / 2);
    CHECK(p.test());  // nothing in progress: complete
  }
}

TEST_CASE("plans started together complete in any order on each rank", "[backend][kokkos][plan][interleave]") {
  // As collc::plan's (tests/mpi/test_plan.cpp): a rank waiting for one plan
  // advances the others. A collc::kokkos::plan gave other waits no turns:
  // even ranks waiting for A while odd ranks waited for B timed out.
  const int P = world_size(), me = world_rank();
  const exec_space exec;
  collc::plan_options o;
  o.timeout_s = 10;
  o.chunk_bytes = 512;  // several executions per call: a rank's start() cannot run a call to its end alone
  auto a = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, 700, o);
  auto b = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, 700, o);
  Kokkos::View<std::int64_t*> x("x", 700), ya("ya", 700), yb("yb", 700);
  for (int it = 0; it < 3; ++it) {
    Kokkos::deep_copy(x, me + it);
    a.start(exec, x, ya);
    b.start(exec, x, yb);
    if ((me + it) % 2 == 0) {
      a.wait();
      b.wait();
    } else {
      b.wait();
      a.wait();
    }
    const std::int64_t want = static_cast<std::int64_t>(P) * (P - 1) / 2 + static_cast<std::int64_t>(P) * it;
    CHECK(ya(699) == want);
    CHECK(yb(0) == want);
  }
}

TEST_CASE("wait and test on a moved-from plan say so", "[backend][kokkos][plan][moved]") {
  // The moved-from plan kept its execution space and ran on the null engine (SIGSEGV).
  const exec_space exec;
  auto p = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, 10);
  Kokkos::View<std::int64_t*> x("x", 10), y("y", 10);
  p(exec, x, y);
  auto q = std::move(p);
  CHECK_THROWS_WITH(p.wait(), Catch::Contains("used after being moved from"));  // NOLINT(bugprone-use-after-move)
  CHECK_THROWS_WITH(p.test(), Catch::Contains("used after being moved from"));
  auto r = collc::kokkos::make_allreduce<exec_space, std::int64_t>(MPI_COMM_WORLD, 10);
  r = std::move(q);
  CHECK_THROWS_WITH(q.wait(), Catch::Contains("used after being moved from"));  // NOLINT(bugprone-use-after-move)
  r(exec, x, y);
  CHECK(y(0) == 0);
}

TEST_CASE("large messages and pseudo-nodes", "[backend][kokkos][plan][chunks][nodes]") {
  const int P = world_size();
  collc::plan_options small;
  small.chunk_bytes = 2048;
  for (collective c : all_collectives) {
    INFO(to_string(c) << " in chunks");
    if (collc::reduces(c))
      check<mat2, mat_mul>(c, 1000 + static_cast<std::size_t>(P), P - 1, 3, small);
    else
      check<mat2>(c, 1000 + static_cast<std::size_t>(P), 0, 3, small);
    check<double>(c, 777, 0, 2, small);
  }
  check<double>(collective::allreduce, (std::size_t{3} << 20) / sizeof(double) + 13, 0, 2);
  for (int k : {1, 2}) {
    collc::plan_options o;
    o.ranks_per_node = k;
    for (collective c : all_collectives) {
      INFO(to_string(c) << ", " << k << " rank(s) per node");
      check<std::int64_t>(c, static_cast<std::size_t>(P) + 3, P - 1, 2, o);
      if (collc::reduces(c)) check<mat2, mat_mul>(c, 40, P / 2, 2, o);
    }
  }
}
