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
#include <collc/config.hpp>

#include <cstdint>
#include <vector>

namespace collc::mpi {

struct placement_map {
  std::vector<int> comm_of_prog;  ///< program rank -> communicator rank
  std::vector<int> prog_of_comm;  ///< communicator rank -> program rank
  std::vector<int> node_of;       ///< program rank -> node id (0, 1, ... ascending)
  int nodes = 1;

  /// Program rank = communicator rank for every rank.
  [[nodiscard]] bool identity() const;
  /// First program rank and size of node `n`.
  [[nodiscard]] int node_first(int n) const;
  [[nodiscard]] int node_size(int n) const;
};

/// The node key of every communicator rank: its physical node (named by the
/// leader rank) and, with pseudo-nodes, the pseudo-node inside it.
std::vector<std::int64_t> node_keys(const std::vector<int>& physical_leader, int ranks_per_node,
                                    collc::placement place);

/// Program ranks and nodes for ranks with node keys `key` (see the file comment).
placement_map make_placement(const std::vector<std::int64_t>& key, bool order_sensitive);

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/topology.ipp>
#endif
