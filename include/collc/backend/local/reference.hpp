#pragma once
/// \file
/// The oracle for executor and lowering tests: what every rank's recv buffer
/// must hold after a collective, computed sequentially as a left fold in rank
/// order, ((x0 op x1) op x2) op ... x(P-1). For exact types and for
/// non-commutative operators a correct program gives exactly this; for
/// floating point a program may associate differently (equal within rounding),
/// but all ranks must still agree bitwise.
///
///   std::vector<std::vector<int>> send{{1, 2}, {3, 4}, {5, 6}};
///   auto want = collc::local::reference(collc::collective::allreduce, 3, 2, 0, send, collc::plus{});
///   // want == {{9, 12}, {9, 12}, {9, 12}}
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ops.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace collc::local {

/// Expected recv buffers of `coll` over `ranks` ranks with MPI counts (`count`
/// elements per rank, or per block for reduce_scatter/allgather; blocks are
/// dense). sends[r] is rank r's send buffer; for bcast, sends[root] is the
/// root's data (what recv[root] holds on entry) and other entries are ignored.
/// For reduce, ranks other than the root get an empty vector: their recv
/// buffer is unspecified. Throws errc::invalid_argument naming the bad value
/// (rank count, root, number or size of send buffers).
template <element T, class Op = plus>
requires reduction_op<Op, T> std::vector<std::vector<T>> reference(collective coll, int ranks, std::size_t count,
                                                                   int root, std::span<const std::vector<T>> sends,
                                                                   const Op& op = {}) {
  auto fail = [](const std::string& msg) {
    throw collc::error(errc::invalid_argument, collc::detail::cat("local reference: ", msg));
  };
  if (ranks < 1) fail(collc::detail::cat("ranks must be >= 1, got ", ranks));
  const auto P = static_cast<std::size_t>(ranks);
  const bool rooted = coll == collective::reduce || coll == collective::bcast;
  if (rooted && (root < 0 || root >= ranks))
    fail(collc::detail::cat("root ", root, " out of range for ", ranks, " ranks"));
  if (sends.size() != P) fail(collc::detail::cat(sends.size(), " send buffers for ", ranks, " ranks"));
  const std::size_t need = coll == collective::reduce_scatter ? count * P : count;
  for (std::size_t r = 0; r < P; ++r) {
    if (coll == collective::bcast && r != static_cast<std::size_t>(root)) continue;
    if (sends[r].size() < need)
      fail(collc::detail::cat("send buffer of rank ", r, " has ", sends[r].size(), " elements, need ", need));
  }

  // Left fold over ranks of the `count` elements starting at `offset` of each send buffer.
  auto fold = [&](std::size_t offset) {
    std::vector<T> acc(sends[0].begin() + static_cast<std::ptrdiff_t>(offset),
                       sends[0].begin() + static_cast<std::ptrdiff_t>(offset + count));
    for (std::size_t q = 1; q < P; ++q)
      for (std::size_t i = 0; i < count; ++i) acc[i] = op(acc[i], sends[q][offset + i]);
    return acc;
  };
  auto prefix = [&](std::size_t r) {
    return std::vector<T>(sends[r].begin(), sends[r].begin() + static_cast<std::ptrdiff_t>(count));
  };

  std::vector<std::vector<T>> out(P);
  switch (coll) {
    case collective::allreduce: {
      const auto all = fold(0);
      for (auto& o : out) o = all;
      break;
    }
    case collective::reduce_scatter:
      for (std::size_t r = 0; r < P; ++r) out[r] = fold(r * count);
      break;
    case collective::allgather: {
      std::vector<T> all;
      all.reserve(count * P);
      for (std::size_t q = 0; q < P; ++q)
        all.insert(all.end(), sends[q].begin(), sends[q].begin() + static_cast<std::ptrdiff_t>(count));
      for (auto& o : out) o = all;
      break;
    }
    case collective::reduce: out[static_cast<std::size_t>(root)] = fold(0); break;
    case collective::bcast: {
      const auto data = prefix(static_cast<std::size_t>(root));
      for (auto& o : out) o = data;
      break;
    }
  }
  return out;
}

/// reference() for a vector of per-rank vectors (lets T be deduced).
template <element T, class Op = plus>
requires reduction_op<Op, T> std::vector<std::vector<T>> reference(collective coll, int ranks, std::size_t count,
                                                                   int root, const std::vector<std::vector<T>>& sends,
                                                                   const Op& op = {}) {
  return reference(coll, ranks, count, root, std::span<const std::vector<T>>(sends), op);
}

/// reference() for the collective, rank count, count and root of `prog`.
/// Only dense block layouts (block_stride 0 or == count) are supported;
/// errc::unsupported otherwise.
template <element T, class Op = plus>
requires reduction_op<Op, T> std::vector<std::vector<T>> reference(const ir::program& prog,
                                                                   std::span<const std::vector<T>> sends,
                                                                   const Op& op = {}) {
  if (prog.stride() != prog.count)
    throw collc::error(errc::unsupported,
                       collc::detail::cat("local reference: block_stride ", prog.block_stride, " differs from count ",
                                          prog.count, "; only dense blocks are supported"));
  return reference(prog.coll, prog.ranks, prog.count, prog.root, sends, op);
}

}  // namespace collc::local
