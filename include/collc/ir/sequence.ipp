#pragma once
// Definitions of ir/sequence.hpp.
#include <collc/ir/sequence.hpp>

#include <collc/error.hpp>
#include <collc/ir/passes.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir {

COLLC_INLINE std::vector<std::size_t> runs::sequence(int calls, std::size_t max_chunks) const {
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

COLLC_INLINE program alternating_waits(program p, int copies) {
  for (int r = 0; r < p.ranks; ++r)
    for (auto& ins : p.code[static_cast<std::size_t>(r)])
      if (auto* w = std::get_if<wait>(&ins))
        w->value = alternating_wait_value(w->value, p.signals_per_execution(w->peer, w->flag), copies);
  return p;
}

COLLC_INLINE program guarded(program p, int flags) {
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

COLLC_INLINE bool in_place_safe(const program& p) {
  using range = std::pair<std::size_t, std::size_t>;  // [first, last) in recv coordinates
  const auto overlaps = [](const std::vector<range>& set, range x) {
    for (auto [lo, hi] : set)
      if (lo < x.second && x.first < hi) return true;
    return false;
  };
  if (p.coll == collective::bcast) return true;  // one buffer: nothing to alias
  for (int r = 0; r < p.ranks; ++r) {
    if (p.coll == collective::reduce && r != p.root) continue;  // off the root reduce never runs in place
    const std::size_t shift = p.in_place_shift(r);
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
        ok =
            reads_send(d->a, d->count, &d->dst) && reads_send(d->b, d->count, &d->dst) && writes_recv(d->dst, d->count);
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

COLLC_INLINE program engine_form(program p, exchange_pieces pieces) {
  p = pipeline_exchanges(shorten_data_paths(std::move(p)), pieces.piece, pieces.min_count, pieces.ahead);
  // Scratch that forwarding left unused at the end is not allocated.
  std::size_t used = 0;
  for (const auto& code : p.code)
    for (const auto& ins : code)
      detail::pass::for_each_access(ins, [&](const ref& x, std::size_t n, bool) {
        if (x.buf == buffer::scratch) used = std::max(used, x.offset + n);
      });
  p.scratch_count = std::min(p.scratch_count, used);
  return p;
}

COLLC_INLINE std::vector<bool> receives_at_start(const program& p, int r) {
  const auto& code = p.code[static_cast<std::size_t>(r)];
  std::vector<bool> early(code.size(), false);
  const std::size_t shift = p.in_place_shift(r);
  struct span {
    buffer buf;
    std::size_t lo, hi;
  };
  std::vector<span> touched;                     // private ranges the rank touched so far
  std::vector<std::pair<int, int>> posted_late;  // (peer, tag) of receives posted where they stand
  // The user's send seen as recv elements (in place it is that memory).
  const auto private_span = [&](const ref& x, std::size_t n) -> std::optional<span> {
    if (x.buf == buffer::scratch) return span{buffer::scratch, x.offset, x.offset + n};
    if (x.buf == buffer::recv) return span{buffer::recv, x.offset, x.offset + n};
    if (x.buf == buffer::send) return span{buffer::recv, shift + x.offset, shift + x.offset + n};
    return std::nullopt;
  };
  const auto untouched = [&](const span& x) {
    for (const span& t : touched)
      if (t.buf == x.buf && t.lo < x.hi && x.lo < t.hi) return false;
    return true;
  };
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (const auto* v = std::get_if<recv>(&code[i])) {
      const auto at = private_span(v->dst, v->count);
      const std::pair<int, int> key{v->peer, v->tag};
      early[i] = at && v->dst.buf != buffer::send && untouched(*at) &&
                 std::find(posted_late.begin(), posted_late.end(), key) == posted_late.end();
      if (!early[i]) posted_late.push_back(key);
    }
    detail::pass::for_each_access(code[i], [&](const ref& x, std::size_t n, bool) {
      if (auto at = private_span(x, n)) touched.push_back(*at);
    });
  }
  return early;
}

COLLC_INLINE chunked lower_in_chunks(std::size_t count, std::size_t elem_size, std::size_t blocks,
                                     std::size_t chunk_bytes, const chunk_lowering& lower) {
  chunked out;
  if (count == 0) return out;
  const std::size_t granule = line_granule(elem_size);
  std::size_t c = std::max(granule, chunk_bytes / elem_size / blocks / granule * granule);
  c = std::min(c, count);
  program prog;
  for (int tries = 0;; ++tries) {
    prog = lower(c, c == count ? 0 : count);
    const std::size_t need = std::max(prog.shm_count, prog.scratch_count) * elem_size;
    if (need <= chunk_bytes || c <= granule || tries == 16) break;
    std::size_t next =
        static_cast<std::size_t>(static_cast<double>(c) * static_cast<double>(chunk_bytes) / static_cast<double>(need));
    next = std::max(granule, next / granule * granule);
    if (next >= c) next = c > granule ? c - granule : c;
    c = next;
  }
  out.chunk = c;
  out.programs.push_back(std::move(prog));
  if (count % c != 0) out.programs.push_back(lower(count % c, count));
  return out;
}

COLLC_INLINE bool alternates(const std::vector<program>& programs, std::size_t elem_size, std::size_t chunk_bytes) {
  std::size_t shm = 0;
  for (const auto& p : programs) {
    shm = std::max(shm, p.shm_count);
    for (const auto& code : p.code)
      for (const auto& ins : code)
        if (std::holds_alternative<send>(ins) || std::holds_alternative<recv>(ins)) return false;
  }
  const std::size_t data = shm * elem_size;
  const bool rooted =
      !programs.empty() && (programs.front().coll == collective::bcast || programs.front().coll == collective::reduce);
  return data > 0 && data <= (rooted ? rooted_alternate_max_bytes : alternate_max_bytes) && 2 * data <= chunk_bytes;
}

COLLC_INLINE int shm_copies_for(const std::vector<program>& programs, std::size_t elem_size, std::size_t chunk_bytes,
                                std::size_t ring_bytes) {
  if (!alternates(programs, elem_size, chunk_bytes)) return 1;
  const bool rooted =
      !programs.empty() && (programs.front().coll == collective::bcast || programs.front().coll == collective::reduce);
  if (!rooted) return 2;
  std::size_t shm = 0;
  for (const auto& p : programs) shm = std::max(shm, p.shm_count);
  const std::size_t data = (shm * elem_size + 63) / 64 * 64;  // a copy starts on its own cache line
  int k = 2;
  while (k < max_shm_copies && 2 * static_cast<std::size_t>(k) * data <= std::min(ring_bytes, chunk_bytes)) k *= 2;
  return k;  // the largest power of two whose ring fits both limits
}

COLLC_INLINE runs make_runs(chunked lowered, std::size_t count, int shm_copies) {
  // A power of two: the engine picks the copy with a mask, not a division.
  if (shm_copies < 1 || shm_copies > max_shm_copies || (shm_copies & (shm_copies - 1)) != 0)
    throw error(errc::invalid_argument, collc::detail::cat("make_runs: shm_copies is ", shm_copies,
                                                           ", must be a power of two in [1, ", max_shm_copies, "]"));
  const bool alternate = shm_copies > 1;
  runs out;
  out.chunk = lowered.chunk;
  if (lowered.programs.empty()) return out;  // count 0: nothing runs
  out.full_chunks = count / lowered.chunk;
  out.executions_per_call = out.full_chunks + (lowered.programs.size() > 1 ? 1 : 0);
  out.alternate = alternate;
  out.shm_copies = shm_copies;
  int flags = 0;
  for (const auto& p : lowered.programs) {
    flags = std::max(flags, p.flags);
    out.in_place = out.in_place && in_place_safe(p);
  }
  for (const auto& p : lowered.programs) out.programs.push_back(alternate ? alternating_waits(p, shm_copies) : p);
  if (lowered.programs.size() > 1) {
    out.programs.push_back(guarded(lowered.programs[0], flags));
    out.programs.push_back(guarded(lowered.programs[1], flags));
  }
  return out;
}

}  // namespace collc::ir
