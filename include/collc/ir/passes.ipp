#pragma once
// Definitions of ir/passes.hpp.
#include <collc/ir/passes.hpp>

#include <collc/error.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir {

namespace detail::pass {

COLLC_INLINE bool same_buffer(const ref& a, const ref& b) { return a.buf == b.buf && a.owner == b.owner; }

/// [a, a+na) and [b, b+nb) share an element (written so it cannot overflow).
COLLC_INLINE bool overlaps(const ref& a, std::size_t na, const ref& b, std::size_t nb) {
  if (na == 0 || nb == 0 || !same_buffer(a, b)) return false;
  return a.offset <= b.offset ? b.offset - a.offset < na : a.offset - b.offset < nb;
}

/// Operands that are either the very same range or do not touch: the only
/// aliasing copy and reduce allow (see program.hpp).
COLLC_INLINE bool same_or_disjoint(const ref& a, const ref& b, std::size_t n) {
  return a == b || !overlaps(a, n, b, n);
}

/// `second` starts where [first, first+n) ends, in the same buffer.
COLLC_INLINE bool follows(const ref& first, std::size_t n, const ref& second) {
  return same_buffer(first, second) && first.offset <= std::numeric_limits<std::size_t>::max() - n &&
         first.offset + n == second.offset;
}

COLLC_INLINE bool touches(const instruction& ins, const ref& at, std::size_t n) {
  bool hit = false;
  for_each_access(ins, [&](const ref& x, std::size_t m, bool) { hit = hit || overlaps(x, m, at, n); });
  return hit;
}

/// Instructions that order this rank against others.
COLLC_INLINE bool synchronizes(const instruction& ins) {
  return !std::holds_alternative<copy>(ins) && !std::holds_alternative<reduce>(ins);
}

/// Merges `next` into `acc` if both are copies (or both reduces) over
/// contiguous ranges, in either order, and the merged instruction means the
/// same as the two in sequence: its destination is the same range as, or
/// disjoint from, each source (so no element is read after the first half
/// wrote it).
COLLC_INLINE bool try_merge(instruction& acc, const instruction& next) {
  constexpr auto max = std::numeric_limits<std::size_t>::max();
  if (auto* a = std::get_if<copy>(&acc)) {
    const auto* b = std::get_if<copy>(&next);
    if (b == nullptr || a->count > max - b->count) return false;
    copy m;
    if (follows(a->dst, a->count, b->dst) && follows(a->src, a->count, b->src))
      m = copy{a->dst, a->src, a->count + b->count};
    else if (follows(b->dst, b->count, a->dst) && follows(b->src, b->count, a->src))
      m = copy{b->dst, b->src, a->count + b->count};
    else
      return false;
    if (!same_or_disjoint(m.dst, m.src, m.count)) return false;
    acc = m;
    return true;
  }
  if (auto* a = std::get_if<reduce>(&acc)) {
    const auto* b = std::get_if<reduce>(&next);
    if (b == nullptr || a->count > max - b->count) return false;
    reduce m;
    auto chain = [](const reduce& x, const reduce& y) {
      return follows(x.dst, x.count, y.dst) && follows(x.a, x.count, y.a) && follows(x.b, x.count, y.b);
    };
    if (chain(*a, *b))
      m = reduce{a->dst, a->a, a->b, a->count + b->count};
    else if (chain(*b, *a))
      m = reduce{b->dst, b->a, b->b, a->count + b->count};
    else
      return false;
    if (!same_or_disjoint(m.dst, m.a, m.count) || !same_or_disjoint(m.dst, m.b, m.count)) return false;
    acc = m;
    return true;
  }
  return false;
}

COLLC_INLINE bool zero_count_data_op(const instruction& ins) {
  if (const auto* c = std::get_if<copy>(&ins)) return c->count == 0;
  if (const auto* r = std::get_if<reduce>(&ins)) return r->count == 0;
  return false;
}

}  // namespace detail::pass

