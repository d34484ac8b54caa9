#pragma once
// Property 4, race: every rank's buffers as cells, vector clocks, and the
// FastTrack checks on every element access (verify.hpp, "Model").
#include <collc/ir/verify.hpp>

#include <collc/ir/verify/sequence.ipp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace collc::ir::detail::verification {

/// P vector clocks of P entries; clock r is rank r's knowledge of every rank's time.
class vector_clocks {
 public:
  explicit vector_clocks(int ranks)
      : ranks_(ranks), vc_(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks), 0) {}
  tick* of(int r) { return vc_.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(ranks_); }
  /// Rank r learns everything `other` knows (a wait or a recv).
  void join(int r, const tick* other) {
    tick* v = of(r);
    for (int q = 0; q < ranks_; ++q) v[q] = std::max(v[q], other[q]);
  }

 private:
  int ranks_;
  std::vector<tick> vc_;
};

/// One element of a buffer, FastTrack style: the value, the last write's
/// epoch, and the reads since (one epoch, or a read set in a side pool).
struct cell {
  std::uint32_t value = 0;      ///< expression id; 0 = undefined
  std::uint32_t w_clock = 0;    ///< clock of the last write on w_rank
  std::int32_t w_rank = -1;     ///< -1: never written
  std::uint32_t r_clock = 0;    ///< single read: clock; read set: index into the pool
  std::int32_t r_rank = -1;     ///< -1: no read since the write; >= 0: one read; read_set: several
  std::uint32_t in_flight = 0;  ///< sends from this element not yet completed by a fence
  static constexpr std::int32_t read_set = -2;
};

/// An access to element `element` of the range `via` names, by `rank`.
struct access {
  int rank;
  const ref* via;  // how the instruction names the element (for messages)
  std::size_t element;
};

/// "recv[3]": the element an access touches.
COLLC_INLINE std::string name_of(const access& a) {
  ref x = *a.via;
  x.offset += a.element;
  return name_range(x, 1);
}

/// What an access raced with; no value: it is ordered.
using race_report = std::optional<std::string>;

/// Every rank's send, recv, shm (shm_copies copies) and scratch as cells,
/// and the sends still reading them. Accesses check FastTrack's rules
/// against the accessing rank's vector clock `v` and record themselves.
class memory {
 public:
  /// Buffers as large as the largest program of the sequence needs (the
  /// first program decides aliasing: all share collective and root).
  explicit memory(const sequence& s) : s_(s) {
    const auto P = static_cast<std::size_t>(s.ranks);
    std::size_t recv_n = 0, send_n = 0, scratch_n = 0;
    for (const program* q : s.programs) {
      recv_n = std::max(recv_n, q->recv_count());
      send_n = std::max(send_n, q->send_count());
      scratch_n = std::max(scratch_n, q->scratch_count);
    }
    const std::size_t shm_n = s.shm_max * static_cast<std::size_t>(s.o.shm_copies);
    const program& p = s.first();
    base_.assign(P * n_buffers, 0);
    std::size_t total = 0;
    for (int r = 0; r < s.ranks; ++r) {
      const auto b = static_cast<std::size_t>(r) * n_buffers;
      const bool alias = aliased(p, s.o, r);
      const std::size_t recv_size = alias ? std::max(recv_n, send_shift(p, r) + send_n) : recv_n;
      base_[b + static_cast<std::size_t>(buffer::recv)] = total;
      total += recv_size;
      if (alias) {
        base_[b + static_cast<std::size_t>(buffer::send)] =
            base_[b + static_cast<std::size_t>(buffer::recv)] + send_shift(p, r);
      } else {
        base_[b + static_cast<std::size_t>(buffer::send)] = total;
        total += send_n;
      }
      base_[b + static_cast<std::size_t>(buffer::shm)] = total;
      total += shm_n;
      base_[b + static_cast<std::size_t>(buffer::scratch)] = total;
      total += scratch_n;
    }
    cells_.assign(total, cell{});
    pending_.assign(P, {});
  }

  /// The first cell of `x`; shm in the copy `shm_shift` elements on.
  [[nodiscard]] std::size_t loc(const ref& x, std::size_t shm_shift) const {
    return base_[static_cast<std::size_t>(x.owner) * n_buffers + static_cast<std::size_t>(x.buf)] + x.offset +
           (x.buf == buffer::shm ? shm_shift : 0);
  }
  [[nodiscard]] const cell& operator[](std::size_t at) const { return cells_[at]; }

  /// Read cell `at` as a.rank.
  race_report read(std::size_t at, const access& a, tick now, const tick* v) {
    cell& c = cells_[at];
    if (c.w_rank >= 0 && c.w_rank != a.rank && c.w_clock > v[c.w_rank])
      return cat("reads ", name_of(a), ", written by ", s_.describe_epoch(c.w_rank, c.w_clock),
                 ", but no wait or recv orders that write before this read");
    record_read(c, a.rank, now, v);
    return std::nullopt;
  }

