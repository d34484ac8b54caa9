#pragma once
/// \file
/// Recursive exchange (multi-radix butterfly), the recursive-exchange family
/// of Jocksch et al. 2026.
///
/// A factor set [-a1..-ak, b1..bj, ak..a1] runs k reduce-scatter steps, j
/// reduce-exchange steps, then k allgather steps that mirror the first k.
/// Step i groups ranks that differ only in mixed-radix digit i, with stride
/// a1*...*a(i-1): step 1 groups neighbours, so every partial sum covers a
/// contiguous block of ranks and reductions combine in rank order (correct for
/// non-commutative operators). A value is computed either by one owner (after
/// the reduce-scatter) or identically by every member of a reduce-exchange
/// group, so all ranks end with the same expression tree.
///
/// Data of one rank is a sequence of *positions*: the prod(a) parts of the
/// vector (allreduce), or the P blocks (reduce_scatter / allgather, block
/// sigma(p) at position p, sigma chosen so rank r ends with block r).
/// A reduce-scatter step keeps the part of the current position range named
/// by the rank's digit; an allgather step reunites the group's parts.
#include <collc/algo/builder.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace collc::algo::detail {

struct positions {
  std::vector<std::size_t> len;      // elements at each position
  std::vector<std::size_t> send_at;  // where the position starts in a rank's send buffer
  std::vector<std::size_t> recv_at;  // where it starts in a rank's recv buffer
  std::vector<std::size_t> prefix;   // prefix sums of len (storage order in shm regions)

  constexpr void finish() {
    prefix.assign(len.size() + 1, 0);
    for (std::size_t p = 0; p < len.size(); ++p) prefix[p + 1] = prefix[p] + len[p];
  }
  [[nodiscard]] constexpr std::size_t span(std::size_t lo, std::size_t hi) const { return prefix[hi] - prefix[lo]; }
};

/// Where one rank's data for its current position range lives.
struct holding {
  enum class kind { user_send, user_recv, shm };
  kind where = kind::user_send;
  std::size_t base = 0;  // shm: offset of position `lo`
  std::size_t lo = 0, hi = 0;
  int ready = 0;            // signal index after which peers may read it
  std::size_t copy_in = 0;  // user data: shm offset of position 0's copy (if copied in)
  bool copied_in = false;
};

/// Digit-reversed position rank r owns after reduce-scatter steps `rs`.
constexpr std::size_t final_position(int r, const std::vector<int>& rs, std::size_t npos) {
  std::size_t lo = 0, len = npos;
  int s = 1;
  for (int a : rs) {
    const auto d = static_cast<std::size_t>((r / s) % a);
    len /= static_cast<std::size_t>(a);
    lo += d * len;
    s *= a;
  }
  return lo;
}

template <class Builder>
class recursive_exchange_lowering {
 public:
  /// rs: reduce-scatter radices a1..ak; re: reduce-exchange radices.
  /// Builder: builder, or builder_view to lower over a subset of ranks.
  constexpr recursive_exchange_lowering(Builder& b, positions pos, std::vector<int> rs, std::vector<int> re)
      : b_(b), pos_(std::move(pos)), rs_(std::move(rs)), re_(std::move(re)) {
    const int P = b_.ranks();
    stride_.push_back(1);
    for (int a : rs_) stride_.push_back(stride_.back() * a);
    for (int a : re_) stride_.push_back(stride_.back() * a);
    hold_.assign(static_cast<std::size_t>(P), holding{});
  }

  /// Every rank starts holding all positions in its user buffer `k`.
  constexpr void start_all(holding::kind k) {
    for (auto& h : hold_) h = holding{k, 0, 0, pos_.len.size(), 0, 0, false};
  }
  /// Rank r starts holding [lo, hi) in its user buffer `k`.
  constexpr void start_one(int r, holding::kind k, std::size_t lo, std::size_t hi) {
    hold_[idx(r)] = holding{k, 0, lo, hi, 0, 0, false};
  }

