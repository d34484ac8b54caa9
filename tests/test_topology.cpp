// Tests for include/collc/topology.hpp: the synthetic parser (hwloc 2.9's
// syntax), the level model (one level per distinct split of the PUs), the
// rank-order hierarchy for compact, round-robin, oversubscribed and unbound
// ranks, binding lookup and the fingerprint. Expected radices come from the
// machines' shapes, worked out by hand in the comments.
#include <catch2/catch.hpp>
#include <collc/topology.hpp>

#include <string>
#include <vector>

using namespace collc;

namespace {

std::vector<std::string> kinds(const node_topology& t) {
  std::vector<std::string> k;
  for (const auto& l : t.levels) k.push_back(l.kind);
  return k;
}

std::vector<int> objects(const node_topology& t) {
  std::vector<int> n;
  for (const auto& l : t.levels) n.push_back(l.objects());
  return n;
}

std::string error_of(const std::string& text) {
  try {
    (void)node_topology::synthetic(text);
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::invalid_argument);
    return e.what();
  }
  FAIL("no error for '" << text << "'");
  return {};
}

}  // namespace

TEST_CASE("synthetic: the paper's EPYC and Grace nodes", "[topology][synthetic]") {
  const auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  CHECK(kinds(epyc) == std::vector<std::string>{"pack", "numa", "core", "pu"});
  CHECK(objects(epyc) == std::vector<int>{2, 8, 128, 128});
  CHECK(epyc.pus() == 128);
  CHECK(epyc.describe() == "pack:2 numa:4 core:16 pu:1");
  // PU 17 is in NUMA domain 1 (PUs 16..31) of package 0 (PUs 0..63).
  CHECK(epyc.levels[0].of_pu[17] == 0);
  CHECK(epyc.levels[1].of_pu[17] == 1);
  CHECK(epyc.levels[0].of_pu[64] == 1);
  CHECK(epyc.levels[1].of_pu[64] == 4);

  const auto grace = node_topology::synthetic("pack:4 core:72 pu:1");
  CHECK(kinds(grace) == std::vector<std::string>{"pack", "core", "pu"});
  CHECK(grace.pus() == 288);
  CHECK(grace.describe() == "pack:4 core:72 pu:1");
}

TEST_CASE("synthetic: spellings, caches and hyperthreads", "[topology][synthetic]") {
  const auto t = node_topology::synthetic("Package:2 NUMANode:2 L3Cache:2(size=32MiB) Core:4 PU:2");
  CHECK(kinds(t) == std::vector<std::string>{"pack", "numa", "l3", "core", "pu"});
  CHECK(objects(t) == std::vector<int>{2, 4, 8, 32, 64});
  REQUIRE(t.caches.size() == 1);
  CHECK(t.caches[0].depth == 3);
  CHECK(t.caches[0].bytes == std::size_t{32} << 20);
  CHECK(t.caches[0].pus_per_cache == 8);
  CHECK(t.levels[2].cache_bytes == std::size_t{32} << 20);
  // 32 MiB shared by 8 PUs, one rank per PU: 4 MiB each; two ranks per PU: 2 MiB.
  CHECK(t.cache_bytes_per_rank(64) == std::size_t{4} << 20);
  CHECK(t.cache_bytes_per_rank(128) == std::size_t{2} << 20);
  CHECK(node_topology::synthetic("socket:1 l2:2(size=1024KiB) thread:1").caches[0].bytes == std::size_t{1} << 20);
  // hwloc's decimal units.
  CHECK(node_topology::synthetic("socket:1 l2:2(size=3MB) thread:1").caches[0].bytes == 3000000);
  CHECK(node_topology::synthetic("socket:1 l2:2(size=3kB) thread:1").caches[0].bytes == 3000);
}

