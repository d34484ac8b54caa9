#pragma once
/// \file
/// Node segments shared by the plans of one communicator, so that a plan
/// after the first sets up without creating MPI objects: MPI_Comm_split,
/// MPI_Comm_dup and MPI_Win_allocate_shared cost 0.2-0.6 ms each on an
/// oversubscribed node, more than everything else a plan's setup does.
///
/// A segment_pool belongs to one node of one placement (the communicator of
/// the ranks sharing a segment) and owns shared windows ("arenas"). A plan
/// leases a range of `bytes` at the same offset of every node rank's slot of
/// one arena. Leasing is agreed by all ranks, freeing is local:
///
///  - every rank proposes the first range that is free in its own view (the
///    ranges it holds a lease on are taken); the plan's setup agreement (one
///    allreduce, engine.hpp) checks that every rank proposes the same range,
///    which is then free in every view, so no rank still runs a plan on it:
///    the range is taken;
///  - ranks that destroyed their plans in different orders may propose
///    different ranges; then everyone allocates a new arena (collectively,
///    as the result of the allreduce is the same everywhere);
///  - a new arena is zeroed by every rank and the node synchronizes once
///    before anyone polls it (fresh shared memory is zero on Linux, but no
///    MPI standard promises it); a range above everything leased before in
///    its arena is still zero, and flags that start at zero (engine.hpp) let a plan
///    start there with no collective of its own;
///  - a range that was leased before may hold an earlier plan's data where
///    the new plan has its flags, and data read as a flag can be any value:
///    its flag lines are zeroed and the node synchronizes (one barrier).
/// Arenas live until the pool dies with the communicator's registry (the last
/// plan on the communicator destroyed), so a program that creates and
/// destroys plans of similar sizes reuses the same memory.
#include <collc/backend/mpi/handles.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace collc::detail {

class segment_pool;

/// A leased range: this rank's part and every node peer's, same offset.
struct segment_lease {
  std::vector<std::byte*> slot;  ///< [node rank] start of the range in that rank's slot
  std::size_t bytes = 0;
  int arena = -1;
  std::size_t offset = 0;
};

class segment_pool {
 public:
  /// Takes ownership of `node_comm` (the ranks sharing segments).
  explicit segment_pool(comm_owner node_comm) : node_comm_(std::move(node_comm)) {
    COLLC_MPI_CHECK(MPI_Comm_rank(node_comm_.get(), &node_rank_));
    COLLC_MPI_CHECK(MPI_Comm_size(node_comm_.get(), &node_size_));
  }
  segment_pool(const segment_pool&) = delete;
  segment_pool& operator=(const segment_pool&) = delete;
  /// Collective over the node (MPI_Win_free), in arena order on every rank.
  ~segment_pool() {
    for (auto& a : arenas_) a.win.reset();
    node_comm_.reset();
  }

  [[nodiscard]] MPI_Comm node_comm() const noexcept { return node_comm_.get(); }
  [[nodiscard]] int node_rank() const noexcept { return node_rank_; }
  [[nodiscard]] int node_size() const noexcept { return node_size_; }
  /// Shared windows created so far (for tests: a reused range creates none).
  [[nodiscard]] int arenas() const noexcept { return static_cast<int>(arenas_.size()); }

  /// Local: the first range of `bytes` free in this rank's view, as (arena,
  /// offset); arena -1 if no arena has room. Plan setup agrees on it across
  /// ranks (engine.hpp) before take().
  [[nodiscard]] std::pair<int, std::size_t> propose(std::size_t bytes) const {
    // First fit among the holes released plans left, else above everything
    // leased: O(holes), not O(live plans) (a scan of the leases made building
    // 20,000 plans quadratic: 14 s).
    const std::size_t need = round_up(bytes);
    for (std::size_t i = 0; i < arenas_.size(); ++i) {
      const arena_state& a = arenas_[i];
      for (const auto& [off, len] : a.holes)
        if (len >= need) return {static_cast<int>(i), off};
      if (a.high_water + need <= a.capacity) return {static_cast<int>(i), a.high_water};
    }
    return {-1, 0};
  }

