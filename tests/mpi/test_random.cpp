// Randomized plans, fixed seed: each case draws a collective, an element type
// and operator, a count, a root, a schedule (the default, or any of
// algo::all_schedules for the communicator's size), plan options (chunk size,
// pseudo-nodes, placement, setup checks), a communicator (MPI_COMM_WORLD, a
// duplicate, or a split in reversed rank order) and up to three plans built
// together; then a few rounds in which the plans are started in order, in a
// random buffer form each (spans, pointers, in place, blocking operator(), or
// the blocking collc::allreduce etc. with its own cached plan),
// with fresh buffers every round, and completed in an order every rank draws
// for itself (plans started together may complete in any order on each rank:
// backend/mpi/plan.hpp). Every result is checked against a rank-order fold
// each rank computes alone (support.hpp); doubles must also be bitwise equal
// on every rank for allreduce.
//
// A bounded form of the randomized sweep (2026-12-07, ~100,000 cases) that
// found the blocking bcast/allgather of a type without + did not compile, and
// the orders no fixed test had tried. COLLC_TEST_SEED and COLLC_TEST_CASES
// change the draw; a failure prints the case so it can be run alone.
#include "support.hpp"

#include <collc/algo/presets.hpp>
#include <collc/blocking.hpp>
#include <collc/plan.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using collc::collective;
using namespace collc_test;

namespace {

/// The element type and operator of a case.
enum class kind : int { int64_plus, int64_max, int64_xor, double_plus, mat_product, chars };

const char* kind_name(kind k) {
  switch (k) {
    case kind::int64_plus: return "int64 plus";
    case kind::int64_max: return "int64 max";
    case kind::int64_xor: return "int64 bit_xor";
    case kind::double_plus: return "double plus";
    case kind::mat_product: return "mat2 product (not commutative)";
    case kind::chars: return "char";
  }
  return "?";
}

/// How a round starts one plan.
/// free_call: the blocking collc::allreduce etc. on the communicator (its own
/// cached plan, between the case's plans).
enum class form : int { spans, pointers, in_place_span, in_place_pointer, blocking, free_call };

const char* form_name(form f) {
  switch (f) {
    case form::spans: return "spans";
    case form::pointers: return "pointers";
    case form::in_place_span: return "in place";
    case form::in_place_pointer: return "in place (pointer)";
    case form::blocking: return "blocking";
    case form::free_call: return "collc::<collective>(comm, ...)";
  }
  return "?";
}

/// One plan of a case, as drawn (the same on every rank of its communicator).
struct plan_spec {
  collective coll = collective::allreduce;
  std::size_t count = 0;
  int root = 0;
  std::optional<collc::algo::schedule> schedule;  ///< nullopt: the default
  collc::plan_options options;

