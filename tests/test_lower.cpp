// Tests for include/collc/algo/ (lower.hpp, presets.hpp and the families):
// every schedule collc can lower is proved correct by the verifier, for every
// collective, small P exhaustively and larger P by seeded sampling; bad
// schedules give errors that name the bad value; lowering runs at compile time.
#include <catch2/catch.hpp>
#include <collc/algo/cost.hpp>
#include <collc/algo/presets.hpp>
#include <collc/ir/verify.hpp>

#include <random>
#include <string>

using namespace collc;

namespace {

constexpr collective all_collectives[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                          collective::reduce, collective::bcast};

std::vector<int> pseudo_nodes(int P, int per_node) {
  std::vector<int> n;
  if (per_node > 0)
    for (int r = 0; r < P; ++r) n.push_back(r / per_node);
  return n;
}

// Lowers and verifies; returns "" or a description of the failure.
std::string check(const algo::schedule& s, collective c, int P, std::size_t count, bool commutative, int per_node,
                  int root) {
  const auto prog = algo::lower(s, {.coll = c,
                                    .ranks = P,
                                    .count = count,
                                    .root = root,
                                    .granule = 1,
                                    .block_stride = 0,
                                    .node_of = pseudo_nodes(P, per_node)});
  auto v = ir::verify(prog, {.commutative = commutative, .executions = 2, .in_place = false});
  if (v && c == collective::allreduce)
    v = ir::verify(prog, {.commutative = commutative, .executions = 2, .in_place = true});
  if (v) return "";
  return s.to_string() + " " + std::string(to_string(c)) + " P=" + std::to_string(P) +
         " count=" + std::to_string(count) + " per_node=" + std::to_string(per_node) +
         (commutative ? " commutative" : "") + ": " + v.to_string();
}

constexpr std::size_t instruction_count(const ir::program& p) {
  std::size_t n = 0;
  for (const auto& rank : p.code) n += rank.size();
  return n;
}

}  // namespace

TEST_CASE("every schedule of every collective verifies for P <= 16", "[algo][lower][verify]") {
  std::size_t checked = 0;
  for (int P = 1; P <= 16; ++P)
    for (auto c : all_collectives)
      for (bool commutative : {false, true})
        for (const auto& s : algo::all_schedules(c, P, commutative)) {
          // Counts: empty, one element, fewer than P, not divisible by P, several per rank.
          for (std::size_t count :
               {std::size_t{0}, std::size_t{1}, std::size_t(P - 1), std::size_t(P + 3), std::size_t(3 * P)}) {
            const auto failure = check(s, c, P, count, commutative, 0, P - 1);
            INFO(failure);
            CHECK(failure.empty());
            ++checked;
          }
        }
  CHECK(checked > 5000);
}

TEST_CASE("schedules spanning pseudo-nodes verify (messages between nodes)", "[algo][lower][verify][nodes]") {
  for (int P : {2, 3, 4, 5, 6, 7, 8, 9, 12})
    for (int per_node : {1, 2, 3})
      for (auto c : all_collectives)
        for (bool commutative : {false, true})
          for (const auto& s : algo::all_schedules(c, P, commutative)) {
            const auto failure = check(s, c, P, std::size_t(P + 3), commutative, per_node, P / 2);
            INFO(failure);
            CHECK(failure.empty());
          }
}

TEST_CASE("a seeded random sample of schedules verifies up to P = 64", "[algo][lower][verify]") {
  std::mt19937 rng(20261202);
  for (int trial = 0; trial < 120; ++trial) {
    const int P = std::uniform_int_distribution<int>(17, 64)(rng);
    const auto c = all_collectives[std::uniform_int_distribution<int>(0, 4)(rng)];
    const bool commutative = rng() % 2 == 0;
    const auto schedules = algo::all_schedules(c, P, commutative);
    const auto& s = schedules[std::uniform_int_distribution<std::size_t>(0, schedules.size() - 1)(rng)];
    const std::size_t count = std::uniform_int_distribution<std::size_t>(0, 3 * static_cast<std::size_t>(P))(rng);
    const int per_node = std::array{0, 0, 4, 8}[rng() % 4];
    const auto failure =
        check(s, c, P, count, commutative, per_node, static_cast<int>(rng() % static_cast<unsigned>(P)));
    INFO(failure);
    CHECK(failure.empty());
  }
}

