// include/collc/backend/kokkos/reproducible.hpp and collc::exact_sum through
// collc::kokkos plans, at 1..4 ranks: the reducer (value by value, into a
// scalar and into a View), local_sum / local_dot (blocks through the range
// add), plans over Views of accumulators for every allreduce schedule and the
// default reduce_scatter, and the one-call reproducible_sum / _dot. The same
// global summands, split over the ranks by a random partition, must give the
// bits of their sequential exact sum (independent of P). Failures are combined
// over ranks.
#include "../mpi/support.hpp"

#include <collc/algo/presets.hpp>
#include <collc/backend/kokkos/plan.hpp>
#include <collc/backend/kokkos/reproducible.hpp>
#include <collc/exact_sum.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using collc::collective;
using acc = collc::exact_sum<double>;
using exec_space = Kokkos::DefaultHostExecutionSpace;
using namespace collc_test;

namespace {

struct kokkos_session {
  kokkos_session() { Kokkos::initialize(); }
  ~kokkos_session() { Kokkos::finalize(); }
} const session;

/// Set `s`: cancelling pairs near 2^900, values over 100 binades, subnormals; bits from hashes only.
std::vector<double> summand_set(std::uint64_t s, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = mix(s * 1000003u + i / 2);
    const double m = static_cast<double>((h >> 11) | (std::uint64_t{1} << 52)) * 0x1p-53;
    const double sign = (h & 1) ? -1.0 : 1.0;
    switch (h >> 8 & 3) {
      case 0: v[i] = (i % 2 == 0 ? sign : -sign) * std::ldexp(m, 900); break;
      case 1: v[i] = sign * std::ldexp(m, static_cast<int>(h >> 16 & 127) - 64); break;
      case 2: v[i] = sign * std::numeric_limits<double>::denorm_min() * static_cast<double>(h >> 20 & 1023); break;
      default: v[i] = sign * std::ldexp(m, -40);
    }
  }
  return v;
}

acc sequential(const std::vector<double>& v) {
  acc a;
  for (double x : v) a += x;
  return a;
}

std::vector<double> my_share(const std::vector<double>& v, std::uint64_t seed) {
  const int me = world_rank(), P = world_size();
  std::mt19937_64 g(seed);
  std::vector<double> mine;
  for (double x : v)
    if (static_cast<int>(g() % static_cast<std::uint64_t>(P)) == me) mine.push_back(x);
  std::mt19937_64 order(seed + static_cast<std::uint64_t>(me) * 7919u);
  std::shuffle(mine.begin(), mine.end(), order);
  return mine;
}

Kokkos::View<double*> to_view(const std::vector<double>& v) {
  Kokkos::View<double*> out("x", v.size());
  auto h = Kokkos::create_mirror_view(out);
  for (std::size_t i = 0; i < v.size(); ++i) h(i) = v[i];
  Kokkos::deep_copy(out, h);
  return out;
}

bool same(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

}  // namespace

TEST_CASE("exact_sum_reducer: Kokkos::parallel_reduce accumulates exactly", "[exact_sum][backend][kokkos]") {
  const auto set = summand_set(3, 20000);
  const acc want = sequential(set);
  const auto x = to_view(set);
  acc by_value;
  Kokkos::parallel_reduce(
      "test::exact", Kokkos::RangePolicy<exec_space>(0, set.size()),
      KOKKOS_LAMBDA(std::size_t i, acc & a) { a += x(i); }, collc::kokkos::exact_sum_reducer<double>(by_value));
  CHECK(by_value == want);
  Kokkos::View<acc, Kokkos::HostSpace> result("result");
  Kokkos::parallel_reduce(
      "test::exact_view", Kokkos::RangePolicy<exec_space>(0, set.size()),
      KOKKOS_LAMBDA(std::size_t i, acc & a) { a += x(i); },
      collc::kokkos::exact_sum_reducer<double>(
          collc::kokkos::exact_sum_reducer<double>::result_view_type(result.data())));
  CHECK(result() == want);
  CHECK(collc::kokkos::local_sum(exec_space(), x) == want);
  const Kokkos::View<double*> ones("ones", set.size());
  Kokkos::deep_copy(ones, 1.0);
  CHECK(collc::kokkos::local_dot(exec_space(), x, ones) == want);
  CHECK(same(want.round(), collc::kokkos::local_dot(exec_space(), ones, x).round()));
  CHECK_THROWS_WITH(collc::kokkos::local_dot(exec_space(), x, Kokkos::View<double*>("short", 3)),
                    Catch::Contains("elements, y has 3"));
}

