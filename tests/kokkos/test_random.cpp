// Randomized Kokkos plans, fixed seed: the bounded form of the probes that
// exercised collc::kokkos::plan at random (2026-12-07, kk and il: no defect
// found), kept so their coverage stays in the suite.
//
// "random Kokkos plans": each case draws an element type and operator (collc
// operators, Kokkos reducers, a non-commutative user type), a collective, a
// count (0, 1, around P, around a chunk boundary, or up to a few thousand), a
// root, a schedule, a chunk size, pseudo-nodes and a factory (make_plan or the
// collective's make_*); then a few calls, each on fresh Views of a drawn form
// (plain, an offset subview, a LayoutLeft column, unmanaged host memory; a
// const send View), in place or not, blocking or start() and wait() or a
// test() loop (each rank draws its own), the plan moved between calls.
//
// "interleaved Kokkos and collc plans": a pool of Kokkos plans and collc::plans
// on a duplicate of MPI_COMM_WORLD and on a split of it; each round starts
// several in one order on every rank (a plan moved while its call runs, a new
// plan's setup, a blocking collc::allreduce etc. or a blocking call of an idle
// plan between the starts) and completes them in an order each rank draws for
// itself, by wait(), test() loops or polling all; sometimes a plan is
// destroyed with its call in progress (its destructor completes the call).
//
// Inputs are small integers (dyadic doubles: every sum is exact in any order),
// so every element is compared bitwise with a rank-order fold each rank
// computes alone. The ranks agree on the outcome after every call (or round)
// before any further collective, so a failure on one rank cannot leave its
// peers waiting in a call it skips; the failing case is printed with its seed.
// COLLC_TEST_SEED and COLLC_TEST_CASES (cases of the first test, rounds of the
// second) change the draw.
#include "support.hpp"

#include <collc/algo/presets.hpp>
#include <collc/backend/kokkos/plan.hpp>
#include <collc/blocking.hpp>
#include <collc/plan.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using collc::collective;
using namespace collc_test;

namespace {

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// --- exact inputs and the reference -------------------------------------------------

/// Element i of rank r's input under `salt`: values whose folds are exact in
/// any association (so results compare bitwise).
template <class T>
T value(int r, std::size_t i, std::uint64_t salt);
template <>
std::int64_t value<std::int64_t>(int r, std::size_t i, std::uint64_t salt) {
  return static_cast<std::int64_t>(mix(salt * 1315423911u + static_cast<std::uint64_t>(r) * 7919 + i) % 2000001) -
         1000000;
}
template <>
std::uint64_t value<std::uint64_t>(int r, std::size_t i, std::uint64_t salt) {
  return mix(salt * 31 + static_cast<std::uint64_t>(r) * 1000003 + i) | 1;  // odd: products never reach 0
}
template <>
double value<double>(int r, std::size_t i, std::uint64_t salt) {
  // Multiples of 1/64 below 32 in magnitude: sums of a few are exact.
  const auto k = static_cast<std::int64_t>(mix(salt + static_cast<std::uint64_t>(r) * 104729 + i * 3) % 4001);
  return static_cast<double>(k - 2000) / 64.0;
}
template <>
mat2 value<mat2>(int r, std::size_t i, std::uint64_t salt) {
  const std::uint64_t h = mix(salt ^ (static_cast<std::uint64_t>(r) << 40) ^ i);
  return {static_cast<std::uint32_t>(h % mat_prime), static_cast<std::uint32_t>((h >> 20) % mat_prime),
          static_cast<std::uint32_t>((h >> 40) % mat_prime), static_cast<std::uint32_t>((h >> 7) % mat_prime)};
}

/// Rank r's send data (P blocks for reduce_scatter; bcast: the root's data).
template <class T>
std::vector<T> inputs(collective c, int r, int P, std::size_t n, std::uint64_t salt) {
  const std::size_t len = c == collective::reduce_scatter ? n * static_cast<std::size_t>(P) : n;
  std::vector<T> v(len);
  for (std::size_t i = 0; i < len; ++i) v[i] = value<T>(r, i, salt);
  return v;
}

/// The result on rank `me`: a left fold in rank order of regenerated inputs.
template <class T, class Op>
std::vector<T> reference(collective c, int me, int P, std::size_t n, int root, std::uint64_t salt) {
  const Op op{};
  std::vector<T> out;
  switch (c) {
    case collective::allreduce:
    case collective::reduce:
      out = inputs<T>(c, 0, P, n, salt);
      for (int r = 1; r < P; ++r) {
        const auto s = inputs<T>(c, r, P, n, salt);
        for (std::size_t i = 0; i < n; ++i) out[i] = op(out[i], s[i]);
      }
      break;
    case collective::reduce_scatter: {
      const std::size_t base = static_cast<std::size_t>(me) * n;
      for (int r = 0; r < P; ++r) {
        const auto s = inputs<T>(c, r, P, n, salt);
        if (r == 0)
          out.assign(s.begin() + static_cast<std::ptrdiff_t>(base), s.begin() + static_cast<std::ptrdiff_t>(base + n));
        else
          for (std::size_t i = 0; i < n; ++i) out[i] = op(out[i], s[base + i]);
      }
      break;
    }
    case collective::allgather:
      for (int r = 0; r < P; ++r) {
        const auto s = inputs<T>(c, r, P, n, salt);
        out.insert(out.end(), s.begin(), s.end());
      }
      break;
    case collective::bcast: out = inputs<T>(c, root, P, n, salt); break;
  }
  return out;
}

/// A value no result holds (0xA5 bytes), in elements a call must not write.
template <class T>
T sentinel() {
  T t;
  std::memset(&t, 0xA5, sizeof t);
  return t;
}

/// "" if got[0, want.size()) equals want bitwise, else how many differ and where first.
template <class T>
std::string compare(const T* got, const std::vector<T>& want) {
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && bad++ == 0) first = i;
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(want.size()) + " elements wrong, first at " +
         std::to_string(first);
}