  [[nodiscard]] std::string describe(kind k) const {
    std::ostringstream s;
    s << collc::to_string(coll) << '<' << kind_name(k) << "> count=" << count << " root=" << root
      << " schedule=" << (schedule ? schedule->to_string() : std::string("default"))
      << " chunk_bytes=" << options.chunk_bytes << " ranks_per_node=" << options.ranks_per_node
      << (options.pseudo_placement ? " round_robin" : "") << (options.checks.value_or(false) ? " checks" : "");
    return s.str();
  }
};

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

/// Draws a count: small, around P and block sizes, or around the chunk.
std::size_t draw_count(std::mt19937_64& g, int P, std::size_t elem, std::size_t chunk_bytes) {
  const std::size_t chunk_elems = std::max<std::size_t>(1, (chunk_bytes ? chunk_bytes : 4096) / elem);
  switch (g() % 6) {
    case 0: return g() % 4;                                                // 0..3
    case 1: return static_cast<std::size_t>(P) * (1 + g() % 3) + g() % 3;  // around P
    case 2: return 1 + g() % 300;
    case 3: return 1 + g() % 5000;
    default: {  // k chunks and a tail, at most 24 chunks
      const std::size_t k = 1 + g() % 24;
      const std::size_t tail = g() % 3 == 0 ? 0 : g() % (chunk_elems + 1);
      return std::min<std::size_t>(k * chunk_elems + tail, 1u << 16);
    }
  }
}

/// The buffers of one plan in one round; they live until the round's checks.
template <class T>
struct round_buffers {
  std::vector<T> send, recv, buf;
  std::vector<T>* out = nullptr;
};

template <class T>
T sentinel_value() {
  if constexpr (std::is_same_v<T, mat2>)
    return mat2{7, 7, 7, 7};
  else
    return static_cast<T>(-7);
}

template <class T, class Op>
struct running {
  plan_spec spec;
  round_buffers<T> b;  ///< before the plan: ~plan completes a call in progress into it
  collc::plan<T, Op> plan;
  form how = form::spans;
};

/// Starts (or, blocking, runs) one plan's call of round `it`.
/// The blocking free function of r's collective on `comm` (blocking.hpp).
template <class T, class Op>
void free_call(running<T, Op>& r, MPI_Comm comm) {
  const std::size_t n = r.spec.count;
  auto& b = r.b;
  switch (r.spec.coll) {
    case collective::bcast: collc::bcast(comm, b.buf.data(), n, r.spec.root); break;
    case collective::allgather: collc::allgather(comm, b.send.data(), b.recv.data(), n); break;
    case collective::allreduce:
      if constexpr (std::is_invocable_v<const Op&, const T&, const T&>)
        collc::allreduce(comm, b.send.data(), b.recv.data(), n, Op{});
      break;
    case collective::reduce_scatter:
      if constexpr (std::is_invocable_v<const Op&, const T&, const T&>)
        collc::reduce_scatter_block(comm, b.send.data(), b.recv.data(), n, Op{});
      break;
    case collective::reduce:
      if constexpr (std::is_invocable_v<const Op&, const T&, const T&>)
        collc::reduce(comm, b.send.data(), b.recv.data(), n, r.spec.root, Op{});
      break;
  }
}

template <class T, class Op>
void start_call(running<T, Op>& r, MPI_Comm comm, int me, int P, int it) {
  const collective c = r.spec.coll;
  const std::size_t n = r.spec.count;
  const std::size_t slen = c == collective::reduce_scatter ? n * static_cast<std::size_t>(P) : n;
  const std::size_t rlen = c == collective::allgather ? n * static_cast<std::size_t>(P) : n;
  auto& b = r.b;
  b = {};
  b.send = send_data<T>(c, me, P, n, it);
  const T s = sentinel_value<T>();
  const bool in_place = c == collective::bcast || r.how == form::in_place_span || r.how == form::in_place_pointer;
  if (in_place) {
    // MPI's in-place layouts (plan.hpp): the root's data (bcast), the rank's
    // block among P (allgather), else the send buffer itself.
    b.buf.assign(std::max(slen, rlen), s);
    if (c == collective::bcast) {
      if (me == r.spec.root) b.buf = b.send;
    } else if (c == collective::allgather) {
      std::copy(b.send.begin(), b.send.end(),
                b.buf.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * n));
    } else {
      std::copy(b.send.begin(), b.send.end(), b.buf.begin());
    }
    b.out = &b.buf;
    if (r.how == form::free_call)
      free_call(r, comm);
    else if (r.how == form::in_place_pointer)
      r.plan.start(collc::in_place, b.buf.empty() ? nullptr : b.buf.data());
    else if (r.how == form::blocking)
      r.plan(collc::in_place, std::span<T>(b.buf));
    else
      r.plan.start(collc::in_place, std::span<T>(b.buf));
    return;
  }
  b.recv.assign(rlen, s);
  b.out = &b.recv;
  switch (r.how) {
    case form::pointers: r.plan.start(b.send.data(), b.recv.data()); break;
    case form::blocking: r.plan(std::span<const T>(b.send), std::span<T>(b.recv)); break;
    case form::free_call: free_call(r, comm); break;
    default: r.plan.start(std::span<const T>(b.send), std::span<T>(b.recv)); break;
  }
}

/// Checks one plan's result of round `it`; returns "" or what is wrong.
template <class T, class Op>
std::string check_call(const running<T, Op>& r, int me, int P, int it) {
  const collective c = r.spec.coll;
  const std::size_t n = r.spec.count;
  const std::vector<T>& got_all = *r.b.out;
  const bool in_place = c == collective::bcast || r.how == form::in_place_span || r.how == form::in_place_pointer;
  if (c == collective::reduce && me != r.spec.root) {
    // Off the root: recv is never written; an in-place buffer is unspecified.
    if (in_place) return {};
    const T s = sentinel_value<T>();
    for (std::size_t i = 0; i < got_all.size(); ++i)
      if (!(got_all[i] == s)) return "reduce wrote recv off the root at element " + std::to_string(i);
    return {};
  }
  const std::vector<T> want = expected<T, Op>(c, me, P, n, r.spec.root, it);
  // In place, reduce_scatter's result is the first block of the buffer.
  const std::size_t len = want.size();
  if (got_all.size() < len) return "buffer shorter than the result";
  std::vector<T> got(got_all.begin(), got_all.begin() + static_cast<std::ptrdiff_t>(len));
  std::size_t first = 0;
  if (const std::size_t bad = mismatches(got, want, &first); bad != 0)
    return std::to_string(bad) + " of " + std::to_string(len) + " elements wrong, first at " + std::to_string(first) +
           " (" + form_name(r.how) + ")";
  return {};
}

