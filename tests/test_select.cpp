// Tests for include/collc/algo/select.hpp: every candidate is a correct
// schedule (lowered and verified for small P), commutativity and P's
// factorization are respected, the 64-byte slice rule prunes, the ranking
// follows the cost model (checked against ir::predict on the lowered
// program, computed here) and breaks near-ties by traffic across the
// hierarchy (the paper's aligned sets on its two nodes), schedules print and
// parse back, and the COLLC_ALGO / COLLC_FACTORS overrides work or fail with
// the variable's name.
#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/algo/select.hpp>
#include <collc/ir/verify.hpp>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

using namespace collc;
using namespace collc::algo;

namespace {

constexpr collective all_collectives[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                          collective::reduce, collective::bcast};

std::vector<int> radices_of(const schedule& s) { return {s.factors.begin(), s.factors.end()}; }

/// Product of the reduce-scatter radices of a recursive-exchange set.
long long rs_product(const schedule& s) {
  long long p = 1;
  for (int r : s.factors)
    if (r < 0) p *= -r;
  return p;
}

struct env_guard {
  env_guard(const char* algo, const char* factors) {
    set("COLLC_ALGO", algo);
    set("COLLC_FACTORS", factors);
  }
  ~env_guard() {
    unsetenv("COLLC_ALGO");
    unsetenv("COLLC_FACTORS");
  }
  static void set(const char* name, const char* value) {
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
};

std::string override_error(collective c, int P, bool commutative, errc* code = nullptr) {
  try {
    (void)override_from_env(c, P, commutative);
  } catch (const collc::error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace

TEST_CASE("every candidate lowers and verifies", "[select][candidates]") {
  for (int P : {2, 3, 4, 5, 6, 7, 8, 12}) {
    for (collective c : all_collectives) {
      for (bool commutative : {true, false}) {
        for (std::size_t bytes : {std::size_t{8}, std::size_t{4096}}) {
          const auto k = candidates(c, P, bytes, commutative);
          REQUIRE(!k.empty());
          for (const auto& cand : k) {
            INFO(cand.sched.to_string() << " " << to_string(c) << " P=" << P << " commutative=" << commutative);
            lower_request q;
            q.coll = c;
            q.ranks = P;
            q.count = 3 * static_cast<std::size_t>(P);
            q.root = P - 1;
            const auto prog = lower(cand.sched, q);
            CHECK((commutative || !reduces(c) || !prog.commutative_only));
            const auto v = ir::verify(prog, {.commutative = commutative});
            INFO(v.to_string());
            CHECK(static_cast<bool>(v));
          }
        }
      }
    }
  }
}

TEST_CASE("non-commutative operators get no cyclic shift; P's factorization decides", "[select][candidates]") {
  for (int P : {7, 13}) {  // prime
    const auto nc = candidates(collective::allreduce, P, 1 << 16, false);
    std::set<std::string> names;
    for (const auto& k : nc) {
      CHECK(k.sched.fam != family::cyclic_shift);
      names.insert(k.sched.to_string());
      if (k.sched.fam == family::recursive_exchange && !k.sched.fold) {
        // The only factorization of a prime: one step of radix P.
        for (int r : radices_of(k.sched)) CHECK((r == P || r == -P));
      }
    }
    CHECK(names.count(recursive_doubling(P).to_string()) == 1);  // folding is the non-commutative route
    CHECK(names.count(rabenseifner(P).to_string()) == 1);
    const auto com = candidates(collective::allreduce, P, 1 << 16, true);
    bool cyclic = false, ring = false;
    for (const auto& k : com) {
      cyclic = cyclic || (k.sched.fam == family::cyclic_shift && !k.sched.factors.empty());
      ring = ring || k.sched == schedule::ring();
    }
    CHECK(cyclic);
    CHECK(ring);
  }
  // A power of two: no folding needed.
  for (const auto& k : candidates(collective::allreduce, 8, 64, false)) CHECK(!k.sched.fold);
}

TEST_CASE("no reduce-scatter slice below a cache line", "[select][prune]") {
  // 256 bytes: at most 4 slices of 64 bytes.
  bool split = false;
  for (const auto& k : candidates(collective::allreduce, 16, 256, true))
    if (k.sched.fam == family::recursive_exchange && !k.sched.fold) {
      CHECK(rs_product(k.sched) <= 4);
      split = split || rs_product(k.sched) > 1;
    }
  CHECK(split);
  // 8 bytes: no split at all.
  for (const auto& k : candidates(collective::allreduce, 16, 8, true))
    if (k.sched.fam == family::recursive_exchange && !k.sched.fold) CHECK(rs_product(k.sched) == 1);
  // The rule is a knob.
  select_options o;
  o.min_slice_bytes = 1;
  bool wide = false;
  for (const auto& k : candidates(collective::allreduce, 16, 256, true, {}, {}, o))
    wide = wide || (k.sched.fam == family::recursive_exchange && rs_product(k.sched) == 16);
  CHECK(wide);
}

TEST_CASE("ranking follows the cost model", "[select][rank]") {
  const ir::machine_model m;
  for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 14, std::size_t{1} << 18}) {
    const auto k = candidates(collective::allreduce, 8, bytes, true);
    REQUIRE(k.size() > 10);
    // Re-costed candidates: seconds == ir::predict of the lowered program
    // (one-byte elements, cache-line granule), computed independently here.
    int refined = 0;
    for (const auto& c : k) {
      if (!c.refined) continue;
      ++refined;
      lower_request q;
      q.ranks = 8;
      q.count = bytes;
      q.granule = 64;
      CHECK(c.seconds == Approx(ir::predict(lower(c.sched, q), m, 1)).epsilon(1e-9));
    }
    CHECK(refined >= 8);
    // Refined candidates come first, best first (flat node: no tie-break by
    // topology), then the rest by the closed form.
    std::size_t i = 0;
    for (; i + 1 < k.size() && k[i + 1].refined; ++i) CHECK(k[i].seconds <= k[i + 1].seconds);
    for (++i; i + 1 < k.size(); ++i) CHECK(k[i].seconds <= k[i + 1].seconds);
    // The choice is the best of everything the model re-costed.
    const auto s = select(collective::allreduce, 8, bytes, true);
    CHECK(s == k.front().sched);
  }
  // Messages above the chunk are a pipeline of chunks: twice the bytes, twice the time.
  const auto one = candidates(collective::allreduce, 4, std::size_t{1} << 20, true);
  const auto two = candidates(collective::allreduce, 4, std::size_t{2} << 20, true);
  for (const auto& a : one)
    for (const auto& b : two)
      if (a.sched == b.sched && a.refined && b.refined) CHECK(b.seconds == Approx(2 * a.seconds).epsilon(1e-9));
}

TEST_CASE("the paper's nodes: factor sets aligned to the hierarchy", "[select][topology]") {
  const auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  const auto grace = node_topology::synthetic("pack:4 core:72 pu:1");
  for (std::size_t bytes : {std::size_t{1} << 16, std::size_t{1} << 20}) {
    // EPYC, core < quadrant < socket: reduce-scatter inside a NUMA domain (16)
    // first, then across the package's 4 domains; sockets last.
    const auto e = candidates(collective::allreduce, 128, bytes, true, {}, epyc);
    REQUIRE(!e.empty());
    const auto fe = radices_of(e.front().sched);
    INFO(e.front().sched.to_string());
    CHECK(e.front().aligned);
    REQUIRE(fe.size() >= 4);
    CHECK(fe[0] == -16);
    CHECK(fe[1] == -4);
    CHECK(fe.back() == 16);
    // Grace: the socket (72) first, then the 4 sockets; the product of the
    // phase is P (collc's rule), so {-72,4,72} or {-72,-4,4,72}.
    const auto g = candidates(collective::allreduce, 288, bytes, true, {}, grace);
    const auto fg = radices_of(g.front().sched);
    INFO(g.front().sched.to_string());
    CHECK(g.front().aligned);
    CHECK((fg == std::vector<int>{-72, 4, 72} || fg == std::vector<int>{-72, -4, 4, 72}));
  }
}

TEST_CASE("near-ties go to the schedule with the least traffic across the hierarchy", "[select][topology]") {
  const auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  select_options o;
  const auto k = candidates(collective::allreduce, 128, 1 << 20, true, {}, epyc, o);
  REQUIRE(k.front().refined);
  REQUIRE(k.front().crossing.size() == 2);  // package and NUMA boundaries
  double best = k.front().seconds;
  for (const auto& c : k)
    if (c.refined) best = std::min(best, c.seconds);
  CHECK(k.front().seconds <= best * (1 + o.tie_tolerance));
  auto total = [](const candidate& c) { return c.crossing.at(0) + c.crossing.at(1); };
  for (const auto& c : k)
    if (c.refined && c.seconds < best * (1 + o.tie_tolerance) && !c.crossing.empty())
      CHECK(total(k.front()) <= total(c));
  // Without a tolerance the model alone decides.
  o.tie_tolerance = 0;
  const auto pure = candidates(collective::allreduce, 128, 1 << 20, true, {}, epyc, o);
  for (const auto& c : pure)
    if (c.refined) CHECK(pure.front().seconds <= c.seconds);
  // Unbound ranks: no hierarchy in rank order, nothing to break ties with.
  auto unbound = epyc;
  unbound.bindings.assign(128, rank_binding{});
  CHECK(candidates(collective::allreduce, 128, 1 << 20, true, {}, unbound).front().crossing.empty());
}

TEST_CASE("several nodes: the node count joins the hierarchy", "[select][topology]") {
  const auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  std::vector<int> node_of;
  for (int r = 0; r < 256; ++r) node_of.push_back(r / 128);
  const auto k = candidates(collective::allreduce, 256, 1 << 20, true, node_of, epyc);
  REQUIRE(!k.empty());
  INFO(k.front().sched.to_string());
  CHECK(k.front().aligned);
  CHECK(k.front().crossing.size() == 3);  // node, package, NUMA
  CHECK_THROWS_AS(candidates(collective::allreduce, 256, 64, true, std::vector<int>(3, 0)), collc::error);
}

TEST_CASE("large P stays affordable and valid", "[select][scale]") {
  for (int P : {4096, 65536}) {
    const auto s = select(collective::allreduce, P, 1 << 20, true);
    INFO(s.to_string());
    CHECK_NOTHROW(check_schedule(s, collective::allreduce, P, true));
  }
  CHECK(select(collective::allreduce, 1, 64, true) == schedule::copy_in());
}

TEST_CASE("schedules print and parse back", "[select][parse]") {
  for (int P : {2, 6, 8, 12})
    for (collective c : all_collectives)
      for (const auto& s : all_schedules(c, P, true)) {
        INFO(s.to_string());
        CHECK(parse_schedule(s.to_string()) == s);
      }
  CHECK(parse_schedule(" tree ") == schedule::tree(0));
  CHECK(parse_schedule("binomial") == schedule::tree(0));
  CHECK(parse_schedule("copy_in") == schedule::copy_in());
  for (const char* bad : {"", "recexch", "recexch{2,x}", "tree:1", "tree:2x0", "tree:x", "cyclic{}", "ring+fold",
                          "fancy", "recexch2,2"}) {
    INFO(bad);
    try {
      (void)parse_schedule(bad);
      FAIL("accepted");
    } catch (const collc::error& e) {
      CHECK(e.code() == errc::parse_error);
      CHECK_THAT(e.what(), Catch::Contains("'" + std::string(bad) + "'"));
    }
  }
}

TEST_CASE("check_schedule names what does not fit", "[select][check]") {
  CHECK_THROWS_WITH(check_schedule(schedule::recursive({2, 2, 2}), collective::allreduce, 7, true),
                    Catch::Contains("(8)") && Catch::Contains("(7)"));
  try {
    check_schedule(schedule::cyclic({2, 2, 2}), collective::allreduce, 7, false);
    FAIL("accepted");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::not_commutative);
  }
  CHECK_NOTHROW(check_schedule(schedule::cyclic({2, 2, 2}), collective::allgather, 7, false));
  CHECK_THROWS_WITH(check_schedule(schedule::tree(1), collective::allreduce, 4, true), Catch::Contains("arity"));
  CHECK_THROWS_WITH(check_schedule(schedule::recursive({2, 2}, true), collective::allreduce, 9, true),
                    Catch::Contains("fold"));
  CHECK_THROWS(check_schedule(schedule::ring(), collective::bcast, 4, true));
}

TEST_CASE("overrides: COLLC_ALGO and COLLC_FACTORS", "[select][override]") {
  SECTION("unset") {
    env_guard g(nullptr, nullptr);
    CHECK(!override_from_env(collective::allreduce, 4, true));
  }
  SECTION("a factor set that fits P is recursive exchange") {
    env_guard g(nullptr, "-2,-2,2,2");
    CHECK(override_from_env(collective::allreduce, 4, true) == schedule::recursive({-2, -2, 2, 2}));
  }
  SECTION("one whose product exceeds P is a cyclic shift, for commutative operators") {
    env_guard g(nullptr, "2,2,2");
    CHECK(override_from_env(collective::allreduce, 7, true) == schedule::cyclic({2, 2, 2}));
    errc code{};
    CHECK_THAT(override_error(collective::allreduce, 7, false, &code),
               Catch::Contains("COLLC_FACTORS='2,2,2'") && Catch::Contains("commutative"));
    CHECK(code == errc::not_commutative);
  }
  SECTION("a factor set that fits neither way") {
    env_guard g(nullptr, "4,4");
    CHECK_THAT(override_error(collective::allreduce, 7, true),
               Catch::Contains("COLLC_FACTORS='4,4'") && Catch::Contains("cyclic shift"));
  }
  SECTION("a family with its factors") {
    env_guard g("recexch", "-4,4");
    CHECK(override_from_env(collective::allreduce, 4, true) == schedule::recursive({-4, 4}));
    env_guard::set("COLLC_ALGO", "cyclic");
    env_guard::set("COLLC_FACTORS", "4,2");
    CHECK(override_from_env(collective::allreduce, 7, true) == schedule::cyclic({4, 2}));
  }
  SECTION("named algorithms and whole schedules") {
    env_guard g("ring", nullptr);
    CHECK(override_from_env(collective::allreduce, 5, true) == schedule::ring());
    env_guard::set("COLLC_ALGO", "tree:3x2");
    CHECK(override_from_env(collective::allreduce, 5, false) == schedule::tree(3, 2));
    env_guard::set("COLLC_ALGO", "rabenseifner");
    CHECK(override_from_env(collective::allreduce, 6, false) == rabenseifner(6));
    env_guard::set("COLLC_ALGO", "recursive_doubling");
    CHECK(override_from_env(collective::allreduce, 8, false) == schedule::recursive({2, 2, 2}));
    env_guard::set("COLLC_ALGO", "recexch{-8,8}");
    CHECK(override_from_env(collective::allreduce, 8, false) == schedule::recursive({-8, 8}));
    env_guard::set("COLLC_ALGO", "copyin");
    CHECK(override_from_env(collective::bcast, 8, false) == schedule::copy_in());
  }
  SECTION("invalid overrides give clear errors") {
    env_guard g("bogus", nullptr);
    errc code{};
    CHECK_THAT(override_error(collective::allreduce, 4, true, &code), Catch::Contains("COLLC_ALGO='bogus'"));
    CHECK(code == errc::parse_error);
    env_guard::set("COLLC_ALGO", "ring");
    CHECK_THAT(override_error(collective::allreduce, 4, false), Catch::Contains("commutative"));
    env_guard::set("COLLC_FACTORS", "2,2");
    CHECK_THAT(override_error(collective::allreduce, 4, true), Catch::Contains("COLLC_FACTORS goes with"));
    env_guard::set("COLLC_ALGO", "recexch");
    env_guard::set("COLLC_FACTORS", nullptr);
    CHECK_THAT(override_error(collective::allreduce, 4, true), Catch::Contains("needs COLLC_FACTORS"));
    env_guard::set("COLLC_ALGO", nullptr);
    env_guard::set("COLLC_FACTORS", "2,x");
    CHECK_THAT(override_error(collective::allreduce, 4, true, &code), Catch::Contains("COLLC_FACTORS='2,x'"));
    CHECK(code == errc::parse_error);
    env_guard::set("COLLC_FACTORS", "{}");
    CHECK_THAT(override_error(collective::allreduce, 4, true), Catch::Contains("empty"));
    env_guard::set("COLLC_FACTORS", "-2,2");
    CHECK_THAT(override_error(collective::reduce_scatter, 2, true), Catch::Contains("COLLC_FACTORS='-2,2'"));
  }
}