COLLC_INLINE program merge_adjacent(program p) {
  for (auto& code : p.code) {
    rank_program out;
    out.reserve(code.size());
    for (auto& ins : code) {
      if (detail::pass::zero_count_data_op(ins)) continue;
      if (!out.empty() && detail::pass::try_merge(out.back(), ins)) continue;
      out.push_back(std::move(ins));
    }
    code = std::move(out);
  }
  return p;
}

namespace detail::pass {

/// State of receive_into_destination: the program with tombstones (indices
/// stay valid while instructions are removed) and, per (buffer, owner), the
/// instructions that touch it.
class forwarding {
 public:
  static constexpr std::size_t buffer_kinds = 4;  // send, recv, shm, scratch

  explicit forwarding(program& p) : p_(p), removed_(p.code.size()), users_(p.code.size() * buffer_kinds) {
    for (std::size_t r = 0; r < p.code.size(); ++r) {
      removed_[r].assign(p.code[r].size(), false);
      for (std::size_t i = 0; i < p.code[r].size(); ++i)
        for_each_access(p.code[r][i], [&](const ref& x, std::size_t, bool) { note(x, r, i); });
    }
  }

  void run() {
    for (std::size_t r = 0; r < p_.code.size(); ++r)
      for (std::size_t i = 0; i < p_.code[r].size(); ++i)
        while (!removed_[r][i] && forward(r, i)) {
        }
    for (std::size_t r = 0; r < p_.code.size(); ++r) {
      rank_program kept;
      for (std::size_t i = 0; i < p_.code[r].size(); ++i)
        if (!removed_[r][i]) kept.push_back(std::move(p_.code[r][i]));
      p_.code[r] = std::move(kept);
    }
  }

 private:
  struct site {
    std::size_t rank, index;
  };

  std::vector<site>* users(const ref& x) {
    if (x.owner < 0 || static_cast<std::size_t>(x.owner) >= p_.code.size()) return nullptr;
    return &users_[static_cast<std::size_t>(x.owner) * buffer_kinds + static_cast<std::size_t>(x.buf)];
  }
  void note(const ref& x, std::size_t r, std::size_t i) {
    if (auto* u = users(x); u && (u->empty() || u->back().rank != r || u->back().index != i)) u->push_back({r, i});
  }

  /// The range instruction (r, i) writes, if it is a copy, reduce or recv.
  static const ref* written(const instruction& ins, std::size_t& n) {
    if (const auto* c = std::get_if<copy>(&ins)) return n = c->count, &c->dst;
    if (const auto* c = std::get_if<reduce>(&ins)) return n = c->count, &c->dst;
    if (const auto* c = std::get_if<recv>(&ins)) return n = c->count, &c->dst;
    return nullptr;
  }

