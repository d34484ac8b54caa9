#pragma once
/// \file
/// Binding: one rank's instruction list (ir::program::code[r]) becomes a flat
/// array of `bound_op`s, the "bytecode" the interpreter runs many times.
///
/// What binding resolves once:
///  - buffers to a slot of a small base table the executor fills per run:
///      0 send, 1 recv (user memory, moved by the chunk base every run),
///      2 scratch, 3 + l the shm data of node rank l (fixed for the plan);
///  - flags to the address of their 64-byte line in the node segment, and a
///    wait's target to (slot of the peer's per-flag signal base, value);
///  - send/recv to a `transfer`: peer's communicator rank, tag, MPI datatype;
///  - program ranks back to communicator ranks: with a renumbering
///    (topology.hpp), block j of reduce_scatter's send and allgather's recv
///    belongs to program rank j = communicator rank comm_of_prog[j], so those
///    offsets are remapped block by block (copies and reduces that span
///    blocks are split; a message that spans blocks gets an indexed type).
/// Every reference is checked against the program's declared capacities, so a
/// faulty program is refused at bind time instead of writing out of bounds.
#include <collc/backend/mpi/bound.hpp>
#include <collc/config.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>

#include <cstddef>

namespace collc::mpi {

/// Binds `prog`'s code for ctx.prog_rank (see the file comment). Throws
/// collc::error(errc::invalid_argument) naming the instruction when the
/// program breaks a rule of ir/program.hpp.
bound_program bind(const ir::program& prog, const bind_context& ctx);

/// Whether running `b` with send and recv on the same user memory (MPI's
/// in-place) reads every send element before anything overwrites it. In-place
/// element s of send is element `shift + s` of recv (shift = own block for
/// allgather, 0 otherwise). A message reads its source until the next fence.
bool in_place_safe(const bound_program& b, std::size_t shift);

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/binder.ipp>
#endif
