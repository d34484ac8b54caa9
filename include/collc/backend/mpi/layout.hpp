#pragma once
/// \file
/// Where a plan's data lives, as a pure function of its lowered programs: the
/// flag lines and shm of each rank's part of the node segment, scratch, and
/// the runs (which program executes when, ir/sequence.hpp). No MPI: the
/// engine (engine.hpp) takes this value at setup, and tests/test_layout.cpp
/// checks the rules without any ranks.
///
/// The rules, each measured on the 2-core development VM (docs/benchmarks.md):
///  - shared-memory programs with up to 16 KiB of shm per rank (bcast and
///    reduce: 128 KiB, below) rotate over
///    shm copies by execution number (ir::shm_copies_for; two is the paper's
///    `alt`, Jocksch et al. 2026), so a rank can enter the next call while a
///    slow peer still reads the previous one; bcast and reduce get a ring of
///    up to 32, so their root (or leaves) run ahead by that many calls;
///  - a one-flag program whose shm (every copy when alternating) fits in the
///    56 bytes after its flag keeps it in the flag's cache line: a peer that
///    sees the signal has the data in the same line transfer;
///  - otherwise an alternating program's signals rotate over words by
///    execution number (flag_words): a peer that runs ahead writes later
///    executions' words, so the word a waiter reads still holds the signal
///    of the waiter's execution, with its call number. The check that a
///    signal comes from the same call then needs nothing but that word
///    (bcast of 8 B at P = 2: no read of the root's registry line, which the
///    root rewrites every call). A one-flag program whose copy fits in the
///    56 bytes after a word puts each copy in a line of its own behind its
///    execution's word (signal_beside_data): as in the flag line, a waiter
///    gets the signal and the data in one line transfer, and a ring of 32
///    copies has 32 words. Otherwise the words are those of the flag line
///    (up to 8);
///  - bcast and reduce programs alternate up to 128 KiB of shm per rank
///    (ir::rooted_alternate_max_bytes), and large bcast calls (and reduce on
///    2 ranks up to 2 MiB) on a node with a core per rank are lowered in
///    chunks of 64 KiB of shm (lowering_chunk_bytes), so their copies
///    pipeline.
#include <collc/config.hpp>
#include <collc/ir/program.hpp>
#include <collc/ir/sequence.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace collc::mpi {

/// The layout of one plan on one rank (every rank computes the same value
/// from the same programs; only slot addresses differ, and they are not here).
struct plan_layout {
  int flags = 0;                   ///< flag lines per rank (64 bytes each)
  std::size_t shm_elems = 0;       ///< shm elements per rank and copy, over the programs
  std::size_t scratch_elems = 0;   ///< private scratch elements, over the programs
  std::size_t max_count = 0;       ///< largest program count (staging buffer)
  bool any_rank_messages = false;  ///< some rank's program sends or receives (every rank alike)
  bool alternate = false;          ///< shm_copies > 1
  int shm_copies = 1;              ///< execution e uses shm copy e % shm_copies (a power of two)
  bool data_in_flag_line = false;  ///< shm sits in the 56 bytes after the only flag
  /// Words that each flag's signals rotate over: execution e signals in word
  /// e % flag_words (a power of two; 1 unless alternating, one program, data
  /// outside the flag line), flag_word_stride() words apart.
  int flag_words = 1;
  bool signal_beside_data = false;  ///< each shm copy in its own line, behind its execution's flag word
  std::size_t copy_bytes = 0;       ///< bytes from one shm copy to the other
  std::size_t slot_bytes = 0;       ///< this rank's part of the node segment
  ir::runs runs;                    ///< the programs bound, in the order they run

  /// 8-byte words from one execution's flag word to the next: 1 within the
  /// flag line, 8 (a line) when each word heads its shm copy's line.
  [[nodiscard]] std::size_t flag_word_stride() const noexcept { return signal_beside_data ? 8 : 1; }

  /// One line: "flags 1, shm 64 B x 2 (alternating), scratch 0 B, slot 192 B, 2 programs, 1 execution per call".
  [[nodiscard]] std::string to_string(std::size_t elem_size) const;
};

/// The shm per rank of one chunk of a pipelined rooted call (lowering_chunk_bytes).
inline constexpr std::size_t pipeline_chunk_bytes = std::size_t{64} << 10;

/// The shm bound a plan's chunks are lowered with (ir::lower_in_chunks), for
/// a `bytes`-byte call on `ranks` ranks under the chunk limit `chunk_bytes`:
/// the limit itself, except for pipelined rooted calls. A bcast, or a reduce
/// of up to 2 MiB on 2 ranks (the binomial tree, the default there), on one
/// node with no more ranks than cores, larger than two pipeline chunks,
/// runs in chunks of at most pipeline_chunk_bytes of shm (and half of
/// chunk_bytes, so that two copies fit it), which alternate (ir::alternates):
/// the root (a reduce's leaf) fills chunk k + 1 while the readers copy out
/// chunk k. Up to two chunks a call alternates whole where its shm allows
/// (a bcast of 64 KiB at P = 2: 2.9 us, where one chunk and a tail of 72 KiB
/// pipelined took 6.6 us: the tail runs guarded, a full hand-off).
/// Measured on 2 cores (docs/benchmarks.md, "Rooted calls in alternating
/// 64 KiB chunks"): P = 2 bcast (copy-in) 128 KiB-4 MiB 1.1-1.5x faster,
/// reduce (tree) 128 KiB-2 MiB 1.2-1.3x. Not pipelined: a copy-in reduce
/// (reduce-scatter, then gather: P = 2, 4 MiB ran 658 against 531 us; at
/// P >= 3 the default up to 2 MiB), and calls with more ranks than cores,
/// where each further hand-off waits for a descheduled rank (P = 3, 4,
/// 128 KiB-4 MiB: 1.1-1.9x slower). Bcast at P >= 3 with a core per rank
/// is pipelined on the principle, not measured (2 cores here).
[[nodiscard]] std::size_t lowering_chunk_bytes(collective c, std::size_t bytes, int ranks, bool one_node,
                                               bool oversubscribed, std::size_t chunk_bytes) noexcept;

/// The layout of `lowered` (chunk program, then tail if any; `chunk` elements
/// per chunk, `count` per call) for elements of `elem_size` bytes under the
/// chunk limit `chunk_bytes`. Throws errc::invalid_argument when a program is
/// not for `ranks` ranks.
[[nodiscard]] plan_layout layout_of(const std::vector<ir::program>& lowered, std::size_t chunk, std::size_t count,
                                    std::size_t elem_size, std::size_t chunk_bytes, int ranks);

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/layout.ipp>
#endif
