#pragma once
/// \file
/// Named schedules (the textbook algorithms of Thakur, Rabenseifner
/// & Gropp 2005 as presets of the
/// four families), the enumeration of every schedule for a collective (the
/// property tests' search space), and the default selection rule.
#include <collc/algo/schedule.hpp>
#include <collc/config.hpp>
#include <collc/core.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace collc::algo {

namespace detail {
/// The largest power of two <= P (P >= 1).
int floor_pow2(int P);
/// log2 of a power of two f.
int log2_exact(int f);
}  // namespace detail

/// Recursive doubling: log2(P') reduce-exchange steps of radix 2 over the
/// largest power of two P' <= P, the other P - P' ranks folded in.
schedule recursive_doubling(int P);

/// Rabenseifner: recursive-halving reduce-scatter then recursive-doubling
/// allgather (radix 2), remainder folded in for non-power-of-two P.
schedule rabenseifner(int P);

/// The ring: schedule::ring().
schedule ring();
/// The binomial tree: schedule::tree(0).
schedule binomial_tree();

/// Every schedule collc can lower for (collective, P): all recursive-exchange
/// factor sets (every ordered factorization, every split between
/// reduce-scatter and reduce-exchange steps), the folded presets for
/// non-power-of-two P, and, for commutative operators (or allgather), every
/// cyclic-shift set and the ring; trees of several arities and roots; copy-in.
std::vector<schedule> all_schedules(collective c, int P, bool commutative);

/// True when every node holds the same number of ranks, in contiguous blocks.
bool uniform_blocks(const std::vector<int>& node_of, int& per_node, int& nodes);

/// The default selection rule (until the tuned selector): documented in
/// docs/architecture.md, "Default selection".
///  - one node: allreduce <= 4 KiB and P <= 16, and P = 2 at every size:
///    {P} (one step, every rank reduces all contributions); larger: {-P,P}
///    (every rank reduces its slice, then reads the others'). reduce_scatter {-P}, allgather {P};
///    reduce and bcast: binomial tree up to 4 KiB (reduce at P = 2: up to
///    2 MiB, presets.ipp says why), else copy-in.
///  - one node with more ranks than `node_cores` (oversubscribed; 0 =
///    unknown, taken as one core per rank): allreduce while P x bytes <=
///    64 KiB: {P} (with the MPI engine's alternating shm copies a call has
///    one hand-off per peer and no entry wait; measured on 2 cores: P = 4,
///    8 B: 8 us against 16-23 us for the flat tree, P = 8: 32 us against
///    37-42 us); then, and for reduce and bcast, up to 64 KiB: the flat tree
///    (tree:P-1: the leaves write, the root reduces and writes, the leaves
///    read; each leaf waits on the root only: P = 8, 16 KiB: 46 us against
///    52 us for {8}; from 128 KiB {-P,P} wins). A rank descheduled in the
///    middle of a call stalls everyone who waits on it, so the number of
///    dependent waits decides. Reduce and bcast above 64 KiB and up to
///    2 MiB: the binomial tree (each rank waits on its parent and children
///    only, where copy-in's rounds wait on every rank; presets.ipp has the
///    measurement).
///  - several nodes, equal blocks of L ranks on N nodes: hierarchical
///    allreduce {-L, N, L} (reduce-scatter on the node, exchange of slices
///    between nodes, allgather on the node), {-L..} forms for the others;
///    uneven nodes: binomial tree.
schedule default_schedule(collective c, int P, std::size_t bytes, bool commutative,
                          const std::vector<int>& node_of = {}, int node_cores = 0);

}  // namespace collc::algo

#if COLLC_HEADER_ONLY
#include <collc/algo/presets.ipp>
#endif