  /// Rank r starts holding all positions in its shm at `base` (a partial
  /// already computed there, e.g. by folding), valid after signal `ready`.
  constexpr void start_shm(int r, std::size_t base, int ready) {
    hold_[idx(r)] = holding{holding::kind::shm, base, 0, pos_.len.size(), ready, 0, false};
  }

  /// Gives same-node peers a copy of the user data they will read in the
  /// next step: rank r copies its positions outside [skip_lo[r], skip_hi[r])
  /// (the part only r itself reads), and only if a same-node rank reads it.
  constexpr void copy_in(const std::vector<std::vector<int>>& readers_of, const std::vector<std::size_t>& skip_lo,
                         const std::vector<std::size_t>& skip_hi) {
    auto needed = [&](int r) {
      for (int q : readers_of[idx(r)])
        if (q != r && b_.same_node(q, r)) return true;
      return false;
    };
    bool any = false;
    for (int r = 0; r < b_.ranks(); ++r) any = any || needed(r);
    if (!any) return;
    const std::size_t region = b_.alloc_shm(pos_.span(0, pos_.len.size()));
    for (int r = 0; r < b_.ranks(); ++r) {
      if (!needed(r) || hold_[idx(r)].where == holding::kind::shm) continue;
      auto& h = hold_[idx(r)];
      h.copy_in = region;
      h.copied_in = true;
      for (std::size_t p = h.lo; p < h.hi; ++p)
        if (p < skip_lo[idx(r)] || p >= skip_hi[idx(r)])
          b_.copy(r, ir::ref{ir::buffer::shm, r, region + pos_.prefix[p]}, user_ref(r, h, p), pos_.len[p]);
      h.ready = b_.publish(r);
    }
  }

  /// bcast's first step: every rank fetches its own final position from
  /// `root` (which holds everything in its recv, copied in if needed).
  constexpr void scatter_from(int root) {
    const int P = b_.ranks();
    std::vector<pull> pulls;
    std::vector<std::size_t> mine(idx(P));
    for (int r = 0; r < P; ++r) {
      mine[idx(r)] = final_position(r, rs_, pos_.len.size());
      if (r != root) add_pulls(pulls, r, root, mine[idx(r)], mine[idx(r)] + 1);
    }
    const auto got = b_.fetch(pulls);
    std::size_t m = 0;
    for (auto n : pos_.len) m = std::max(m, n);
    const std::size_t region = b_.alloc_shm(m);
    for (std::size_t k = 0; k < pulls.size(); ++k)
      emit_copy_run(pulls[k].consumer, pulls[k], got[k], false, region, pulls[k].first);
    const holding root_had = hold_[idx(root)];
    for (int r = 0; r < P; ++r) {
      auto& h = hold_[idx(r)];
      h.lo = mine[idx(r)];
      h.hi = h.lo + 1;
      if (r == root) {
        if (root_had.copied_in) {
          h.where = holding::kind::shm;
          h.base = root_had.copy_in + pos_.prefix[h.lo];
        }
        h.copied_in = false;
      } else {
        h.where = holding::kind::shm;
        h.base = region;
        h.copied_in = false;
        h.ready = b_.publish(r);
      }
    }
  }

  [[nodiscard]] constexpr int stride(std::size_t step) const { return stride_[step]; }
  [[nodiscard]] constexpr const holding& held(int r) const { return hold_[idx(r)]; }
  [[nodiscard]] constexpr const positions& pos() const { return pos_; }

  /// Reduce-scatter step i (0-based). `to_recv`: results go straight to the
  /// user's recv buffer (nobody reads them afterwards).
  constexpr void reduce_scatter_step(std::size_t i, bool to_recv) {
    const int a = rs_[i], s = stride_[i];
    const int P = b_.ranks();
    std::vector<std::size_t> nlo(idx(P)), nhi(idx(P));
    for (int r = 0; r < P; ++r) {
      const auto& h = hold_[idx(r)];
      const auto part = (h.hi - h.lo) / static_cast<std::size_t>(a);
      nlo[idx(r)] = h.lo + static_cast<std::size_t>(digit(r, a, s)) * part;
      nhi[idx(r)] = nlo[idx(r)] + part;
    }
    combine_step(a, s, nlo, nhi, to_recv, [](int) { return true; });
  }

