// Tests for include/collc/tune.hpp on real communicators: measured tuning
// agrees across ranks and picks the lowest median it measured, tuned plans
// compute the right result (a non-commutative operator too), wisdom is
// written, hit (also for other counts of the same range), ignored when it is
// corrupt or from another machine, overrides win, and the layout of a
// communicator is what the plan sees.
//
// Hidden test "[.bar]": the measured bar of docs/selection.md (default choice
// against exhaustive measurement over 8 B .. 16 MiB, and setup time with and
// without a wisdom hit), run by hand:
//   mpiexec -n 8 build/tests/mpi_test_tune "[.bar]"
#include "support.hpp"

#include <collc/tune.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using collc::collective;
using namespace collc_test;
namespace fs = std::filesystem;

namespace {

/// The same string on every rank?
bool same_everywhere(const std::string& s) {
  std::uint64_t h = collc::detail::stable_hash64(s), lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

/// A fresh wisdom path chosen by rank 0, removed (with its lock) at the end.
struct shared_path {
  fs::path path;
  shared_path() {
    std::string p;
    if (world_rank() == 0) {
      std::random_device rd;
      p = (fs::temp_directory_path() / ("collc_tune_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd())))
              .string();
    }
    path = collc::mpi::bcast_string(MPI_COMM_WORLD, p);
  }
  ~shared_path() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
      std::error_code ec;
      fs::remove(path, ec);
      fs::remove_all(fs::path(path.string() + ".lock"), ec);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
};

collc::tune_options quick(const fs::path* wisdom = nullptr) {
  collc::tune_options o;
  o.budget_s = 0.08;
  o.top = 3;
  o.min_rounds = 3;
  o.use_wisdom = wisdom != nullptr;
  if (wisdom) o.wisdom_file = *wisdom;
  return o;
}

struct env_var {
  const char* name;
  env_var(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~env_var() { unsetenv(name); }
};

}  // namespace

TEST_CASE("tuning measures the best candidates and every rank agrees", "[tune]") {
  const int P = world_size();
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{40000}}) {
    const auto r = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, count, quick());
    INFO("count " << count << " chose " << r.chosen.to_string());
    CHECK(same_everywhere(r.chosen.to_string()));
    CHECK(r.setup_s > 0);
    if (P == 1) {
      CHECK(r.from == collc::tune_result::origin::single_rank);
      continue;
    }
    REQUIRE(r.from == collc::tune_result::origin::measured);
    REQUIRE(!r.measured.empty());
    CHECK(r.measured.size() <= 4);  // the plan's default and the selector's top 3
    // The plan's own default is measured first, so tuning cannot do worse than not tuning.
    CHECK(r.measured.front().sched == collc::make_allreduce<double>(MPI_COMM_WORLD, count).schedule());
    double best = r.measured.front().median_s;
    bool chosen_measured = false;
    for (const auto& m : r.measured) {
      CHECK(m.samples.size() >= 3);
      CHECK(m.median_s > 0);
      best = std::min(best, m.median_s);
      chosen_measured = chosen_measured || m.sched == r.chosen;
      std::string all;
      for (double s : m.samples) all += std::to_string(s) + ",";
      CHECK(same_everywhere(all));  // batch times are maxima over ranks
    }
    CHECK(chosen_measured);
    for (const auto& m : r.measured)
      if (m.sched == r.chosen) CHECK(m.median_s == best);
    // Then the selector's own best (unless that is the default).
    const auto layout = collc::describe_comm(MPI_COMM_WORLD, false);
    const auto ranked =
        collc::algo::candidates(collective::allreduce, P, count * sizeof(double), true, layout.node_of, layout.node);
    const auto& second = r.measured.size() > 1 ? r.measured[1].sched : r.measured[0].sched;
    CHECK((second == ranked.front().sched || r.measured.front().sched == ranked.front().sched));
  }
}

TEST_CASE("tuned plans compute the right result", "[tune]") {
  const int P = world_size(), me = world_rank();
  const std::size_t n = 777;
  auto p = collc::make_tuned<std::int64_t>(collective::allreduce, MPI_COMM_WORLD, n, quick());
  const auto in = send_data<std::int64_t>(collective::allreduce, me, P, n, 3);
  std::vector<std::int64_t> out(n);
  p(in.data(), out.data());
  CHECK(mismatches(out, expected<std::int64_t, collc::plus>(collective::allreduce, me, P, n, 0, 3)) == 0);

  // A non-commutative operator: no cyclic shift is measured, rank order holds.
  const auto r = collc::tune<mat2, mat_mul>(collective::allreduce, MPI_COMM_WORLD, 100, quick());
  for (const auto& m : r.measured) CHECK(m.sched.fam != collc::algo::family::cyclic_shift);
  auto q = collc::make_tuned<mat2, mat_mul>(collective::allreduce, MPI_COMM_WORLD, 100, quick());
  const auto a = send_data<mat2>(collective::allreduce, me, P, 100, 5);
  std::vector<mat2> b(100);
  q(a.data(), b.data());
  CHECK(mismatches(b, expected<mat2, mat_mul>(collective::allreduce, me, P, 100, 0, 5)) == 0);
}

TEST_CASE("every collective can be tuned", "[tune]") {
  const int P = world_size(), me = world_rank();
  for (collective c : {collective::reduce_scatter, collective::allgather, collective::reduce, collective::bcast}) {
    INFO(collc::to_string(c));
    const int root = P - 1;
    auto p = collc::make_tuned<std::int64_t>(c, MPI_COMM_WORLD, 33, quick(), collc::plus{}, root);
    auto in = send_data<std::int64_t>(c, me, P, 33, 1);
    const auto want = expected<std::int64_t, collc::plus>(c, me, P, 33, root, 1);
    std::vector<std::int64_t> out(c == collective::allgather ? 33 * static_cast<std::size_t>(P) : 33);
    if (c == collective::bcast) {
      out = me == root ? in : std::vector<std::int64_t>(33, -1);
      p(std::span<std::int64_t>(out));
      CHECK(out == want);
    } else {
      p(in.data(), out.data());
      if (c != collective::reduce || me == root) CHECK(mismatches(out, want) == 0);
    }
  }
}

TEST_CASE("a collective value outside the enumeration is refused before any collective", "[tune]") {
  CHECK_THROWS_WITH(collc::tune<double>(static_cast<collective>(7), MPI_COMM_WORLD, 10, quick()),
                    "collc::tune: collective value 7 is none of allreduce, reduce_scatter, allgather, reduce, bcast");
}

TEST_CASE("wisdom: written after measuring, hit afterwards", "[tune][wisdom]") {
  const int P = world_size();
  if (P == 1) return;
  shared_path w;
  const auto first = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 5000, quick(&w.path));
  REQUIRE(first.from == collc::tune_result::origin::measured);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::vector<std::string> warnings;
    const auto loaded = collc::wisdom::load(w.path, {}, &warnings);
    CHECK(warnings.empty());
    REQUIRE(loaded.entries().size() == 1);
    CHECK(loaded.entries()[0].schedule == first.chosen.to_string());
    CHECK(loaded.entries()[0].source == "tuned");
    CHECK(loaded.entries()[0].key.ranks == P);
  }
  const auto second = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 5000, quick(&w.path));
  CHECK(second.from == collc::tune_result::origin::wisdom);
  CHECK(second.chosen == first.chosen);
  CHECK(second.setup_s < first.setup_s);
  // Same power-of-two byte range (5000 * 8 = 40000 in [32768, 65536)): a hit.
  CHECK(collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 6000, quick(&w.path)).from ==
        collc::tune_result::origin::wisdom);
  // Another range, element type or collective: measured.
  CHECK(collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 9000, quick(&w.path)).from ==
        collc::tune_result::origin::measured);
  CHECK(collc::tune<float>(collective::allreduce, MPI_COMM_WORLD, 5000, quick(&w.path)).from ==
        collc::tune_result::origin::measured);
  // COLLC_WISDOM names the file when the options do not.
  {
    env_var e("COLLC_WISDOM", w.path.c_str());
    auto o = quick();
    o.use_wisdom = true;
    CHECK(collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 5000, o).from ==
          collc::tune_result::origin::wisdom);
  }
}

