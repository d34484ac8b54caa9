#pragma once
// Element groups: proving programs on groups of elements that every
// instruction moves together (verify.hpp, "Element groups"): divided by the
// common factor of all offsets and counts, then renumbered to the runs
// between cuts.
#include <collc/ir/program.hpp>

#include <collc/config.hpp>
#include <collc/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir::detail::verification {

using collc::detail::cat;

/// True if `p`'s block_stride means anything: the P-block buffer of a
/// reduce_scatter's send or an allgather's recv. The engine's chunk programs
/// of the other collectives carry the whole call's count there (one lowering
/// for every collective); no check reads it but well-formedness
/// (block_stride >= count), which runs on the programs as given, so a grouped
/// copy drops it (0, dense) instead of letting it split or refuse the groups.
COLLC_INLINE bool stride_matters(const program& p) {
  return p.coll == collective::reduce_scatter || p.coll == collective::allgather;
}

/// The largest g dividing every element offset and count of `programs`: each
/// ref's offset and each instruction's count, and each program's count and
/// block stride (where it matters). 0 when all are 0. Capacities (shm_count,
/// scratch_count) do not enter: an access ending at a multiple m of g fits a
/// capacity c iff m / g fits c / g rounded down.
COLLC_INLINE std::size_t element_group(const std::vector<const program*>& programs) {
  std::size_t g = 0;
  const auto fold = [&g](std::size_t v) { g = std::gcd(g, v); };
  for (const program* p : programs) {
    fold(p->count);
    if (stride_matters(*p)) fold(p->block_stride);
    for (const rank_program& code : p->code)
      for (const instruction& ins : code) {
        if (const auto* c = std::get_if<copy>(&ins)) {
          fold(c->dst.offset), fold(c->src.offset), fold(c->count);
        } else if (const auto* d = std::get_if<reduce>(&ins)) {
          fold(d->dst.offset), fold(d->a.offset), fold(d->b.offset), fold(d->count);
        } else if (const auto* s = std::get_if<send>(&ins)) {
          fold(s->src.offset), fold(s->count);
        } else if (const auto* v = std::get_if<recv>(&ins)) {
          fold(v->dst.offset), fold(v->count);
        }
      }
  }
  return g;
}

/// `p` with every offset and count divided by `g` (which divides them all,
/// element_group) and its capacities divided rounding down.
COLLC_INLINE program divided(const program& p, std::size_t g) {
  program q = p;
  q.count /= g;
  q.block_stride = stride_matters(p) ? q.block_stride / g : 0;
  q.shm_count /= g;
  q.scratch_count /= g;
  for (rank_program& code : q.code)
    for (instruction& ins : code) {
      if (auto* c = std::get_if<copy>(&ins)) {
        c->dst.offset /= g, c->src.offset /= g, c->count /= g;
      } else if (auto* d = std::get_if<reduce>(&ins)) {
        d->dst.offset /= g, d->a.offset /= g, d->b.offset /= g, d->count /= g;
      } else if (auto* s = std::get_if<send>(&ins)) {
        s->src.offset /= g, s->count /= g;
      } else if (auto* v = std::get_if<recv>(&ins)) {
        v->dst.offset /= g, v->count /= g;
      }
    }
  return q;
}

/// A renumbering of element positions that keeps what any instruction can
/// tell apart, one per space of positions: the user's buffers of all ranks
/// (send and recv, whose positions the results and MPI_IN_PLACE relate),
/// and each rank's shm and scratch. `in[space]` (sorted) holds every offset and end of every range
/// an instruction, a message or the collective itself moves, and every
/// place such a move carries one of them to; cut k becomes position k, so
/// each run of elements between two cuts becomes one element (verify.hpp,
/// "Element groups").
struct element_cuts {
  std::vector<std::vector<std::uint64_t>> in;  ///< [space]; empty: none within the limit
  int ranks = 0;
  /// 0: send and recv of every rank; 1 + r: rank r's shm; 1 + P + r: rank r's scratch.
  [[nodiscard]] static std::size_t space_of(const ref& x, int ranks) noexcept {
    const auto owner = static_cast<std::size_t>(x.owner);
    if (x.buf == buffer::shm) return 1 + owner;
    if (x.buf == buffer::scratch) return 1 + static_cast<std::size_t>(ranks) + owner;
    return 0;
  }
};

struct move {  // [lo, hi) of space `from` lands on [lo + by, hi + by) of space `to`, element for element
  std::size_t from, to;
  std::uint64_t lo, hi;
  std::int64_t by;
};