  /// Reduce-exchange step j (0-based among the positive reduce steps): every
  /// group member reduces the whole current range. `computes(r)` selects the
  /// ranks that need the result (a rooted reduce's last step: the root only).
  template <class Pred>
  constexpr void reduce_exchange_step(std::size_t j, bool to_recv, Pred computes) {
    const std::size_t i = rs_.size() + j;
    const int a = re_[j], s = stride_[i];
    const int P = b_.ranks();
    std::vector<std::size_t> nlo(idx(P)), nhi(idx(P));
    for (int r = 0; r < P; ++r) {
      nlo[idx(r)] = hold_[idx(r)].lo;
      nhi[idx(r)] = hold_[idx(r)].hi;
    }
    combine_step(a, s, nlo, nhi, to_recv, computes);
  }

  /// Allgather step mirroring reduce-scatter step i: the group's members
  /// reunite their parts. `to_recv`: the last step writes the user's recv
  /// (`writes_recv(r)` false skips it, e.g. a bcast root that already has it).
  template <class Pred>
  constexpr void allgather_step(std::size_t i, bool to_recv, Pred writes_recv) {
    const int a = rs_[i], s = stride_[i];
    const int P = b_.ranks();
    std::vector<pull> pulls;
    for (int r = 0; r < P; ++r) {
      if (to_recv && !writes_recv(r)) continue;
      const int d = digit(r, a, s);
      for (int t = 0; t < a; ++t) {
        const int q = r + (t - d) * s;
        const auto& hq = hold_[idx(q)];
        add_pulls(pulls, r, q, hq.lo, hq.hi);
      }
    }
    const auto got = b_.fetch(pulls);
    // New holdings: the union of the group's ranges.
    std::vector<holding> next = hold_;
    const std::size_t region = to_recv ? 0 : b_.alloc_shm(max_group_span(a, s));
    std::size_t k = 0;
    for (int r = 0; r < P; ++r) {
      auto& h = next[idx(r)];
      const int d = digit(r, a, s);
      h.lo = hold_[idx(r + (0 - d) * s)].lo;
      h.hi = hold_[idx(r + (a - 1 - d) * s)].hi;
      if (to_recv && !writes_recv(r)) continue;
      while (k < pulls.size() && pulls[k].consumer == r) {
        const auto& pl = pulls[k];
        emit_copy_run(r, pl, got[k], to_recv, region, h.lo);
        ++k;
      }
    }
    for (int r = 0; r < P; ++r) {
      auto& h = next[idx(r)];
      if (!to_recv) {
        h.where = holding::kind::shm;
        h.base = region;
        h.copied_in = false;
        h.ready = b_.publish(r);
      }
    }
    hold_ = std::move(next);
  }

  /// Rooted gather of every position to `root`'s recv (after the reduce
  /// steps); each position is read from one rank that holds it.
  constexpr void gather_to(int root) {
    std::vector<pull> pulls;
    const std::size_t npos = pos_.len.size();
    std::vector<int> owner(npos, -1);
    for (int pass = 0; pass < 3; ++pass)
      for (int r = 0; r < b_.ranks(); ++r) {
        const bool prefer = pass == 0 ? r == root : pass == 1 ? b_.same_node(r, root) : true;
        if (!prefer) continue;
        for (std::size_t p = hold_[idx(r)].lo; p < hold_[idx(r)].hi; ++p)
          if (owner[p] < 0) owner[p] = r;
      }
    for (std::size_t p = 0; p < npos; ++p) add_pulls(pulls, root, owner[p], p, p + 1);
    const auto got = b_.fetch(pulls);
    for (std::size_t k = 0; k < pulls.size(); ++k) emit_copy_run(root, pulls[k], got[k], true, 0, 0);
  }

 private:
  static constexpr std::size_t idx(int r) { return static_cast<std::size_t>(r); }
  static constexpr int digit(int r, int a, int s) { return (r / s) % a; }
  static constexpr bool is_user(const ir::ref& x) { return x.buf == ir::buffer::send || x.buf == ir::buffer::recv; }

