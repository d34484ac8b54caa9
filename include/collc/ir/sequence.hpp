#pragma once
/// \file
/// What a persistent plan runs, execution by execution, as plain programs the
/// verifier can prove in the order they run (verify_sequence in verify.hpp).
/// The MPI engine (backend/mpi/engine.hpp) builds its plans from exactly these
/// functions and binds exactly these programs, so a proof of
/// `runs.sequence(...)` is a proof of what the engine executes.
///
/// A call of `count` elements runs a *chunk* program `full_chunks` times (user
/// pointers advanced by the chunk base) and then a *tail* program for
/// `count % chunk` elements; each run is one execution, and executions count
/// on across calls:
///
///   call 1: chunk chunk ... chunk tail'   call 2: chunk' chunk ... chunk tail'   ...
///
/// A wait's value counts from the signals its peer gave in all earlier
/// executions (program.hpp's epoch * signals_per_execution + value when one
/// program runs every time). Cross-execution waits (value <= 0, "the peer has
/// finished reading my shm of the previous execution") are written by
/// lowering for the program followed by itself; after a program switch they
/// would name the wrong signals of the other program (the chunk program's
/// signal -1 may come before its last read of shm, where the tail program's
/// does not). So the first execution after a switch runs a *guarded* copy
/// (tail', chunk'): entry waits for every signal every node peer gave in all
/// earlier executions (value 0 on every flag), then the program. A reader
/// signals after its last read of shm another rank rewrites (lowering's
/// invariant, proven by the verifier), so the guard covers every read of the
/// earlier executions.
///
/// Alternating shm (`alt` in Jocksch et al. 2026): programs without messages whose shm
/// is small get k copies (two; a ring of more for rooted collectives, see
/// shm_copies_for); execution e uses copy e % k and cross-execution waits look
/// k - 1 executions further back (alternating_wait_value). Guarded copies keep
/// their waits as lowered: after the guard every earlier execution is
/// finished, so every copy is free.
#include <collc/config.hpp>
#include <collc/ir/passes.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace collc::ir {

/// `p` with every cross-execution wait rewritten by alternating_wait_value:
/// what runs when shm rotates over `copies` copies by execution number.
program alternating_waits(program p, int copies = 2);

/// `p` preceded, on every rank, by waits for all signals of all earlier
/// executions of every other rank on its node, on each of `flags` flags (the
/// most any program of the sequence uses): the first execution after a
/// program switch (see the file comment).
program guarded(program p, int flags);

/// Whether running `p` with send and recv of every rank on the same memory
/// (MPI_IN_PLACE) reads every send element before anything overwrites it;
/// where not, the engine stages the input (or the output). Decided for all
/// ranks at once, from the program every rank holds, so the whole plan runs
/// one way and verify(..., {.in_place = true}) proves exactly that. In place,
/// send element s is recv element shift + s (allgather: shift = rank *
/// stride, the rank's own block; otherwise 0). A message reads its source
/// until the next fence.
bool in_place_safe(const program& p);

/// How engine_form pipelines exchanges between two ranks (pipeline_exchanges).
struct exchange_pieces {
  std::size_t piece = 0;      ///< elements per piece; 0: no pipelining
  std::size_t min_count = 0;  ///< only exchanges of at least this many elements
  std::size_t ahead = 0;      ///< pieces in flight ahead of the one received; 0: all sent at once
};

/// The program the MPI engine binds for a lowered chunk program `p`:
/// shorten_data_paths, so that data goes straight to where it is used instead
/// of through a temporary and a copy, and scratch trimmed to what is still
/// used. Between nodes every message the builder received into scratch lands
/// in place (copy-in's allgather at P = 4: 3 of 4 blocks no longer copied);
/// on one node copy-in's reduce and bcast at P = 2 reduce or read straight
/// into recv (one copy of half the data less; 256 KiB: reduce 9.7 against
/// 10.6-12.4 us, bcast 5.7-6.0 against 6.6-6.7 us). The engine and the
/// tests that prove its runs call this one function. With `pieces`
/// (elements; default: off), large exchanges between two ranks then become
/// pipelines of pieces (pipeline_exchanges); the engine passes
/// exchange_pieces_for() of its element size.
program engine_form(program p, exchange_pieces pieces = {});

