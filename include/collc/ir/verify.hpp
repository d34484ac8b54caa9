#pragma once
/// \file
/// collc::verify: runs all P rank programs of an ir::program symbolically and
/// proves, for every execution of a persistent plan, that
///   0. well_formed    every ref, flag and peer is legal (see program.hpp),
///   1. contribution   every result element holds each rank's contribution
///                     exactly once and nothing else (nothing uninitialised,
///                     nothing stale from an earlier execution),
///   2. operand_order  for non-commutative operators the in-order leaves of
///                     each result are ranks 0..P-1,
///   3. identical      every rank holds the same expression tree for an element
///                     (so floating-point results are bitwise identical),
///   4. race           every read is ordered after the write it reads, and no
///                     write is concurrent with another rank's access,
///   5. deadlock       no wait or recv blocks forever; sends and recvs match.
/// The first violation is reported with rank, instruction index, execution and
/// a reason that names the offending buffer element, flag or peer.
///
/// Model. Values are hash-consed expression trees: leaf(rank, element,
/// execution) for the caller's input, node(a, b) for `a op b`, 0 for an
/// undefined value. The caller of each rank is modelled at every execution
/// boundary: it reads the rank's results, then writes fresh leaves (tagged with
/// the execution index) into the rank's send buffer (bcast: the root's recv),
/// so stale reads show up as wrong contributions and late writes as races.
/// Happens-before is tracked with vector clocks (one clock tick per
/// instruction): program order; a wait with threshold t synchronises with the
/// peer's t-th signal of that flag; a recv with its matched send. Accesses are
/// checked FastTrack style: a write epoch and the reads since, per element.
/// A send reads its source at the send; the source counts as being read until
/// the sender's next fence (or the end of the execution), and any write to it
/// before then is reported.
///
/// Sends. A send never blocks, but a fence, and the end of an execution
/// (where the engine completes the execution's sends), wait until every send
/// the rank started has been received: MPI completes a large standard-mode
/// send only once its receive is posted (rendezvous), and the engine posts a
/// receive at its recv. A program that is live only with buffered sends
/// (send, fence, recv on both sides of a pair) is a deadlock.
///
/// Scheduling. Ranks run round robin, each until it blocks (wait threshold not
/// reached, recv without a message). This single greedy run is conclusive:
///  - a blocked instruction, once enabled, stays enabled until its own rank
///    executes it: flags only grow, only the receiving rank removes messages
///    from its channels, sends never block, and a blocked rank's sends only
///    get received (so a fence, once enabled, stays so);
///  - no rank's control flow depends on data, and which signal a wait or which
///    send a recv pairs with is fixed by counting, not by timing.
/// So every schedule executes the same instructions with the same
/// synchronisation (the happens-before relation is schedule independent): if
/// the greedy run gets stuck, every run gets stuck at the same instructions, and
/// vector clocks report a race whenever one exists in some schedule. In a
/// race-free program the values are schedule independent too, so one run
/// decides 1-3.
///
/// Order of reports. Static checks first: property 0, then the pairing of
/// sends with recvs and of waits with signals (reported as deadlock). During
/// the run a race stops it at once; a wrong result (1-3) is kept while the run
/// goes on and is reported unless a race turns up later (the race is the
/// cause) or a deadlock in the same or an earlier execution.
///
/// Cost: O(total instructions * P) for synchronisation plus O(element accesses)
/// for data; about 24 bytes per element of every rank's buffers, where an
/// element is a group of elements moved together (see "Element groups").
/// At most 65536 ranks (P vector clocks of P entries).
///
/// Element groups. Elements that every instruction moves together need not
/// be simulated one by one:
///  - When every offset and count (each ref's offset, each instruction's
///    count, the program's count and, for reduce_scatter and allgather, its
///    block stride; the engine's chunk programs of the other collectives
///    carry an unused one, which the grouped copy drops) is a multiple of g, each
///    instruction moves whole groups of g elements, element i of a group to
///    element i of a group. The run is then g independent copies of the run
///    of the program with those numbers divided by g (capacities rounded
///    down), one per position in the group: result element g*k + i holds
///    the tree of divided element k with each leaf k' read as g*k' + i.
///  - More generally, cut each space of positions (the send and recv of all
///    ranks, which the results and MPI_IN_PLACE relate; each rank's shm;
///    each rank's scratch) at every offset and end of every range, and close
///    the cuts under the moves (copy and reduce operands to their
///    destination, a send's source to its recv's destination, block r of a
///    P-block buffer to block 0): a cut inside one side of a move is a cut
///    of the other. Each run between two cuts then lands on runs of the same
///    length, position for position, so numbering the runs 0, 1, 2, ...
///    gives a program whose run is the original's with each run of elements
///    in the place of one element (the original is the union, over
///    positions p, of the renumbered run restricted to runs longer than p,
///    and no instruction mixes runs). Renumbering is used when the cuts are
///    at most a quarter of the positions: chunk and tail programs that split
///    the same shm at unrelated places can cut it almost element by element
///    (an 8 MiB allreduce in pseudo-nodes of 2 does), and such a sequence is
///    proven as given.
/// Either way a result holds each contribution once, in order and
/// identically on every rank iff the grouped one does; two accesses overlap
/// iff the grouped ones do; signals and waits are untouched. The static
/// checks (0, and the pairing of 5) run on the programs as given first,
/// since a send and a recv of different lengths could group alike. verify
/// proves the grouped programs (an allreduce of 1000003 elements at P = 8
/// in nodes of 4: 0.01 s, where element by element needs 2.6 GiB) and on a
/// violation re-runs element by element, so that reports name real
/// elements. verify_options::element_groups = false turns grouping off.
///
/// Note: as every execution runs the same code, a stale value (from an earlier
/// execution) in a result comes with a race or an uninitialised read in
/// execution 0, which is what gets reported; the "stale" wording of property 1
/// is kept for completeness but no test program reaches it.
#include <collc/config.hpp>
#include <collc/ir/program.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace collc::ir {