struct case_env {
  MPI_Comm comm;
  int me, P;
  long* calls;             ///< checked calls, for the summary
  std::mt19937_64 shared;  ///< the same draws on every rank of comm
  std::mt19937_64 own;     ///< this rank's draws (completion order, skew)
};

/// Draws a schedule: the default half the time, else any schedule collc can
/// lower for (collective, P).
std::optional<collc::algo::schedule> draw_schedule(std::mt19937_64& g, collective c, int P, bool commutative) {
  if (g() % 2 == 0) return std::nullopt;
  const auto all = collc::algo::all_schedules(c, P, commutative);
  if (all.empty()) return std::nullopt;
  return all[g() % all.size()];
}

template <class T, class Op>
plan_spec draw_spec(case_env& e, kind k) {
  auto& g = e.shared;
  plan_spec s;
  if constexpr (std::is_same_v<T, char>) {
    s.coll = g() % 2 ? collective::allgather : collective::bcast;
  } else {
    constexpr collective all[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                  collective::reduce, collective::bcast};
    s.coll = all[g() % 5];
  }
  constexpr std::size_t chunks[] = {0, 0, 0, 256, 4096, 65536};
  s.options.chunk_bytes = chunks[g() % 6];
  s.count = draw_count(g, e.P, sizeof(T), s.options.chunk_bytes);
  s.root = static_cast<int>(g() % static_cast<std::uint64_t>(e.P));
  s.schedule = draw_schedule(g, s.coll, e.P, collc::commutative_v<Op>);
  const auto nodes = g() % 6;
  if (nodes >= 4) s.options.ranks_per_node = static_cast<int>(nodes - 3);  // 1 or 2
  if (s.options.ranks_per_node != 0 && g() % 3 == 0) s.options.pseudo_placement = collc::placement::round_robin;
  if (g() % 6 == 0 && s.count <= 4096) s.options.checks = true;
  s.options.timeout_s = 120;  // a hang becomes an error naming the wait
  (void)k;
  return s;
}

/// One case of kind k: up to three plans on e.comm, a few rounds each.
/// Returns this rank's first failure, or "".
template <class T, class Op>
std::string run_case(case_env& e, kind k, std::string& label) {
  const int nplans = 1 + static_cast<int>(e.shared() % 3);
  std::vector<plan_spec> specs;
  for (int i = 0; i < nplans; ++i) specs.push_back(draw_spec<T, Op>(e, k));
  const int rounds = 1 + static_cast<int>(e.shared() % 4);
  std::vector<form> forms;  // per (round, plan), shared
  for (int i = 0; i < rounds * nplans; ++i) forms.push_back(static_cast<form>(e.shared() % 6));
  for (const auto& s : specs) label += "\n    " + s.describe(k);

  std::vector<running<T, Op>> plans;
  try {
    for (const auto& s : specs) {
      auto p = s.schedule ? collc::mpi::make_plan<T, Op>(s.coll, e.comm, s.count, s.root, *s.schedule, s.options)
                          : collc::mpi::make_plan<T, Op>(s.coll, e.comm, s.count, s.root, s.options);
      plans.push_back({s, {}, std::move(p), form::spans});
    }
  } catch (const collc::error& err) {
    return std::string("setup: ") + err.what();
  }
  for (int it = 0; it < rounds; ++it) {
    std::vector<int> order(static_cast<std::size_t>(nplans));
    for (int i = 0; i < nplans; ++i) {
      order[static_cast<std::size_t>(i)] = i;
      plans[static_cast<std::size_t>(i)].how = forms[static_cast<std::size_t>(it * nplans + i)];
    }
    std::shuffle(order.begin(), order.end(), e.own);
    std::string why;
    try {
      for (auto& r : plans) {
        if (e.own() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(e.own() % 200));
        start_call(r, e.comm, e.me, e.P, it);
      }
      for (int i : order) {
        auto& r = plans[static_cast<std::size_t>(i)];
        if (r.how == form::blocking || r.how == form::free_call) continue;
        if (e.own() % 3 == 0)
          while (!r.plan.test()) std::this_thread::yield();
        else
          r.plan.wait();
      }
      *e.calls += nplans;
      for (auto& r : plans)
        if (why.empty())
          if (std::string bad = check_call(r, e.me, e.P, it); !bad.empty()) why = r.spec.describe(k) + ": " + bad;
    } catch (const collc::error& err) {
      why = err.what();
    }
    // Agree before the next collective, so a rank that failed does not leave
    // its peers in a check it skips.
    if (!all_ranks(why.empty(), e.comm))
      return "round " + std::to_string(it) + ": " + (why.empty() ? std::string("a peer failed") : why);
    for (auto& r : plans)
      if constexpr (std::is_floating_point_v<T>)
        if (r.spec.coll == collective::allreduce && !identical_everywhere(*r.b.out, e.comm))
          return "round " + std::to_string(it) + ", " + r.spec.describe(k) + ": not bitwise equal on every rank";
  }
  return {};
}