/// Occasionally lets this rank fall behind its peers (own draws).
void skew(std::mt19937_64& own) {
  const auto k = own() % 8;
  if (k == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(own() % 300));
  else if (k == 1)
    std::this_thread::yield();
}

// --- Views of several forms over one buffer ---------------------------------------

/// `len` elements as a View of a drawn form; `ptr` addresses them on the host.
template <class T>
struct view_buffer {
  enum form : int { plain, offset_subview, layout_left_column, unmanaged };
  static constexpr const char* names[] = {"plain", "offset subview", "LayoutLeft column", "unmanaged"};
  form kind;
  std::size_t len, off;
  Kokkos::View<T*> whole;
  Kokkos::View<T**, Kokkos::LayoutLeft> matrix;
  std::vector<T> host;
  T* ptr = nullptr;

  view_buffer(int k, std::size_t n, std::mt19937_64& g) : kind(static_cast<form>(k)), len(n), off(1 + g() % 4) {
    switch (kind) {
      case plain:
        whole = Kokkos::View<T*>("plain", n);
        ptr = whole.data();
        break;
      case offset_subview:  // elements before and after the subview: a write outside it shows (outside())
        whole = Kokkos::View<T*>("pool", n + off + g() % 4);
        ptr = whole.data() + off;
        break;
      case layout_left_column:  // column 1 of n x 3: contiguous, a LayoutStride View
        matrix = Kokkos::View<T**, Kokkos::LayoutLeft>("matrix", n, 3);
        ptr = n ? &matrix(0, 1) : nullptr;
        break;
      case unmanaged:
        host.resize(n + off + 1);
        ptr = host.data() + off;
        break;
    }
    const auto [first, size] = allocation();
    std::fill(first, first + size, sentinel<T>());
  }
  /// The whole allocation behind the View (plain: the View itself).
  std::pair<T*, std::size_t> allocation() const {
    switch (kind) {
      case offset_subview: return {whole.data(), whole.extent(0)};
      case layout_left_column: return {matrix.data(), matrix.size()};
      case unmanaged: return {const_cast<T*>(host.data()), host.size()};
      default: return {ptr, len};
    }
  }
  /// "" unless an element of the allocation outside the View changed (a call
  /// must write only its View).
  std::string outside() const {
    const auto [first, size] = allocation();
    const T s = sentinel<T>();
    for (std::size_t i = 0; i < size; ++i)
      if ((first + i < ptr || first + i >= ptr + len) && std::memcmp(first + i, &s, sizeof(T)) != 0)
        return std::string(names[kind]) + " View: element " + std::to_string(i) +
               " of its allocation, outside it, changed";
    return {};
  }
  /// Calls f with this buffer as a View.
  template <class F>
  void with(F&& f) const {
    switch (kind) {
      case plain: f(whole); break;
      case offset_subview: f(Kokkos::subview(whole, std::make_pair(off, off + len))); break;
      case layout_left_column: f(Kokkos::subview(matrix, Kokkos::ALL, 1)); break;
      case unmanaged: f(Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(ptr, len)); break;
    }
  }
  void fill(const std::vector<T>& v) { std::copy(v.begin(), v.end(), ptr); }
  void fill(const T& x) { std::fill(ptr, ptr + len, x); }
};