/// Exchanges between nodes of at least exchange_pipeline_bytes travel as
/// pieces of exchange_piece_bytes, all sent at once (exchange_pieces_ahead
/// = 0), each reduced as it arrives (pipeline_exchanges). Measured over
/// loopback TCP (P = 2, one rank per node, allreduce: one exchange and its
/// reduction per 4 MiB network chunk; rounds beside MPI_Allreduce,
/// docs/benchmarks.md, "Between nodes: pipelined exchanges"):
///  - pieces (7 rounds): with 512 KiB pieces collc took 1032 against 1307 us
///    whole at 4 MiB, 2359 against 2605 at 8 MiB, 5052 against 5496 at 16 MiB
///    (256 KiB, 1 MiB and 2 MiB pieces less); at 1 and 2 MiB pieces made the
///    ratio to MPI worse (0.94 against 0.79, 1.16 against 0.98), so smaller
///    exchanges stay whole;
///  - a window (piece j + k sent once piece j is in: pipeline_exchanges'
///    `ahead`), one build, 12 rounds alternating k = 0, 1, 2: all at once
///    1066 / 2447 / 5114 us at 4 / 8 / 16 MiB, one ahead 1517 / 3013 / 5995,
///    two ahead 1362 / 2835 / 5930. (Earlier rounds in the VM's other mode had
///    one ahead 7-10 % ahead; it never held up in the same build.)
inline constexpr std::size_t exchange_piece_bytes = std::size_t{512} << 10;
inline constexpr std::size_t exchange_pipeline_bytes = std::size_t{4} << 20;
inline constexpr std::size_t exchange_pieces_ahead = 0;

/// exchange_piece_bytes, exchange_pipeline_bytes and exchange_pieces_ahead,
/// the sizes in elements of `elem_size` bytes.
constexpr exchange_pieces exchange_pieces_for(std::size_t elem_size) noexcept {
  if (elem_size == 0) return {};
  return {std::max<std::size_t>(1, exchange_piece_bytes / elem_size), exchange_pipeline_bytes / elem_size,
          exchange_pieces_ahead};
}

/// Which of rank r's instructions are receives the engine posts when an
/// execution starts instead of where they stand (per instruction; true only
/// for recv). Posting early lets a message land in its place as it arrives
/// (no copy out of MPI's unexpected queue, no rendezvous round trip waiting
/// for the receiver to get there) and lets the sender's fence complete
/// sooner. A receive qualifies when its destination is scratch or the user's
/// recv, no earlier instruction of the rank touches that range (the user's
/// send counted as recv elements shift + s, as if in place, so the answer
/// holds either way), and no earlier receive from the same peer with the same
/// tag stays where it stands (MPI matches in posting order). Then the early
/// write is invisible: nothing of the rank reads or writes the range before
/// the receive, no other rank can see private memory, and MPI delivers the
/// same message into it. Posting earlier only lets sends complete earlier, so
/// a program verify() proves live under late posting stays live; the
/// verifier models every receive where it stands.
std::vector<bool> receives_at_start(const program& p, int r);

/// One lowering of a chunk: `count` elements per rank (per block for
/// reduce_scatter / allgather, blocks `block_stride` apart; 0 = dense).
using chunk_lowering = std::function<program(std::size_t count, std::size_t block_stride)>;

/// Elements per 64-byte cache line for elements of `elem_size` bytes (1 when
/// they do not tile a line): the granule lowering aligns blocks to, so that
/// no two ranks write one line (false sharing between writers).
constexpr std::size_t line_granule(std::size_t elem_size) noexcept {
  return elem_size > 0 && elem_size <= 64 && 64 % elem_size == 0 ? 64 / elem_size : 1;
}

/// How a plan of `count` elements of `elem_size` bytes is cut into
/// executions: the chunk starts at `chunk_bytes` (divided by `blocks`, the
/// blocks per rank of reduce_scatter / allgather, a multiple of `granule`
/// elements, one cache line) and shrinks until the chunk program's shm and
/// scratch each fit in `chunk_bytes`; the tail takes count % chunk. Returns
/// the chunk program (and the tail program if any) and the chunk size.
struct chunked {
  std::vector<program> programs;  ///< [0] chunk, [1] tail (if count % chunk != 0)
  std::size_t chunk = 0;          ///< elements per chunk
};

chunked lower_in_chunks(std::size_t count, std::size_t elem_size, std::size_t blocks, std::size_t chunk_bytes,
                        const chunk_lowering& lower);

/// The bytes of shm per rank up to which shared-memory programs alternate
/// two copies (see alternates()).
inline constexpr std::size_t alternate_max_bytes = 16384;

