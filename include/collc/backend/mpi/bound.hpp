#pragma once
/// \file
/// The bound form of a plan, as values: the bytecode the interpreter runs
/// (`bound_op`, one rank's `bound_program`), the persistent transfers of its
/// messages, and the node-segment range it leased. binder.hpp makes them from
/// an ir::program; engine.hpp runs them; nothing here does any work.
///
/// Buffers are slots of a small base table the engine fills per execution:
///   0 send, 1 recv (user memory, moved by the chunk base every execution),
///   2 scratch, 3 + l the shm data of node rank l (fixed for the plan).
#include <collc/backend/mpi/handles.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace collc::mpi {

enum class opcode : std::uint8_t { copy, reduce, signal, wait, send, recv, fence };

/// Slots of the base table (see the file comment).
inline constexpr std::uint16_t slot_send = 0;
inline constexpr std::uint16_t slot_recv = 1;
inline constexpr std::uint16_t slot_scratch = 2;
inline constexpr std::uint16_t slot_shm0 = 3;

/// One bytecode instruction. Offsets and counts are in elements.
struct bound_op {
  opcode code = opcode::copy;
  std::uint16_t dst_slot = 0, a_slot = 0, b_slot = 0;
  std::uint32_t index = 0;  ///< signal: flag; wait: signal-base slot; send/recv: transfer
  /// wait, flag spread over words (engine.hpp): the execution of the awaited
  /// signal relative to this one, floor((value - 1) / the peer's signals per execution)
  std::int32_t exec_offset = 0;
  std::size_t dst = 0, a = 0, b = 0, n = 0;
  std::int64_t value = 0;         ///< wait: value relative to this execution
  std::uint64_t* flag = nullptr;  ///< signal: own flag line; wait: the peer's flag line
  int peer = 0;                   ///< wait/send/recv: program rank of the peer
  std::uint32_t source = 0;       ///< index of the instruction in the rank's program
};

/// A send or recv: a persistent request, re-initialised only when the address
/// it is bound to changes (user buffers move with the chunk base and with the
/// caller's pointers; shm and scratch never move).
struct transfer {
  bool is_send = true;
  int peer = 0;  ///< communicator rank
  int tag = 0;
  std::uint16_t slot = 0;  ///< base-table slot of the buffer
  std::size_t offset = 0;  ///< elements from the slot's base
  int count = 0;           ///< of `type`
  MPI_Datatype type = MPI_BYTE;
  std::shared_ptr<type_owner> owned_type;  ///< an indexed type for a message spanning remapped blocks
  MPI_Request request = MPI_REQUEST_NULL;
  const std::byte* bound = nullptr;
  bool active = false;
  std::size_t first = 0, last = 0;  ///< elements of the buffer the message covers (hull)
};

/// One program bound for one rank.
struct bound_program {
  std::vector<bound_op> ops;
  std::vector<transfer> transfers;
  /// signals[l * flags + f]: signals node rank l gives on flag f per execution.
  std::vector<std::int64_t> signals;
  std::size_t count = 0;  ///< elements per block / per rank (the chunk)
  bool in_place_safe = true;
  /// Receives (transfer indices, in program order) the engine starts when an
  /// execution starts, not where they stand: ir::receives_at_start.
  std::vector<std::uint32_t> early_receives;
};

/// Everything the binder needs to know about the rank and the node.
struct bind_context {
  int prog_rank = 0;
  int node_first = 0;  ///< first program rank of the node
  int node_size = 1;
  int flags = 0;  ///< flag lines per rank in the segment
  std::size_t elem_size = 1;
  std::size_t shm_capacity = 0;      ///< elements of shm per rank in the segment
  std::size_t scratch_capacity = 0;  ///< elements of scratch per rank
  std::vector<int> comm_of_prog;     ///< program rank -> communicator rank
  int comm_rank = 0;
  int tag_ub = 32767;
  /// Address of flag f of node rank l.
  std::vector<std::uint64_t*> flag_lines;  ///< [l * flags + f]
};

/// A leased range: this rank's part and every node peer's, same offset.
struct segment_lease {
  std::vector<std::byte*> slot;  ///< [node rank] start of the range in that rank's slot
  std::size_t bytes = 0;
  int arena = -1;
  std::size_t offset = 0;
};

}  // namespace collc::mpi