// --- "random Kokkos plans" ----------------------------------------------------------

/// The element type and operator of a case (Kokkos reducers map to collc
/// operators: op_t).
enum class kind : int {
  int64_plus,
  int64_kokkos_max,
  double_kokkos_sum,
  mat_product,
  uint64_kokkos_prod,
  uint64_kokkos_bor,
  double_kokkos_min
};
constexpr int kinds = 7;
const char* kind_name(kind k) {
  switch (k) {
    case kind::int64_plus: return "int64 collc::plus";
    case kind::int64_kokkos_max: return "int64 Kokkos::Max";
    case kind::double_kokkos_sum: return "double Kokkos::Sum";
    case kind::mat_product: return "mat2 product (not commutative)";
    case kind::uint64_kokkos_prod: return "uint64 Kokkos::Prod";
    case kind::uint64_kokkos_bor: return "uint64 Kokkos::BOr";
    case kind::double_kokkos_min: return "double Kokkos::Min";
  }
  return "?";
}

/// How a rank completes one call.
enum class completion : int { blocking, start_wait, test_loop };
const char* completion_name(completion m) {
  return m == completion::blocking ? "blocking" : m == completion::start_wait ? "start+wait" : "test() loop";
}

struct case_env {
  int me, P;
  std::mt19937_64 shared;  ///< the same draws on every rank
  std::mt19937_64 own;     ///< this rank's draws (completion, skew, offsets)
  long* calls;
  std::string label;
};

/// One call of `p` on fresh Views; returns "" or what this rank saw wrong.
/// Op is the collc operator of the reference.
template <class T, class Op, class Plan>
std::string one_call(Plan& p, case_env& e, int call) {
  const exec_space exec;
  const collective c = p.kind();
  const std::size_t n = p.count();
  const int root = p.root();
  const std::uint64_t salt = e.shared();
  const bool in_place = c == collective::bcast || e.shared() % 2 == 0;
  const int form = static_cast<int>(e.shared() % 4);
  const bool const_send = e.shared() % 2 == 0, one_argument = e.shared() % 2 == 0;
  const auto how = static_cast<completion>(e.own() % 3);
  const std::vector<T> mine = inputs<T>(c, e.me, e.P, n, salt);
  const T s = sentinel<T>();
  std::string what = "call " + std::to_string(call) + ": " + view_buffer<T>::names[form] + " Views" +
                     (in_place ? (one_argument ? ", in place (p(exec, buf))" : ", in place") : "") +
                     (!in_place && const_send ? ", const send" : "") + ", " + completion_name(how) + " on rank " +
                     std::to_string(e.me);
  auto run = [&](auto&& start, auto&& blocking) {
    skew(e.own);
    if (how == completion::blocking) {
      blocking();
      return;
    }
    start();
    if (how == completion::test_loop)
      while (!p.test()) std::this_thread::yield();
    else
      p.wait();
  };
  std::string bad;
  if (in_place) {
    // MPI's in-place layouts: the root's data (bcast), this rank's block among P (allgather), else send.
    view_buffer<T> b(form, p.in_place_count(), e.own);
    b.fill(s);
    if (c == collective::allgather)
      std::copy(mine.begin(), mine.end(), b.ptr + static_cast<std::size_t>(e.me) * n);
    else if (c != collective::bcast || e.me == root)
      b.fill(mine);
    b.with([&](const auto& v) {
      run(
          [&] {
            if (one_argument)
              p.start(exec, v);
            else
              p.start(exec, collc::in_place, v);
          },
          [&] {
            if (one_argument)
              p(exec, v);
            else
              p(exec, collc::in_place, v);
          });
    });
    // Off reduce's root an in-place buffer is unspecified.
    if (!(c == collective::reduce && e.me != root)) bad = compare(b.ptr, reference<T, Op>(c, e.me, e.P, n, root, salt));
    if (bad.empty()) bad = b.outside();
  } else {
    view_buffer<T> sb(form, p.send_count(), e.own);
    sb.fill(mine);
    // Off reduce's root recv is not significant: sometimes an empty View.
    const bool off_root = c == collective::reduce && e.me != root;
    view_buffer<T> rb(form, off_root && e.own() % 2 ? 0 : p.recv_count(), e.own);
    rb.fill(s);
    sb.with([&](const auto& sv) {
      rb.with([&](const auto& rv) {
        if (const_send) {
          const typename std::remove_cvref_t<decltype(sv)>::const_type cv = sv;
          run([&] { p.start(exec, cv, rv); }, [&] { p(exec, cv, rv); });
        } else {
          run([&] { p.start(exec, sv, rv); }, [&] { p(exec, sv, rv); });
        }
      });
    });
    if (!compare(sb.ptr, mine).empty())
      bad = "the send View was modified";
    else if (off_root)
      bad = compare(rb.ptr, std::vector<T>(rb.len, s)).empty() ? "" : "reduce wrote recv off the root";
    else
      bad = compare(rb.ptr, reference<T, Op>(c, e.me, e.P, n, root, salt));
    if (bad.empty()) bad = sb.outside();
    if (bad.empty()) bad = rb.outside();
  }
  ++*e.calls;
  return bad.empty() ? bad : what + ": " + bad;
}

