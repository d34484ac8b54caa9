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
/// is small get two copies; execution e uses copy e % 2 and cross-execution
/// waits look one execution further back (alternating_wait_value). Guarded
/// copies keep their waits as lowered: after the guard every earlier
/// execution is finished, so either copy is free.
#include <collc/error.hpp>
#include <collc/ir/passes.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir {

/// `p` with every cross-execution wait rewritten by alternating_wait_value:
/// what runs when shm alternates between two copies by execution parity.
inline program alternating_waits(program p) {
  for (int r = 0; r < p.ranks; ++r)
    for (auto& ins : p.code[static_cast<std::size_t>(r)])
      if (auto* w = std::get_if<wait>(&ins)) w->value = alternating_wait_value(w->value, p.signals_per_execution(w->peer, w->flag));
  return p;
}

/// `p` preceded, on every rank, by waits for all signals of all earlier
/// executions of every other rank on its node, on each of `flags` flags (the
/// most any program of the sequence uses): the first execution after a
/// program switch (see the file comment).
inline program guarded(program p, int flags) {
  p.flags = std::max(p.flags, flags);
  for (int r = 0; r < p.ranks; ++r) {
    rank_program entry;
    for (int q = 0; q < p.ranks; ++q)
      if (q != r && p.same_node(r, q))
        for (int f = 0; f < flags; ++f) entry.push_back(wait{q, f, 0});
    if (entry.empty()) continue;
    auto& code = p.code[static_cast<std::size_t>(r)];
    code.insert(code.begin(), entry.begin(), entry.end());
  }
  p.name += " (guarded)";
  return p;
}

/// Whether running `p` with send and recv of every rank on the same memory
/// (MPI_IN_PLACE) reads every send element before anything overwrites it;
/// where not, the engine stages the input (or the output). Decided for all
/// ranks at once, from the program every rank holds, so the whole plan runs
/// one way and verify(..., {.in_place = true}) proves exactly that. In place,
/// send element s is recv element shift + s (allgather: shift = rank *
/// stride, the rank's own block; otherwise 0). A message reads its source
/// until the next fence.
inline bool in_place_safe(const program& p) {
  using range = std::pair<std::size_t, std::size_t>;  // [first, last) in recv coordinates
  const auto overlaps = [](const std::vector<range>& set, range x) {
    for (auto [lo, hi] : set)
      if (lo < x.second && x.first < hi) return true;
    return false;
  };
  if (p.coll == collective::bcast) return true;  // one buffer: nothing to alias
  for (int r = 0; r < p.ranks; ++r) {
    if (p.coll == collective::reduce && r != p.root) continue;  // off the root reduce never runs in place
    const std::size_t shift = p.coll == collective::allgather ? p.stride() * static_cast<std::size_t>(r) : 0;
    std::vector<range> written, in_flight;
    const auto reads_send = [&](const ref& x, std::size_t n, const ref* dst) {
      if (x.buf != buffer::send) return true;
      const range s{shift + x.offset, shift + x.offset + n};
      if (overlaps(written, s)) return false;
      // Element-for-element aliasing of the destination is fine; a shifted overlap is not.
      if (dst && dst->buf == buffer::recv && s.first != dst->offset && overlaps({{dst->offset, dst->offset + n}}, s))
        return false;
      return true;
    };
    const auto writes_recv = [&](const ref& x, std::size_t n) {
      if (x.buf != buffer::recv) return true;
      const range w{x.offset, x.offset + n};
      if (overlaps(in_flight, w)) return false;
      written.push_back(w);
      return true;
    };
    for (const auto& ins : p.code[static_cast<std::size_t>(r)]) {
      bool ok = true;
      if (std::holds_alternative<fence>(ins)) {
        in_flight.clear();
      } else if (const auto* c = std::get_if<copy>(&ins)) {
        ok = reads_send(c->src, c->count, &c->dst) && writes_recv(c->dst, c->count);
      } else if (const auto* d = std::get_if<reduce>(&ins)) {
        ok = reads_send(d->a, d->count, &d->dst) && reads_send(d->b, d->count, &d->dst) &&
             writes_recv(d->dst, d->count);
      } else if (const auto* s = std::get_if<send>(&ins)) {
        ok = reads_send(s->src, s->count, nullptr);
        if (ok && s->src.buf == buffer::send)
          in_flight.push_back({shift + s->src.offset, shift + s->src.offset + s->count});
      } else if (const auto* v = std::get_if<recv>(&ins)) {
        if (v->dst.buf == buffer::recv) ok = !overlaps(written, {v->dst.offset, v->dst.offset + v->count});
        ok = ok && writes_recv(v->dst, v->count);
      }
      if (!ok) return false;
    }
  }
  return true;
}

/// One lowering of a chunk: `count` elements per rank (per block for
/// reduce_scatter / allgather, blocks `block_stride` apart; 0 = dense).
using chunk_lowering = std::function<program(std::size_t count, std::size_t block_stride)>;

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