TEST_CASE("the paper's Grace-Hopper set on 288 ranks verifies", "[algo][lower][verify]") {
  const auto prog = algo::lower(algo::schedule::recursive(factor_set{-9, -8, -4, 4, 8, 9}),
                                {.coll = collective::allreduce, .ranks = 288, .count = 288 * 2});
  CHECK(ir::verify(prog, {.commutative = false}).to_string() == "ok");
}

TEST_CASE("lowering a static factor set runs at compile time", "[algo][lower][constexpr]") {
  constexpr algo::lower_request request{.coll = collective::allreduce, .ranks = 4, .count = 64};
  constexpr auto static_count =
      instruction_count(algo::lower(algo::schedule::recursive(factors<-2, -2, 2, 2>{}), request));
  constexpr auto static_shm = algo::lower(algo::schedule::recursive(factors<-2, -2, 2, 2>{}), request).shm_count;
  static_assert(static_count > 0);
  static_assert(static_shm > 0);
  // The same lowering at run time gives the same program.
  const auto runtime = algo::lower(algo::schedule::recursive(factor_set::parse("-2,-2,2,2")), request);
  CHECK(instruction_count(runtime) == static_count);
  CHECK(runtime.shm_count == static_shm);
}

TEST_CASE("presets are the textbook algorithms", "[algo][presets]") {
  CHECK(algo::recursive_doubling(8) == algo::schedule::recursive(factor_set{2, 2, 2}));
  CHECK(algo::rabenseifner(8) == algo::schedule::recursive(factor_set{-2, -2, -2, 2, 2, 2}));
  CHECK(algo::recursive_doubling(6) == algo::schedule::recursive(factor_set{2, 2}, true));
  CHECK(algo::rabenseifner(7).to_string() == "recexch{-2,-2,2,2}+fold");
  CHECK(algo::binomial_tree().to_string() == "tree:binomial");
  CHECK(algo::ring().to_string() == "ring");
  // Recursive doubling takes log2 steps: 3 waits for data on 8 ranks (plus the
  // guard waits at the start that protect shm across executions).
  const auto rd = algo::lower(algo::recursive_doubling(8), {.coll = collective::allreduce, .ranks = 8, .count = 8});
  int data_waits = 0;
  for (const auto& ins : rd.code[0])
    if (const auto* w = std::get_if<ir::wait>(&ins); w && w->value > 0) ++data_waits;
  CHECK(data_waits == 3);
  // The ring takes 2(P-1) steps: rank 0 signals 2(P-1)+1 times (copy-in included).
  const auto ring = algo::lower(algo::ring(), {.coll = collective::allreduce, .ranks = 5, .count = 10});
  CHECK(ring.signals_per_execution(0, 0) >= 2 * (5 - 1));
  // Folded presets verify for every non-power-of-two P (rank-order folding).
  for (int P : {3, 5, 6, 7, 11, 13})
    for (const auto& s : {algo::recursive_doubling(P), algo::rabenseifner(P)}) {
      const auto failure = check(s, collective::allreduce, P, 2 * static_cast<std::size_t>(P) + 1, false, 0, 0);
      INFO(failure);
      CHECK(failure.empty());
    }
}

TEST_CASE("hierarchical lowering talks between nodes only through messages", "[algo][lower][nodes]") {
  const auto node_of = pseudo_nodes(12, 4);
  const auto s = algo::default_schedule(collective::allreduce, 12, 1 << 20, false, node_of);
  CHECK(s == algo::schedule::recursive(factor_set{-4, 3, 4}));
  const auto prog = algo::lower(s, {.coll = collective::allreduce, .ranks = 12, .count = 48, .node_of = node_of});
  int messages = 0;
  for (int r = 0; r < 12; ++r)
    for (const auto& ins : prog.code[static_cast<std::size_t>(r)]) {
      if (const auto* m = std::get_if<ir::send>(&ins)) {
        ++messages;
        CHECK(node_of[static_cast<std::size_t>(m->peer)] != node_of[static_cast<std::size_t>(r)]);
      }
      if (const auto* w = std::get_if<ir::wait>(&ins))
        CHECK(node_of[static_cast<std::size_t>(w->peer)] == node_of[static_cast<std::size_t>(r)]);
    }
  CHECK(messages == 12 * 2);  // each rank exchanges its slice with the 2 other nodes
  CHECK(ir::verify(prog, {.commutative = false}));
}

