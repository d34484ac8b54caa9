#pragma once
/// \file
/// Where the ranks of a communicator live, and the renumbering into "program
/// ranks" that the lowering expects: every node a contiguous block of program
/// ranks, nodes numbered 0, 1, ... in program order.
///
/// A node here is a set of ranks that share one segment: a physical node
/// (MPI_COMM_TYPE_SHARED), or, with plan_options::ranks_per_node = k, a
/// pseudo-node of k ranks inside a physical node (placed by block or round
/// robin over communicator ranks) that reaches the others only by messages.
///
/// Renumbering reorders ranks, and a reduction runs in program-rank order. For
/// an operator that is not commutative the result must be in communicator
/// rank order, so then program rank = communicator rank, and a node is split
/// into its maximal runs of consecutive ranks (each run gets its own segment;
/// runs of one physical node talk by messages). Block placement loses nothing;
/// round-robin placement degenerates to one rank per node.
#include <collc/backend/mpi/options.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

namespace collc::detail {

struct placement_map {
  std::vector<int> comm_of_prog;  ///< program rank -> communicator rank
  std::vector<int> prog_of_comm;  ///< communicator rank -> program rank
  std::vector<int> node_of;       ///< program rank -> node id (0, 1, ... ascending)
  int nodes = 1;

  [[nodiscard]] bool identity() const {
    for (std::size_t i = 0; i < comm_of_prog.size(); ++i)
      if (comm_of_prog[i] != static_cast<int>(i)) return false;
    return true;
  }
  /// First program rank and size of node `n`.
  [[nodiscard]] int node_first(int n) const {
    return static_cast<int>(std::find(node_of.begin(), node_of.end(), n) - node_of.begin());
  }
  [[nodiscard]] int node_size(int n) const { return static_cast<int>(std::count(node_of.begin(), node_of.end(), n)); }
};

/// The node key of every communicator rank: its physical node (named by the
/// leader rank) and, with pseudo-nodes, the pseudo-node inside it.
inline std::vector<std::int64_t> node_keys(const std::vector<int>& physical_leader, int ranks_per_node,
                                           collc::placement place) {
  const auto p = static_cast<std::int64_t>(physical_leader.size());
  std::vector<std::int64_t> key(physical_leader.size());
  for (std::size_t r = 0; r < key.size(); ++r) {
    std::int64_t pseudo = 0;
    if (ranks_per_node > 0) {
      const std::int64_t k = ranks_per_node;
      const std::int64_t n = (p + k - 1) / k;
      pseudo = place == collc::placement::block ? static_cast<std::int64_t>(r) / k : static_cast<std::int64_t>(r) % n;
    }
    key[r] = physical_leader[r] * p + pseudo;
  }
  return key;
}

/// Program ranks and nodes for ranks with node keys `key` (see the file comment).
inline placement_map make_placement(const std::vector<std::int64_t>& key, bool order_sensitive) {
  const int p = static_cast<int>(key.size());
  placement_map m;
  m.comm_of_prog.resize(key.size());
  m.prog_of_comm.resize(key.size());
  m.node_of.resize(key.size());
  if (order_sensitive) {
    // Program rank = communicator rank; a node is a run of equal keys.
    int node = 0;
    for (int r = 0; r < p; ++r) {
      if (r > 0 && key[static_cast<std::size_t>(r)] != key[static_cast<std::size_t>(r) - 1]) ++node;
      m.comm_of_prog[static_cast<std::size_t>(r)] = r;
      m.node_of[static_cast<std::size_t>(r)] = node;
    }
    m.nodes = p == 0 ? 0 : node + 1;
  } else {
    // Nodes in the order of their smallest rank, ranks ascending inside a node.
    std::map<std::int64_t, int> first;  // key -> smallest rank with that key
    for (int r = p - 1; r >= 0; --r) first[key[static_cast<std::size_t>(r)]] = r;
    std::iota(m.comm_of_prog.begin(), m.comm_of_prog.end(), 0);
    std::stable_sort(m.comm_of_prog.begin(), m.comm_of_prog.end(), [&](int a, int b) {
      return first[key[static_cast<std::size_t>(a)]] < first[key[static_cast<std::size_t>(b)]];
    });
    int node = 0;
    for (int q = 0; q < p; ++q) {
      const auto c = static_cast<std::size_t>(m.comm_of_prog[static_cast<std::size_t>(q)]);
      if (q > 0 && key[c] != key[static_cast<std::size_t>(m.comm_of_prog[static_cast<std::size_t>(q) - 1])]) ++node;
      m.node_of[static_cast<std::size_t>(q)] = node;
    }
    m.nodes = p == 0 ? 0 : node + 1;
  }
  for (int q = 0; q < p; ++q) m.prog_of_comm[static_cast<std::size_t>(m.comm_of_prog[static_cast<std::size_t>(q)])] = q;
  return m;
}

}  // namespace collc::detail