TEST_CASE("wisdom: corrupt files and other machines' entries are not used", "[tune][wisdom]") {
  const int P = world_size();
  if (P == 1) return;
  shared_path w;
  SECTION("corrupt: measured, and the file is rewritten whole") {
    if (world_rank() == 0) std::ofstream(w.path) << "collc-wisdom 1\nentry coll=allreduce elem=8 ...\n";
    MPI_Barrier(MPI_COMM_WORLD);
    const auto r = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 100, quick(&w.path));
    CHECK(r.from == collc::tune_result::origin::measured);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
      std::vector<std::string> warnings;
      CHECK(collc::wisdom::load(w.path, {}, &warnings).entries().size() == 1);
      CHECK(warnings.empty());
    }
  }
  SECTION("another machine's entry for the same call") {
    const auto layout = collc::describe_comm(MPI_COMM_WORLD, false);
    auto key = collc::wisdom_key_for<double, collc::plus>(collective::allreduce, layout);
    key.fingerprint = "not-this-machine";
    if (world_rank() == 0)
      collc::wisdom::update(w.path, {collc::wisdom_entry{key, 1, 1000, "tree:3", 1e-6, "tuned", {}}});
    MPI_Barrier(MPI_COMM_WORLD);
    const auto r = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 100, quick(&w.path));
    CHECK(r.from == collc::tune_result::origin::measured);
    // The same entry for this machine is used.
    key.fingerprint = layout.fingerprint;
    if (world_rank() == 0)
      collc::wisdom::update(w.path, {collc::wisdom_entry{key, 1, 1000, "tree:3", 1e-6, "tuned", {}}});
    MPI_Barrier(MPI_COMM_WORLD);
    const auto s = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 100, quick(&w.path));
    CHECK(s.from == collc::tune_result::origin::wisdom);
    CHECK(s.chosen == collc::algo::schedule::tree(3));
  }
}