/// Runs `calls` calls of `p`, moving it between calls sometimes; agrees after each.
template <class T, class Op, class Plan>
std::string run_calls(Plan p, case_env& e, int calls) {
  for (int k = 0; k < calls; ++k) {
    if (e.shared() % 5 == 0) {  // the plan moves between calls (its exec_ and core travel)
      Plan q = std::move(p);
      p = std::move(q);
    }
    std::string why;
    try {
      why = one_call<T, Op>(p, e, k);
    } catch (const collc::error& err) {
      why = "call " + std::to_string(k) + " threw: " + err.what();
    }
    if (!all_ranks(why.empty())) return why.empty() ? "a peer failed" : why;
  }
  return {};
}

template <class T, class KOp>
std::string kokkos_case(case_env& e, kind k) {
  using Op = collc::kokkos::op_t<KOp>;
  auto& g = e.shared;
  const int P = e.P;
  const collective c = all_collectives[g() % 5];
  const int root = static_cast<int>(g() % static_cast<std::uint64_t>(P));
  collc::plan_options o;
  constexpr std::size_t chunks[] = {0, 0, 512, 1024, 4096, 65536};
  o.chunk_bytes = chunks[g() % 6];
  switch (g() % 6) {
    case 3: o.ranks_per_node = 1; break;
    case 4: o.ranks_per_node = 2; break;
    case 5:
      o.ranks_per_node = 2;
      o.pseudo_placement = collc::placement::round_robin;
      break;
    default: break;
  }
  o.timeout_s = 60;  // a hang becomes an error naming the wait
  std::optional<collc::algo::schedule> schedule;
  if (g() % 2 == 0)
    if (const auto all = collc::algo::all_schedules(c, P, collc::commutative_v<Op>); !all.empty())
      schedule = all[g() % all.size()];
  auto make = [&](std::size_t n) {
    return schedule ? collc::kokkos::make_plan<exec_space, T, KOp>(c, MPI_COMM_WORLD, n, root, *schedule, o)
                    : collc::kokkos::make_plan<exec_space, T, KOp>(c, MPI_COMM_WORLD, n, root, o);
  };
  std::size_t n = 0;
  const auto size_class = g() % 7;
  switch (size_class) {
    case 0: n = g() % 2; break;                                                    // 0, 1
    case 1: n = static_cast<std::size_t>(P) * (1 + g() % 2) + g() % 3 - 1; break;  // around P
    case 2: n = 1 + g() % 300; break;
    case 3:
    case 4: n = 1 + g() % 3000; break;
    default:
      // Around a chunk boundary (1-3 chunks, -1..+1): the chunk as a plan of
      // many chunks of the same shape lowers it (line granules, blocks).
      if (o.chunk_bytes != 0) {
        const std::size_t chunk = make(4 * o.chunk_bytes / sizeof(T)).chunk_elements();
        n = (1 + g() % 3) * chunk + g() % 3 - 1;
      } else {
        n = 1 + g() % 1000;
      }
      break;
  }
  const bool factory = g() % 2 == 0;  // make_<collective> instead of make_plan
  const int calls = 1 + static_cast<int>(g() % 3);
  e.label += std::string("\n    ").append(collc::to_string(c)) + '<' + kind_name(k) + "> count=" + std::to_string(n) +
             " root=" + std::to_string(root) + " schedule=" + (schedule ? schedule->to_string() : "default") +
             " chunk_bytes=" + std::to_string(o.chunk_bytes) + " ranks_per_node=" + std::to_string(o.ranks_per_node) +
             (o.pseudo_placement ? " round_robin" : "") + (factory ? " make_<collective>" : " make_plan") + ", " +
             std::to_string(calls) + " call(s)";
  try {
    if (factory) {
      auto with = [&](auto&&... sched) {
        switch (c) {
          case collective::allreduce:
            return run_calls<T, Op>(collc::kokkos::make_allreduce<exec_space, T, KOp>(MPI_COMM_WORLD, n, sched..., o),
                                    e, calls);
          case collective::reduce_scatter:
            return run_calls<T, Op>(
                collc::kokkos::make_reduce_scatter<exec_space, T, KOp>(MPI_COMM_WORLD, n, sched..., o), e, calls);
          case collective::reduce:
            return run_calls<T, Op>(
                collc::kokkos::make_reduce<exec_space, T, KOp>(MPI_COMM_WORLD, n, root, sched..., o), e, calls);
          case collective::allgather:
            return run_calls<T, Op>(collc::kokkos::make_allgather<exec_space, T>(MPI_COMM_WORLD, n, sched..., o), e,
                                    calls);
          case collective::bcast:
            return run_calls<T, Op>(collc::kokkos::make_bcast<exec_space, T>(MPI_COMM_WORLD, n, root, sched..., o), e,
                                    calls);
        }
        return std::string("unknown collective");
      };
      return schedule ? with(*schedule) : with();
    }
    return run_calls<T, Op>(make(n), e, calls);
  } catch (const collc::error& err) {
    // Setup is collective and fails alike everywhere (or times out everywhere).
    return std::string("setup threw: ") + err.what();
  }
}