COLLC_INLINE element_cuts find_element_cuts(const std::vector<const program*>& programs, std::size_t limit) {
  const int ranks = programs.front()->ranks;
  const auto P = static_cast<std::size_t>(std::max(ranks, 1));
  constexpr std::size_t user = 0;
  std::vector<std::set<std::uint64_t>> cuts(1 + 2 * P, std::set<std::uint64_t>{0});
  std::vector<move> moves;
  const auto space = [&](const ref& x) { return element_cuts::space_of(x, ranks); };
  const auto range = [&](const ref& x, std::size_t n) {
    auto& c = cuts[space(x)];
    c.insert(x.offset), c.insert(x.offset + n);
  };
  const auto moved = [&](const ref& from, const ref& to, std::size_t n) {
    const std::size_t f = space(from), t = space(to);
    if (n != 0 && (f != t || from.offset != to.offset))
      moves.push_back({f, t, from.offset, from.offset + n,
                       static_cast<std::int64_t>(to.offset) - static_cast<std::int64_t>(from.offset)});
  };
  for (const program* p : programs) {
    if (p->ranks != ranks || p->code.size() != P) return {};
    for (std::size_t v : {p->count, p->send_count(), p->recv_count()}) cuts[user].insert(v);
    for (std::size_t r = 0; r < P; ++r) cuts[1 + r].insert(p->shm_count), cuts[1 + P + r].insert(p->scratch_count);
    if (stride_matters(*p)) {
      // Block r of the P-block buffer is rank r's result (reduce_scatter) or
      // input (allgather), and in place an allgather's send is its block:
      // the cuts repeat with the block stride, so block r starts at r times
      // the renumbered stride.
      const std::size_t stride = p->stride();
      for (std::size_t r = 0; r <= P; ++r) cuts[user].insert(r * stride), cuts[user].insert(r * stride + p->count);
      for (std::size_t r = 1; r < P; ++r)
        moves.push_back({user, user, 0, stride, static_cast<std::int64_t>(r * stride)});
    }
    // The k-th send on a channel lands in the k-th recv (check_matching).
    std::map<std::tuple<int, int, int>, std::pair<std::vector<const send*>, std::vector<const recv*>>> channels;
    for (std::size_t r = 0; r < p->code.size(); ++r)
      for (const instruction& ins : p->code[r]) {
        if (const auto* c = std::get_if<copy>(&ins)) {
          range(c->dst, c->count), range(c->src, c->count), moved(c->src, c->dst, c->count);
        } else if (const auto* d = std::get_if<reduce>(&ins)) {
          range(d->dst, d->count), range(d->a, d->count), range(d->b, d->count);
          moved(d->a, d->dst, d->count), moved(d->b, d->dst, d->count);
        } else if (const auto* sd = std::get_if<send>(&ins)) {
          range(sd->src, sd->count);
          channels[{static_cast<int>(r), sd->peer, sd->tag}].first.push_back(sd);
        } else if (const auto* v = std::get_if<recv>(&ins)) {
          range(v->dst, v->count);
          channels[{v->peer, static_cast<int>(r), v->tag}].second.push_back(v);
        }
      }
    for (const auto& [key, ends] : channels) {
      if (ends.first.size() != ends.second.size()) return {};
      for (std::size_t k = 0; k < ends.first.size(); ++k) {
        if (ends.first[k]->count != ends.second[k]->count) return {};
        moved(ends.first[k]->src, ends.second[k]->dst, ends.first[k]->count);
      }
    }
  }
  // Close the cuts under the moves: a cut inside one side of a move is a cut
  // of the other, so the two sides split into runs of the same lengths.
  std::size_t total = 0, work = 0;
  for (const auto& c : cuts) total += c.size();
  if (total > limit) return {};
  for (bool grew = true; grew;) {
    grew = false;
    for (const move& m : moves)
      for (int side = 0; side < 2; ++side) {
        const std::int64_t by = side == 0 ? m.by : -m.by;
        const std::uint64_t lo = side == 0 ? m.lo : m.lo + static_cast<std::uint64_t>(m.by);
        const std::uint64_t hi = lo + (m.hi - m.lo);
        const std::set<std::uint64_t>& from = cuts[side == 0 ? m.from : m.to];
        std::set<std::uint64_t>& to = cuts[side == 0 ? m.to : m.from];
        for (auto it = from.upper_bound(lo); it != from.end() && *it < hi; ++it) {
          if (to.insert(*it + static_cast<std::uint64_t>(by)).second) grew = true, ++total;
          if (total > limit || ++work > 64 * limit) return {};
        }
      }
  }
  element_cuts out;
  out.ranks = ranks;
  for (const auto& c : cuts) out.in.emplace_back(c.begin(), c.end());
  return out;
}