TEST_CASE("overrides win over tuning; bad ones fail on every rank", "[tune][override]") {
  const int P = world_size();
  {
    env_var e("COLLC_ALGO", "tree:2");
    const auto r = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 100, quick());
    CHECK(r.from == collc::tune_result::origin::override_env);
    CHECK(r.chosen == collc::algo::schedule::tree(2));
    CHECK(r.measured.empty());
  }
  {
    env_var e("COLLC_FACTORS", P == 1 ? "1" : "3,3,3,3,3,3,3,3,3");
    bool threw = false;
    try {
      (void)collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 100, quick());
    } catch (const collc::error& x) {
      threw = true;
      CHECK_THAT(x.what(), Catch::Contains("COLLC_FACTORS"));
    }
    CHECK(all_ranks(threw));
  }
}

TEST_CASE("extra candidates are measured too", "[tune]") {
  if (world_size() == 1) return;
  auto o = quick();
  o.top = 1;
  o.extra = {collc::algo::schedule::ring(), collc::algo::schedule::tree(0),
             collc::algo::schedule::recursive({7, 7, 7})};  // the last fits no P here: skipped
  const auto r = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, 64, o);
  REQUIRE(r.measured.size() >= 2);
  bool ring = false;
  for (const auto& m : r.measured) {
    ring = ring || m.sched == collc::algo::schedule::ring();
    CHECK(m.sched != collc::algo::schedule::recursive({7, 7, 7}));
  }
  CHECK(ring);
}

TEST_CASE("describe_comm reports the plan's layout", "[tune][layout]") {
  const int P = world_size();
  const auto l = collc::describe_comm(MPI_COMM_WORLD, false);
  CHECK(l.size == P);
  CHECK(l.nodes * l.ranks_per_node == P);
  CHECK(l.fingerprint.size() == 16);
  CHECK(same_everywhere(l.fingerprint));
  collc::plan_options o;
  o.ranks_per_node = 2;
  const auto pseudo = collc::describe_comm(MPI_COMM_WORLD, true, o);
  CHECK(pseudo.nodes == (P + 1) / 2);
  if (P % 2 == 0) {
    CHECK(pseudo.ranks_per_node == 2);
  } else {
    CHECK(pseudo.ranks_per_node == (P == 1 ? 1 : 0));
  }
  if (P > 2) CHECK(static_cast<int>(pseudo.node_of.size()) == P);
}

// --- the measured bar (hidden; run by hand, see the file comment) ---------------