std::string run_kind(case_env& e, kind k) {
  switch (k) {
    case kind::int64_plus: return kokkos_case<std::int64_t, collc::plus>(e, k);
    case kind::int64_kokkos_max: return kokkos_case<std::int64_t, Kokkos::Max<std::int64_t>>(e, k);
    case kind::double_kokkos_sum: return kokkos_case<double, Kokkos::Sum<double>>(e, k);
    case kind::mat_product: return kokkos_case<mat2, mat_mul>(e, k);
    case kind::uint64_kokkos_prod: return kokkos_case<std::uint64_t, Kokkos::Prod<std::uint64_t>>(e, k);
    case kind::uint64_kokkos_bor: return kokkos_case<std::uint64_t, Kokkos::BOr<std::uint64_t>>(e, k);
    case kind::double_kokkos_min: return kokkos_case<double, Kokkos::Min<double>>(e, k);
  }
  return "unknown kind";
}

// --- "interleaved Kokkos and collc plans" -------------------------------------------

/// One plan of the pool and the buffers of its current call.
struct slot {
  std::string desc;
  bool started = false;
  virtual ~slot() = default;
  virtual void start(std::mt19937_64& shared, std::mt19937_64& own) = 0;
  virtual void blocking(std::mt19937_64& shared, std::mt19937_64& own) = 0;
  virtual bool test() = 0;
  virtual void wait() = 0;
  /// Destroys the plan (its destructor completes a call in progress).
  virtual void destroy_plan() = 0;
  /// "" or what is wrong with the last call's result.
  virtual std::string check() = 0;
};

/// Kokkos (K) or collc::plan of T and Op on `comm`.
template <class T, class Op, bool K>
struct slot_of : slot {
  using plan_type =
      std::conditional_t<K, collc::kokkos::plan<exec_space, T, collc::kokkos::op_t<Op>>, collc::plan<T, Op>>;
  using ref_op = collc::kokkos::op_t<Op>;
  // The buffers before the plan: its destructor may complete a call into them.
  std::vector<T> s, r;
  std::optional<view_buffer<T>> vs, vr;
  std::optional<plan_type> p;
  int me = 0, P = 1, root = 0;
  collective c;
  std::size_t n;
  std::uint64_t salt = 0;
  bool in_place = false;