inline chunked lower_in_chunks(std::size_t count, std::size_t elem_size, std::size_t blocks, std::size_t chunk_bytes,
                               const chunk_lowering& lower) {
  chunked out;
  if (count == 0) return out;
  const std::size_t granule = elem_size <= 64 && 64 % elem_size == 0 ? 64 / elem_size : 1;
  std::size_t c = std::max(granule, chunk_bytes / elem_size / blocks / granule * granule);
  c = std::min(c, count);
  program prog;
  for (int tries = 0;; ++tries) {
    prog = lower(c, c == count ? 0 : count);
    const std::size_t need = std::max(prog.shm_count, prog.scratch_count) * elem_size;
    if (need <= chunk_bytes || c <= granule || tries == 16) break;
    std::size_t next = static_cast<std::size_t>(static_cast<double>(c) * static_cast<double>(chunk_bytes) /
                                                static_cast<double>(need));
    next = std::max(granule, next / granule * granule);
    if (next >= c) next = c > granule ? c - granule : c;
    c = next;
  }
  out.chunk = c;
  out.programs.push_back(std::move(prog));
  if (count % c != 0) out.programs.push_back(lower(count % c, count));
  return out;
}

/// The elements of shm per rank up to which shared-memory programs alternate
/// two copies (bytes; see alternates()).
inline constexpr std::size_t alternate_max_bytes = 16384;

/// Whether programs of `elem_size`-byte elements alternate shm copies: no
/// messages (transfers are bound to fixed shm addresses), and shm of at most
/// 16 KiB per rank whose two copies fit in `chunk_bytes`. It halves the
/// hand-offs of tiny calls (P = 2, 8 B: 0.30 us against 0.45 us), as an
/// execution need not wait for its peers to finish reading the previous one.
inline bool alternates(const std::vector<program>& programs, std::size_t elem_size, std::size_t chunk_bytes) {
  std::size_t shm = 0;
  for (const auto& p : programs) {
    shm = std::max(shm, p.shm_count);
    for (const auto& code : p.code)
      for (const auto& ins : code)
        if (std::holds_alternative<send>(ins) || std::holds_alternative<recv>(ins)) return false;
  }
  const std::size_t data = shm * elem_size;
  return data > 0 && data <= alternate_max_bytes && 2 * data <= chunk_bytes;
}

/// The programs a plan binds and the order it runs them (see the file comment).
struct runs {
  /// [0] chunk; with a tail also [1] tail, [2] chunk after a tail (guarded),
  /// [3] tail after a chunk (guarded). Alternating: [0] and [1] with
  /// alternating_waits.
  std::vector<program> programs;
  std::size_t chunk = 0;                ///< elements per chunk
  std::size_t full_chunks = 0;          ///< chunk executions per call
  std::size_t executions_per_call = 0;  ///< full_chunks, plus one with a tail
  bool alternate = false;               ///< execution e uses shm copy e % 2
  bool in_place = true;                 ///< the programs may run with send and recv aliased

  /// The program of execution `i` of a call, `last` the program that ran
  /// before it (-1: none since the plan was built).
  [[nodiscard]] std::size_t program_for(std::size_t i, int last) const {
    const std::size_t base = i < full_chunks ? 0 : 1;
    if (programs.size() > 2 && last >= 0 && static_cast<std::size_t>(last) % 2 != base) return base + 2;
    return base;
  }
  /// The programs of the first `calls` calls, execution by execution, with
  /// at most `max_chunks` chunk executions per call. Every run of w
  /// consecutive executions that the plan can execute appears here when
  /// max_chunks >= w and calls >= w (every wait looks at most w - 1
  /// executions back: two with alternating copies).
  [[nodiscard]] std::vector<std::size_t> sequence(int calls, std::size_t max_chunks) const {
    std::vector<std::size_t> order;
    int last = -1;
    for (int c = 0; c < calls; ++c)
      for (std::size_t i = 0; i < executions_per_call; ++i) {
        if (i < full_chunks && i >= max_chunks) continue;  // the same chunk program again
        const std::size_t k = program_for(i, last);
        order.push_back(k);
        last = static_cast<int>(k);
      }
    return order;
  }
};

/// The runs of a plan from its lowered chunk (and tail) program.
inline runs make_runs(chunked lowered, std::size_t count, bool alternate) {
  runs out;
  out.chunk = lowered.chunk;
  if (lowered.programs.empty()) return out;  // count 0: nothing runs
  out.full_chunks = count / lowered.chunk;
  out.executions_per_call = out.full_chunks + (lowered.programs.size() > 1 ? 1 : 0);
  out.alternate = alternate;
  int flags = 0;
  for (const auto& p : lowered.programs) {
    flags = std::max(flags, p.flags);
    out.in_place = out.in_place && in_place_safe(p);
  }
  for (const auto& p : lowered.programs) out.programs.push_back(alternate ? alternating_waits(p) : p);
  if (lowered.programs.size() > 1) {
    out.programs.push_back(guarded(lowered.programs[0], flags));
    out.programs.push_back(guarded(lowered.programs[1], flags));
  }
  return out;
}

}  // namespace collc::ir