TEST_CASE("measured bar: default choice against exhaustive measurement", "[.bar]") {
  // Per size: (1) every candidate the selector generates is measured
  // (alternating rounds, medians) to find the best; (2) the default and that
  // best are measured again, alone, in alternation, and the ratio is the
  // median of the per-round ratios. Phase 2 is an independent sample: the
  // minimum of many noisy medians (phase 1) is biased low.
  const int P = world_size(), me = world_rank();
  const auto layout = collc::describe_comm(MPI_COMM_WORLD, false);
  double budget = 3.0;
  if (const char* b = std::getenv("COLLC_BAR_BUDGET")) budget = std::atof(b);
  if (me == 0) {
    std::printf("\n### P = %d (%s)\n\n", P, layout.node.describe().c_str());
    std::printf("| bytes | default | best of exhaustive | candidates | default | best | default / best |\n");
    std::printf("|---:|---|---|---:|---:|---:|---:|\n");
  }
  double worst = 0;
  std::vector<std::size_t> sizes;
  for (std::size_t b = 8; b < (std::size_t{16} << 20); b *= 4) sizes.push_back(b);
  sizes.push_back(std::size_t{16} << 20);
  for (std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(double);
    // The default a plan gets (the measured rule on one node, the selector across nodes).
    const auto chosen = collc::make_allreduce<double>(MPI_COMM_WORLD, count).schedule();
    collc::tune_options o;
    o.use_wisdom = false;
    o.honour_overrides = false;
    o.top = 0;  // the default and every candidate the selector generates
    o.budget_s = budget;
    o.min_rounds = 5;
    o.max_rounds = 41;
    const auto all = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, count, o);
    const auto best = std::min_element(all.measured.begin(), all.measured.end(), [](const auto& a, const auto& b) {
                        return a.median_s < b.median_s;
                      })->sched;
    double ratio = 1, def = 0, bst = 0;
    if (!(best == chosen)) {
      o.selector = false;  // the default, then the best
      o.extra = {best};
      o.min_rounds = 9;
      o.max_rounds = 61;
      o.budget_s = budget / 2;
      const auto pair = collc::tune<double>(collective::allreduce, MPI_COMM_WORLD, count, o);
      REQUIRE(pair.measured.size() == 2);
      REQUIRE(pair.measured[0].sched == chosen);
      std::vector<double> ratios;
      for (std::size_t i = 0; i < pair.measured[0].samples.size(); ++i)
        ratios.push_back(pair.measured[0].samples[i] / pair.measured[1].samples[i]);
      ratio = collc::mpi::median(ratios);
      def = pair.measured[0].median_s;
      bst = pair.measured[1].median_s;
    } else {
      def = bst = all.measured.front().median_s;
    }
    worst = std::max(worst, ratio);
    if (me == 0)
      std::printf("| %zu | %s | %s | %zu | %.2f us | %.2f us | %.3f |\n", bytes, chosen.to_string().c_str(),
                  best.to_string().c_str(), all.measured.size(), def * 1e6, bst * 1e6, ratio);
    std::fflush(stdout);
  }
  if (me == 0) std::printf("\nworst default / best: %.3f\n", worst);

  // Setup: tuning without wisdom, with a wisdom hit, and the model's default.
  shared_path w;
  const std::size_t count = 1 << 16;
  collc::tune_options o;
  o.wisdom_file = w.path;
  o.budget_s = 0.3;
  using clock = std::chrono::steady_clock;
  auto timed = [&](auto&& make) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clock::now();
    auto p = make();
    double t = std::chrono::duration<double>(clock::now() - t0).count(), m = 0;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
  };
  const double miss = timed([&] { return collc::make_tuned<double>(collective::allreduce, MPI_COMM_WORLD, count, o); });
  const double hit = timed([&] { return collc::make_tuned<double>(collective::allreduce, MPI_COMM_WORLD, count, o); });
  const double model = timed([&] {
    const auto l = collc::describe_comm(MPI_COMM_WORLD, false);
    return collc::make_allreduce<double>(
        MPI_COMM_WORLD, count, collc::algo::select(collective::allreduce, P, count * 8, true, l.node_of, l.node));
  });
  if (me == 0)
    std::printf(
        "\nsetup of a 512 KiB allreduce plan: tuned without wisdom %.1f ms, with a wisdom hit %.1f ms "
        "(%.0fx faster), model default %.1f ms\n",
        miss * 1e3, hit * 1e3, miss / hit, model * 1e3);
  CHECK(miss / hit >= 10);
}

TEST_CASE("wisdom: a file that cannot be written is a warning with the whole reason", "[tune][wisdom]") {
  // wisdom_store reports errors as warnings (wisdom is a cache). It once cut
  // the first 7 characters off each one (a "collc: " prefix error::what() no
  // longer has), so the warning said "ot write ..." without the path's start.
  const fs::path file = fs::path("/nonexistent-collc-dir") / std::to_string(::getpid()) / "wisdom.txt";
  collc::wisdom_entry e;
  e.key.ranks = world_size();
  e.key.ranks_per_node = world_size();  // one node of P ranks: a valid entry, so the error is the file's
  e.min_count = 1;
  e.max_count = 10;
  e.schedule = "copyin";
  e.source = "test";
  std::string reason;
  try {
    collc::wisdom::update(file, {e});
  } catch (const collc::error& x) {
    reason = x.what();
  }
  REQUIRE_FALSE(reason.empty());
  std::string printed;
  if (world_rank() == 0) {
    // Rank 0 prints; catch its stderr in a file for the call.
    const std::string log = (fs::temp_directory_path() / ("collc_warn_" + std::to_string(::getpid()))).string();
    std::fflush(stderr);
    const int saved = ::dup(2);
    FILE* f = std::fopen(log.c_str(), "w");
    REQUIRE(f != nullptr);
    ::dup2(::fileno(f), 2);
    collc::mpi::wisdom_store(MPI_COMM_WORLD, file, e);
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::fclose(f);
    std::ifstream in(log);
    printed.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    fs::remove(log);
    // The reason names a temporary file with a random suffix: compare up to it.
    const std::string stem = reason.substr(0, reason.find(".tmp.") + 5);
    INFO("printed: " << printed << "reason: " << reason);
    CHECK(stem.find(file.string()) != std::string::npos);
    CHECK(printed.find("collc: warning: " + stem) != std::string::npos);
  } else {
    collc::mpi::wisdom_store(MPI_COMM_WORLD, file, e);
  }
}
