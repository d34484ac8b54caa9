#pragma once
/// \file
/// Node segments shared by the plans of one communicator, so that a plan
/// after the first sets up without creating MPI objects: MPI_Comm_split,
/// MPI_Comm_dup and MPI_Win_allocate_shared cost 0.2-0.6 ms each on an
/// oversubscribed node, more than everything else a plan's setup does.
///
/// A segment_pool belongs to one node of one placement (the communicator of
/// the ranks sharing a segment) and owns shared memory segments ("arenas"):
/// POSIX shared memory that node rank 0 creates and unlinks as soon as every
/// node rank has mapped it (the memory then goes with the last process that
/// unmaps it, killed or not), 7x cheaper to set up than
/// MPI_Win_allocate_shared (82 against 534 us at 8 ranks on 2 cores), which
/// stays the fallback where POSIX shared memory is unavailable. A plan
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
///    as the result of the allreduce is the same everywhere) and retires the
///    lowest proposal where it is free (retire()), so that a range one rank
///    still holds (keep(): a failed plan's sends read it) is not proposed by
///    the others at every later setup;
///  - a new arena is zero before anyone polls it: POSIX shared memory is
///    created by ftruncate, which POSIX fills with zeros; an MPI window (the
///    fallback) is zeroed by every rank and the node synchronizes once (no
///    MPI standard promises zeroed windows); a range above everything leased before in
///    its arena is still zero, and flags that start at zero (engine.hpp) let a plan
///    start there with no collective of its own;
///  - a range that was leased before may hold an earlier plan's data where
///    the new plan has its flags, and data read as a flag can be any value:
///    its flag lines are zeroed and the node synchronizes (one barrier).
/// Arenas live until the pool dies with the communicator's registry (the last
/// plan on the communicator destroyed), so a program that creates and
/// destroys plans of similar sizes reuses the same memory.
#include <collc/backend/mpi/bound.hpp>
#include <collc/backend/mpi/handles.hpp>
#include <collc/config.hpp>

#include <mpi.h>

#include <cstddef>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace collc::mpi {

class segment_pool;

class segment_pool {
 public:
  /// Takes ownership of `node_comm` (the ranks sharing segments).
  explicit segment_pool(comm_owner node_comm);
  /// Borrows `node_comm`, which must outlive the pool: a communicator that
  /// lies within one node serves as its own node communicator (no split).
  explicit segment_pool(MPI_Comm node_comm);
  segment_pool(const segment_pool&) = delete;
  segment_pool& operator=(const segment_pool&) = delete;
  /// Collective over the node where an arena is an MPI window (the
  /// fallback: which windows a rank keeps (keep()) is agreed, then
  /// MPI_Win_free), in arena order on every rank; else local.
  ~segment_pool();

  [[nodiscard]] MPI_Comm node_comm() const noexcept { return comm_; }
  [[nodiscard]] int node_rank() const noexcept { return node_rank_; }
  [[nodiscard]] int node_size() const noexcept { return node_size_; }
  /// Arenas created so far (for tests: a reused range creates none).
  [[nodiscard]] int arenas() const noexcept { return static_cast<int>(arenas_.size()); }
  /// Of them, the ones shared between processes (none on a one-rank node).
  [[nodiscard]] int windows() const noexcept {
    int n = 0;
    for (const auto& a : arenas_) n += a.own ? 0 : 1;
    return n;
  }
  /// Of them, the MPI shared windows (the fallback).
  [[nodiscard]] int mpi_windows() const noexcept {
    int n = 0;
    for (const auto& a : arenas_) n += a.win.get() != MPI_WIN_NULL ? 1 : 0;
    return n;
  }

  /// Local: the first range of `bytes` free in this rank's view, as (arena,
  /// offset); arena -1 if no arena has room. Plan setup agrees on it across
  /// ranks (engine.hpp) before take().
  [[nodiscard]] std::pair<int, std::size_t> propose(std::size_t bytes) const;

  /// Takes the range that every node rank proposed, or with `arena` < 0 a new
  /// arena (collective over the node: every rank must take the same branch).
  /// The range's first `zero_bytes` (its flag lines) are zero on every rank
  /// when this returns if `always_zero`, or if any of them was leased before:
  /// an earlier plan may have kept data there, whose values would read as
  /// flags far above any count. Then each rank zeroes its own part and
  /// the node synchronizes (collective; the decision is the same everywhere,
  /// as every rank has seen the same agreed leases). Memory never leased
  /// since the arena was zeroed needs nothing.
  segment_lease take(int arena, std::size_t offset, std::size_t bytes, std::size_t zero_bytes, bool always_zero);

  /// Local: the range is free in this rank's view.
  void release(const segment_lease& l) noexcept;
  /// Local: the range stays leased (no later plan gets it) and its arena's
  /// memory outlives the pool: a failed plan's sends still active read it
  /// when a late peer's receive matches them (engine::~engine).
  void keep(const segment_lease& l) noexcept;
  /// Local: removes the range from this rank's free ranges if it is one (the
  /// high-water mark, agreed, is left as it is). A plan setup whose ranks
  /// proposed different ranges retires the lowest proposal, so that a range
  /// one rank keeps (keep()) and the others freed stops being proposed: else
  /// every later plan that fits it disagreed again and took a new arena.
  void retire(int arena, std::size_t offset, std::size_t bytes) noexcept;

