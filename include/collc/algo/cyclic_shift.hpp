#pragma once
/// \file
/// Cyclic shift (dissemination), the cyclic-shift family of Jocksch et al.
/// 2026: commutative operators
/// only. Radices r1..rn satisfy r1*...*r(n-1) < P <= r1*...*rn, so step i
/// talks to ranks at distance multiples of s_i = r1*...*r(i-1) and the last
/// step is truncated where the windows would wrap past P (e.g. {2,2,2} for 7).
///
/// Work is on P blocks (the P parts of an allreduce vector, or the P blocks
/// of reduce_scatter / allgather); block offsets are taken modulo P.
///  - reduce-scatter (strides growing, last step truncated): after step i,
///    rank y holds for each block b with offset o = (y - b) mod P a multiple
///    of s_(i+1) the sum of contributions of ranks b+o .. b+o+s_(i+1)-1
///    (clipped at offset P). After the last step that is block y, complete.
///  - mirrored allgather (strides shrinking, first step truncated): after
///    step i, rank y holds blocks y + m*s_i (m*s_i < P).
///  - dissemination allgather (strides growing, last step truncated, Bruck):
///    after step i rank y holds blocks y .. y + min(s_(i+1), P) - 1.
/// A positive-only allreduce set disseminates the *contributions* with the
/// Bruck allgather and then every rank reduces them in rank order: one
/// expression tree on every rank (bitwise-identical results), which partial
/// sums over rotated windows could not give.
#include <collc/algo/builder.hpp>
#include <collc/algo/recursive_exchange.hpp>

#include <cstddef>
#include <vector>

namespace collc::algo::detail {

class cyclic_shift_lowering {
 public:
  constexpr cyclic_shift_lowering(builder& b, positions blocks) : b_(b), blk_(std::move(blocks)) {
    P_ = b_.ranks();
    stage_.assign(idx(P_), stage{});
  }

  /// Stage 0: every rank holds its own contribution to all blocks (in send),
  /// copied into shm for same-node readers.
  constexpr void start_with_all_blocks() {
    const std::size_t copy = b_.alloc_shm(blk_.span(0, idx(P_)));
    for (int y = 0; y < P_; ++y) {
      auto& st = stage_[idx(y)];
      st = stage{};
      st.slots.resize(idx(P_));
      for (std::size_t blk = 0; blk < idx(P_); ++blk) {
        st.slots[blk] = slot{ir::ref{ir::buffer::shm, y, copy + blk_.prefix[blk]},
                             ir::ref{ir::buffer::send, y, blk_.send_at[blk]}, blk};
        b_.copy(y, st.slots[blk].shared, st.slots[blk].direct, blk_.len[blk]);
      }
      st.ready = b_.publish(y);
    }
  }

  /// Reduce-scatter with radices a (growing strides). Results land in recv
  /// at `recv_at` of the rank's own block if `to_recv`, else in shm.
  constexpr void reduce_scatter(const std::vector<int>& a, bool to_recv) {
    int s = 1;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const int next = s * a[i];  // s_(i+1), may exceed P in the last step
      const bool last = i + 1 == a.size();
      // Rank y keeps blocks at offsets m*next < P: slot m.
      std::vector<pull> pulls;
      std::vector<std::vector<std::size_t>> first(idx(P_));
      for (int y = 0; y < P_; ++y) {
        for (std::size_t m = 0; m * static_cast<std::size_t>(next) < idx(P_); ++m) {
          const std::size_t o = m * static_cast<std::size_t>(next);
          const std::size_t blk = block_at(y, -static_cast<std::ptrdiff_t>(o));
          first[idx(y)].push_back(pulls.size());
          for (int t = 0; t < a[i] && o + static_cast<std::size_t>(t * s) < idx(P_); ++t) {
            const int z = rank_at(y, t * s);
            add_pull(pulls, y, z, blk);
          }
        }
        first[idx(y)].push_back(pulls.size());
      }
      const auto got = b_.fetch(pulls);
      std::size_t region = 0;
      if (!(last && to_recv)) region = b_.alloc_shm(max_kept_span(next));
      std::vector<stage> out(idx(P_));
      for (int y = 0; y < P_; ++y) {
        auto& st = out[idx(y)];
        std::size_t at = 0;
        for (std::size_t m = 0; m + 1 < first[idx(y)].size(); ++m) {
          const std::size_t blk = block_at(y, -static_cast<std::ptrdiff_t>(m * static_cast<std::size_t>(next)));
          const std::size_t n = blk_.len[blk];
          const ir::ref dst = (last && to_recv) ? ir::ref{ir::buffer::recv, y, blk_.recv_at[blk]}
                                                : ir::ref{ir::buffer::shm, y, region + at};
          std::vector<ir::ref> in;
          for (std::size_t k = first[idx(y)][m]; k < first[idx(y)][m + 1]; ++k) in.push_back(got[k]);
          if (n != 0) b_.reduce_chain(y, dst, in, n);
          st.slots.push_back(slot{dst, dst, blk});
          at += n;
        }
        st.ready = (last && to_recv) ? 0 : b_.publish(y);
      }
      stage_ = std::move(out);
      s = next;
    }
  }