  slot_of(collective coll, std::size_t count, int root_, const collc::plan_options& o, MPI_Comm comm,
          const char* comm_name)
      : c(coll), n(count) {
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    root = root_ % P;
    if constexpr (K)
      p.emplace(collc::kokkos::make_plan<exec_space, T, Op>(c, comm, n, root, o));
    else
      p.emplace(collc::mpi::make_plan<T, Op>(c, comm, n, root, o));
    desc = std::string(K ? "Kokkos " : "collc::plan ") + std::string(collc::to_string(c)) +
           " count=" + std::to_string(n) + " root=" + std::to_string(root) + " " + p->schedule_name() +
           " ranks_per_node=" + std::to_string(o.ranks_per_node) + " chunk_bytes=" + std::to_string(o.chunk_bytes) +
           " on " + comm_name;
  }
  void prepare(std::mt19937_64& shared, std::mt19937_64& own) {
    salt = shared();
    in_place = c == collective::bcast || shared() % 2 == 0;
    const std::vector<T> mine = inputs<T>(c, me, P, n, salt);
    const T sent = sentinel<T>();
    if (in_place) {
      s.assign(p->in_place_count(), sent);
      if (c == collective::allgather)
        std::copy(mine.begin(), mine.end(), s.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * n));
      else if (c != collective::bcast || me == root)
        std::copy(mine.begin(), mine.end(), s.begin());
      r.clear();
    } else {
      s = mine;
      r.assign(p->recv_count(), sent);
    }
    if constexpr (K) {
      const int form = static_cast<int>(shared() % 4);
      vs.emplace(form, s.size(), own);
      vs->fill(s);
      vr.emplace(form, r.size(), own);
      vr->fill(r);
    }
  }
  template <class Go>
  void call(Go&& go) {
    if constexpr (K) {
      vs->with([&](const auto& sv) {
        if (in_place)
          go(exec_space(), collc::in_place, sv);
        else
          vr->with([&](const auto& rv) { go(exec_space(), sv, rv); });
      });
    } else {
      if (in_place)
        go(collc::in_place, std::span<T>(s));
      else
        go(std::span<const T>(s), std::span<T>(r));
    }
  }
  void start(std::mt19937_64& shared, std::mt19937_64& own) override {
    prepare(shared, own);
    call([&](auto&&... a) { p->start(a...); });
    started = true;
    if (shared() % 5 == 0) {  // the plan moves while its call is in progress
      plan_type q = std::move(*p);
      p.reset();
      p.emplace(std::move(q));
    }
  }
  void blocking(std::mt19937_64& shared, std::mt19937_64& own) override {
    prepare(shared, own);
    call([&](auto&&... a) { (*p)(a...); });
  }
  bool test() override { return p->test(); }
  void wait() override { p->wait(); }
  void destroy_plan() override { p.reset(); }
  std::string check() override {
    started = false;
    for (const auto* v : {vs ? &*vs : nullptr, vr ? &*vr : nullptr})
      if (v)
        if (std::string bad = v->outside(); !bad.empty()) return desc + ": " + bad;
    const T* in = K ? vs->ptr : s.data();
    const T* out = in_place ? in : (K ? vr->ptr : r.data());
    if (c == collective::reduce && me != root) {
      if (in_place) return {};  // unspecified off the root
      const std::size_t rn = K ? vr->len : r.size();
      return compare(out, std::vector<T>(rn, sentinel<T>())).empty() ? "" : desc + ": reduce wrote recv off the root";
    }
    if (!in_place)
      if (std::string bad = compare(in, inputs<T>(c, me, P, n, salt)); !bad.empty())
        return desc + ": the send buffer was modified";
    std::string bad = compare(out, reference<T, ref_op>(c, me, P, n, root, salt));
    return bad.empty() ? bad : desc + (in_place ? " (in place)" : "") + ": " + bad;
  }
};

struct pool_env {
  MPI_Comm world_dup, halves;  ///< a duplicate of MPI_COMM_WORLD; MPI_COMM_WORLD split by parity, reversed
  int me, P;
  std::mt19937_64 shared, own;
  long* calls;
};

std::unique_ptr<slot> make_slot(pool_env& e) {
  auto& g = e.shared;
  const collective c = all_collectives[g() % 5];
  const int root = static_cast<int>(g() % static_cast<std::uint64_t>(e.P));
  collc::plan_options o;
  constexpr std::size_t chunks[] = {0, 512, 2048, 8192, 0};
  o.chunk_bytes = chunks[g() % 5];
  const auto nodes = g() % 5;
  if (nodes >= 3) o.ranks_per_node = static_cast<int>(nodes - 2);  // 1 or 2
  o.timeout_s = 60;
  std::size_t n = 0;
  switch (g() % 4) {
    case 0: n = g() % 4; break;
    case 1: n = g() % 200; break;
    case 2: n = g() % 1000; break;
    default: n = 1000 + g() % 3000; break;
  }
  const bool kokkos = g() % 2 == 0;
  const bool on_halves = g() % 3 == 0;
  const MPI_Comm comm = on_halves ? e.halves : e.world_dup;
  const char* name = on_halves ? "the halves of MPI_COMM_WORLD" : "a duplicate of MPI_COMM_WORLD";
  switch (g() % 3) {
    case 0:
      if (kokkos) return std::make_unique<slot_of<std::int64_t, collc::plus, true>>(c, n, root, o, comm, name);
      return std::make_unique<slot_of<std::int64_t, collc::plus, false>>(c, n, root, o, comm, name);
    case 1:
      if (kokkos) return std::make_unique<slot_of<mat2, mat_mul, true>>(c, n, root, o, comm, name);
      return std::make_unique<slot_of<mat2, mat_mul, false>>(c, n, root, o, comm, name);
    default:
      if (kokkos) return std::make_unique<slot_of<double, Kokkos::Max<double>, true>>(c, n, root, o, comm, name);
      return std::make_unique<slot_of<double, collc::plus, false>>(c, n, root, o, comm, name);
  }
}

