#pragma once
/// \file
/// L2 of the pipeline: the per-rank program. A program is P flat instruction
/// lists over symbolic buffers; it knows nothing of MPI, threads or types.
/// Backends bind it (resolve buffers to pointers, flags to atomics) and run it
/// many times; collc::verify proves it correct; the text form prints it.
///
/// Semantics (what verify() checks and every backend implements):
///  - Buffers, addressed in *elements* of the plan's type T:
///      send    the rank's input  (user memory, private to the rank)
///      recv    the rank's output (user memory, private to the rank)
///      shm     the rank's slot of the node's shared segment; any rank on the
///              same node may read and write another rank's shm
///      scratch private temporary memory of the rank
///    A ref names (buffer, owner rank, offset). send/recv/scratch refs must be
///    owned by the executing rank; shm refs by a rank on the same node.
///  - copy:   dst[i] = src[i]                      for i < count
///  - reduce: dst[i] = a[i] op b[i]                for i < count
///    `a` holds contributions of lower ranks than `b` (operand order is
///    explicit so non-commutative operators are correct). dst may alias a or
///    b element-for-element (same buffer, owner and offset).
///  - signal: the rank's own flag `flag` += 1 (release).
///  - wait:   block until flag `flag` of rank `peer` (same node) reaches
///            epoch * signals_per_execution(peer, flag) + value   (acquire),
///    where epoch counts the program's previous executions. value in
///    [1, S] names a signal of the current execution; value <= 0 names one of
///    an earlier execution (used to protect shm against overwriting data a
///    peer has not finished reading). Flags only grow, so waits are monotone.
///  - send:   start sending src[0..count) to `peer` with `tag`; the source
///    must stay untouched until the end of the execution or the next fence.
///  - recv:   block until the matching message (k-th send from peer with the
///    same tag matches the k-th recv) has been written into dst.
///  - fence:  complete every send/recv this rank has started. A send is
///    complete once its receiver has received it (MPI may send by
///    rendezvous), and so is every send at the end of an execution.
///  The same program runs for every execution of a plan; the signal structure
///  (signals per flag per rank) is therefore fixed, which is what lets a wait
///  name its target relative to the current execution.
#include <collc/core.hpp>
#include <collc/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace collc::ir {

enum class buffer : std::uint8_t { send, recv, shm, scratch };

constexpr std::string_view to_string(buffer b) noexcept {
  switch (b) {
    case buffer::send: return "send";
    case buffer::recv: return "recv";
    case buffer::shm: return "shm";
    case buffer::scratch: return "scratch";
  }
  return "?";
}

/// A symbolic address: element `offset` of `owner`'s buffer `buf`.
struct ref {
  buffer buf = buffer::send;
  int owner = 0;
  std::size_t offset = 0;
  friend constexpr bool operator==(const ref&, const ref&) = default;
};

struct copy {
  ref dst, src;
  std::size_t count = 0;
  friend constexpr bool operator==(const copy&, const copy&) = default;
};
struct reduce {
  ref dst, a, b;  ///< dst = a op b; a comes first in rank order
  std::size_t count = 0;
  friend constexpr bool operator==(const reduce&, const reduce&) = default;
};
struct signal {
  int flag = 0;
  friend constexpr bool operator==(const signal&, const signal&) = default;
};
struct wait {
  int peer = 0;
  int flag = 0;
  std::int64_t value = 0;  ///< relative to this execution, see the file comment
  friend constexpr bool operator==(const wait&, const wait&) = default;
};
struct send {
  int peer = 0;
  ref src;
  std::size_t count = 0;
  int tag = 0;
  friend constexpr bool operator==(const send&, const send&) = default;
};
struct recv {
  int peer = 0;
  ref dst;
  std::size_t count = 0;
  int tag = 0;
  friend constexpr bool operator==(const recv&, const recv&) = default;
};
struct fence {
  friend constexpr bool operator==(const fence&, const fence&) = default;
};

using instruction = std::variant<copy, reduce, signal, wait, send, recv, fence>;
using rank_program = std::vector<instruction>;

/// Everything a backend or the verifier needs to know about one lowered
/// collective, plus the per-rank instruction lists.
struct program {
  collective coll = collective::allreduce;
  int ranks = 1;                   ///< P
  std::size_t count = 0;           ///< elements, MPI meaning (see collective)
  std::size_t block_stride = 0;    ///< reduce_scatter send / allgather recv: distance between
                                   ///< blocks in elements; 0 means `count` (dense). Lets a
                                   ///< backend run a chunk of every block with one program.
  int root = 0;                    ///< reduce / bcast only
  bool commutative_only = false;   ///< true if correct only for commutative ops
  std::size_t shm_count = 0;       ///< shm elements each rank needs
  std::size_t scratch_count = 0;   ///< scratch elements each rank needs
  int flags = 0;                   ///< flags per rank
  std::vector<int> node_of;        ///< node id of each rank; empty = all on node 0
  std::vector<rank_program> code;  ///< code[r] is rank r's program
  std::string name;                ///< schedule that produced it, for humans

  friend bool operator==(const program&, const program&) = default;

  [[nodiscard]] constexpr int node(int rank) const {
    return node_of.empty() ? 0 : node_of[static_cast<std::size_t>(rank)];
  }
  [[nodiscard]] constexpr bool same_node(int a, int b) const { return node(a) == node(b); }

  /// Distance between blocks of the P-block buffer (see block_stride).
  [[nodiscard]] constexpr std::size_t stride() const { return block_stride == 0 ? count : block_stride; }
  /// Where rank r's send starts in its recv when the two are one buffer
  /// (MPI_IN_PLACE): its own block for allgather, else the start.
  [[nodiscard]] constexpr std::size_t in_place_shift(int r) const {
    return coll == collective::allgather ? stride() * static_cast<std::size_t>(r) : 0;
  }
  /// Extent of a P-block buffer: P-1 strides plus one block.
  [[nodiscard]] constexpr std::size_t blocked_count() const {
    return ranks <= 0 ? 0 : stride() * static_cast<std::size_t>(ranks - 1) + count;
  }
  /// Elements in each rank's send buffer (bcast: the root's data lives in recv).
  [[nodiscard]] constexpr std::size_t send_count() const {
    switch (coll) {
      case collective::reduce_scatter: return blocked_count();
      case collective::bcast: return 0;
      default: return count;
    }
  }
  /// Elements in each rank's recv buffer.
  [[nodiscard]] constexpr std::size_t recv_count() const {
    return coll == collective::allgather ? blocked_count() : count;
  }
  /// Capacity of `buf` for one rank, in elements.
  [[nodiscard]] constexpr std::size_t capacity(buffer buf) const {
    switch (buf) {
      case buffer::send: return send_count();
      case buffer::recv: return recv_count();
      case buffer::shm: return shm_count;
      case buffer::scratch: return scratch_count;
    }
    return 0;
  }
  /// Number of signals rank `r` gives on `flag` in one execution.
  [[nodiscard]] constexpr std::int64_t signals_per_execution(int r, int flag) const {
    std::int64_t n = 0;
    for (const auto& ins : code[static_cast<std::size_t>(r)])
      if (const auto* s = std::get_if<signal>(&ins); s && s->flag == flag) ++n;
    return n;
  }
};

}  // namespace collc::ir