/// The same for bcast and reduce programs: a bcast root (reduce leaf) then
/// fills the next copy while its readers empty this one. Measured on 2 cores
/// (docs/benchmarks.md, "Rooted calls in alternating 64 KiB chunks"): with
/// more ranks than cores the default flat tree of 24-64 KiB (48-128 KiB of
/// shm per rank) 1.2-2.4x faster alternating. Two copies of 128 KiB fill
/// the default chunk_bytes, which bounds them (alternates()).
inline constexpr std::size_t rooted_alternate_max_bytes = std::size_t{128} << 10;

/// Whether programs of `elem_size`-byte elements alternate shm copies: no
/// messages (transfers are bound to fixed shm addresses), and shm of at most
/// alternate_max_bytes per rank (rooted_alternate_max_bytes for bcast and
/// reduce) whose two copies fit in `chunk_bytes`. It halves the hand-offs of
/// tiny calls (P = 2, 8 B: 0.30 us against 0.45 us), as an execution need
/// not wait for its peers to finish reading the previous one, and lets a
/// bcast root (reduce leaf) fill the next copy while its readers empty this one.
bool alternates(const std::vector<program>& programs, std::size_t elem_size, std::size_t chunk_bytes);

/// The most shm copies a plan rotates over (a power of two).
inline constexpr int max_shm_copies = 32;

/// How many shm copies programs of `elem_size`-byte elements rotate over: 1
/// where they do not alternate (alternates() is false); 2 for collectives in
/// which every rank waits for every other each execution (allreduce,
/// reduce_scatter, allgather: no rank can run further ahead); for bcast and
/// reduce a ring of up to max_shm_copies within `ring_bytes` (default 64 KiB;
/// two copies whatever their size, which alternates() bounds)
/// and `chunk_bytes`, so back-to-back calls need not wait for the slowest
/// reader each call: the root (bcast) or the leaves (reduce) run up to k - 1
/// executions ahead, as an MPI library's eager sends run ahead in its
/// shared-memory FIFO. Measured on 2 cores, back-to-back bcast of 8 B: P = 4
/// 3.4 us per call with 2 copies, 2.0 with 4, 1.0 with 8, 0.7 with 16, 0.44
/// with 32 (Open MPI 0.7); P = 2 0.32 us with 2, 0.10-0.12 with 16 (Open MPI
/// 0.12-0.17).
int shm_copies_for(const std::vector<program>& programs, std::size_t elem_size, std::size_t chunk_bytes,
                   std::size_t ring_bytes = std::size_t{64} << 10);

/// The programs a plan binds and the order it runs them (see the file comment).
struct runs {
  /// [0] chunk; with a tail also [1] tail, [2] chunk after a tail (guarded),
  /// [3] tail after a chunk (guarded). Alternating: [0] and [1] with
  /// alternating_waits.
  std::vector<program> programs;
  std::size_t chunk = 0;                ///< elements per chunk
  std::size_t full_chunks = 0;          ///< chunk executions per call
  std::size_t executions_per_call = 0;  ///< full_chunks, plus one with a tail
  bool alternate = false;               ///< shm_copies > 1
  int shm_copies = 1;                   ///< execution e uses shm copy e % shm_copies
  bool in_place = true;                 ///< the programs may run with send and recv aliased

  /// The program of execution `i` of a call, `last` the program that ran
  /// before it (-1: none since the plan was built).
  [[nodiscard]] constexpr std::size_t program_for(std::size_t i, int last) const {
    const std::size_t base = i < full_chunks ? 0 : 1;
    if (programs.size() > 2 && last >= 0 && static_cast<std::size_t>(last) % 2 != base) return base + 2;
    return base;
  }
  /// The programs of the first `calls` calls, execution by execution, with
  /// at most `max_chunks` chunk executions per call. Every run of w
  /// consecutive executions that the plan can execute appears here when
  /// max_chunks >= w and calls >= w (every wait looks at most w - 1
  /// executions back: shm_copies with alternating copies; see window()).
  [[nodiscard]] std::vector<std::size_t> sequence(int calls, std::size_t max_chunks) const;
  /// The w for sequence(w, w) that covers every window the plan can run:
  /// its waits look at most shm_copies executions back (3 at least, as
  /// a program switch needs two executions before it).
  [[nodiscard]] constexpr int window() const noexcept { return shm_copies + 1 > 3 ? shm_copies + 1 : 3; }
};

/// The runs of a plan from its lowered chunk (and tail) program, rotating
/// over `shm_copies` shm copies (1: none; shm_copies_for).
runs make_runs(chunked lowered, std::size_t count, int shm_copies);
runs make_runs(chunked lowered, std::size_t count, bool) = delete;  // pass a number of copies

}  // namespace collc::ir

#if COLLC_HEADER_ONLY
#include <collc/ir/sequence.ipp>
#endif