/// A blocking collc::allreduce, reduce_scatter_block, allgather, reduce or
/// bcast on the duplicate (a plan the communicator caches, built the first
/// time) between starts.
std::string blocking_call(pool_env& e) {
  constexpr std::size_t sizes[] = {1, 7, 100, 3000};
  auto& g = e.shared;
  const std::size_t n = sizes[g() % 4];
  const std::uint64_t salt = g();
  const int root = static_cast<int>(g() % static_cast<std::uint64_t>(e.P));
  const collective c = all_collectives[g() % 5];
  const std::vector<std::int64_t> x = inputs<std::int64_t>(c, e.me, e.P, n, salt);
  std::vector<std::int64_t> y(c == collective::allgather ? n * static_cast<std::size_t>(e.P) : n, -7);
  ++*e.calls;
  switch (c) {
    case collective::allreduce: collc::allreduce(e.world_dup, x.data(), y.data(), n); break;
    case collective::reduce_scatter: collc::reduce_scatter_block(e.world_dup, x.data(), y.data(), n); break;
    case collective::allgather: collc::allgather(e.world_dup, x.data(), y.data(), n); break;
    case collective::reduce: collc::reduce(e.world_dup, x.data(), y.data(), n, root); break;
    case collective::bcast:
      if (e.me == root) y = x;
      collc::bcast(e.world_dup, y.data(), n, root);
      break;
  }
  if (c == collective::reduce && e.me != root) return {};
  const std::string bad = compare(y.data(), reference<std::int64_t, collc::plus>(c, e.me, e.P, n, root, salt));
  return bad.empty()
             ? bad
             : std::string("blocking collc::").append(collc::to_string(c)) + " count " + std::to_string(n) + ": " + bad;
}

/// One round; returns "" or this rank's first failure.
std::string pool_round(pool_env& e, std::vector<std::unique_ptr<slot>>& pool) {
  auto& g = e.shared;
  std::string why;
  auto note = [&](const std::string& bad) {
    if (why.empty() && !bad.empty()) why = bad;
  };
  // Refresh the pool: new plans, and one destroyed (the same on every rank).
  while (pool.size() < 2 + g() % 4) pool.push_back(make_slot(e));
  if (pool.size() > 2 && g() % 3 == 0) pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(g() % pool.size()));
  std::vector<std::size_t> chosen(pool.size());
  std::iota(chosen.begin(), chosen.end(), 0);
  std::shuffle(chosen.begin(), chosen.end(), g);
  chosen.resize(std::min<std::size_t>(chosen.size(), 2 + g() % 4));
  std::vector<std::size_t> started;
  for (std::size_t i : chosen) {
    skew(e.own);
    pool[i]->start(g, e.own);
    ++*e.calls;
    started.push_back(i);
    switch (g() % 10) {
      case 0: pool.push_back(make_slot(e)); break;  // a setup while calls are in progress
      case 1:
      case 2:
        skew(e.own);
        note(blocking_call(e));
        break;
      case 3:  // a blocking call of a plan not started this round
        for (std::size_t j = 0; j < pool.size(); ++j)
          if (std::find(started.begin(), started.end(), j) == started.end()) {
            pool[j]->blocking(g, e.own);
            ++*e.calls;
            note(pool[j]->check());
            break;
          }
        break;
      default: break;
    }
  }
  // Completion: this rank's own order, by wait(), test() loops or polling all.
  std::shuffle(started.begin(), started.end(), e.own);
  switch (e.own() % 3) {
    case 0:
      for (std::size_t i : started) {
        skew(e.own);
        pool[i]->wait();
        note(pool[i]->check());
      }
      break;
    case 1:
      for (std::size_t i : started) {
        while (!pool[i]->test()) std::this_thread::yield();
        note(pool[i]->check());
      }
      break;
    default:
      while (!started.empty()) {
        for (std::size_t q = 0; q < started.size();) {
          if (pool[started[q]]->test()) {
            note(pool[started[q]]->check());
            started.erase(started.begin() + static_cast<std::ptrdiff_t>(q));
          } else {
            ++q;
          }
        }
        if (e.own() % 4 == 0) skew(e.own);
      }
      break;
  }
  // A plan destroyed with its call in progress: the destructor completes it.
  if (g() % 6 == 0) {
    const std::size_t j = g() % pool.size();
    pool[j]->start(g, e.own);
    ++*e.calls;
    skew(e.own);
    pool[j]->destroy_plan();
    if (const std::string bad = pool[j]->check(); !bad.empty()) note("destroyed mid-call: " + bad);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return why;
}

}  // namespace