  /// Allgather whose first step is the truncated one (mirror of
  /// reduce_scatter(a)): radices a are given in reduce-scatter order and run
  /// in reverse. Every rank holds exactly its own block on entry (slot 0).
  /// The last step writes recv (skipped for ranks where !writes(y)).
  template <class Pred>
  constexpr void mirrored_allgather(const std::vector<int>& a, Pred writes) {
    std::vector<int> s(a.size() + 1, 1);
    for (std::size_t i = 0; i < a.size(); ++i) s[i + 1] = s[i] * a[i];
    for (std::size_t i = a.size(); i-- > 0;) {
      const int si = s[i];
      const bool last = i == 0;
      // After this step rank y holds blocks y + m*si, m*si < P (slot m);
      // block y + m*si comes from z = y + t*si, t = m mod a_i, its slot m / a_i.
      std::vector<pull> pulls;
      for (int y = 0; y < P_; ++y) {
        if (last && !writes(y)) continue;
        for (std::size_t m = 0; m * static_cast<std::size_t>(si) < idx(P_); ++m) {
          const int t = static_cast<int>(m % static_cast<std::size_t>(a[i]));
          const int z = rank_at(y, t * si);
          add_pull(pulls, y, z, stage_[idx(z)].slots[m / static_cast<std::size_t>(a[i])].block);
        }
      }
      gather_into(pulls, last, !last);
    }
  }