TEST_CASE("levels that split the PUs alike are kept once", "[topology][levels]") {
  // One L3 per package is the package; one NUMA node per package too.
  CHECK(kinds(node_topology::synthetic("pack:2 l3:1 core:4 pu:1")) == std::vector<std::string>{"pack", "core", "pu"});
  CHECK(kinds(node_topology::synthetic("pack:2 numa:1 l3:2 core:4 pu:1")) ==
        std::vector<std::string>{"pack", "l3", "core", "pu"});
  // A per-core L2 is the core; NUMA wins over an L3 that splits alike.
  CHECK(kinds(node_topology::synthetic("pack:1 numa:2 l3:1 l2:4 core:1 pu:2")) ==
        std::vector<std::string>{"pack", "numa", "core", "pu"});
  CHECK(node_topology::synthetic("pack:2 l3:1 core:4 pu:1").describe() == "pack:2 core:4 pu:1");
}

TEST_CASE("synthetic: errors name the problem", "[topology][synthetic][errors]") {
  CHECK_THAT(error_of("pack:2 core:4"), Catch::Contains("last level must be pu"));
  CHECK_THAT(error_of("pack:2 widget:4 pu:1"), Catch::Contains("unknown level kind 'widget'"));
  CHECK_THAT(error_of("pack:0 pu:1"), Catch::Contains("arity"));
  CHECK_THAT(error_of("pack:x pu:1"), Catch::Contains("arity"));
  CHECK_THAT(error_of("pack 2 pu:1"), Catch::Contains("kind:arity"));
  CHECK_THAT(error_of(""), Catch::Contains("no levels"));
  CHECK_THAT(error_of("pack:1024 core:1024 pu:2"), Catch::Contains("more than"));
  CHECK_THAT(error_of("l3:2(size=12XB) pu:1"), Catch::Contains("unit"));
  CHECK_THAT(error_of("l3:2(size=12 pu:1"), Catch::Contains("unclosed"));
}

TEST_CASE("rank-order hierarchy with compact binding", "[topology][ranks]") {
  const auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  // core < quadrant < socket: 16 ranks per NUMA domain, 4 domains per package, 2 packages.
  CHECK(epyc.rank_radices(128) == std::vector<int>{16, 4, 2});
  // Half the node: package 0 only.
  CHECK(epyc.rank_radices(64) == std::vector<int>{16, 4});
  // 96 ranks: blocks of 16 fit a NUMA domain; 32 (two domains) fit a package
  // (0-31, 32-63, 64-95), 48 would not (48-95 spans both); 3 such blocks.
  CHECK(epyc.rank_radices(96) == std::vector<int>{16, 2, 3});
  // 72 ranks: 16 does not divide 72, 8 does and fits; no multiple of 8 that
  // divides 72 fits a package (24: 48-71 spans 64), so 9 blocks of 8.
  CHECK(epyc.rank_radices(72) == std::vector<int>{8, 9});
  const auto grace = node_topology::synthetic("pack:4 core:72 pu:1");
  CHECK(grace.rank_radices(288) == std::vector<int>{72, 4});
  CHECK(grace.rank_radices(283) == std::vector<int>{283});  // prime: no block fits evenly
  CHECK(grace.rank_radices(1) == std::vector<int>{});
  auto blocks = epyc.rank_blocks(128);
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0] == std::pair<std::string, int>{"numa", 16});
  CHECK(blocks[1] == std::pair<std::string, int>{"pack", 64});
  CHECK(blocks[2] == std::pair<std::string, int>{"node", 128});
}

TEST_CASE("rank-order hierarchy for every rank count has product P", "[topology][ranks]") {
  const auto t = node_topology::synthetic("pack:2 numa:2 l3:2 core:4 pu:2");
  for (int L = 1; L <= 70; ++L) {
    const auto r = t.rank_radices(L);
    long long prod = 1;
    for (int x : r) {
      CHECK(x >= 2);
      prod *= x;
    }
    CHECK(prod == L);
  }
}

TEST_CASE("rank-order hierarchy follows the bindings", "[topology][ranks][binding]") {
  auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  const int pack = epyc.level_index("pack");
  REQUIRE(pack == 0);
  SECTION("round robin over packages: consecutive ranks never share one") {
    for (int r = 0; r < 8; ++r) epyc.bindings.push_back({pack, r % 2});
    CHECK(epyc.rank_radices(8) == std::vector<int>{8});
  }
  SECTION("blocks of two ranks per package") {
    for (int r = 0; r < 8; ++r) epyc.bindings.push_back({pack, (r / 2) % 2});
    CHECK(epyc.rank_radices(8) == std::vector<int>{2, 4});
  }
  SECTION("unbound ranks: flat") {
    epyc.bindings.assign(8, rank_binding{});
    CHECK(epyc.rank_radices(8) == std::vector<int>{8});
  }
  SECTION("bindings for another rank count are ignored (compact assumed)") {
    epyc.bindings.assign(3, rank_binding{});
    CHECK(epyc.rank_radices(128) == std::vector<int>{16, 4, 2});
  }
}