TEST_CASE("collc::kokkos plans of exact_sum: every allreduce schedule, same bits", "[exact_sum][backend][kokkos]") {
  const int P = world_size();
  std::vector<std::string> failures;
  std::uint64_t seed = 11;
  std::vector<std::vector<double>> sets;
  std::vector<acc> want;
  for (std::uint64_t j = 0; j < static_cast<std::uint64_t>(std::max(2, P)); ++j) {
    sets.push_back(summand_set(100 + j, 1200));
    want.push_back(sequential(sets.back()));
  }
  auto check = [&](auto& p, std::size_t outputs) {
    Kokkos::View<acc*> send("send", p.send_count()), recv("recv", p.recv_count());
    for (std::size_t j = 0; j < outputs; ++j) {
      const auto mine = my_share(sets[j], seed++);
      send(j) = acc{};
      send(j).add(mine.data(), mine.size());
    }
    p(exec_space(), send, recv);
    for (std::size_t k = 0; k < p.recv_count(); ++k) {
      const std::size_t j = p.kind() == collective::reduce_scatter ? static_cast<std::size_t>(world_rank()) : k;
      if (std::memcmp(&recv(k), &want[j], sizeof(acc)) != 0)
        failures.push_back(p.name() + " schedule " + p.schedule_name() + ": element " + std::to_string(j) + " differs");
    }
  };
  for (const auto& s : collc::algo::all_schedules(collective::allreduce, P, true)) {
    auto p = collc::kokkos::make_allreduce<exec_space, acc>(MPI_COMM_WORLD, 2, s);
    check(p, 2);
  }
  {
    auto p = collc::kokkos::make_reduce_scatter<exec_space, acc>(MPI_COMM_WORLD, 1);
    check(p, static_cast<std::size_t>(P));
  }
  for (const auto& f : failures) FAIL_CHECK("rank " << world_rank() << ": " << f);
  REQUIRE(all_ranks(failures.empty()));
}

TEST_CASE("collc::kokkos::reproducible_sum / _dot: one call, P-independent bits", "[exact_sum][backend][kokkos]") {
  const auto set = summand_set(9, 30000);
  const auto mine = my_share(set, 99);
  const auto x = to_view(mine);
  const Kokkos::View<double*> twos("twos", mine.size());
  Kokkos::deep_copy(twos, 2.0);
  acc twice;
  for (double v : set) twice += 2.0 * v;
  auto p = collc::kokkos::make_reproducible_allreduce<exec_space, double>(MPI_COMM_WORLD);
  const double s = collc::kokkos::reproducible_sum(p, exec_space(), x);
  const double d = collc::kokkos::reproducible_dot(p, exec_space(), twos, x);
  const bool ok = same(s, sequential(set).round()) && same(d, twice.round());
  CHECK(same(s, sequential(set).round()));
  CHECK(same(d, twice.round()));
  REQUIRE(all_ranks(ok));
}

TEST_CASE("collc::kokkos::reproducible_dot: one rank's bad Views fail its peers at once",
          "[exact_sum][backend][kokkos]") {
  // The local dot threw on that rank before its plan call, so its peers,
  // already in the allreduce, waited for the timeout and then reported a
  // timeout that did not say why. Now the call is refused (plan_facts::refuse_call).
  const int me = world_rank(), P = world_size();
  if (P == 1) return;
  collc::plan_options o;
  o.timeout_s = 30;
  auto p = collc::kokkos::make_reproducible_allreduce<exec_space, double>(MPI_COMM_WORLD, o);
  const Kokkos::View<double*> x("x", 4), y("y", me == 0 ? 3 : 4);
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  bool timed_out = false;
  try {
    (void)collc::kokkos::reproducible_dot(p, exec_space(), x, y);
  } catch (const collc::error& e) {
    what = e.what();
    timed_out = e.code() == collc::errc::timeout;
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("rank " << me << ": '" << what << "' after " << waited << " s");
  CHECK(!what.empty());
  CHECK(!timed_out);
  CHECK(waited < 20);
}
