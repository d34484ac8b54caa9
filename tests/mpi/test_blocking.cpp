// Tests for include/collc/blocking.hpp: blocking collectives with lazily
// built, cached plans. Results against the rank-order reference for many
// counts (CP2K-like: sizes vary, each repeats), in place, several types and
// operators (a non-commutative one), every collective; one plan per key;
// caches die with their communicator; the schedule comes from an override,
// the wisdom file, measured tuning (COLLC_TUNE=1) or the selector.
#include "support.hpp"

#include <collc/blocking.hpp>

#include <unistd.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

using collc::collective;
using namespace collc_test;
namespace fs = std::filesystem;

namespace {

struct env_var {
  const char* name;
  env_var(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~env_var() { unsetenv(name); }
};

fs::path shared_temp_path() {
  std::string p;
  if (world_rank() == 0) {
    std::random_device rd;
    p = (fs::temp_directory_path() / ("collc_blocking_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd())))
            .string();
  }
  return collc::mpi::bcast_string(MPI_COMM_WORLD, p);
}

void remove_on_rank0(const fs::path& p) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::error_code ec;
    fs::remove(p, ec);
    fs::remove_all(fs::path(p.string() + ".lock"), ec);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

bool contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("allreduce over varying counts, each repeated, one plan per count", "[blocking]") {
  const int P = world_size(), me = world_rank();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const std::vector<std::size_t> counts{0, 1, 7, static_cast<std::size_t>(P), 1000, 3, 1000, (1u << 16) + 3, 7, 0};
  int it = 0;
  for (std::size_t n : counts) {
    ++it;
    const auto in = send_data<std::int64_t>(collective::allreduce, me, P, n, it);
    const auto want = expected<std::int64_t, collc::plus>(collective::allreduce, me, P, n, 0, it);
    std::vector<std::int64_t> out(n, -1);
    collc::allreduce(comm, in.data(), out.data(), n);
    CHECK(all_ranks(mismatches(out, want) == 0));
    std::vector<std::int64_t> buf = in;
    collc::allreduce(comm, collc::in_place, buf.data(), n);
    CHECK(all_ranks(mismatches(buf, want) == 0));
  }
  // Distinct counts: 0, 1, 7, P, 1000, 3, 65539 (P may equal 1, 3 or 7).
  std::set<std::size_t> distinct(counts.begin(), counts.end());
  const auto plans = collc::cached_plans(comm);
  CHECK(plans.size() == distinct.size());
  for (const auto& p : plans) CHECK_THAT(p, Catch::Contains("allreduce") && Catch::Contains("schedule="));
  MPI_Comm_free(&comm);
}

TEST_CASE("types and operators get plans of their own", "[blocking]") {
  const int P = world_size(), me = world_rank();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  for (int rep = 0; rep < 3; ++rep) {
    const auto d = send_data<double>(collective::allreduce, me, P, 100, rep);
    std::vector<double> dout(100);
    collc::allreduce(comm, d.data(), dout.data(), 100);
    CHECK(mismatches(dout, expected<double, collc::plus>(collective::allreduce, me, P, 100, 0, rep)) == 0);
    CHECK(identical_everywhere(dout, comm));

    const auto i = send_data<std::int64_t>(collective::allreduce, me, P, 100, rep);
    std::vector<std::int64_t> iout(100);
    collc::allreduce(comm, i.data(), iout.data(), 100, collc::max{});
    CHECK(mismatches(iout, expected<std::int64_t, collc::max>(collective::allreduce, me, P, 100, 0, rep)) == 0);

    const auto m = send_data<mat2>(collective::allreduce, me, P, 100, rep);
    std::vector<mat2> mout(100);
    collc::allreduce(comm, m.data(), mout.data(), 100, mat_mul{});
    CHECK(mismatches(mout, expected<mat2, mat_mul>(collective::allreduce, me, P, 100, 0, rep)) == 0);
  }
  const auto plans = collc::cached_plans(comm);
  CHECK(plans.size() == 3);
  if (P > 1 && plans.size() == 3) CHECK_THAT(plans[2], !Catch::Contains("cyclic") && !Catch::Contains("ring"));
  MPI_Comm_free(&comm);
}

TEST_CASE("every blocking collective", "[blocking]") {
  const int P = world_size(), me = world_rank();
  const int root = P - 1;
  for (std::size_t n : {std::size_t{1}, std::size_t{50}, std::size_t{3000}}) {
    for (int it = 0; it < 2; ++it) {
      auto rs_in = send_data<std::int64_t>(collective::reduce_scatter, me, P, n, it);
      std::vector<std::int64_t> rs_out(n);
      collc::reduce_scatter_block(MPI_COMM_WORLD, rs_in.data(), rs_out.data(), n);
      CHECK(mismatches(rs_out, expected<std::int64_t, collc::plus>(collective::reduce_scatter, me, P, n, 0, it)) == 0);

      auto ag_in = send_data<std::int64_t>(collective::allgather, me, P, n, it);
      std::vector<std::int64_t> ag_out(n * static_cast<std::size_t>(P));
      collc::allgather(MPI_COMM_WORLD, ag_in.data(), ag_out.data(), n);
      CHECK(mismatches(ag_out, expected<std::int64_t, collc::plus>(collective::allgather, me, P, n, 0, it)) == 0);

      auto r_in = send_data<std::int64_t>(collective::reduce, me, P, n, it);
      std::vector<std::int64_t> r_out(me == root ? n : 0);
      collc::reduce(MPI_COMM_WORLD, r_in.data(), me == root ? r_out.data() : nullptr, n, root);
      if (me == root)
        CHECK(mismatches(r_out, expected<std::int64_t, collc::plus>(collective::reduce, me, P, n, root, it)) == 0);

      auto b = me == 0 ? send_data<std::int64_t>(collective::bcast, 0, P, n, it) : std::vector<std::int64_t>(n, -7);
      collc::bcast(MPI_COMM_WORLD, b.data(), n, 0);
      CHECK(b == expected<std::int64_t, collc::plus>(collective::bcast, me, P, n, 0, it));
    }
  }
  collc::release_cached_plans(MPI_COMM_WORLD);
  CHECK(collc::cached_plans(MPI_COMM_WORLD).empty());
}

namespace {
/// A type without + (collc::plus does not reduce it): bcast and allgather need none.
struct no_plus {
  std::int32_t a;
  std::uint16_t b, c;
  friend bool operator==(const no_plus&, const no_plus&) = default;
};
}  // namespace

// collc::bcast and collc::allgather of a type without + did not compile:
// the blocking plan's factory (mpi::make_for) instantiated make_allreduce<T,
// plus> and its static_assert (found by tests/mpi/result_sweep.cpp).
TEST_CASE("bcast and allgather of a type without + (any trivially copyable T)", "[blocking]") {
  const int me = world_rank(), P = world_size();
  const std::size_t n = 5;
  std::vector<no_plus> buf(n), mine(n), all(n * static_cast<std::size_t>(P));
  for (int it = 0; it < 3; ++it) {
    for (std::size_t i = 0; i < n; ++i) {
      buf[i] = me == 0 ? no_plus{it * 100 + static_cast<std::int32_t>(i), 7, 9} : no_plus{-1, 0, 0};
      mine[i] = {me * 1000 + it * 10 + static_cast<std::int32_t>(i), static_cast<std::uint16_t>(me), 3};
    }
    collc::bcast(MPI_COMM_WORLD, buf.data(), n, 0);
    collc::allgather(MPI_COMM_WORLD, mine.data(), all.data(), n);
    bool ok = true;
    for (std::size_t i = 0; i < n; ++i) ok = ok && buf[i] == no_plus{it * 100 + static_cast<std::int32_t>(i), 7, 9};
    for (int r = 0; r < P; ++r)
      for (std::size_t i = 0; i < n; ++i)
        ok = ok && all[static_cast<std::size_t>(r) * n + i] ==
                       no_plus{r * 1000 + it * 10 + static_cast<std::int32_t>(i), static_cast<std::uint16_t>(r), 3};
    CHECK(all_ranks(ok));
  }
}

TEST_CASE("caches die with their communicator", "[blocking][comms]") {
  const int P = world_size(), me = world_rank();
  for (int round = 0; round < 4; ++round) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    CHECK(collc::cached_plans(comm).empty());  // a new communicator (maybe the same handle) starts empty
    const auto in = send_data<std::int64_t>(collective::allreduce, me, P, 64, round);
    std::vector<std::int64_t> out(64);
    collc::allreduce(comm, in.data(), out.data(), 64);
    collc::allreduce(comm, in.data(), out.data(), 64);
    CHECK(mismatches(out, expected<std::int64_t, collc::plus>(collective::allreduce, me, P, 64, 0, round)) == 0);
    CHECK(collc::cached_plans(comm).size() == 1);
    MPI_Comm_free(&comm);  // frees the cached plan inside MPI_Comm_free
  }
  // A split communicator: each half has its own plans.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
  int hp = 1, hr = 0;
  MPI_Comm_size(half, &hp);
  MPI_Comm_rank(half, &hr);
  const auto in = send_data<std::int64_t>(collective::allreduce, hr, hp, 10, 9);
  std::vector<std::int64_t> out(10);
  collc::allreduce(half, in.data(), out.data(), 10);
  CHECK(mismatches(out, expected<std::int64_t, collc::plus>(collective::allreduce, hr, hp, 10, 0, 9)) == 0);
  MPI_Comm_free(&half);
}

TEST_CASE("where a cached plan's schedule comes from", "[blocking][select]") {
  const int P = world_size(), me = world_rank();
  if (P == 1) return;
  const auto in = send_data<std::int64_t>(collective::allreduce, me, P, 200, 0);
  const auto want = expected<std::int64_t, collc::plus>(collective::allreduce, me, P, 200, 0, 0);
  std::vector<std::int64_t> out(200);
  SECTION("the one default rule, the schedule make_allreduce picks for the same call") {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    collc::allreduce(comm, in.data(), out.data(), 200);
    const auto p = collc::make_allreduce<std::int64_t>(comm, 200);
    CHECK(contains(collc::cached_plans(comm), "schedule=" + p.schedule_name() + " (default)"));
    MPI_Comm_free(&comm);
  }
  SECTION("an override") {
    env_var e("COLLC_ALGO", "ring");
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    collc::allreduce(comm, in.data(), out.data(), 200);
    CHECK(mismatches(out, want) == 0);
    CHECK(contains(collc::cached_plans(comm), "schedule=ring (override)"));
    MPI_Comm_free(&comm);
  }
  SECTION("the wisdom file, then measured tuning that writes it") {
    const fs::path w = shared_temp_path();
    env_var e("COLLC_WISDOM", w.c_str());
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    const auto l = collc::describe_comm(comm, false);
    if (me == 0)
      collc::wisdom::update(
          w, {collc::wisdom_entry{collc::wisdom_key_for<std::int64_t, collc::plus>(collective::allreduce, l),
                                  128,
                                  255,
                                  "tree:binomial",
                                  1e-6,
                                  "tuned",
                                  {}}});
    MPI_Barrier(MPI_COMM_WORLD);
    collc::allreduce(comm, in.data(), out.data(), 200);
    CHECK(mismatches(out, want) == 0);
    CHECK(contains(collc::cached_plans(comm), "schedule=tree:binomial (wisdom)"));
    {
      env_var t("COLLC_TUNE", "1");
      std::vector<std::int64_t> big_in(5000, me + 1), big_out(5000);
      collc::allreduce(comm, big_in.data(), big_out.data(), 5000);
      CHECK(big_out == std::vector<std::int64_t>(5000, static_cast<std::int64_t>(P) * (P + 1) / 2));
      CHECK((contains(collc::cached_plans(comm), "count=5000") && contains(collc::cached_plans(comm), "(tuned)")));
      MPI_Comm again;
      MPI_Comm_dup(MPI_COMM_WORLD, &again);
      collc::allreduce(again, big_in.data(), big_out.data(), 5000);
      CHECK(contains(collc::cached_plans(again), "(wisdom)"));
      MPI_Comm_free(&again);
    }
    {
      // A boolean like every collc switch: "no" does not tune (it did), and
      // a word that is none is an error naming it.
      env_var t("COLLC_TUNE", "no");
      std::vector<std::int64_t> in2(3000, me + 1), out2(3000);
      collc::allreduce(comm, in2.data(), out2.data(), 3000);
      int found = 0;
      for (const std::string& line : collc::cached_plans(comm))
        if (contains(line, "count=3000")) {
          ++found;
          INFO(line);
          CHECK(!contains(line, "(tuned)"));
        }
      CHECK(found == 1);
    }
    {
      env_var t("COLLC_TUNE", "maybe");
      std::vector<std::int64_t> in3(3001, 1), out3(3001);
      const auto e = error_of([&] { collc::allreduce(comm, in3.data(), out3.data(), 3001); });
      REQUIRE(e);
      CHECK(e->first == collc::errc::invalid_argument);
      CHECK(contains(e->second, "COLLC_TUNE='maybe' is not a boolean"));
    }
    MPI_Comm_free(&comm);
    remove_on_rank0(w);
  }
}