TEST_CASE("oversubscribed compact ranks share PUs in blocks", "[topology][ranks]") {
  const auto two = node_topology::synthetic("pack:1 core:2 pu:1");
  // 8 ranks on 2 cores: ranks 0-3 on core 0, 4-7 on core 1.
  CHECK(two.rank_radices(8) == std::vector<int>{4, 2});
  CHECK(two.rank_radices(2) == std::vector<int>{2});
  const auto c = two.with_compact_ranks(8);
  CHECK(c.bindings[3] == rank_binding{static_cast<int>(two.levels.size()) - 1, 0});
  CHECK(c.bindings[4] == rank_binding{static_cast<int>(two.levels.size()) - 1, 1});
}

TEST_CASE("locate: the smallest object holding a PU set", "[topology][binding]") {
  const auto epyc = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  CHECK(epyc.locate({5}) == rank_binding{3, 5});           // one PU
  CHECK(epyc.locate({16, 17, 31}) == rank_binding{1, 1});  // NUMA domain 1
  CHECK(epyc.locate({0, 63}) == rank_binding{0, 0});       // package 0
  CHECK(epyc.locate({0, 64}) == rank_binding{});           // both packages: the node
  CHECK(epyc.locate({}) == rank_binding{});                // unknown
  CHECK(epyc.locate({500, 7}) == rank_binding{3, 7});      // PUs outside the model are ignored
}

TEST_CASE("flat fallback", "[topology][flat]") {
  const auto f = node_topology::flat(6);
  CHECK(f.pus() == 6);
  CHECK(f.describe() == "pu:6");
  CHECK(f.rank_radices(6) == std::vector<int>{6});
  CHECK(node_topology{}.rank_radices(4) == std::vector<int>{4});
  CHECK_THROWS_AS(node_topology::flat(0), collc::error);
}

TEST_CASE("non-uniform nodes are described by object counts", "[topology][levels]") {
  // 2 packages with 2 and 1 cores (one disabled): not hwloc-synthetic shaped.
  std::vector<topology_level> raw{{"pack", {0, 0, 1}, 0}, {"core", {0, 1, 2}, 0}, {"pu", {0, 1, 2}, 0}};
  const auto t = node_topology::from_levels(raw);
  CHECK(t.describe() == "pack=2 core=3 pu=3");
  CHECK(t.rank_radices(3) == std::vector<int>{3});
  std::vector<topology_level> bad{{"pack", {1, 0, 0}, 0}, {"pu", {0, 1, 2}, 0}};
  CHECK_THROWS_WITH(node_topology::from_levels(bad), Catch::Contains("PU order"));
  std::vector<topology_level> short_level{{"pack", {0, 0}, 0}, {"pu", {0, 1, 2}, 0}};
  CHECK_THROWS_WITH(node_topology::from_levels(short_level), Catch::Contains("covers 2 PUs"));
}

TEST_CASE("fingerprint: equal nodes agree, any difference shows", "[topology][fingerprint]") {
  const auto a = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  const auto b = node_topology::synthetic("pack:2 numa:4 core:16 pu:1");
  CHECK(a.fingerprint() == b.fingerprint());
  CHECK(a.fingerprint().size() == 16);
  CHECK(a.fingerprint() != node_topology::synthetic("pack:2 numa:2 core:32 pu:1").fingerprint());
  CHECK(a.fingerprint() != a.with_compact_ranks(64).fingerprint());  // bindings count
  CHECK(node_topology::synthetic("pack:1 l3:2(size=16MB) core:4 pu:1").fingerprint() !=
        node_topology::synthetic("pack:1 l3:2(size=32MB) core:4 pu:1").fingerprint());
}