TEST_CASE("default selection verifies for every collective and shape", "[algo][presets]") {
  for (int P : {1, 2, 3, 4, 7, 8, 16, 17})
    for (auto c : all_collectives)
      for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 20})
        for (int per_node : {0, 2, 3}) {
          const auto node_of = pseudo_nodes(P, per_node);
          const auto s = algo::default_schedule(c, P, bytes, false, node_of);
          const auto failure = check(s, c, P, std::size_t(2 * P + 1), false, per_node, 0);
          INFO(failure);
          CHECK(failure.empty());
        }
}

TEST_CASE("rooted defaults on one node: the tree for small calls and for reduce at P = 2 up to 2 MiB",
          "[algo][presets]") {
  const std::vector<int> one_node(2, 0);
  // node_cores 0: no oversubscription rule (the tree of P - 1 for small calls).
  for (std::size_t bytes : {std::size_t{8}, std::size_t{4096}}) {
    CHECK(algo::default_schedule(collective::reduce, 2, bytes, true, one_node, 0) == algo::schedule::tree(0));
    CHECK(algo::default_schedule(collective::bcast, 2, bytes, true, one_node, 0) == algo::schedule::tree(0));
  }
  for (std::size_t bytes : {std::size_t{32} << 10, std::size_t{256} << 10, std::size_t{2} << 20})
    CHECK(algo::default_schedule(collective::reduce, 2, bytes, true, one_node, 0) == algo::schedule::tree(0));
  CHECK(algo::default_schedule(collective::reduce, 2, (std::size_t{2} << 20) + 8, true, one_node, 0) ==
        algo::schedule::copy_in());
  CHECK(algo::default_schedule(collective::bcast, 2, std::size_t{256} << 10, true, one_node, 0) ==
        algo::schedule::copy_in());
  CHECK(algo::default_schedule(collective::reduce, 4, std::size_t{256} << 10, true, std::vector<int>(4, 0), 0) ==
        algo::schedule::copy_in());
}

TEST_CASE("rooted defaults on an oversubscribed node: the binomial tree up to 2 MiB, then copy-in", "[algo][presets]") {
  // 2 cores: P = 3, 4, 8 are oversubscribed; 16 cores: they are not.
  for (int P : {3, 4, 8}) {
    const std::vector<int> one_node(static_cast<std::size_t>(P), 0);
    for (collective c : {collective::bcast, collective::reduce}) {
      INFO(to_string(c) << " P = " << P);
      CHECK(algo::default_schedule(c, P, 65536, true, one_node, 2) == algo::schedule::tree(P - 1));
      for (std::size_t bytes : {std::size_t{65536} + 8, std::size_t{256} << 10, std::size_t{2} << 20})
        CHECK(algo::default_schedule(c, P, bytes, true, one_node, 2) == algo::schedule::tree(0));
      CHECK(algo::default_schedule(c, P, (std::size_t{2} << 20) + 8, true, one_node, 2) == algo::schedule::copy_in());
      CHECK(algo::default_schedule(c, P, std::size_t{256} << 10, true, one_node, 16) == algo::schedule::copy_in());
    }
    // The other collectives keep their rules.
    CHECK(algo::default_schedule(collective::allgather, P, std::size_t{256} << 10, true, one_node, 2) ==
          algo::schedule::recursive(factor_set{P}));
  }
}