  /// Bruck allgather (growing strides, last step truncated) starting from
  /// one block per rank (its own, slot 0). The last step writes recv if
  /// `to_recv`, else a private-use shm region (see reduce_contributions).
  constexpr void dissemination_allgather(const std::vector<int>& a, bool to_recv) {
    int s = 1;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const int next = s * a[i];
      const bool last = i + 1 == a.size();
      // After the step rank y holds offsets o < min(next, P) (slot o); offset
      // o = t*s + o' comes from z = y + t*s, its slot o'.
      std::vector<pull> pulls;
      for (int y = 0; y < P_; ++y)
        for (std::size_t o = 0; o < std::min(idx(next), idx(P_)); ++o) {
          const int z = rank_at(y, static_cast<int>(o / static_cast<std::size_t>(s)) * s);
          add_pull(pulls, y, z, stage_[idx(z)].slots[o % static_cast<std::size_t>(s)].block);
        }
      gather_into(pulls, last && to_recv, !last);
      s = next;
    }
  }

  /// Every rank starts holding just block `own(y)` in its user buffer at
  /// `direct(y)`, copied into shm for same-node readers.
  template <class Own, class Direct>
  constexpr void start_with_own_block(Own own, Direct direct) {
    std::size_t m = 0;
    for (auto n : blk_.len) m = std::max(m, n);
    const std::size_t copy = b_.alloc_shm(m);
    for (int y = 0; y < P_; ++y) {
      const std::size_t blk = own(y);
      stage st;
      st.slots.push_back(slot{ir::ref{ir::buffer::shm, y, copy}, direct(y), blk});
      b_.copy(y, st.slots[0].shared, st.slots[0].direct, blk_.len[blk]);
      st.ready = b_.publish(y);
      stage_[idx(y)] = std::move(st);
    }
  }

  /// After a dissemination allgather of contributions (stage slots hold
  /// ranks' whole vectors), reduce them in rank order into recv.
  constexpr void reduce_contributions(std::size_t count) {
    for (int y = 0; y < P_; ++y) {
      std::vector<ir::ref> in(idx(P_));
      for (const auto& sl : stage_[idx(y)].slots) in[sl.block] = sl.direct;
      b_.reduce_chain(y, ir::ref{ir::buffer::recv, y, 0}, in, count);
    }
  }

 private:
  struct slot {
    ir::ref shared, direct;
    std::size_t block = 0;
  };
  struct stage {
    std::vector<slot> slots;
    int ready = 0;
  };

  static constexpr std::size_t idx(int r) { return static_cast<std::size_t>(r); }
  [[nodiscard]] constexpr int rank_at(int y, int d) const { return ((y + d) % P_ + P_) % P_; }
  [[nodiscard]] constexpr std::size_t block_at(int y, std::ptrdiff_t d) const {
    return static_cast<std::size_t>(((y + d) % P_ + P_) % P_);
  }

  [[nodiscard]] constexpr const slot& find(int z, std::size_t blk) const {
    for (const auto& sl : stage_[idx(z)].slots)
      if (sl.block == blk) return sl;
    return stage_[idx(z)].slots.front();  // unreachable for valid schedules
  }
  constexpr void add_pull(std::vector<pull>& pulls, int y, int z, std::size_t blk) const {
    const slot& sl = find(z, blk);
    pulls.push_back(pull{y, z, sl.shared, sl.direct, blk_.len[blk], stage_[idx(z)].ready, blk});
  }

  // Largest total size of the blocks one rank keeps at offsets m*next.
  [[nodiscard]] constexpr std::size_t max_kept_span(int next) const {
    std::size_t m = 0;
    for (int y = 0; y < P_; ++y) {
      std::size_t sum = 0;
      for (std::size_t o = 0; o < idx(P_); o += static_cast<std::size_t>(next))
        sum += blk_.len[block_at(y, -static_cast<std::ptrdiff_t>(o))];
      m = std::max(m, sum);
    }
    return m;
  }

  // Copies the pulled blocks (grouped by consumer, in slot order) into a new
  // shm region, or into recv; publishes if peers read the result.
  constexpr void gather_into(const std::vector<pull>& pulls, bool last, bool publish) {
    const auto got = b_.fetch(pulls);
    std::size_t m = 0;
    {
      std::size_t cur = 0;
      for (std::size_t k = 0; k < pulls.size(); ++k) {
        if (k > 0 && pulls[k].consumer != pulls[k - 1].consumer) cur = 0;
        cur += pulls[k].count;
        m = std::max(m, cur);
      }
    }
    const std::size_t region = last ? 0 : b_.alloc_shm(m);
    std::vector<stage> out(idx(P_));
    std::size_t at = 0;
    for (std::size_t k = 0; k < pulls.size(); ++k) {
      const int y = pulls[k].consumer;
      if (k == 0 || y != pulls[k - 1].consumer) at = 0;
      const std::size_t blk = pulls[k].first;
      const ir::ref dst =
          last ? ir::ref{ir::buffer::recv, y, blk_.recv_at[blk]} : ir::ref{ir::buffer::shm, y, region + at};
      b_.copy(y, dst, got[k], pulls[k].count);
      out[idx(y)].slots.push_back(slot{dst, dst, blk});
      at += pulls[k].count;
    }
    if (publish)
      for (int y = 0; y < P_; ++y) out[idx(y)].ready = b_.publish(y);
    stage_ = std::move(out);
  }

  builder& b_;
  positions blk_;
  int P_ = 0;
  std::vector<stage> stage_;
};

}  // namespace collc::algo::detail
