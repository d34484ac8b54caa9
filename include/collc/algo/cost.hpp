#pragma once
/// \file
/// The alpha-beta-gamma cost of a schedule in closed form: a sum over the
/// schedule's steps, without lowering, so every candidate factor set can be
/// ranked for P up to 65536 (a few microseconds per schedule).
///
///   collc::ir::machine_model m;
///   double t = collc::algo::predict(collc::algo::rabenseifner(1024), collc::collective::allreduce,
///                                   1024, 1 << 20, m, 32);  // 32 ranks per node
///
/// Each step costs  latency + node-port bytes * beta_net + copied bytes * beta
/// + reduced bytes * gamma, with
///  - latency: alpha_sync if the rank has a partner on its node, alpha_net if
///    on another node (the larger when both);
///  - node-port bytes: what all ranks of a node send off the node in the step
///    (one network port per node, as in ir::predict);
///  - beta, gamma: the single-core rates, or the node's shared bandwidth split
///    over the ranks moving memory at once (machine_model::copy_per_byte).
/// The terms follow what algo::lower emits for the step (e.g. recursive
/// exchange copies user data into shm only when a same-node peer reads it;
/// an allgather step copies all `a` pieces of the new range, its own one too),
/// so for small P the result stays within a small factor of
/// ir::predict(algo::lower(...)) (tests/test_cost.cpp checks 2x). It differs
/// where the program's ranks are out of step: ir::predict follows each rank,
/// this takes the slowest rank of every step, and it assumes nodes are equal
/// blocks of ranks aligned with the schedule's groups, trees rooted at rank 0
/// and, for folded schedules, virtual ranks spread evenly over the nodes.
///
/// Textbook terms (Hockney's alpha-beta model; the costs of Thakur,
/// Rabenseifner & Gropp 2005; one rank per node, beta_copy = gamma = 0):
///   recursive doubling  log2(P) * alpha_net + log2(P) * n * beta_net
///   Rabenseifner        2 log2(P) * alpha_net + 2 n (P-1)/P * beta_net
///   ring                2 (P-1) * alpha_net + 2 n (P-1)/P * beta_net
/// Against the lower bounds of Chan et al. 2007 (log2(P) * alpha latency,
/// 2 n (P-1)/P * beta bandwidth for allreduce): recursive doubling meets the
/// first, ring the second, Rabenseifner the second and twice the first.
#include <collc/algo/lower.hpp>
#include <collc/config.hpp>
#include <collc/error.hpp>
#include <collc/ir/cost.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace collc::algo {

namespace detail {

/// The cache-line minimum slice (bytes) lowering uses to split vectors.
inline constexpr std::size_t cost_granule = 64;

}  // namespace detail

/// Predicted seconds for one execution of schedule `s` for collective `c` on
/// `P` ranks, `bytes` per rank (MPI meaning: per rank for allreduce / reduce /
/// bcast, per block for reduce_scatter / allgather), with `ranks_per_node`
/// consecutive ranks per node (0: all on one node). Closed form over the
/// schedule's steps (see the file comment). Throws collc::error naming the
/// bad value for a schedule that does not fit (P, c), like algo::lower.
///
///   double ring = collc::algo::predict(collc::algo::schedule::ring(), collective::allreduce, 4096, 1 << 24, m, 1);
double predict(const schedule& s, collective c, int P, std::size_t bytes, const ir::machine_model& m,
               int ranks_per_node = 0);

}  // namespace collc::algo

#if COLLC_HEADER_ONLY
#include <collc/algo/cost.ipp>
#endif