  // The rank's user buffer at position p.
  [[nodiscard]] constexpr ir::ref user_ref(int r, const holding& h, std::size_t p) const {
    return h.where == holding::kind::user_send ? ir::ref{ir::buffer::send, r, pos_.send_at[p]}
                                               : ir::ref{ir::buffer::recv, r, pos_.recv_at[p]};
  }
  // Where peers on the same node read q's position p.
  [[nodiscard]] constexpr ir::ref shared_ref(int q, std::size_t p) const {
    const auto& h = hold_[idx(q)];
    if (h.where == holding::kind::shm) return {ir::buffer::shm, q, h.base + pos_.prefix[p] - pos_.prefix[h.lo]};
    return {ir::buffer::shm, q, h.copy_in + pos_.prefix[p]};
  }
  // Where q itself (or a message to another node) reads its position p.
  [[nodiscard]] constexpr ir::ref direct_ref(int q, std::size_t p) const {
    const auto& h = hold_[idx(q)];
    if (h.where == holding::kind::shm) return shared_ref(q, p);
    return user_ref(q, h, p);
  }

  // Pulls for positions [lo, hi) of q into r, one per contiguous run.
  constexpr void add_pulls(std::vector<pull>& pulls, int r, int q, std::size_t lo, std::size_t hi) const {
    for (std::size_t p = lo; p < hi; ++p) {
      if (pos_.len[p] == 0) continue;
      pull next{r, q, shared_ref(q, p), direct_ref(q, p), pos_.len[p], hold_[idx(q)].ready, p};
      if (!pulls.empty()) {
        auto& last = pulls.back();
        if (last.consumer == r && last.producer == q && adjacent(last.shared, last.count, next.shared) &&
            adjacent(last.direct, last.count, next.direct)) {
          last.count += next.count;
          continue;
        }
      }
      pulls.push_back(next);
    }
  }
  static constexpr bool adjacent(const ir::ref& a, std::size_t n, const ir::ref& b) {
    return a.buf == b.buf && a.owner == b.owner && a.offset + n == b.offset;
  }

  // Largest span any rank's new range covers in a gather step.
  [[nodiscard]] constexpr std::size_t max_group_span(int a, int s) const {
    std::size_t m = 0;
    for (int r = 0; r < b_.ranks(); ++r) {
      const int d = digit(r, a, s);
      m = std::max(m, pos_.span(hold_[idx(r - d * s)].lo, hold_[idx(r + (a - 1 - d) * s)].hi));
    }
    return m;
  }

  // Copies one fetched run (positions of the pull's producer) into r's new
  // region or recv. Positions are found by walking the producer's range.
  constexpr void emit_copy_run(int r, const pull& pl, ir::ref src, bool to_recv, std::size_t region,
                               std::size_t new_lo) {
    const auto& hq = hold_[idx(pl.producer)];
    std::size_t p = pl.first;
    std::size_t done = 0;
    for (; done < pl.count && p < hq.hi; ++p) {
      const std::size_t n = pos_.len[p];
      if (n == 0) continue;
      const ir::ref dst = to_recv ? ir::ref{ir::buffer::recv, r, pos_.recv_at[p]}
                                  : ir::ref{ir::buffer::shm, r, region + pos_.prefix[p] - pos_.prefix[new_lo]};
      b_.copy(r, dst, ir::ref{src.buf, src.owner, src.offset + done}, n);
      done += n;
    }
  }

