// collc::exact_sum<double> through MPI plans (include/collc/plan.hpp) and the
// one-call helpers (include/collc/reproducible.hpp), run at P = 1..8: the same
// global set of summands (regenerated on every rank from a seed), split over
// the ranks by a random partition (a different one per case) in a random
// local order, must give bit for bit the sequential exact sum of the whole set,
// which no rank count, schedule or partition enters: so every P and every
// schedule gives the same bits. Covered: the default plan; every schedule of
// collc::algo::all_schedules for allreduce (recursive exchange, cyclic shift,
// ring, trees, copy-in), reduce and reduce_scatter with the default operator;
// in place; pseudo-nodes (the message path); reproducible_sum / _dot with a
// plan and with the cached blocking plan. Failures are combined over ranks.
#include "support.hpp"

#include <collc/algo/presets.hpp>
#include <collc/exact_sum.hpp>
#include <collc/plan.hpp>
#include <collc/reproducible.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

using collc::collective;
using acc = collc::exact_sum<double>;
using namespace collc_test;

namespace {

/// Summand i of set `s`: huge cancelling pairs, values over 120 binades,
/// subnormals. Built from integer hashes only, so every rank (and every P) gets
/// the same bits.
double summand(std::uint64_t s, std::size_t i) {
  const std::uint64_t h = mix(s * 0x100000001b3ull + i / 2);
  const double m = static_cast<double>((h >> 11) | (std::uint64_t{1} << 52)) * 0x1p-53;  // [0.5, 1)
  const bool neg = (h & 1) != 0;
  switch (h >> 8 & 3) {
    case 0: return (i % 2 == 0) == neg ? std::ldexp(m, 950) : -std::ldexp(m, 950);  // the pair cancels exactly
    case 1: return (neg ? -1 : 1) * std::ldexp(m, static_cast<int>(h >> 16 & 127) - 64);
    case 2: return (neg ? -1 : 1) * std::numeric_limits<double>::denorm_min() * static_cast<double>(h >> 20 & 1023);
    default: return (neg ? -1 : 1) * 1e-300 * m;
  }
}

std::vector<double> summand_set(std::uint64_t s, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = summand(s, i);
  return v;
}

acc sequential(const std::vector<double>& v) {
  acc a;
  for (double x : v) a += x;
  return a;
}

/// This rank's share of `v` under a random partition drawn from `seed` (the
/// same on every rank), in an order that depends on the rank too.
std::vector<double> my_share(const std::vector<double>& v, std::uint64_t seed, int me, int P) {
  std::mt19937_64 g(seed);
  std::vector<double> mine;
  for (double x : v)
    if (static_cast<int>(g() % static_cast<std::uint64_t>(P)) == me) mine.push_back(x);
  std::mt19937_64 order(seed ^ static_cast<std::uint64_t>(me + 1) * 0x9e3779b97f4a7c15ull);
  std::shuffle(mine.begin(), mine.end(), order);
  return mine;
}

acc accumulate(const std::vector<double>& x, bool range) {
  acc a;
  if (range)
    a.add(x.data(), x.size());
  else
    for (double v : x) a += v;
  return a;
}

std::string hex(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", x);
  return b;
}

constexpr std::size_t set_size = 1500;

/// Runs one plan over `elements` output elements (set j for element j) and
/// checks each against the sequential exact sum. Returns "" or the first problem.
std::string check_plan(collc::plan<acc>& p, std::uint64_t case_seed, bool in_place) {
  const int me = world_rank(), P = world_size();
  const collective c = p.kind();
  const std::size_t outputs = c == collective::reduce_scatter ? p.count() * static_cast<std::size_t>(P) : p.count();
  std::vector<acc> send(p.send_count()), recv(p.recv_count());
  std::vector<acc> want(outputs);
  for (std::size_t j = 0; j < outputs; ++j) {
    const auto set = summand_set(j + 1, set_size);
    want[j] = sequential(set);
    send[j] = accumulate(my_share(set, case_seed * 131 + j, me, P), (case_seed + j) % 2 == 0);
  }
  if (in_place) {
    std::vector<acc> buf = send;
    buf.resize(p.in_place_count());
    p(collc::in_place, buf);
    recv.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(p.recv_count()));
  } else {
    p(send, recv);
  }
  if (c == collective::reduce && me != p.root()) return "";
  for (std::size_t k = 0; k < p.recv_count(); ++k) {
    const std::size_t j = c == collective::reduce_scatter ? static_cast<std::size_t>(me) * p.count() + k : k;
    if (std::memcmp(&recv[k], &want[j], sizeof(acc)) != 0 ||
        std::bit_cast<std::uint64_t>(recv[k].round()) != std::bit_cast<std::uint64_t>(want[j].round()))
      return p.name() + " schedule " + p.schedule_name() + ": element " + std::to_string(j) + " is " +
             hex(recv[k].round()) + ", the exact sum rounds to " + hex(want[j].round());
  }
  return "";
}

}  // namespace