  /// Takes the range that every node rank proposed, or with `arena` < 0 a new
  /// arena (collective over the node: every rank must take the same branch).
  /// The range's first `zero_bytes` (its flag lines) are zero on every rank
  /// when this returns if `always_zero`, or if any of them was leased before:
  /// an earlier plan may have kept data there, whose values would read as
  /// flags far above any count. Then each rank zeroes its own part and
  /// the node synchronizes (collective; the decision is the same everywhere,
  /// as every rank has seen the same agreed leases). Memory never leased
  /// since the arena was zeroed needs nothing.
  segment_lease take(int arena, std::size_t offset, std::size_t bytes, std::size_t zero_bytes, bool always_zero) {
    segment_lease l;
    l.bytes = bytes;
    l.slot.assign(static_cast<std::size_t>(node_size_), nullptr);
    if (bytes == 0) return l;  // every rank: the program needs no segment
    const std::size_t need = round_up(bytes);
    l.arena = arena >= 0 ? arena : add_arena(need);
    l.offset = arena >= 0 ? offset : 0;
    arena_state& a = arenas_[static_cast<std::size_t>(l.arena)];
    a.used.emplace(l.offset, need);
    const bool leased_before = l.offset < a.high_water;
    a.carve(l.offset, need);
    for (int r = 0; r < node_size_; ++r)
      l.slot[static_cast<std::size_t>(r)] = a.base[static_cast<std::size_t>(r)] + l.offset;
    if (zero_bytes > 0 && (always_zero || leased_before)) {
      std::memset(l.slot[static_cast<std::size_t>(node_rank_)], 0, zero_bytes);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      COLLC_MPI_CHECK(MPI_Barrier(node_comm_.get()));  // zero before anyone polls
    }
    return l;
  }

  /// Local: the range is free in this rank's view.
  void release(const segment_lease& l) noexcept {
    if (l.arena < 0 || static_cast<std::size_t>(l.arena) >= arenas_.size()) return;
    arena_state& a = arenas_[static_cast<std::size_t>(l.arena)];
    auto it = a.used.find(l.offset);
    if (it == a.used.end()) return;
    a.free_range(it->first, it->second);
    a.used.erase(it);
  }

 private:
  /// 64 KiB per rank unless a plan needs more: room for the segments of
  /// hundreds of small plans, and cheap to zero (16 pages: on 8 ranks
  /// sharing 2 cores, zeroing 256 KiB each took 4-5 ms of the first plan).
  static constexpr std::size_t min_arena_bytes = std::size_t{64} << 10;

  struct arena_state {
    win_owner win;
    std::vector<std::byte*> base;             ///< [node rank] line-aligned start of the slot
    std::size_t capacity = 0;                 ///< bytes per rank
    std::size_t high_water = 0;               ///< end of the highest range leased so far (agreed: same everywhere)
    std::map<std::size_t, std::size_t> used;   ///< offset -> bytes, ranges leased by this rank
    std::map<std::size_t, std::size_t> holes;  ///< offset -> bytes, free ranges below high_water

    /// [off, off + n) is leased: cut it out of its hole, or extend high_water.
    void carve(std::size_t off, std::size_t n) {
      if (off >= high_water) {
        if (off > high_water) holes.emplace(high_water, off - high_water);
        high_water = off + n;
        return;
      }
      auto it = holes.upper_bound(off);
      if (it == holes.begin()) return;  // not free in this view: the agreement said otherwise (new arena path)
      --it;
      const auto [h, len] = *it;
      if (off + n > h + len) return;
      holes.erase(it);
      if (off > h) holes.emplace(h, off - h);
      if (off + n < h + len) holes.emplace(off + n, h + len - off - n);
    }
    /// [off, off + n) is free again: a hole, merged with its neighbours.
    void free_range(std::size_t off, std::size_t n) {
      auto next = holes.lower_bound(off);
      if (next != holes.end() && next->first == off + n) {
        n += next->second;
        next = holes.erase(next);
      }
      if (next != holes.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
          off = prev->first;
          n += prev->second;
          holes.erase(prev);
        }
      }
      holes.emplace(off, n);
    }
  };

  static std::size_t round_up(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

  int add_arena(std::size_t need) {
    arena_state a;
    a.capacity = std::max(need, min_arena_bytes);
    MPI_Info info = MPI_INFO_NULL;
    COLLC_MPI_CHECK(MPI_Info_create(&info));
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void* mine = nullptr;
    // 64 bytes more: windows are not line-aligned everywhere (see align_line).
    const int rc =
        MPI_Win_allocate_shared(static_cast<MPI_Aint>(a.capacity + 64), 1, info, node_comm_.get(), &mine, a.win.out());
    MPI_Info_free(&info);
    mpi_check(rc, "MPI_Win_allocate_shared");
    a.base.resize(static_cast<std::size_t>(node_size_));
    for (int r = 0; r < node_size_; ++r) {
      MPI_Aint size = 0;
      int disp = 0;
      void* p = nullptr;
      COLLC_MPI_CHECK(MPI_Win_shared_query(a.win.get(), r, &size, &disp, &p));
      a.base[static_cast<std::size_t>(r)] = static_cast<std::byte*>(align_line(p));
    }
    std::memset(a.base[static_cast<std::size_t>(node_rank_)], 0, a.capacity);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    COLLC_MPI_CHECK(MPI_Barrier(node_comm_.get()));  // zero before anyone polls
    arenas_.push_back(std::move(a));
    return static_cast<int>(arenas_.size()) - 1;
  }

  comm_owner node_comm_;
  int node_rank_ = 0, node_size_ = 1;
  std::vector<arena_state> arenas_;
};

}  // namespace collc::detail
