#pragma once
/// \file
/// Optimisation passes: program -> program functions, each correct on its own
/// (a program that passes collc::ir::verify still passes after any of them)
/// and each a no-op when nothing applies.
///
///   merge_adjacent            consecutive copies / reduces over contiguous ranges
///                             become one; zero-count copies / reduces vanish
///   receive_into_destination  `recv X; ...; copy D <- X` -> `recv D` (same for a
///                             copy or reduce into X) when X is used nowhere else
///   drop_redundant_waits      waits already implied by what the rank knows
///   shorten_data_paths        the first two in turn to a fixpoint (what the MPI
///                             engine applies: ir::engine_form)
///   optimize                  all of them, in the order documented there
///
/// The passes never renumber flags, change signals, sends or buffer sizes, so
/// signals_per_execution and the wait values of the input stay meaningful.
#include <collc/config.hpp>
#include <collc/ir/program.hpp>

#include <cstddef>
#include <cstdint>
#include <variant>

namespace collc::ir {

namespace detail::pass {

/// Calls f(ref, count, is_write) for every buffer range `ins` touches.
template <class F>
void for_each_access(const instruction& ins, F&& f) {
  if (const auto* c = std::get_if<copy>(&ins)) {
    f(c->dst, c->count, true);
    f(c->src, c->count, false);
  } else if (const auto* r = std::get_if<reduce>(&ins)) {
    f(r->dst, r->count, true);
    f(r->a, r->count, false);
    f(r->b, r->count, false);
  } else if (const auto* s = std::get_if<send>(&ins)) {
    f(s->src, s->count, false);
  } else if (const auto* v = std::get_if<recv>(&ins)) {
    f(v->dst, v->count, true);
  }
}

}  // namespace detail::pass

/// Merges consecutive copies (and consecutive reduces) of a rank whose ranges
/// continue each other in the same buffers, and drops copies and reduces of
/// count 0 (a zero-count send or recv is kept: it still matches a partner).
/// Example: `copy d+0 <- s+0 x4; copy d+4 <- s+4 x4`  ->  `copy d+0 <- s+0 x8`
///   auto q = collc::ir::merge_adjacent(p);
program merge_adjacent(program p);

/// Writes data straight to its final place: when an instruction (recv, copy
/// or reduce) writes a temporary X in scratch or shm and X's only use is a
/// later `copy D <- X` on the same rank, the instruction writes D and the
/// copy goes. X may also be the first or last part of the copy's source (a
/// copy-out that merge_adjacent made of several temporaries'): then the copy
/// shrinks to the rest. Applies only when X is touched by nothing else
/// (any rank, any execution), nothing between the two touches D, no send
/// still reading D is pending, and, if D is shared memory, no
/// synchronisation lies between the two (so no other rank can tell).
/// Example: `recv <-r4 tag 0 scratch+0 x8; copy recv+8 <- scratch+0 x8` -> `recv <-r4 tag 0 recv+8 x8`,
///          `copy scratch+0 <- shm@2+0 x8; copy recv+0 <- scratch+0 x8` -> `copy recv+0 <- shm@2+0 x8`,
///          `recv <-r1 scratch+0 x4; recv <-r2 scratch+4 x4; fence; copy recv+4 <- scratch+0 x8`
///            -> `recv <-r1 recv+4 x4; recv <-r2 recv+8 x4; fence`
///   auto q = collc::ir::receive_into_destination(p);
/// Not done (yet): X in the middle of a copy's source, or X read by several copies.
program receive_into_destination(program p);

/// Removes every wait whose condition the rank already knows to hold at that
/// point: a repeat of an earlier wait on the same (peer, flag) with a value
/// no larger, a wait implied transitively (we waited for q's k-th signal and
/// q had waited for r2's flag f >= v before giving it, so our later wait on
/// (r2, f, <= v) is implied), a wait on an earlier execution implied by
/// anything newer, and waits on flags nobody signals (value <= 0). Knowledge
/// is propagated vector-clock style along signal -> wait edges and from one
/// execution to the next (see detail::pass::wait_knowledge); send/recv ordering is
/// not used. Waits on ranks of another node or that can never return are kept.
/// Memory is (signals on a node) x (ranks on the node) x flags x 8 bytes; a
/// node needing more than 128 MiB (detail::pass::wait_knowledge::max_entries)
/// keeps all its waits.
/// Example: `wait r1.f0 >= 2; ...; wait r1.f0 >= 1` -> the second wait goes.
///   auto q = collc::ir::drop_redundant_waits(p);
program drop_redundant_waits(program p);

/// merge_adjacent and receive_into_destination in turn until neither changes
/// anything: the data-movement passes, without touching a signal or a
/// wait. The MPI engine binds programs in this form (ir::engine_form in
/// sequence.hpp), and verifies what it binds. Every change
/// removes an instruction or shrinks a copy, so this ends.
///   auto q = collc::ir::shorten_data_paths(collc::algo::lower(schedule, request));
program shorten_data_paths(program p);

/// Overlaps a large exchange between two ranks with the reduction of what
/// it brings (a pipeline, as MPI libraries segment large messages). Where
/// ranks r and q both run `send ->peer A xn; recv <-peer D xn; fence; C`, C
/// a copy or reduce that reads all of D (the recursive-exchange step between
/// two nodes), and n >= max(2 * piece, min_count), both messages travel as pieces of `piece`
/// elements (same tag: MPI matches them in order) and each rank consumes
/// piece j as soon as it has arrived. With `ahead` = 0 every piece is sent
/// at once:
///   `send A+0 xm; send A+m xm; ...; recv D+0 xm; C[0, m); recv D+m xm; C[m, 2m); ...; fence`
/// with `ahead` = k the first k pieces are sent first and piece j + k right
/// after piece j has arrived, so at most k pieces of each message are in
/// flight (k = 1: `send A+0; recv D+0; send A+m; C[0, m); recv D+m; send A+2m; C[m, 2m); ...`).
/// Either way the network carries piece j + 1 while C works on piece j. Applies only
/// where moving C's pieces before the fence and the later receives touches
/// nothing they touch: C's other ranges are disjoint from D (or D itself,
/// element for element) and its destination is no source of a send still in
/// flight. In place (send and recv one buffer) C then writes what a send may
/// still read, so such a program is not in_place_safe and the engine stages
/// the input. piece = 0, or a program on one node (no messages), returns p
/// unchanged.
///   auto q = collc::ir::pipeline_exchanges(p, 65536, 524288);  // doubles: 512 KiB pieces from 4 MiB, all at once
program pipeline_exchanges(program p, std::size_t piece, std::size_t min_count = 0, std::size_t ahead = 0);

/// All passes: drop_redundant_waits first (its analysis only looks at
/// signals and waits, which the other passes never touch, and fewer waits
/// leave adjacent copies to merge and let forwarding cross fewer
/// synchronisations), then shorten_data_paths (merging pieces can make a
/// temporary's write and its copy-out match in size; forwarding turns
/// `copy T <- S; copy D <- T` into direct copies that may now be contiguous).
/// optimize(optimize(p)) == optimize(p).
/// Example: auto q = collc::ir::optimize(collc::algo::lower(schedule, request));
program optimize(program p);

// --- alternating shm ------------------------------------------------------------

/// A wait's value when shm rotates over `copies` copies by execution number
/// (two: `alt` in Jocksch et al. 2026, by parity): a cross-execution wait
/// (value <= 0: "the peer has finished the previous execution's part", which
/// protects shm the peer may still read) may look copies - 1 executions
/// further back, since execution e writes the copy that execution e - copies
/// used last. `signals` = the peer's signals on the flag per execution. Waits
/// inside the execution (value > 0) are unchanged.
constexpr std::int64_t alternating_wait_value(std::int64_t value, std::int64_t signals, int copies = 2) noexcept {
  return value <= 0 ? value - static_cast<std::int64_t>(copies - 1) * signals : value;
}

/// What an engine runs when it rotates shm over `copies` copies (2 to 64),
/// written as one program over `copies` executions so that verify() can
/// prove it: execution j is `p` with alternating_wait_value(..., copies),
/// its shm references moved to copy j (offset + j * shm_count) and its waits
/// shifted by the j executions' signals before it. Programs with send/recv
/// are refused (errc::invalid_argument): their transfers are bound to fixed
/// addresses. verify_sequence(..., {.shm_copies = k}) proves the same runs
/// without building this program.
///   auto ring = collc::ir::alternate(prog, 8);  verify(ring, {.executions = 3});
program alternate(const program& p, int copies = 2);

}  // namespace collc::ir

#if COLLC_HEADER_ONLY
#include <collc/ir/passes.ipp>
#endif