TEST_CASE("exact_sum plans: every schedule gives the sequential exact sum's bits", "[exact_sum][backend][mpi]") {
  const int P = world_size();
  std::vector<std::string> failures;
  std::size_t plans = 0;
  std::uint64_t seed = 1;
  auto run = [&](collc::plan<acc>& p, bool in_place) {
    ++plans;
    if (auto f = check_plan(p, seed++, in_place); !f.empty()) failures.push_back(f);
  };
  {
    auto p = collc::make_allreduce<acc>(MPI_COMM_WORLD, 3);  // default schedule, default operator
    run(p, false);
    run(p, true);
  }
  for (const auto& s : collc::algo::all_schedules(collective::allreduce, P, true)) {
    auto p = collc::make_allreduce<acc>(MPI_COMM_WORLD, 2, s);
    run(p, (seed & 1) != 0);
  }
  for (const auto& s : collc::algo::all_schedules(collective::reduce, P, true)) {
    auto p = collc::make_reduce<acc>(MPI_COMM_WORLD, 2, P - 1, s);
    run(p, false);
  }
  for (const auto& s : collc::algo::all_schedules(collective::reduce_scatter, P, true)) {
    auto p = collc::make_reduce_scatter<acc>(MPI_COMM_WORLD, 1, s);
    run(p, false);
  }
  {
    collc::plan_options o;
    o.ranks_per_node = 2;  // pseudo-nodes of 2 ranks: accumulators travel as MPI messages
    auto p = collc::make_allreduce<acc>(MPI_COMM_WORLD, 3, o);
    run(p, false);
    auto q = collc::make_allreduce<acc>(MPI_COMM_WORLD, 2, o, collc::algo::ring());
    run(q, false);
  }
  for (const auto& f : failures) FAIL_CHECK("rank " << world_rank() << ": " << f);
  REQUIRE(all_ranks(failures.empty()));
  if (world_rank() == 0) WARN(plans << " exact_sum plans at P = " << P << ": bitwise identical to the sequential sum");
}