/// The property a program failed (none = verified). Numbered as in the file comment.
enum class property : std::uint8_t { none, well_formed, contribution, operand_order, identical, race, deadlock };

constexpr std::string_view to_string(property p) noexcept {
  switch (p) {
    case property::none: return "none";
    case property::well_formed: return "well_formed";
    case property::contribution: return "contribution";
    case property::operand_order: return "operand_order";
    case property::identical: return "identical";
    case property::race: return "race";
    case property::deadlock: return "deadlock";
  }
  return "?";
}

/// How the program will be used.
struct verify_options {
  /// The operator is commutative: operand order (property 2) is not required,
  /// and `a op b` equals `b op a` when comparing trees (never re-association).
  /// A program with commutative_only set is refused if this is false.
  bool commutative = false;
  /// Run the program this many times back to back (catches cross-execution
  /// hazards such as overwriting shm a peer still reads from the last execution).
  int executions = 2;
  /// send and recv of each rank are the same memory (MPI_IN_PLACE):
  /// allreduce / reduce_scatter: send[i] is recv[i] (the result is the first
  /// `count` elements); allgather: send[i] is recv[rank * stride + i];
  /// reduce: as allreduce, at the root only; bcast: ignored.
  bool in_place = false;
  /// Copies of shm that executions rotate over (1 to 64): execution e
  /// uses copy e % shm_copies, every shm reference moved by (e % shm_copies)
  /// times the largest shm_count of the programs (the engine's alternating
  /// halves, `alt` in Jocksch et al. 2026; see backend/mpi/engine.hpp).
  int shm_copies = 1;
  /// Bytes verify may use (its verify_memory_estimate); a larger program is
  /// refused up front with collc::error(errc::invalid_argument) instead of
  /// exhausting the machine. 0: no limit.
  std::uint64_t memory_limit = std::uint64_t{2} << 30;
  /// Prove in element groups (see "Element groups" above); false: element
  /// by element, the reference the grouping is tested against.
  bool element_groups = true;
};

/// Outcome of collc::verify: the first violation found, or none.
struct verify_result {
  property failed = property::none;
  int rank = -1;              ///< rank whose instruction (or result) is at fault; -1: the whole program
  std::ptrdiff_t index = -1;  ///< instruction index in code[rank]; -1: none (e.g. a result check)
  int execution = -1;         ///< 0-based execution; -1: a static check
  std::string reason;

  /// True when the program verified.
  explicit operator bool() const { return failed == property::none; }

  /// "ok", or e.g. "rank 3, instruction 7 (execution 1): <reason>".
  [[nodiscard]] std::string to_string() const;
};

/// Bytes collc::verify (and verify_sequence) would hold at its peak for
/// `programs`, program k running in runs[k] of the executions, with options
/// `o` (in element groups when o.element_groups, as verify runs them): an
/// estimate from the sizes only, in O(instructions), saturating
/// instead of overflowing. It counts the cells of every rank's buffers (24 B
/// per element), the vector clocks (4 B * P each: one per rank, one per
/// signal of every execution, one per message in flight), the expression
/// trees (inputs and reductions of every execution), the allreduce results
/// and the per-(rank, flag) counters; not the read sets of elements read
/// concurrently by several ranks. Programs whose shape alone verify refuses
/// (ranks < 1 or > 65536, not one rank program per rank) count nothing:
/// they are reported without simulating. verify refuses a program whose
/// estimate exceeds verify_options::memory_limit.
///
///   auto bytes = collc::ir::verify_memory_estimate({&prog}, {2}, {});  // what verify(prog) needs
std::uint64_t verify_memory_estimate(const std::vector<const program*>& programs,
                                     const std::vector<std::uint64_t>& runs, const verify_options& o = {});

/// Runs every rank's program symbolically for `o.executions` back-to-back
/// executions and returns the first violation of properties 0-5 (see the file
/// comment), or a result that converts to true.
///
///   auto r = collc::verify(prog, {.commutative = false});
///   if (!r) std::cerr << r.to_string() << '\n';  // "rank 3, instruction 7 (execution 1): ..."
///
/// Throws collc::error(errc::invalid_argument) only for bad options.
verify_result verify(const program& p, const verify_options& o = {});

/// Runs a sequence of executions, execution e running programs[order[e]]
/// (o.executions is ignored), and proves properties 0-5 for it: what a
/// persistent plan runs when its calls alternate between programs, e.g. the
/// chunk program k times, a tail program, then the next call's chunks
/// (ir/sequence.hpp). A wait's value counts from the signals the peer gave
/// in all earlier executions, whichever programs they ran. The programs must
/// share collective, rank count, root and node layout.
///
///   auto r = collc::verify_sequence({chunk, tail}, {0, 0, 1, 0, 0, 1}, {.commutative = true});
verify_result verify_sequence(const std::vector<program>& programs, const std::vector<std::size_t>& order,
                              const verify_options& o = {});

/// verify(), throwing collc::error(errc::verification_failed) naming the
/// program, the property and the violation when it fails.
///
///   collc::verify_or_throw(prog, {.commutative = true, .executions = 3});
void verify_or_throw(const program& p, const verify_options& o = {});

}  // namespace collc::ir

namespace collc {
using ir::verify;
using ir::verify_or_throw;
using ir::verify_sequence;
}  // namespace collc

#if COLLC_HEADER_ONLY
#include <collc/ir/verify.ipp>
#endif