  /// Write `value` into cell `at` as a.rank.
  race_report write(std::size_t at, const access& a, tick now, const tick* v, std::uint32_t value) {
    cell& c = cells_[at];
    if (c.in_flight != 0)
      return cat("writes ", name_of(a), " while ", in_flight_sender(at), " from it is in flight (no fence in between)");
    if (c.w_rank >= 0 && c.w_rank != a.rank && c.w_clock > v[c.w_rank])
      return cat("writes ", name_of(a), " concurrently with its write by ", s_.describe_epoch(c.w_rank, c.w_clock));
    if (c.r_rank >= 0) {
      if (c.r_rank != a.rank && c.r_clock > v[c.r_rank])
        return cat("writes ", name_of(a), " while ", s_.describe_epoch(c.r_rank, c.r_clock),
                   " may still be reading it (no wait or recv orders that read before this write)");
    } else if (c.r_rank == cell::read_set) {
      for (const auto& [q, k] : read_sets_[c.r_clock])
        if (q != a.rank && k > v[q])
          return cat("writes ", name_of(a), " while ", s_.describe_epoch(q, k),
                     " may still be reading it (no wait or recv orders that read before this write)");
      read_sets_[c.r_clock].clear();
      free_sets_.push_back(c.r_clock);
    }
    c.r_rank = -1;
    c.w_rank = a.rank;
    c.w_clock = now;
    c.value = value;
    return std::nullopt;
  }

  /// A send starts reading cell `at` as a.rank: its last write must be
  /// ordered before; the read lasts until the sender's next fence.
  race_report start_send_read(std::size_t at, const access& a, const tick* v) {
    cell& c = cells_[at];
    if (c.w_rank >= 0 && c.w_rank != a.rank && c.w_clock > v[c.w_rank])
      return cat("sends ", name_of(a), ", written by ", s_.describe_epoch(c.w_rank, c.w_clock),
                 ", but no wait or recv orders that write before this send");
    ++c.in_flight;
    return std::nullopt;
  }
  /// Rank r's send at `index` (of `execution`) reads [first, first + count) until its next fence.
  void note_send(int r, std::size_t first, std::size_t count, std::ptrdiff_t index, int execution) {
    pending_[static_cast<std::size_t>(r)].push_back({first, count, index, execution});
  }

  /// Fence of rank r: every started send has read its source; the read ends here.
  void complete_sends(int r, tick now, const tick* v) {
    auto& pending = pending_[static_cast<std::size_t>(r)];
    for (const auto& p : pending)
      for (std::size_t i = 0; i < p.count; ++i) {
        cell& c = cells_[p.first + i];
        --c.in_flight;
        record_read(c, r, now, v);
      }
    pending.clear();
  }

 private:
  struct pending_send {
    std::size_t first;  // first cell of the source
    std::size_t count;
    std::ptrdiff_t index;
    int execution;
  };

  void record_read(cell& c, int t, tick now, const tick* v) {
    if (c.r_rank == -1 || c.r_rank == t || (c.r_rank >= 0 && c.r_clock <= v[c.r_rank])) {
      c.r_rank = t;  // the previous read happens before this one: one epoch suffices
      c.r_clock = now;
    } else if (c.r_rank >= 0) {
      std::uint32_t slot;
      if (free_sets_.empty()) {
        slot = static_cast<std::uint32_t>(read_sets_.size());
        read_sets_.emplace_back();
      } else {
        slot = free_sets_.back();
        free_sets_.pop_back();
      }
      read_sets_[slot] = {{c.r_rank, c.r_clock}, {t, now}};
      c.r_rank = cell::read_set;
      c.r_clock = slot;
    } else {
      auto& set = read_sets_[c.r_clock];
      if (set.back().first == t)
        set.back().second = now;
      else
        set.emplace_back(t, now);
    }
  }

  /// Which send keeps cell `at` busy (only for the message).
  [[nodiscard]] std::string in_flight_sender(std::size_t at) const {
    for (int r = 0; r < s_.ranks; ++r)
      for (const auto& p : pending_[static_cast<std::size_t>(r)])
        if (at >= p.first && at < p.first + p.count)
          return cat("the send at rank ", r, " instruction ", p.index, " (execution ", p.execution, ')');
    return "a send";
  }

  const sequence& s_;
  std::vector<std::size_t> base_;  // first cell of (rank, buffer)
  std::vector<cell> cells_;
  std::vector<std::vector<std::pair<std::int32_t, tick>>> read_sets_;
  std::vector<std::uint32_t> free_sets_;
  std::vector<std::vector<pending_send>> pending_;  // [rank]: sends not yet completed by a fence
};

}  // namespace collc::ir::detail::verification