  /// Tries to make instruction (r, i), which writes a temporary X, write the
  /// destination of the copy that is X's only reader instead.
  bool forward(std::size_t r, std::size_t i) {
    auto& code = p_.code[r];
    std::size_t n = 0;
    const ref* xp = written(code[i], n);
    if (xp == nullptr || n == 0 || (xp->buf != buffer::scratch && xp->buf != buffer::shm)) return false;
    const ref x = *xp;
    // j: the next instruction of this rank touching X; it must copy all of X out.
    std::size_t j = i + 1;
    while (j < code.size() && (removed_[r][j] || !touches(code[j], x, n))) ++j;
    if (j == code.size()) return false;
    auto* out = std::get_if<copy>(&code[j]);
    if (out == nullptr || out->src.buf != x.buf || out->src.owner != x.owner) return false;
    // X is the copy's whole source, or its first or last part (a copy that
    // merge_adjacent made of several temporaries' copies-out): X's part of
    // the copy goes, the rest stays at j.
    if (x.offset < out->src.offset || x.offset + n > out->src.offset + out->count) return false;
    const std::size_t skip = x.offset - out->src.offset;
    const bool prefix = skip == 0, suffix = skip + n == out->count;
    if (!prefix && !suffix) return false;
    const ref d{out->dst.buf, out->dst.owner, out->dst.offset + skip};
    if (overlaps(out->dst, out->count, x, n)) return false;
    // The new instruction must itself be well formed.
    if (const auto* c = std::get_if<copy>(&code[i]); c && !same_or_disjoint(d, c->src, n)) return false;
    if (const auto* c = std::get_if<reduce>(&code[i]);
        c && (!same_or_disjoint(d, c->a, n) || !same_or_disjoint(d, c->b, n)))
      return false;
    // D is now written at i instead of j: nothing in between may see the
    // difference, and if D is shared no other rank may either (no
    // synchronisation between i and j means no remote access is ordered
    // between them).
    for (std::size_t k = i + 1; k < j; ++k) {
      if (removed_[r][k]) continue;
      if (touches(code[k], d, n)) return false;
      if (d.buf == buffer::shm && synchronizes(code[k])) return false;
    }
    // A send started before i (and not fenced yet) must keep reading the old D.
    for (std::size_t k = i; k-- > 0;) {
      if (removed_[r][k]) continue;
      if (std::holds_alternative<fence>(code[k])) break;
      if (const auto* s = std::get_if<send>(&code[k]); s && overlaps(s->src, s->count, d, n)) return false;
    }
    // X must be a true temporary: written by i, read by j, touched by nothing
    // else on any rank, in any execution.
    auto* u = users(x);
    if (u == nullptr) return false;
    for (const auto& s : *u) {
      if (removed_[s.rank][s.index]) continue;
      bool bad = false;
      for_each_access(p_.code[s.rank][s.index], [&](const ref& y, std::size_t m, bool write) {
        if (!overlaps(y, m, x, n)) return;
        const bool ok = s.rank == r && ((s.index == i && write) || (s.index == j && !write));
        bad = bad || !ok;
      });
      if (bad) return false;
    }
    std::visit(
        [&](auto& w) {
          if constexpr (requires { w.dst; }) w.dst = d;
        },
        code[i]);
    if (prefix && suffix) {
      removed_[r][j] = true;
    } else {
      if (prefix) out->src.offset += n, out->dst.offset += n;
      out->count -= n;
    }
    note(d, r, i);
    return true;
  }

  program& p_;
  std::vector<std::vector<bool>> removed_;
  std::vector<std::vector<site>> users_;  ///< [owner * buffer_kinds + buffer]
};

}  // namespace detail::pass

COLLC_INLINE program receive_into_destination(program p) {
  detail::pass::forwarding(p).run();
  return p;
}

namespace detail::pass {

/// Per node, what each rank knows at each point about every flag of the node:
/// known[q][f] = v means flag f of rank q has reached at least
/// epoch * S(q,f) + v (the same relative form as wait values), in every
/// execution. Knowledge grows along program order (own signals), along
/// signal -> wait edges (a wait learns everything the signaller knew when it
/// signalled, shifted by S per execution for waits on earlier executions),
/// and across executions (a rank starts knowing what it knew at its end,
/// shifted by S). A least fixpoint from "nothing known" is sound at every
/// step; values below the smallest wait value of a flag are useless and
/// become "unknown", which bounds the values and so guarantees termination.
class wait_knowledge {
 public:
  static constexpr std::int64_t unknown = std::numeric_limits<std::int64_t>::min();
  /// Waits this far in the past are left alone (and keep the shifts below overflow).
  static constexpr std::int64_t oldest = -(std::int64_t{1} << 60);
  static constexpr int max_rounds = 256;
  /// Snapshot entries (8 bytes each) the analysis may hold per node; beyond
  /// it (e.g. a ring over hundreds of ranks of one node) nothing is dropped.
  static constexpr std::size_t max_entries = std::size_t{1} << 24;

