#pragma once
// What the MPI engine lowers at setup for one plan, without MPI: the chunk
// and tail programs of engine::lower_chunks() (ir::lower_in_chunks with the
// engine's request: cache-line granule, blocks for reduce_scatter /
// allgather, the root and the node map in program ranks; in ir::engine_form,
// as the engine binds them). Shared by
// tests/test_layout.cpp and tests/test_sequence.cpp, so both check the
// programs the engine binds.
#include <collc/algo/lower.hpp>
#include <collc/ir/sequence.hpp>

#include <cstddef>
#include <optional>
#include <vector>

namespace collc_test {

/// `pieces`: the engine's (ir::exchange_pieces_for) unless a test asks for
/// smaller ones, so that pipelined exchanges appear at small counts.
inline collc::ir::chunked lower_like_engine(const collc::algo::schedule& s, collc::collective c, int P,
                                            std::size_t count, std::size_t elem, std::size_t chunk_bytes,
                                            const std::vector<int>& node_of, int root,
                                            std::optional<collc::ir::exchange_pieces> pieces = std::nullopt) {
  const auto bound = pieces.value_or(collc::ir::exchange_pieces_for(elem));
  const bool blocked = c == collc::collective::reduce_scatter || c == collc::collective::allgather;
  return collc::ir::lower_in_chunks(count, elem, blocked ? static_cast<std::size_t>(P) : 1, chunk_bytes,
                                    [&](std::size_t n, std::size_t stride) {
                                      collc::algo::lower_request q;
                                      q.coll = c;
                                      q.ranks = P;
                                      q.count = n;
                                      q.root = root;
                                      q.granule = collc::ir::line_granule(elem);
                                      q.block_stride = stride;
                                      q.node_of = node_of;
                                      return collc::ir::engine_form(collc::algo::lower(s, q), bound);
                                    });
}

}  // namespace collc_test
