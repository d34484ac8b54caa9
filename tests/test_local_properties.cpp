// Property tests of the whole lowering pipeline on real data: every schedule
// of collc::algo::all_schedules, lowered by collc::algo::lower and run by the
// local executor, must give what the sequential reference gives:
//  - every P <= 16, every collective, every schedule, counts {0, 1, P-1, P+3, 3P}
//    (empty and uneven slices), 2 back-to-back executions with fresh data,
//    allreduce also in place;
//  - int64 plus and double plus over the commutative schedule list, the
//    non-commutative 2x2 matrix product over the non-commutative list;
//  - a seeded random sample of larger cases (P up to 64), some on two nodes.
// int64 and the matrix product are exact. double may associate differently
// from the reference, so it must match within a tolerance, and ranks that hold
// the same result (allreduce, allgather, bcast) must agree bitwise.
#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/backend/local/executor.hpp>
#include <collc/backend/local/reference.hpp>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace collc;

namespace {

// 2x2 matrices modulo a prime under multiplication: associative, not commutative.
struct mat2 {
  std::int64_t a, b, c, d;
  friend bool operator==(const mat2&, const mat2&) = default;
  friend std::ostream& operator<<(std::ostream& os, const mat2& m) {
    return os << "[" << m.a << " " << m.b << "; " << m.c << " " << m.d << "]";
  }
};
constexpr std::int64_t prime = 1'000'003;
struct mat_mul {
  mat2 operator()(const mat2& x, const mat2& y) const {
    return {(x.a * y.a + x.b * y.c) % prime, (x.a * y.b + x.b * y.d) % prime, (x.c * y.a + x.d * y.c) % prime,
            (x.c * y.b + x.d * y.d) % prime};
  }
};

constexpr collective all_collectives[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                          collective::reduce, collective::bcast};

std::int64_t random_value(std::mt19937_64& g, std::int64_t*) { return static_cast<std::int64_t>(g() % 2001) - 1000; }
double random_value(std::mt19937_64& g, double*) { return std::uniform_real_distribution<double>(-1.0, 1.0)(g); }
mat2 random_value(std::mt19937_64& g, mat2*) {
  auto v = [&] { return static_cast<std::int64_t>(g() % prime); };
  return {v(), v(), v(), v()};
}
template <class T>
std::vector<T> random_vector(std::mt19937_64& g, std::size_t n) {
  std::vector<T> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(random_value(g, static_cast<T*>(nullptr)));
  return v;
}

struct case_t {
  collective coll;
  int ranks;
  std::size_t count;
  int root;
  algo::schedule sched;
  std::vector<int> node_of;
  bool in_place;

  [[nodiscard]] std::string describe() const {
    std::ostringstream s;
    s << to_string(coll) << " P=" << ranks << " count=" << count << " root=" << root << " schedule "
      << sched.to_string();
    if (!node_of.empty()) s << " on 2 nodes";
    if (in_place) s << " in place";
    return s.str();
  }
};

// Result check for one rank: exact, or within `tol` for double.
template <class T>
bool matches(const std::vector<T>& got, const std::vector<T>& want) {
  if constexpr (std::is_floating_point_v<T>) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - want[i]) <= 1e-12)) return false;
    return true;
  } else {
    return got == want;
  }
}