  wait_knowledge(const program& p, std::vector<int> ranks) : p_(p), ranks_(std::move(ranks)) {
    local_.assign(p.code.size(), -1);
    for (std::size_t k = 0; k < ranks_.size(); ++k) local_[static_cast<std::size_t>(ranks_[k])] = static_cast<int>(k);
    flags_ = std::max(p.flags, 0);  // signals and waits on flags outside [0, flags) are ignored (and kept)
    const std::size_t entries = ranks_.size() * static_cast<std::size_t>(flags_);
    std::size_t signals = ranks_.size();  // one end state per rank, one snapshot per signal
    for (int r : ranks_)
      for (const auto& ins : code(r)) signals += std::holds_alternative<signal>(ins) ? 1 : 0;
    too_big_ = entries > max_entries || (entries != 0 && signals > max_entries / entries);
    if (too_big_) return;
    per_exec_.assign(entries, 0);
    floor_.assign(entries, unknown);
    min_wait_.assign(entries, std::numeric_limits<std::int64_t>::max());
    snaps_.resize(ranks_.size());
    for (std::size_t k = 0; k < ranks_.size(); ++k) {
      snaps_[k].resize(static_cast<std::size_t>(flags_));
      for (const auto& ins : code(ranks_[k])) {
        if (const auto* s = std::get_if<signal>(&ins); s && valid_flag(s->flag)) {
          ++per_exec_[entry(k, s->flag)];
          snaps_[k][static_cast<std::size_t>(s->flag)].push_back(std::vector<std::int64_t>(entries, unknown));
        }
        if (const auto* w = std::get_if<wait>(&ins); w && usable(*w)) {
          auto& m = min_wait_[entry(static_cast<std::size_t>(local(w->peer)), w->flag)];
          m = std::min(m, w->value);
        }
      }
    }
    // A flag nobody signals stays 0, so every wait on it with value <= 0 holds.
    for (std::size_t e = 0; e < entries; ++e)
      if (per_exec_[e] == 0) floor_[e] = clamp(e, 0);
    ends_.assign(ranks_.size(), floor_);
  }

  /// Runs to the fixpoint; false if it did not converge or would need too
  /// much memory (then nothing may be dropped).
  bool solve() {
    if (too_big_) return false;
    for (int round = 0; round < max_rounds; ++round) {
      redundant_.clear();
      bool changed = false;
      for (std::size_t k = 0; k < ranks_.size(); ++k) changed = step(k) || changed;
      if (!changed) return true;
    }
    return false;
  }

  /// (rank, index) of every wait implied at its point; valid after solve().
  [[nodiscard]] const std::vector<std::pair<int, std::size_t>>& redundant() const { return redundant_; }

 private:
  const rank_program& code(int r) const { return p_.code[static_cast<std::size_t>(r)]; }
  int local(int r) const {
    return r < 0 || static_cast<std::size_t>(r) >= local_.size() ? -1 : local_[static_cast<std::size_t>(r)];
  }
  std::size_t entry(std::size_t k, int f) const {
    return k * static_cast<std::size_t>(flags_) + static_cast<std::size_t>(f);
  }
  bool valid_flag(int f) const { return f >= 0 && f < flags_; }
  bool usable(const wait& w) const { return local(w.peer) >= 0 && valid_flag(w.flag) && w.value >= oldest; }
  std::int64_t clamp(std::size_t e, std::int64_t v) const { return v < min_wait_[e] ? unknown : v; }

  static bool join(std::vector<std::int64_t>& into, const std::vector<std::int64_t>& from) {
    bool changed = false;
    for (std::size_t e = 0; e < into.size(); ++e)
      if (from[e] > into[e]) into[e] = from[e], changed = true;
    return changed;
  }
  /// Knowledge from `back` executions ago, expressed relative to now.
  void join_shifted(std::vector<std::int64_t>& into, const std::vector<std::int64_t>& from, std::int64_t back) const {
    for (std::size_t e = 0; e < into.size(); ++e)
      if (from[e] != unknown) into[e] = std::max(into[e], clamp(e, from[e] - back * per_exec_[e]));
  }

