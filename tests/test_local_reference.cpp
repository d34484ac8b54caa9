// Tests for include/collc/backend/local/reference.hpp: the sequential oracle.
// Expected values are worked out by hand from the MPI definitions.
#include <catch2/catch.hpp>
#include <collc/backend/local/reference.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace collc;
using vec = std::vector<std::int64_t>;

namespace {

// Appends b's decimal digits to a: not commutative, so the result spells the
// fold order. (Not associative either, which is why it is only used here: the
// reference promises a left fold, ((x0 op x1) op x2).)
struct append_digit {
  std::int64_t operator()(std::int64_t a, std::int64_t b) const { return a * 10 + b; }
};

const std::vector<vec> sends3 = {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 1, 2, 3}, {4, 5, 6, 7, 8, 9}};

}  // namespace

TEST_CASE("allreduce: every rank gets the element-wise reduction", "[backend][local][reference]") {
  const std::vector<vec> send{{1, 2}, {3, 4}, {5, 6}};
  const auto want = local::reference(collective::allreduce, 3, 2, 0, send, plus{});
  CHECK(want == std::vector<vec>{{9, 12}, {9, 12}, {9, 12}});
  CHECK(local::reference(collective::allreduce, 3, 2, 0, send, max{}) == std::vector<vec>(3, vec{5, 6}));
}

TEST_CASE("the fold is a left fold in rank order", "[backend][local][reference]") {
  const std::vector<vec> send{{1, 3}, {2, 1}, {3, 2}};
  CHECK(local::reference(collective::allreduce, 3, 2, 0, send, append_digit{}) == std::vector<vec>(3, vec{123, 312}));
  CHECK(local::reference(collective::reduce, 3, 2, 1, send, append_digit{}) == std::vector<vec>{{}, {123, 312}, {}});
}

TEST_CASE("reduce_scatter: rank r gets the reduction of block r", "[backend][local][reference]") {
  // Blocks of 2: rank 0 sums elements 0-1 of every rank, rank 1 elements 2-3, rank 2 elements 4-5.
  const auto want = local::reference(collective::reduce_scatter, 3, 2, 0, sends3, plus{});
  CHECK(want == std::vector<vec>{{12, 15}, {18, 12}, {15, 18}});
  CHECK(local::reference(collective::reduce_scatter, 3, 2, 0, sends3, append_digit{}) ==
        std::vector<vec>{{174, 285}, {396, 417}, {528, 639}});
}

TEST_CASE("allgather: every rank gets all blocks in rank order", "[backend][local][reference]") {
  const std::vector<vec> send{{1, 2}, {3, 4}, {5, 6, 99}};  // the extra element is past count and ignored
  CHECK(local::reference(collective::allgather, 3, 2, 0, send) == std::vector<vec>(3, vec{1, 2, 3, 4, 5, 6}));
}

TEST_CASE("reduce: only the root's result is specified", "[backend][local][reference]") {
  CHECK(local::reference(collective::reduce, 3, 1, 2, sends3, plus{}) == std::vector<vec>{{}, {}, {12}});
}

TEST_CASE("bcast: every rank gets the root's data, other inputs are ignored", "[backend][local][reference]") {
  const std::vector<vec> send{{}, {4, 5}, {}};
  CHECK(local::reference(collective::bcast, 3, 2, 1, send) == std::vector<vec>(3, vec{4, 5}));
}

TEST_CASE("count 0 and a single rank", "[backend][local][reference]") {
  CHECK(local::reference(collective::allreduce, 3, 0, 0, sends3) == std::vector<vec>(3, vec{}));
  CHECK(local::reference(collective::allgather, 3, 0, 0, sends3) == std::vector<vec>(3, vec{}));
  const std::vector<vec> one{{3, 1, 4}};
  CHECK(local::reference(collective::allreduce, 1, 3, 0, one, append_digit{}) == std::vector<vec>{{3, 1, 4}});
  CHECK(local::reference(collective::reduce_scatter, 1, 3, 0, one) == std::vector<vec>{{3, 1, 4}});
}

TEST_CASE("the program overload takes collective, ranks, count and root from the program",
          "[backend][local][reference]") {
  ir::program p;
  p.coll = collective::reduce_scatter;
  p.ranks = 3;
  p.count = 2;
  CHECK(local::reference(p, std::span<const vec>(sends3), plus{}) == std::vector<vec>{{12, 15}, {18, 12}, {15, 18}});
  p.block_stride = 3;
  CHECK_THROWS_WITH(local::reference(p, std::span<const vec>(sends3)), Catch::Contains("block_stride 3"));
}

TEST_CASE("bad arguments name the offending value", "[backend][local][reference]") {
  auto code_of = [](auto f) {
    try {
      f();
    } catch (const collc::error& e) {
      return e.code();
    }
    return errc::unsupported;
  };
  CHECK_THROWS_WITH(local::reference(collective::allreduce, 0, 1, 0, sends3),
                    Catch::Contains("ranks must be >= 1, got 0"));
  CHECK_THROWS_WITH(local::reference(collective::allreduce, 2, 1, 0, sends3),
                    Catch::Contains("3 send buffers for 2 ranks"));
  CHECK_THROWS_WITH(local::reference(collective::bcast, 3, 1, 3, sends3),
                    Catch::Contains("root 3 out of range for 3 ranks"));
  CHECK_THROWS_WITH(local::reference(collective::reduce_scatter, 3, 3, 0, sends3),
                    Catch::Contains("send buffer of rank 0 has 6 elements, need 9"));
  CHECK(code_of([] { local::reference(collective::allreduce, 3, 7, 0, sends3); }) == errc::invalid_argument);
}
