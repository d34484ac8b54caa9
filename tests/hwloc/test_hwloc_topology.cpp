// Tests for include/collc/backend/hwloc/topology.hpp: hwloc's own parser of
// synthetic descriptions must give the same model as collc's standard-library
// parser (two independent readers of one syntax), the real machine must load,
// and hwloc's rejections must become collc errors.
#include <catch2/catch.hpp>
#include <collc/backend/hwloc/topology.hpp>

#include <string>
#include <vector>

using namespace collc;

namespace {

void same_levels(const node_topology& a, const node_topology& b) {
  REQUIRE(a.levels.size() == b.levels.size());
  for (std::size_t i = 0; i < a.levels.size(); ++i) {
    CHECK(a.levels[i].kind == b.levels[i].kind);
    CHECK(a.levels[i].of_pu == b.levels[i].of_pu);
  }
}

}  // namespace

TEST_CASE("hwloc and collc read synthetic topologies alike", "[hwloc][topology]") {
  for (const char* text : {"pack:2 numa:4 core:16 pu:1", "pack:4 core:72 pu:1", "pack:2 numa:2 l3:2 core:4 pu:2",
                           "pack:1 core:2 pu:1", "pack:2 l3:1 core:4 pu:1", "numa:2 core:3 pu:2"}) {
    INFO(text);
    const auto h = hwloc::read_synthetic(text);
    const auto c = node_topology::synthetic(text);
    same_levels(h, c);
    CHECK(h.describe() == c.describe());
    CHECK(h.rank_radices(h.pus()) == c.rank_radices(c.pus()));
  }
  // The paper's nodes, read by hwloc.
  CHECK(hwloc::read_synthetic("pack:2 numa:4 core:16 pu:1").rank_radices(128) == std::vector<int>{16, 4, 2});
  CHECK(hwloc::read_synthetic("pack:4 core:72 pu:1").rank_radices(288) == std::vector<int>{72, 4});
}

TEST_CASE("hwloc reports cache sizes of synthetic caches", "[hwloc][topology]") {
  for (const char* text : {"pack:1 l3:2(size=8MiB) core:2 pu:1", "pack:1 l3:2(size=8MB) core:2 pu:1"}) {
    INFO(text);
    const auto h = hwloc::read_synthetic(text);
    const auto c = node_topology::synthetic(text);
    REQUIRE(!h.caches.empty());
    CHECK(h.caches.back().depth == 3);
    CHECK(h.caches.back().pus_per_cache == 2);
    CHECK(h.caches.back() == c.caches.back());  // both readers agree on hwloc's units
  }
  CHECK(hwloc::read_synthetic("pack:1 l3:2(size=8MiB) core:2 pu:1").caches.back().bytes == std::size_t{8} << 20);
}

TEST_CASE("this machine loads and this process is bound somewhere in it", "[hwloc][topology]") {
  const auto node = hwloc::read_node();
  REQUIRE(node.pus() >= 1);
  CHECK(node.levels.back().kind == "pu");
  const auto pus = hwloc::bound_pus();
  CHECK(!pus.empty());
  for (int p : pus) CHECK((p >= 0 && p < node.pus()));
  const rank_binding b = node.locate(pus);
  CHECK(b.level < static_cast<int>(node.levels.size()));
}

TEST_CASE("hwloc's rejection of a description is a collc error", "[hwloc][topology][errors]") {
  CHECK_THROWS_WITH(hwloc::read_synthetic("pack:2 frobnicator:3"), Catch::Contains("frobnicator"));
  try {
    (void)hwloc::read_synthetic("pack:2 frobnicator:3");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::invalid_argument);
  }
}