  /// One pass over rank k's program with the current snapshots of the others.
  bool step(std::size_t k) {
    const int rank = ranks_[k];
    auto known = floor_;
    join_shifted(known, ends_[k], 1);
    std::vector<std::int64_t> signalled(static_cast<std::size_t>(flags_), 0);
    bool changed = false;
    const auto& prog = code(rank);
    for (std::size_t i = 0; i < prog.size(); ++i) {
      if (const auto* s = std::get_if<signal>(&prog[i]); s && valid_flag(s->flag)) {
        const auto f = static_cast<std::size_t>(s->flag);
        const std::size_t e = entry(k, s->flag);
        known[e] = std::max(known[e], clamp(e, ++signalled[f]));
        changed = join(snaps_[k][f][static_cast<std::size_t>(signalled[f] - 1)], known) || changed;
      } else if (const auto* w = std::get_if<wait>(&prog[i]); w && usable(*w)) {
        const auto q = static_cast<std::size_t>(local(w->peer));
        const std::size_t e = entry(q, w->flag);
        if (known[e] != unknown && known[e] >= w->value) redundant_.emplace_back(rank, i);
        const std::int64_t per = per_exec_[e];
        if (per == 0 || w->value > per) continue;  // learns nothing (or never returns)
        // back = executions ago such that value + back*per names a signal in [1, per]
        const std::int64_t back = w->value >= 1 ? 0 : (per - w->value) / per;
        const auto& snap =
            snaps_[q][static_cast<std::size_t>(w->flag)][static_cast<std::size_t>(w->value + back * per - 1)];
        join_shifted(known, snap, back);
      }
    }
    changed = join(ends_[k], known) || changed;
    return changed;
  }

  const program& p_;
  bool too_big_ = false;
  std::vector<int> ranks_;  ///< the node's ranks
  std::vector<int> local_;  ///< rank -> index in ranks_, -1 if on another node
  int flags_ = 0;
  std::vector<std::int64_t> per_exec_;  ///< S per (local rank, flag)
  std::vector<std::int64_t> floor_;     ///< known at every point
  std::vector<std::int64_t> min_wait_;  ///< smallest wait value per entry
  /// snaps_[k][f][m]: what rank k knows right after its (m+1)-th signal on f
  std::vector<std::vector<std::vector<std::vector<std::int64_t>>>> snaps_;
  std::vector<std::vector<std::int64_t>> ends_;  ///< what rank k knows at its end
  std::vector<std::pair<int, std::size_t>> redundant_;
};

}  // namespace detail::pass

COLLC_INLINE program drop_redundant_waits(program p) {
  const std::size_t nranks = p.code.size();
  std::vector<std::vector<bool>> drop(nranks);
  for (std::size_t r = 0; r < nranks; ++r) drop[r].assign(p.code[r].size(), false);
  std::vector<int> nodes;
  for (std::size_t r = 0; r < nranks; ++r)
    if (int n = r < p.node_of.size() ? p.node_of[r] : 0; std::find(nodes.begin(), nodes.end(), n) == nodes.end())
      nodes.push_back(n);
  for (int node : nodes) {
    std::vector<int> members;
    for (std::size_t r = 0; r < nranks; ++r)
      if ((r < p.node_of.size() ? p.node_of[r] : 0) == node) members.push_back(static_cast<int>(r));
    detail::pass::wait_knowledge k(p, std::move(members));
    if (!k.solve()) continue;
    for (auto [r, i] : k.redundant()) drop[static_cast<std::size_t>(r)][i] = true;
  }
  for (std::size_t r = 0; r < nranks; ++r) {
    rank_program kept;
    for (std::size_t i = 0; i < p.code[r].size(); ++i)
      if (!drop[r][i]) kept.push_back(std::move(p.code[r][i]));
    p.code[r] = std::move(kept);
  }
  return p;
}

COLLC_INLINE program shorten_data_paths(program p) {
  // Every change removes an instruction or shrinks a copy, so this ends.
  for (;;) {
    program next = receive_into_destination(merge_adjacent(p));
    if (next == p) return p;
    p = std::move(next);
  }
}