TEST_CASE("random Kokkos plans: every factory, type, operator, count, chunk, View form and completion",
          "[backend][kokkos][random]") {
  const int P = world_size(), me = world_rank();
  const std::uint64_t seed = env_or("COLLC_TEST_SEED", 20261207);
  // With the second test 0.7-2 s per registration on 2 cores shared with
  // other work (load 8), up to 8 s at load 11: fewer cases where ranks share
  // cores.
  const std::uint64_t cases = env_or("COLLC_TEST_CASES", static_cast<std::uint64_t>(std::max(48, 384 / P)));
  std::mt19937_64 draw(seed);
  long failures = 0, calls = 0;
  std::uint64_t ran = 0;
  for (std::uint64_t c = 0; c < cases; ++c) {
    ++ran;
    const std::uint64_t case_seed = draw();
    const auto k = static_cast<kind>(draw() % kinds);
    case_env e{me,
               P,
               std::mt19937_64(case_seed),
               std::mt19937_64(mix(case_seed ^ static_cast<std::uint64_t>(me))),
               &calls,
               "case " + std::to_string(c) + " of seed " + std::to_string(seed) + " (P = " + std::to_string(P) + ")"};
    const std::string why = run_kind(e, k);
    if (!why.empty()) {
      ++failures;
      std::fprintf(stderr, "[kokkos random rank %d] %s:\n  %s\n", me, e.label.c_str(), why.c_str());
    }
    // Every rank learns of a failure anywhere before the next case.
    if (!all_ranks(why.empty())) break;
  }
  if (me == 0)
    std::printf("random Kokkos plans: seed %llu, %llu of %llu cases, %ld calls checked on rank 0\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(ran),
                static_cast<unsigned long long>(cases), calls);
  INFO("seed " << seed << ", " << cases << " cases");
  CHECK(failures == 0);
  REQUIRE(all_ranks(failures == 0));
}

TEST_CASE("interleaved Kokkos and collc plans complete in any order on each rank",
          "[backend][kokkos][random][interleave]") {
  const int P = world_size(), me = world_rank();
  const std::uint64_t seed = env_or("COLLC_TEST_SEED", 20261207);
  const std::uint64_t rounds = env_or("COLLC_TEST_CASES", static_cast<std::uint64_t>(std::max(32, 256 / P)));
  long calls = 0;
  pool_env e{MPI_COMM_NULL,
             MPI_COMM_NULL,
             me,
             P,
             std::mt19937_64(seed + 1),
             std::mt19937_64(mix((seed + 1) ^ static_cast<std::uint64_t>(me))),
             &calls};
  MPI_Comm_dup(MPI_COMM_WORLD, &e.world_dup);
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, P - me, &e.halves);
  long failures = 0;
  std::uint64_t ran = 0;
  {
    std::vector<std::unique_ptr<slot>> pool;
    for (std::uint64_t round = 0; round < rounds; ++round) {
      ++ran;
      std::string why;
      try {
        why = pool_round(e, pool);
      } catch (const collc::error& err) {
        why = std::string("threw: ") + err.what();
      }
      if (!why.empty()) {
        ++failures;
        std::string pending;
        for (const auto& s : pool) pending += "\n    " + s->desc + (s->started ? " (started)" : "");
        std::fprintf(stderr, "[kokkos interleave rank %d] round %llu of seed %llu (P = %d), pool:%s\n  %s\n", me,
                     static_cast<unsigned long long>(round), static_cast<unsigned long long>(seed), P, pending.c_str(),
                     why.c_str());
      }
      // Before the next round's collectives (its setups and calls).
      if (!all_ranks(why.empty())) break;
    }
  }  // the plans before their communicators
  MPI_Comm_free(&e.world_dup);
  MPI_Comm_free(&e.halves);
  if (me == 0)
    std::printf("interleaved plans: seed %llu, %llu of %llu rounds, %ld calls checked on rank 0\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(ran),
                static_cast<unsigned long long>(rounds), calls);
  INFO("seed " << seed << ", " << rounds << " rounds");
  CHECK(failures == 0);
  REQUIRE(all_ranks(failures == 0));
}
