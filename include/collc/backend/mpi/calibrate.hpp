#pragma once
/// \file
/// Measures the terms of ir::machine_model on the machine a communicator runs
/// on, with standard MPI calls and plain C++ loops (no plan internals), so
/// the cost model's predictions are in this machine's seconds.
///
///   collc::ir::machine_model m = collc::mpi::calibrate(MPI_COMM_WORLD);  // collective, ~0.1-1 s
///   double t = collc::algo::predict(s, collective::allreduce, P, bytes, m, ranks_per_node);
///
/// What each term measures (medians of many repetitions, after a warm-up):
///  - alpha_sync: half the round trip of a flag between the first two ranks
///    of a node through an MPI_Win_allocate_shared window (C++ atomics,
///    release store / acquire spin, each flag on its own cache line): one
///    signal -> wait handoff between cores.
///  - beta_copy: seconds per byte of std::memcpy of a buffer of
///    `copy_bytes` (16 MiB: out of L2, mostly out of L3) by one core while the
///    node's other ranks sleep.
///  - gamma: seconds per output byte of c[i] = a[i] + b[i] over doubles
///    (a loop the compiler vectorises), same buffer size, one core.
///  - shm_bandwidth: bytes copied per second by all ranks of the node
///    memcpy-ing at once (node ranks * copy_bytes / slowest rank's time).
///    With one rank per node it cannot be measured and is set to one core's
///    1 / beta_copy.
///  - alpha_net, beta_net: MPI_Send / MPI_Recv ping-pong between the first
///    ranks of the first two nodes: alpha_net = half the round trip of 8
///    bytes (less 2 o_net, below), beta_net = (half the round trip of `net_bytes`) - alpha_net, per
///    byte. On one node the pair is two ranks of that node (MPI's shared
///    memory path, reported by calibration::net_between_nodes = false); with
///    one rank in all the defaults are kept.
///  - o_net: the same pair; the sender's time per message of a burst of 32
///    back-to-back 8-byte MPI_Isend + MPI_Waitall into receives posted before
///    (LogP's overhead o; the receiver is assumed to pay the same). Then
///    alpha_net is the 8-byte half round trip less 2 o_net (at least 0): the
///    model charges a message o + alpha + o.
/// Ranks that take no part in a measurement wait in a polled MPI_Ibarrier
/// with short sleeps, so oversubscribed runs leave the cores to the
/// measuring ranks. Every rank returns the same values.
#include <collc/config.hpp>
#include <collc/error.hpp>
#include <collc/ir/cost.hpp>

#include <mpi.h>

#include <cstddef>

namespace collc::mpi {

/// Sizes and repetition counts of the measurements.
struct calibration_options {
  std::size_t copy_bytes = std::size_t{16} << 20;  ///< memcpy / add buffer per rank
  std::size_t net_bytes = std::size_t{4} << 20;    ///< large ping-pong message
  int latency_repetitions = 1000;                  ///< flag and small-message round trips
  int bandwidth_repetitions = 10;                  ///< memcpy, add and large-message repetitions
  /// Nodes as plan_options::ranks_per_node has them: 0 = COLLC_RANKS_PER_NODE,
  /// else physical nodes; L = pseudo-nodes of L consecutive ranks (calibrates
  /// the path between pseudo-nodes, e.g. Open MPI forced onto TCP).
  int ranks_per_node = 0;
};

/// The measured model and what could be measured on this communicator.
struct calibration {
  ir::machine_model model;
  bool sync_measured = false;      ///< a node has >= 2 ranks (else alpha_sync is the default)
  bool shm_measured = false;       ///< likewise for shm_bandwidth (else 1 / beta_copy)
  bool net_measured = false;       ///< >= 2 ranks (else alpha_net, beta_net are the defaults)
  bool net_between_nodes = false;  ///< the ping-pong pair was on two nodes
  int nodes = 1;
  int max_ranks_per_node = 1;
};

/// Measures every term (see the file comment) and reports which could be
/// measured. Collective over `comm`; every rank gets the same result.
/// Throws collc::error(errc::mpi_error) if an MPI call fails.
///
///   auto c = collc::mpi::calibrate_report(MPI_COMM_WORLD, {.copy_bytes = 4 << 20});
///   if (!c.net_between_nodes) std::puts("network terms measured within one node");
calibration calibrate_report(MPI_Comm comm, const calibration_options& opt = {});

/// The measured model (see calibrate_report for what was measurable).
///
///   collc::ir::machine_model m = collc::mpi::calibrate(MPI_COMM_WORLD);
ir::machine_model calibrate(MPI_Comm comm, const calibration_options& opt = {});

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/calibrate.ipp>
#endif