namespace detail::pass {

/// Whether `ins` at code[at + 3] reads the whole of the receive `v` and may
/// run piece by piece before the fence: its other ranges are D itself
/// (element for element) or disjoint from it, and its destination is no
/// source of the rank's sends since the last fence (they are in flight).
inline bool consumer_moves(const rank_program& code, std::size_t at, const send& s, const recv& v) {
  const instruction& ins = code[at + 3];
  const std::size_t n = v.count;
  ref dst;
  if (const auto* c = std::get_if<copy>(&ins)) {
    if (c->src != v.dst || c->count != n || !same_or_disjoint(c->dst, v.dst, n)) return false;
    dst = c->dst;
  } else if (const auto* d = std::get_if<reduce>(&ins)) {
    if ((d->a != v.dst && d->b != v.dst) || d->count != n) return false;
    if (!same_or_disjoint(d->a, v.dst, n) || !same_or_disjoint(d->b, v.dst, n) || !same_or_disjoint(d->dst, v.dst, n))
      return false;
    dst = d->dst;
  } else {
    return false;
  }
  if (overlaps(dst, n, s.src, s.count)) return false;
  for (std::size_t i = at; i-- > 0;) {
    if (std::holds_alternative<fence>(code[i])) break;
    if (const auto* e = std::get_if<send>(&code[i]); e && overlaps(dst, n, e->src, e->count)) return false;
  }
  return true;
}

/// `ins` (a copy or reduce) restricted to its elements [from, from + n).
inline instruction piece_of(const instruction& ins, std::size_t from, std::size_t n) {
  const auto at = [&](ref x) {
    x.offset += from;
    return x;
  };
  if (const auto* c = std::get_if<copy>(&ins)) return copy{at(c->dst), at(c->src), n};
  const auto& d = std::get<reduce>(ins);
  return reduce{at(d.dst), at(d.a), at(d.b), n};
}

}  // namespace detail::pass

COLLC_INLINE program pipeline_exchanges(program p, std::size_t piece, std::size_t min_count, std::size_t ahead) {
  using namespace detail::pass;
  // One node (node_of empty) has no messages: nothing to scan (a 64-rank
  // copy-in program would cost ~40 us of plan setup for nothing).
  if (piece == 0 || p.node_of.empty()) return p;
  const auto P = static_cast<std::size_t>(p.ranks);
  // Rank r's instructions i..i+3 are `send; recv; fence; C` with one peer,
  // equal counts of at least two pieces and min_count, and C free to run
  // piece by piece.
  const auto step_at = [&](std::size_t r, std::size_t i) {
    const rank_program& code = p.code[r];
    if (i + 3 >= code.size() || !std::holds_alternative<fence>(code[i + 2])) return false;
    const auto* s = std::get_if<send>(&code[i]);
    const auto* v = std::get_if<recv>(&code[i + 1]);
    return s && v && s->peer == v->peer && s->count == v->count && v->count >= std::max(2 * piece, min_count) &&
           consumer_moves(code, i, *s, *v);
  };
  // Which message from `peer` with `tag` instruction `at` of rank r is
  // (MPI matches the k-th send with the k-th receive of the same peer and tag).
  const auto ordinal = [&](std::size_t r, std::size_t at, int peer, int tag, bool sends) {
    int k = 0;
    for (std::size_t i = 0; i < at; ++i) {
      const auto& ins = p.code[r][i];
      if (const auto* s = std::get_if<send>(&ins); sends && s && s->peer == peer && s->tag == tag) ++k;
      if (const auto* v = std::get_if<recv>(&ins); !sends && v && v->peer == peer && v->tag == tag) ++k;
    }
    return k;
  };
  // Rank q's step at j is the mirror of rank r's at i: its send is r's
  // receive and its receive r's send.
  const auto mirrors = [&](std::size_t r, std::size_t i, std::size_t q, std::size_t j) {
    const auto& s = std::get<send>(p.code[r][i]);
    const auto& v = std::get<recv>(p.code[r][i + 1]);
    const auto& qs = std::get<send>(p.code[q][j]);
    const auto& qv = std::get<recv>(p.code[q][j + 1]);
    const int ri = static_cast<int>(r), qi = static_cast<int>(q);
    return qs.peer == ri && qs.count == s.count && qs.tag == v.tag && qv.tag == s.tag &&
           ordinal(q, j, ri, qs.tag, true) == ordinal(r, i + 1, qi, v.tag, false) &&
           ordinal(q, j + 1, ri, qv.tag, false) == ordinal(r, i, qi, s.tag, true);
  };
  std::vector<std::vector<std::size_t>> steps(P);  // [r]: where rank r's steps start
  for (std::size_t r = 0; r < P; ++r)
    for (std::size_t i = 0; i < p.code[r].size(); ++i) {
      if (!step_at(r, i)) continue;
      const auto q = static_cast<std::size_t>(std::get<send>(p.code[r][i]).peer);
      if (q >= P || q == r) continue;
      for (std::size_t j = 0; j < p.code[q].size(); ++j)
        if (step_at(q, j) && mirrors(r, i, q, j)) {
          steps[r].push_back(i);
          break;
        }
    }
  for (std::size_t r = 0; r < P; ++r) {
    if (steps[r].empty()) continue;
    const rank_program& code = p.code[r];
    rank_program out;
    std::size_t next = 0;
    for (std::size_t i = 0; i < code.size();) {
      if (next < steps[r].size() && steps[r][next] == i) {
        const auto& s = std::get<send>(code[i]);
        const auto& v = std::get<recv>(code[i + 1]);
        const std::size_t n = v.count;
        const auto send_piece = [&](std::size_t from) {
          send part = s;
          part.src.offset += from;
          part.count = std::min(piece, n - from);
          out.emplace_back(part);
        };
        // Elements sent before the first receive: all (ahead 0, or at least as
        // many pieces as there are), else `ahead` pieces.
        const std::size_t lead = ahead == 0 || ahead >= (n + piece - 1) / piece ? n : ahead * piece;
        for (std::size_t from = 0; from < n && from < lead; from += piece) send_piece(from);
        for (std::size_t from = 0; from < n; from += piece) {
          recv part = v;
          part.dst.offset += from;
          part.count = std::min(piece, n - from);
          out.emplace_back(part);
          if (from + lead < n) send_piece(from + lead);
          out.push_back(piece_of(code[i + 3], from, part.count));
        }
        out.emplace_back(fence{});
        i += 4;
        ++next;
      } else {
        out.push_back(code[i]);
        ++i;
      }
    }
    p.code[r] = std::move(out);
  }
  return p;
}

