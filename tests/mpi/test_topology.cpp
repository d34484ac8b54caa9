// Tests for include/collc/backend/mpi/topology.hpp: node keys of physical and
// pseudo-nodes, and the renumbering into program ranks (nodes as contiguous
// blocks; no renumbering when the operator's order matters).
#include "support.hpp"

#include <collc/backend/mpi/registry.hpp>
#include <collc/backend/mpi/topology.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

using collc::placement;
using collc::mpi::make_placement;
using collc::mpi::node_keys;

TEST_CASE("pseudo-node keys by block and round robin", "[backend][mpi][topology]") {
  const std::vector<int> one_node(7, 0);
  auto block = node_keys(one_node, 3, placement::block);
  auto rr = node_keys(one_node, 3, placement::round_robin);
  CHECK(block == std::vector<std::int64_t>{0, 0, 0, 1, 1, 1, 2});
  CHECK(rr == std::vector<std::int64_t>{0, 1, 2, 0, 1, 2, 0});  // ceil(7/3) = 3 nodes
  CHECK(node_keys(one_node, 0, placement::block) == std::vector<std::int64_t>(7, 0));
  // Pseudo-nodes never span physical nodes.
  const std::vector<int> two_nodes{0, 0, 0, 3, 3, 3};
  auto k = node_keys(two_nodes, 2, placement::block);
  CHECK(k[1] == k[0]);
  CHECK(k[2] != k[3]);  // rank 2 (node 0) and rank 3 (node 1) share pseudo-node 1 but not the machine
  auto phys = node_keys(two_nodes, 0, placement::block);
  CHECK(phys[0] == phys[2]);
  CHECK(phys[2] != phys[3]);
}

TEST_CASE("commutative: nodes become contiguous blocks of program ranks", "[backend][mpi][topology]") {
  const std::vector<std::int64_t> rr{0, 1, 2, 0, 1, 2, 0};
  auto m = make_placement(rr, false);
  CHECK(m.comm_of_prog == std::vector<int>{0, 3, 6, 1, 4, 2, 5});
  CHECK(m.node_of == std::vector<int>{0, 0, 0, 1, 1, 2, 2});
  CHECK(m.nodes == 3);
  for (int q = 0; q < 7; ++q)
    CHECK(m.prog_of_comm[static_cast<std::size_t>(m.comm_of_prog[static_cast<std::size_t>(q)])] == q);
  CHECK(m.node_first(1) == 3);
  CHECK(m.node_size(1) == 2);
  CHECK_FALSE(m.identity());
  // Block placement needs no renumbering.
  auto b = make_placement({5, 5, 9, 9, 9}, false);
  CHECK(b.identity());
  CHECK(b.node_of == std::vector<int>{0, 0, 1, 1, 1});
}

TEST_CASE("order-sensitive: program rank = communicator rank, runs become nodes", "[backend][mpi][topology]") {
  auto rr = make_placement({0, 1, 2, 0, 1, 2, 0}, true);
  CHECK(rr.identity());
  CHECK(rr.node_of == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
  auto block = make_placement({0, 0, 0, 1, 1, 1, 2}, true);
  CHECK(block.identity());
  CHECK(block.node_of == std::vector<int>{0, 0, 0, 1, 1, 1, 2});
  auto mixed = make_placement({4, 4, 7, 4, 7, 7}, true);
  CHECK(mixed.node_of == std::vector<int>{0, 0, 1, 2, 3, 3});
  CHECK(mixed.nodes == 4);
}

TEST_CASE("one machine is one physical node", "[backend][mpi][topology]") {
  auto reg = collc::mpi::registry_for(MPI_COMM_WORLD);
  const auto& leaders = reg->physical_leaders();
  REQUIRE(static_cast<int>(leaders.size()) == collc_test::world_size());
  CHECK(std::all_of(leaders.begin(), leaders.end(), [](int l) { return l == 0; }));
  auto m = make_placement(node_keys(leaders, 0, placement::block), false);
  CHECK(m.nodes == 1);
  CHECK(m.identity());
}