/// `p` with every position x (a cut of its space) replaced by its index
/// among those cuts; nullopt if a position is not a cut, the ranges of one
/// instruction come out of different lengths, or the blocks do not repeat evenly.
COLLC_INLINE std::optional<program> renumbered(const program& p, const element_cuts& cuts) {
  bool exact = true;
  const auto at = [&](std::size_t space, std::uint64_t x) -> std::size_t {
    const auto& c = cuts.in[space];
    const auto it = std::lower_bound(c.begin(), c.end(), x);
    exact = exact && it != c.end() && *it == x;
    return static_cast<std::size_t>(it - c.begin());
  };
  // A range renumbered: its new count (the ranges of one instruction must agree).
  const auto span = [&](ref& x, std::size_t n) {
    const std::size_t space = element_cuts::space_of(x, cuts.ranks);
    const std::uint64_t end = x.offset + n;
    const std::size_t first = at(space, x.offset);
    x.offset = first;
    return at(space, end) - first;
  };
  program q = p;
  q.count = at(0, p.count);
  q.block_stride = p.block_stride == 0 || !stride_matters(p) ? 0 : at(0, p.block_stride);
  // One capacity for every rank's shm (scratch): the largest renumbered one,
  // which every rank's renumbered ranges fit as its own did.
  const auto P = static_cast<std::size_t>(std::max(p.ranks, 1));
  q.shm_count = q.scratch_count = 0;
  for (std::size_t r = 0; r < P; ++r) {
    q.shm_count = std::max(q.shm_count, at(1 + r, p.shm_count));
    q.scratch_count = std::max(q.scratch_count, at(1 + P + r, p.scratch_count));
  }
  exact = exact && at(0, p.send_count()) == q.send_count() && at(0, p.recv_count()) == q.recv_count();
  if (stride_matters(p))
    for (std::size_t r = 0; r <= static_cast<std::size_t>(std::max(p.ranks, 1)); ++r)
      exact = exact && at(0, r * p.stride()) == r * q.stride();
  for (rank_program& code : q.code)
    for (instruction& ins : code) {
      if (auto* c = std::get_if<copy>(&ins)) {
        const std::size_t n = span(c->dst, c->count);
        exact = exact && span(c->src, c->count) == n;
        c->count = n;
      } else if (auto* d = std::get_if<reduce>(&ins)) {
        const std::size_t n = span(d->dst, d->count);
        exact = exact && span(d->a, d->count) == n && span(d->b, d->count) == n;
        d->count = n;
      } else if (auto* s = std::get_if<send>(&ins)) {
        s->count = span(s->src, s->count);
      } else if (auto* v = std::get_if<recv>(&ins)) {
        v->count = span(v->dst, v->count);
      }
    }
  if (!exact) return std::nullopt;
  return q;
}

/// The programs verify runs for `programs`: divided by their element group
/// (element_group), then renumbered to runs between cuts (element_cuts)
/// when the cuts are at most a quarter of the positions (summed over the
/// spaces); none if neither applies.
struct grouped_programs {
  std::vector<program> programs;
  std::string how;  ///< for a report that cannot be re-run element by element
  [[nodiscard]] bool any() const noexcept { return !programs.empty(); }
  [[nodiscard]] std::vector<const program*> pointers() const {
    std::vector<const program*> ps;
    for (const program& q : programs) ps.push_back(&q);
    return ps;
  }
};

COLLC_INLINE grouped_programs group_elements(const std::vector<const program*>& programs) {
  grouped_programs out;
  const std::size_t g = element_group(programs);
  if (g > 1) {
    for (const program* p : programs) out.programs.push_back(divided(*p, g));
    out.how = cat("in groups of ", g, " elements: element k above is elements ", g, "k to ", g, "k+", g - 1);
  }
  const std::vector<const program*> current = out.any() ? out.pointers() : programs;
  // Positions summed over the spaces (the user's buffers, then P shm and P
  // scratch): renumbering pays when the cuts are at most a quarter of them.
  std::uint64_t user = 0, shm = 0, scratch = 0;
  for (const program* p : current) {
    user = std::max<std::uint64_t>({user, p->send_count(), p->recv_count()});
    shm = std::max<std::uint64_t>(shm, p->shm_count);
    scratch = std::max<std::uint64_t>(scratch, p->scratch_count);
  }
  const auto P = static_cast<std::uint64_t>(std::max(current.front()->ranks, 1));
  const std::uint64_t positions = user + P * (shm + scratch);
  const element_cuts cuts = find_element_cuts(current, std::min<std::uint64_t>(positions / 4, 1 << 18));
  if (cuts.in.empty()) return out;
  std::vector<program> runs;
  for (const program* p : current) {
    auto q = renumbered(*p, cuts);
    if (!q) return out;
    runs.push_back(std::move(*q));
  }
  // A report names elements of the user's buffers most of the time: say where their groups start.
  const std::vector<std::uint64_t>& user_cuts = cuts.in[0];
  std::string starts;
  for (std::size_t k = 0; k + 1 < user_cuts.size() && k < 8; ++k)
    starts += cat(k == 0 ? "" : ", ", user_cuts[k] * std::max<std::size_t>(g, 1));
  out.how = cat("in groups of elements moved together: element k above is group k; in send and recv the ",
                user_cuts.size() - 1, " groups start at elements ", starts, user_cuts.size() > 9 ? ", ..." : "",
                " (each rank's shm and scratch are grouped likewise)");
  out.programs = std::move(runs);
  return out;
}

}  // namespace collc::ir::detail::verification