TEST_CASE("bad schedules are refused with the bad value named", "[algo][lower][errors]") {
  using Catch::Matchers::Contains;
  auto lower = [](algo::schedule s, collective c, int P, int root = 0, std::vector<int> node_of = {}) {
    return algo::lower(s, {.coll = c, .ranks = P, .count = 16, .root = root, .node_of = std::move(node_of)});
  };
  CHECK_THROWS_WITH(lower(algo::schedule::recursive(factor_set{2, 2, 2}), collective::allreduce, 7),
                    Contains("(8) must equal the number of ranks (7)"));
  CHECK_THROWS_WITH(lower(algo::schedule::recursive(factor_set{-2, -4, 2, 4}), collective::allreduce, 8),
                    Contains("does not mirror"));
  CHECK_THROWS_WITH(lower(algo::schedule::recursive(factor_set{2, 4}), collective::reduce_scatter, 8),
                    Contains("negative radices only"));
  CHECK_THROWS_WITH(lower(algo::schedule::cyclic(factor_set{2, 2, 4}), collective::allreduce, 7),
                    Contains("last radix 4 is not minimal: 2 suffices"));
  CHECK_THROWS_WITH(lower(algo::schedule::cyclic(factor_set{2, 2, 2}), collective::allreduce, 4),
                    Contains("must be less than the number of ranks (4)"));
  CHECK_THROWS_WITH(lower(algo::schedule::cyclic(factor_set{2, 2}), collective::reduce, 4),
                    Contains("rooted collectives"));
  CHECK_THROWS_WITH(lower(algo::schedule::tree(1), collective::allreduce, 4), Contains("tree arity 1"));
  CHECK_THROWS_WITH(lower(algo::schedule::copy_in(), collective::bcast, 4, 4), Contains("root 4 is not a rank of 4"));
  CHECK_THROWS_WITH(lower(algo::schedule::copy_in(), collective::allreduce, 4, 0, {0, 0}),
                    Contains("node_of has 2 entries for 4 ranks"));
  CHECK_THROWS_WITH(lower(algo::schedule::recursive(factor_set{2, 2}, true), collective::allreduce, 9),
                    Contains("folding needs"));
  try {
    lower(algo::schedule::recursive(factor_set{3, 3}), collective::allreduce, 8);
    FAIL("expected an error");
  } catch (const error& e) {
    CHECK(e.code() == errc::invalid_factor_set);
  }
  // A cyclic-shift program declares that it needs a commutative operator,
  // and the verifier refuses it for a non-commutative one.
  const auto cyclic = lower(algo::schedule::cyclic(factor_set{2, 2, 2}), collective::allreduce, 7);
  CHECK(cyclic.commutative_only);
  CHECK_FALSE(ir::verify(cyclic, {.commutative = false}));
}

TEST_CASE("lowering a bad factor set reports factors.hpp's message, word for word", "[algo][lower][errors][factors]") {
  // One rule book: lowering (and the closed-form cost model) check a factor
  // set with collc::validate, so every entry point names the same rule.
  using K = schedule_kind;
  struct bad_set {
    factor_set f;
    collective c;
    int P;
    K kind;
  };
  const bad_set cases[] = {
      {{2, 1, 2}, collective::allreduce, 4, K::recursive},       // unit radix
      {{-2, -1, 1, 2}, collective::allreduce, 4, K::recursive},  // unit radix (negative)
      {{0, 4}, collective::allgather, 4, K::recursive},          // zero
      {{2, 2, 2}, collective::allreduce, 7, K::recursive},       // wrong product
      {{-2, -2}, collective::reduce_scatter, 8, K::recursive},   // wrong product (reduce-scatter phase)
      {{2, -2}, collective::allreduce, 4, K::recursive},         // sign order
      {{-2, -4, 2, 4}, collective::allreduce, 8, K::recursive},  // mirror
      {{-2, -4}, collective::allreduce, 8, K::recursive},        // allreduce without its allgather tail
      {{2, 4}, collective::reduce_scatter, 8, K::recursive},     // wrong sign
      {{-2, -4}, collective::bcast, 8, K::recursive},            // wrong sign
      {{}, collective::allreduce, 4, K::recursive},              // empty
      {{2, 2, 4}, collective::allreduce, 7, K::cyclic},          // cyclic phase: last radix not minimal
      {{2, 2, 2}, collective::allreduce, 4, K::cyclic},          // cyclic phase: prefix reaches P
      {{2, 2}, collective::allgather, 7, K::cyclic},             // cyclic phase: last radix too small
      {{-2, -2, 2, 2}, collective::allreduce, 7, K::cyclic},     // cyclic phase, mirrored set
      {{3, 3}, collective::reduce_scatter, 7, K::cyclic},        // wrong sign, cyclic
  };
  const ir::machine_model m;
  for (const auto& b : cases) {
    const auto v = validate(b.f, b.P, b.c, b.kind);
    INFO(b.f.to_string() << " " << to_string(b.c) << " P=" << b.P << " " << to_string(b.kind));
    REQUIRE_FALSE(v.ok);
    const auto s = b.kind == K::recursive ? algo::schedule::recursive(b.f) : algo::schedule::cyclic(b.f);
    try {
      (void)algo::lower(s, {.coll = b.c, .ranks = b.P, .count = 16});
      FAIL("lowering accepted a bad factor set");
    } catch (const error& e) {
      CHECK(std::string(e.what()) == std::string(v.message()));
      CHECK(e.code() == v.code);
    }
    try {
      (void)algo::predict(s, b.c, b.P, 64, m);
      FAIL("the cost model accepted a bad factor set");
    } catch (const error& e) {
      CHECK(std::string(e.what()) == std::string(v.message()));
      CHECK(e.code() == v.code);
    }
  }
}