COLLC_INLINE program optimize(program p) { return shorten_data_paths(drop_redundant_waits(std::move(p))); }

COLLC_INLINE program alternate(const program& p, int copies) {
  if (copies < 2 || copies > 64)
    throw error(errc::invalid_argument, collc::detail::cat("alternate: copies is ", copies, ", must be in [2, 64]"));
  program out = p;
  out.shm_count = static_cast<std::size_t>(copies) * p.shm_count;
  for (int r = 0; r < p.ranks; ++r) {
    const rank_program& code = p.code[static_cast<std::size_t>(r)];
    for (const auto& ins : code)
      if (std::holds_alternative<send>(ins) || std::holds_alternative<recv>(ins))
        throw error(errc::invalid_argument,
                    collc::detail::cat("alternate: rank ", r,
                                       " sends or receives messages; only shared-memory programs alternate"));
    rank_program all;
    // Execution j of the ring: shm copy j, its waits counted from the start
    // of the ring (j executions of the peer's signals earlier).
    for (int j = 0; j < copies; ++j) {
      const std::size_t at = static_cast<std::size_t>(j) * p.shm_count;
      auto shifted = [&](ref x) {
        if (x.buf == buffer::shm) x.offset += at;
        return x;
      };
      for (const auto& ins : code) {
        if (const auto* w = std::get_if<wait>(&ins)) {
          const std::int64_t s = p.signals_per_execution(w->peer, w->flag);
          all.push_back(wait{w->peer, w->flag, alternating_wait_value(w->value, s, copies) + j * s});
        } else if (const auto* c = std::get_if<copy>(&ins)) {
          all.push_back(copy{shifted(c->dst), shifted(c->src), c->count});
        } else if (const auto* d = std::get_if<reduce>(&ins)) {
          all.push_back(reduce{shifted(d->dst), shifted(d->a), shifted(d->b), d->count});
        } else {
          all.push_back(ins);
        }
      }
    }
    out.code[static_cast<std::size_t>(r)] = std::move(all);
  }
  return out;
}

}  // namespace collc::ir