  // One reducing step: rank r's group (radix a, stride s) reduces positions
  // [nlo[r], nhi[r]) in rank order; results go to a fresh shm region or recv.
  template <class Pred>
  constexpr void combine_step(int a, int s, const std::vector<std::size_t>& nlo, const std::vector<std::size_t>& nhi,
                              bool to_recv, Pred computes) {
    const int P = b_.ranks();
    std::vector<pull> pulls;
    std::vector<std::size_t> first(idx(P) * static_cast<std::size_t>(a) + 1, 0);
    for (int r = 0; r < P; ++r) {
      const int d = digit(r, a, s);
      for (int t = 0; t < a; ++t) {
        first[idx(r) * static_cast<std::size_t>(a) + static_cast<std::size_t>(t)] = pulls.size();
        if (computes(r)) add_pulls(pulls, r, r + (t - d) * s, nlo[idx(r)], nhi[idx(r)]);
      }
    }
    first.back() = pulls.size();
    const auto got = b_.fetch(pulls);
    std::size_t region = 0;
    if (!to_recv) {
      std::size_t m = 0;
      for (int r = 0; r < P; ++r) m = std::max(m, pos_.span(nlo[idx(r)], nhi[idx(r)]));
      region = b_.alloc_shm(m);
    }
    for (int r = 0; r < P; ++r) {
      if (!computes(r)) continue;
      // Per position, the a inputs in rank order.
      const std::size_t lo = nlo[idx(r)], hi = nhi[idx(r)];
      std::vector<std::vector<ir::ref>> in(hi - lo, std::vector<ir::ref>(static_cast<std::size_t>(a)));
      for (int t = 0; t < a; ++t) {
        const std::size_t begin = first[idx(r) * static_cast<std::size_t>(a) + static_cast<std::size_t>(t)];
        const std::size_t end = first[idx(r) * static_cast<std::size_t>(a) + static_cast<std::size_t>(t) + 1];
        std::size_t k = begin, used = 0;
        for (std::size_t p = lo; p < hi; ++p) {
          if (pos_.len[p] == 0) continue;
          while (k < end && used == pulls[k].count) ++k, used = 0;
          in[p - lo][static_cast<std::size_t>(t)] = ir::ref{got[k].buf, got[k].owner, got[k].offset + used};
          used += pos_.len[p];
        }
      }
      auto dst_of = [&](std::size_t p) {
        return to_recv ? ir::ref{ir::buffer::recv, r, pos_.recv_at[p]}
                       : ir::ref{ir::buffer::shm, r, region + pos_.prefix[p] - pos_.prefix[lo]};
      };
      // With MPI_IN_PLACE recv is the send buffer: when a user-buffer operand
      // comes after the first two, partial folds accumulate in scratch and
      // recv is written by the last fold only (see builder::reduce_chain).
      bool user_later = false;
      for (std::size_t p = lo; p < hi; ++p)
        for (int t = 2; t < a; ++t) user_later = user_later || is_user(in[p - lo][static_cast<std::size_t>(t)]);
      const bool via_scratch = to_recv && user_later;
      const std::size_t acc = via_scratch ? b_.alloc_scratch(r, pos_.span(lo, hi)) : 0;
      auto out_of = [&](std::size_t p, int t) {
        if (!via_scratch || t + 1 == a) return dst_of(p);
        return ir::ref{ir::buffer::scratch, r, acc + pos_.prefix[p] - pos_.prefix[lo]};
      };
      // Loop order (operand, position) lets the builder merge positions.
      for (std::size_t p = lo; p < hi; ++p)
        if (pos_.len[p] != 0) b_.reduce(r, out_of(p, 1), in[p - lo][0], in[p - lo][1], pos_.len[p]);
      for (int t = 2; t < a; ++t)
        for (std::size_t p = lo; p < hi; ++p)
          if (pos_.len[p] != 0)
            b_.reduce(r, out_of(p, t), out_of(p, t - 1), in[p - lo][static_cast<std::size_t>(t)], pos_.len[p]);
    }
    for (int r = 0; r < P; ++r) {
      auto& h = hold_[idx(r)];
      h.lo = nlo[idx(r)];
      h.hi = nhi[idx(r)];
      h.copied_in = false;
      if (to_recv) {
        h.where = holding::kind::user_recv;  // final: nobody reads it again
        h.ready = 0;
      } else {
        h.where = holding::kind::shm;
        h.base = region;
        h.ready = b_.publish(r);
      }
    }
  }

  Builder& b_;
  positions pos_;
  std::vector<int> rs_, re_;
  std::vector<int> stride_;
  std::vector<holding> hold_;
};

}  // namespace collc::algo::detail