// Lowers and runs one case (2 executions, fresh data each) and checks it.
// Returns false (after recording Catch failures) if anything is wrong.
template <class T, class Op>
bool run_case(const case_t& c, const Op& op, std::mt19937_64& g) {
  INFO(c.describe());
  ir::program prog;
  try {
    prog = algo::lower(
        c.sched,
        algo::lower_request{.coll = c.coll, .ranks = c.ranks, .count = c.count, .root = c.root, .node_of = c.node_of});
  } catch (const collc::error& e) {
    FAIL_CHECK("lower() threw: " << e.what());
    return false;
  }
  if (!commutative_v<Op> && prog.commutative_only) {
    FAIL_CHECK("schedule listed for non-commutative operators lowers to a commutative-only program");
    return false;
  }
  const auto P = static_cast<std::size_t>(c.ranks);
  const bool bcast = c.coll == collective::bcast;
  constexpr std::size_t executions = 2;
  std::vector<std::vector<std::vector<T>>> sends(executions), recvs(executions);
  for (std::size_t e = 0; e < executions; ++e)
    for (std::size_t r = 0; r < P; ++r) {
      sends[e].push_back(random_vector<T>(g, bcast ? c.count : prog.send_count()));
      recvs[e].push_back(random_vector<T>(g, prog.recv_count()));  // garbage the program must overwrite
      if (c.in_place || (bcast && r == static_cast<std::size_t>(c.root))) recvs[e][r] = sends[e][r];
    }
  try {
    local::runner<T, Op> run(prog, op, local::options{std::chrono::seconds(20)});
    if (c.in_place)
      run.run(std::span<const std::vector<std::vector<T>>>(recvs), recvs);
    else if (bcast)
      run.run(std::vector<std::vector<std::vector<T>>>(executions), recvs);
    else
      run.run(sends, recvs);
  } catch (const collc::error& e) {
    FAIL_CHECK("local executor threw: " << e.what());
    return false;
  }
  bool ok = true;
  for (std::size_t e = 0; e < executions; ++e) {
    const auto want = local::reference(c.coll, c.ranks, c.count, c.root, sends[e], op);
    for (std::size_t r = 0; r < P; ++r) {
      if (c.coll == collective::reduce && r != static_cast<std::size_t>(c.root)) continue;  // unspecified
      if (!matches(recvs[e][r], want[r])) {
        FAIL_CHECK("execution " << e << ", rank " << r << ": result " << Catch::Detail::stringify(recvs[e][r])
                                << " differs from the reference " << Catch::Detail::stringify(want[r]));
        ok = false;
      }
      // Same result on every rank: bitwise identical, also for floating point.
      const bool shared = c.coll == collective::allreduce || c.coll == collective::allgather || bcast;
      if (shared && r > 0 && !(recvs[e][r] == recvs[e][0])) {
        FAIL_CHECK("execution " << e << ", rank " << r << ": result differs from rank 0's");
        ok = false;
      }
    }
  }
  return ok;
}

// Runs every schedule of the list for (coll, P) at the given counts. Stops a
// collective after a few failures so one bug does not flood the log.
template <class T, class Op>
void check_exhaustive(const Op& op, int max_ranks) {
  std::mt19937_64 g(12345);
  int failures = 0;
  for (int P = 1; P <= max_ranks; ++P)
    for (collective coll : all_collectives) {
      const auto scheds = algo::all_schedules(coll, P, commutative_v<Op>);
      for (const auto& s : scheds) {
        const auto p = static_cast<std::size_t>(P);
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, p - 1, p + 3, 3 * p}) {
          const int root = static_cast<int>((count + p / 2) % p);
          const bool ok = run_case<T>(case_t{coll, P, count, root, s, {}, false}, op, g);
          CHECK(ok);
          failures += ok ? 0 : 1;
          if (coll == collective::allreduce) {
            const bool ok_in_place = run_case<T>(case_t{coll, P, count, root, s, {}, true}, op, g);
            CHECK(ok_in_place);
            failures += ok_in_place ? 0 : 1;
          }
          if (failures >= 20) FAIL("stopping after 20 failing cases");
        }
      }
    }
}

}  // namespace

TEST_CASE("every schedule for P <= 16 matches the reference: int64 plus", "[backend][local][properties]") {
  check_exhaustive<std::int64_t>(plus{}, 16);
}

TEST_CASE("every schedule for P <= 16 matches the reference: double plus", "[backend][local][properties]") {
  check_exhaustive<double>(plus{}, 16);
}

TEST_CASE("every order-preserving schedule for P <= 16 keeps rank order: 2x2 matrix product",
          "[backend][local][properties]") {
  check_exhaustive<mat2>(mat_mul{}, 16);
}

TEST_CASE("seeded random sample up to 64 ranks, some on two nodes", "[backend][local][properties]") {
  std::mt19937_64 g(987654321);
  int failures = 0;
  for (int sample = 0; sample < 100; ++sample) {
    const int P = 2 + static_cast<int>(g() % 63);
    const collective coll = all_collectives[g() % 5];
    const int kind = static_cast<int>(g() % 3);  // 0: int64, 1: double, 2: matrix product
    const auto scheds = algo::all_schedules(coll, P, kind != 2);
    const algo::schedule s = scheds[g() % scheds.size()];
    const std::size_t count = g() % (3 * static_cast<std::size_t>(P) + 1);
    const int root = static_cast<int>(g() % static_cast<std::uint64_t>(P));
    std::vector<int> node_of;
    if (P % 2 == 0 && g() % 2 == 0)
      for (int r = 0; r < P; ++r) node_of.push_back(r < P / 2 ? 0 : 1);
    const bool in_place = coll == collective::allreduce && g() % 2 == 0;
    const case_t c{coll, P, count, root, s, node_of, in_place};
    const bool ok = kind == 0   ? run_case<std::int64_t>(c, plus{}, g)
                    : kind == 1 ? run_case<double>(c, plus{}, g)
                                : run_case<mat2>(c, mat_mul{}, g);
    CHECK(ok);
    if (!ok && ++failures >= 10) FAIL("stopping after 10 failing cases");
  }
}