  /// Shared memory created ahead by the rank that will be node rank 0 of a
  /// pool, so that the pool's first arena needs no broadcast of its name:
  /// the name travels in a collective the caller makes anyway.
  struct prepared {
    char name[48] = {};        ///< "" when none (creation failed, or not rank 0)
    int fd = -1;               ///< the creator's descriptor
    std::size_t capacity = 0;  ///< bytes per rank
    prepared() = default;
    prepared(const prepared&) = delete;
    prepared& operator=(const prepared&) = delete;
    prepared(prepared&& o) noexcept;
    prepared& operator=(prepared&& o) noexcept;
    /// Unlinks and closes what is still held (an unused preparation).
    ~prepared();
  };
  /// Creates the shared memory of an arena of `capacity` bytes for `ranks`
  /// ranks (local; "" on failure). The first call in a process also sweeps
  /// stale segments (sweep_stale_segments).
  static prepared prepare(std::size_t capacity, int ranks);
  /// Removes the names under /dev/shm that collc processes of this user
  /// left behind when they died between creating a segment and removing its
  /// name (a rank killed during the first plan's setup: the name lives until
  /// that setup's agreement): names of collc's own pattern,
  /// "collc.<pid>.<nonce>.<n>", whose process is gone and which have not
  /// changed for `stale_after_s` seconds (a live setup removes its name
  /// within its timeout; the age also spares a live process of another PID
  /// namespace sharing /dev/shm). Returns how many it removed.
  static int sweep_stale_segments(double stale_after_s = stale_segment_age_s);
  static constexpr double stale_segment_age_s = 600;
  /// The first arena this pool adds uses `p` if its capacity is the
  /// arena's: node rank 0 passes what prepare() returned, the others its
  /// name and capacity (the same on every rank, so all take the same path;
  /// an empty name makes the arena an MPI window on every rank).
  void use_prepared(prepared p) { prepared_ = std::move(p); }
  /// 64 KiB per rank unless a plan needs more (see add_arena).
  static constexpr std::size_t first_arena_bytes() noexcept { return min_arena_bytes; }
  /// A prepared arena is mapped without a collective of its own: each rank
  /// maps it and says in the next plan's setup agreement whether it could
  /// (this flag, sticky); confirm() then removes the name (node rank 0).
  /// Until then a rank that could not map it holds private zeros in its
  /// place and must run no plan: the agreement fails every rank alike.
  [[nodiscard]] bool map_failed() const noexcept { return map_failed_; }
  void confirm() noexcept { pending_ = prepared(); }

 private:
  /// 64 KiB per rank unless a plan needs more: room for the segments of
  /// hundreds of small plans, and cheap to zero (16 pages: on 8 ranks
  /// sharing 2 cores, zeroing 256 KiB each took 4-5 ms of the first plan).
  static constexpr std::size_t min_arena_bytes = std::size_t{64} << 10;

  /// A POSIX shared mapping, unmapped with its arena (local: the name is
  /// gone already, the memory goes with the last mapping).
  struct shared_map {
    void* addr = nullptr;
    std::size_t bytes = 0;
    shared_map() = default;
    shared_map(void* a, std::size_t n) : addr(a), bytes(n) {}
    shared_map(shared_map&& o) noexcept : addr(std::exchange(o.addr, nullptr)), bytes(o.bytes) {}
    shared_map& operator=(shared_map&& o) noexcept {
      std::swap(addr, o.addr);
      std::swap(bytes, o.bytes);
      return *this;
    }
    ~shared_map();
  };

  struct arena_state {
    shared_map map;                            ///< the node's POSIX shared memory, every rank's slot
    win_owner win;                             ///< or the MPI shared window (fallback)
    std::unique_ptr<std::byte[]> own;          ///< a one-rank node's arena: private memory
    std::vector<std::byte*> base;              ///< [node rank] line-aligned start of the slot
    std::size_t capacity = 0;                  ///< bytes per rank
    bool kept = false;                         ///< outlives the pool (keep())
    std::size_t high_water = 0;                ///< end of the highest range leased so far (agreed: same everywhere)
    std::map<std::size_t, std::size_t> used;   ///< offset -> bytes, ranges leased by this rank
    std::map<std::size_t, std::size_t> holes;  ///< offset -> bytes, free ranges below high_water

    /// [off, off + n) is leased: cut it out of its hole, or extend high_water.
    void carve(std::size_t off, std::size_t n);
    /// [off, off + n) is free again: a hole, merged with its neighbours.
    void free_range(std::size_t off, std::size_t n);
  };

  static std::size_t round_up(std::size_t n) noexcept { return (n + 63) / 64 * 64; }

  /// A new arena of at least `need` bytes per rank, zeroed (collective over
  /// the node). A node of one rank (MPI_COMM_SELF, a pseudo-node of one)
  /// shares with nobody: its arena is private memory, no window.
  int add_arena(std::size_t need);
  /// The node's POSIX shared memory for `a` (collective over the node);
  /// false on every rank if node rank 0 could not create it.
  bool map_shared(arena_state& a);

  comm_owner node_comm_;  ///< owned node communicator, or none when borrowed
  MPI_Comm comm_ = MPI_COMM_NULL;
  /// Where comm_ is borrowed (the registry's control communicator, on one
  /// host) and an arena is an MPI window: a duplicate made with the first
  /// window, on which ~segment_pool agrees which windows stay. Not comm_
  /// itself: a setup collective a timeout or a mismatch abandoned may be
  /// pending there on some ranks (registry::keep_pending), and the
  /// agreement would match it on the others.
  comm_owner keep_comm_;
  prepared prepared_;  ///< for the first arena (use_prepared)
  prepared pending_;   ///< node rank 0: its name until confirm()
  bool map_failed_ = false;
  int node_rank_ = 0, node_size_ = 1;
  std::vector<arena_state> arenas_;
};

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/segments.ipp>
#endif
