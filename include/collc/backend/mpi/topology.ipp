#pragma once
/// \file
/// Definitions of topology.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/topology.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <numeric>

namespace collc::mpi {

COLLC_INLINE bool placement_map::identity() const {
  for (std::size_t i = 0; i < comm_of_prog.size(); ++i)
    if (comm_of_prog[i] != static_cast<int>(i)) return false;
  return true;
}

COLLC_INLINE int placement_map::node_first(int n) const {
  return static_cast<int>(std::find(node_of.begin(), node_of.end(), n) - node_of.begin());
}

COLLC_INLINE int placement_map::node_size(int n) const {
  return static_cast<int>(std::count(node_of.begin(), node_of.end(), n));
}

COLLC_INLINE std::vector<std::int64_t> node_keys(const std::vector<int>& physical_leader, int ranks_per_node,
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

COLLC_INLINE placement_map make_placement(const std::vector<std::int64_t>& key, bool order_sensitive) {
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

}  // namespace collc::mpi