TEST_CASE("reproducible_sum and reproducible_dot: one call, same bits at every P", "[exact_sum][backend][mpi]") {
  const int me = world_rank(), P = world_size();
  const auto set = summand_set(77, 4000);
  const auto mine = my_share(set, 4242, me, P);
  const double want = sequential(set).round();
  const std::vector<double> ones(mine.size(), 1.0);
  std::vector<std::string> failures;
  auto plan = collc::make_reproducible_allreduce<double>(MPI_COMM_WORLD);
  const double s1 = collc::reproducible_sum(plan, mine);
  const double s2 = collc::reproducible_sum(MPI_COMM_WORLD, mine);
  const double d1 = collc::reproducible_dot(plan, mine, ones);
  for (double s : {s1, s2, d1})
    if (std::bit_cast<std::uint64_t>(s) != std::bit_cast<std::uint64_t>(want))
      failures.push_back("got " + hex(s) + ", want " + hex(want));
  // A dot whose products are not the summands themselves: 3 x, rounded as a
  // plain product is (subnormals), wherever x lives.
  acc want_dot;
  for (double x : set) want_dot += 3.0 * x;
  std::vector<double> threes(mine.size(), 3.0);
  const double d2 = collc::reproducible_dot(MPI_COMM_WORLD, threes, mine);
  if (std::bit_cast<std::uint64_t>(d2) != std::bit_cast<std::uint64_t>(want_dot.round()))
    failures.push_back("dot: got " + hex(d2) + ", want " + hex(want_dot.round()));
  // Wrong plans and sizes are errors a caller can act on.
  auto wrong = collc::make_allreduce<acc>(MPI_COMM_WORLD, 2);
  CHECK_THROWS_WITH(collc::reproducible_sum(wrong, mine), Catch::Contains("allreduce of one accumulator"));
  // A local argument error refuses the call, so the plan is unusable after it (as after any
  // failed call): a plan each.
  auto sizes = collc::make_reproducible_allreduce<double>(MPI_COMM_WORLD);
  CHECK_THROWS_WITH(collc::reproducible_dot(sizes, mine, std::vector<double>(mine.size() + 1)),
                    Catch::Contains("elements, y has"));
  // A null range of n > 0 elements is refused before any rank calls the plan (it crashed with SIGSEGV).
  auto null_data = collc::make_reproducible_allreduce<double>(MPI_COMM_WORLD);
  CHECK_THROWS_WITH(collc::reproducible_sum(null_data, std::span<const double>(static_cast<const double*>(nullptr), 3)),
                    "collc::reproducible_sum: x has 3 elements but a null data pointer");
  // Only rank 0 errs (unequal sizes): its peers, already in the allreduce, fail at once naming
  // it. They waited for the plan's timeout, then reported a timeout that did not say why; with
  // the blocking form (its cached plan, on a communicator of its own, as the refused plan stays
  // unusable) they waited the default 60 s.
  auto peers_fail_at_once = [&](const std::string& form, auto&& dot) {
    const std::vector<double> y(me == 0 ? mine.size() + 1 : mine.size(), 1.0);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      (void)dot(y);
      failures.push_back(form + ", a peer's bad sizes: no error");
    } catch (const collc::error& e) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (me == 0 && std::string(e.what()).find("elements, y has") == std::string::npos)
        failures.push_back(form + ", rank 0's own error: " + e.what());
      if (me != 0 && (e.code() == collc::errc::timeout || waited > 20))
        failures.push_back(form + ", a peer's bad sizes: " + e.what() + " after " + std::to_string(waited) + " s");
    }
  };
  if (P > 1) {
    collc::plan_options o;
    o.timeout_s = 30;
    auto one = collc::make_reproducible_allreduce<double>(MPI_COMM_WORLD, o);
    peers_fail_at_once("plan form",
                       [&](const std::vector<double>& y) { return collc::reproducible_dot(one, mine, y); });
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    peers_fail_at_once("blocking form",
                       [&](const std::vector<double>& y) { return collc::reproducible_dot(dup, mine, y); });
    MPI_Comm_free(&dup);
  }
  // The naive local-then-MPI sum is not reproducible here (the data cancels hugely).
  double local = 0, naive = 0;
  for (double x : mine) local += x;
  MPI_Allreduce(&local, &naive, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (const auto& f : failures) FAIL_CHECK("rank " << me << ": " << f);
  REQUIRE(all_ranks(failures.empty()));
  if (me == 0)
    WARN("P = " << P << ": reproducible_sum = " << hex(s1) << " (exact sum rounded: " << hex(want)
                << "); naive double sum + MPI_Allreduce = " << hex(naive));
}