std::string run_kind(case_env& e, kind k, std::string& label) {
  switch (k) {
    case kind::int64_plus: return run_case<std::int64_t, collc::plus>(e, k, label);
    case kind::int64_max: return run_case<std::int64_t, collc::max>(e, k, label);
    case kind::int64_xor: return run_case<std::int64_t, collc::bit_xor>(e, k, label);
    case kind::double_plus: return run_case<double, collc::plus>(e, k, label);
    case kind::mat_product: return run_case<mat2, mat_mul>(e, k, label);
    case kind::chars: return run_case<char, collc::plus>(e, k, label);
  }
  return "unknown kind";
}

}  // namespace

TEST_CASE("random plans: every collective, type, operator, schedule, chunk, buffer form and completion order",
          "[random]") {
  const int P_world = world_size();
  const int me_world = world_rank();
  const std::uint64_t seed = env_or("COLLC_TEST_SEED", 20261207);
  // 3-15 s per registration on 2 cores: fewer cases where ranks share cores.
  const std::uint64_t cases = env_or("COLLC_TEST_CASES", static_cast<std::uint64_t>(std::max(12, 256 / P_world)));
  std::mt19937_64 world_draw(seed);
  long failures = 0, calls = 0;
  for (std::uint64_t n = 0; n < cases; ++n) {
    // The communicator: the world, a duplicate, or halves in reversed order.
    const auto which = world_draw() % 5;
    MPI_Comm comm = MPI_COMM_WORLD;
    std::string comm_name = "MPI_COMM_WORLD";
    if (which == 3) {
      MPI_Comm_dup(MPI_COMM_WORLD, &comm);
      comm_name = "a duplicate of MPI_COMM_WORLD";
    } else if (which == 4) {
      MPI_Comm_split(MPI_COMM_WORLD, me_world % 2, P_world - me_world, &comm);
      comm_name = "MPI_COMM_WORLD split by rank parity, reversed";
    }
    const std::uint64_t case_seed = world_draw();
    const kind k = static_cast<kind>(world_draw() % 6);
    case_env e{comm,
               0,
               1,
               &calls,
               std::mt19937_64(case_seed + static_cast<std::uint64_t>(me_world % 2) * (which == 4)),
               std::mt19937_64(mix(case_seed ^ static_cast<std::uint64_t>(me_world)))};
    MPI_Comm_rank(comm, &e.me);
    MPI_Comm_size(comm, &e.P);
    std::string label = "case " + std::to_string(n) + " of seed " + std::to_string(seed) + " on " + comm_name +
                        " (P = " + std::to_string(e.P) + ")";
    const std::string why = run_kind(e, k, label);
    if (!why.empty()) {
      ++failures;
      std::fprintf(stderr, "[random rank %d] %s:\n  %s\n", me_world, label.c_str(), why.c_str());
    }
    if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    // Every rank learns of a failure anywhere before the next case, so a
    // failed case does not leave its peers in a later one.
    if (!all_ranks(why.empty())) break;
  }
  if (me_world == 0)
    std::printf("random plans: seed %llu, %llu cases, %ld calls checked on rank 0\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(cases), calls);
  CHECK(failures == 0);
  INFO("seed " << seed << ", " << cases << " cases");
  REQUIRE(all_ranks(failures == 0));
}
