#pragma once
/// \file
/// Definitions of segments.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/segments.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <string>

namespace collc::mpi {

COLLC_INLINE segment_pool::segment_pool(comm_owner node_comm)
    : node_comm_(std::move(node_comm)), comm_(node_comm_.get()) {
  COLLC_MPI_CHECK(MPI_Comm_rank(comm_, &node_rank_));
  COLLC_MPI_CHECK(MPI_Comm_size(comm_, &node_size_));
}

COLLC_INLINE segment_pool::segment_pool(MPI_Comm node_comm) : comm_(node_comm) {
  COLLC_MPI_CHECK(MPI_Comm_rank(comm_, &node_rank_));
  COLLC_MPI_CHECK(MPI_Comm_size(comm_, &node_size_));
}

COLLC_INLINE segment_pool::~segment_pool() {
  // A kept arena (keep()) is neither unmapped nor freed: a send of a failed
  // plan may still read it. Its MPI window is not freed either, on any rank
  // of the node: MPI_Win_free is collective, so the ranks agree first which
  // windows stay (every rank has the same arenas, made collectively). Pools
  // without windows, the usual case, decide locally.
  if (mpi_windows() > 0 && !mpi_finalized()) {
    std::vector<int> kept(arenas_.size());
    for (std::size_t i = 0; i < arenas_.size(); ++i) kept[i] = arenas_[i].kept ? 1 : 0;
    const MPI_Comm agree = keep_comm_ ? keep_comm_.get() : comm_;
    if (MPI_Allreduce(MPI_IN_PLACE, kept.data(), static_cast<int>(kept.size()), MPI_INT, MPI_MAX, agree) == MPI_SUCCESS)
      for (std::size_t i = 0; i < arenas_.size(); ++i)
        if (kept[i] != 0 && arenas_[i].win) *arenas_[i].win.ptr() = MPI_WIN_NULL;  // leaked on purpose
  }
  for (auto& a : arenas_) {
    if (!a.kept) continue;
    a.map.addr = nullptr;   // leaked on purpose: the mapping stays to the end of the process
    (void)a.own.release();  // the same for a one-rank node's private memory
  }
  for (auto& a : arenas_) a.win.reset();
  arenas_.clear();  // unmaps the shared maps (local)
  keep_comm_.reset();
  node_comm_.reset();
}

COLLC_INLINE segment_pool::shared_map::~shared_map() {
  if (addr != nullptr) ::munmap(addr, bytes);
}

COLLC_INLINE std::pair<int, std::size_t> segment_pool::propose(std::size_t bytes) const {
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

COLLC_INLINE segment_lease segment_pool::take(int arena, std::size_t offset, std::size_t bytes, std::size_t zero_bytes,
                                              bool always_zero) {
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
    COLLC_MPI_CHECK(MPI_Barrier(comm_));  // zero before anyone polls
  }
  return l;
}

COLLC_INLINE void segment_pool::release(const segment_lease& l) noexcept {
  if (l.arena < 0 || static_cast<std::size_t>(l.arena) >= arenas_.size()) return;
  arena_state& a = arenas_[static_cast<std::size_t>(l.arena)];
  auto it = a.used.find(l.offset);
  if (it == a.used.end()) return;
  a.free_range(it->first, it->second);
  a.used.erase(it);
}

COLLC_INLINE void segment_pool::keep(const segment_lease& l) noexcept {
  if (l.arena < 0 || static_cast<std::size_t>(l.arena) >= arenas_.size()) return;
  arenas_[static_cast<std::size_t>(l.arena)].kept = true;
}

COLLC_INLINE void segment_pool::retire(int arena, std::size_t offset, std::size_t bytes) noexcept {
  if (arena < 0 || static_cast<std::size_t>(arena) >= arenas_.size() || bytes == 0) return;
  arena_state& a = arenas_[static_cast<std::size_t>(arena)];
  const std::size_t need = round_up(bytes);
  if (offset >= a.high_water || need > a.high_water - offset) return;  // never moves the agreed high-water mark
  a.carve(offset, need);  // a free range in this rank's view is taken out of it; else nothing changes
}

COLLC_INLINE void segment_pool::arena_state::carve(std::size_t off, std::size_t n) {
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

COLLC_INLINE void segment_pool::arena_state::free_range(std::size_t off, std::size_t n) {
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

COLLC_INLINE int segment_pool::add_arena(std::size_t need) {
  arena_state a;
  a.capacity = std::max(need, min_arena_bytes);
  if (node_size_ == 1) {
    // MPI_Win_allocate_shared, its info and query cost a one-rank
    // communicator's first plan most of its setup (0.3-4 ms here), for
    // memory no other process maps.
    a.own = std::make_unique<std::byte[]>(a.capacity + 64);  // value-initialized: zero
    a.base.assign(1, static_cast<std::byte*>(align_line(a.own.get())));
    arenas_.push_back(std::move(a));
    return static_cast<int>(arenas_.size()) - 1;
  }
  if (map_shared(a)) {  // fresh shared memory is zero (ftruncate): nothing to clear
    arenas_.push_back(std::move(a));
    return static_cast<int>(arenas_.size()) - 1;
  }
  // Every node rank alike (the window branch, a borrowed comm_): before any
  // setup collective can have been abandoned on comm_ (setups stop after one).
  if (!node_comm_ && !keep_comm_) COLLC_MPI_CHECK(MPI_Comm_dup(comm_, keep_comm_.out()));
  MPI_Info info = MPI_INFO_NULL;
  COLLC_MPI_CHECK(MPI_Info_create(&info));
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* mine = nullptr;
  // 64 bytes more: windows are not line-aligned everywhere (see align_line).
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(a.capacity + 64), 1, info, comm_, &mine, a.win.out());
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
  COLLC_MPI_CHECK(MPI_Barrier(comm_));  // zero before anyone polls
  arenas_.push_back(std::move(a));
  return static_cast<int>(arenas_.size()) - 1;
}

COLLC_INLINE segment_pool::prepared::prepared(prepared&& o) noexcept
    : fd(std::exchange(o.fd, -1)), capacity(o.capacity) {
  std::memcpy(name, o.name, sizeof name);
  o.name[0] = '\0';
}

COLLC_INLINE segment_pool::prepared& segment_pool::prepared::operator=(prepared&& o) noexcept {
  std::swap(fd, o.fd);
  std::swap(capacity, o.capacity);
  char t[sizeof name];
  std::memcpy(t, name, sizeof name);
  std::memcpy(name, o.name, sizeof name);
  std::memcpy(o.name, t, sizeof name);
  return *this;
}

COLLC_INLINE segment_pool::prepared::~prepared() {
  if (fd >= 0) {
    ::close(fd);
    if (name[0] != '\0') ::shm_unlink(name);
  }
}

COLLC_INLINE std::size_t shared_stride(std::size_t capacity) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (capacity + page - 1) / page * page;
}

COLLC_INLINE int segment_pool::sweep_stale_segments(double stale_after_s) {
  DIR* dir = ::opendir("/dev/shm");  // where glibc keeps POSIX shared memory
  if (dir == nullptr) return 0;
  const auto now = std::chrono::system_clock::now();
  int removed = 0;
  while (const dirent* e = ::readdir(dir)) {
    // collc.<pid>.<hex nonce>.<serial>, as prepare() names them.
    char* end = nullptr;
    if (std::strncmp(e->d_name, "collc.", 6) != 0) continue;
    const long pid = std::strtol(e->d_name + 6, &end, 10);
    if (pid <= 0 || end == nullptr || *end != '.' || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    struct stat st {};
    const std::string path = std::string("/dev/shm/") + e->d_name;
    if (::stat(path.c_str(), &st) != 0 || st.st_uid != ::getuid()) continue;
    const auto changed = std::chrono::system_clock::from_time_t(st.st_mtime);
    if (std::chrono::duration<double>(now - changed).count() < stale_after_s) continue;
    if (::shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

COLLC_INLINE segment_pool::prepared segment_pool::prepare(std::size_t capacity, int ranks) {
  static const int swept = sweep_stale_segments();  // once per process
  (void)swept;
  prepared p;
  p.capacity = capacity;
  const std::size_t bytes = shared_stride(capacity) * static_cast<std::size_t>(ranks);
  // A name no other process uses: pid, a per-process nonce (names stay apart
  // across hosts too: a host wrongly taken for this one finds no such name,
  // and the node fails alike) and a counter; O_EXCL.
  static std::atomic<unsigned> serial{0};
  static const unsigned nonce = std::random_device{}();
  for (int attempt = 0; attempt < 8 && p.fd < 0; ++attempt) {
    std::snprintf(p.name, sizeof p.name, "/collc.%ld.%x.%u", static_cast<long>(::getpid()), nonce, serial.fetch_add(1));
    p.fd = ::shm_open(p.name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (p.fd < 0 && errno != EEXIST) break;
  }
  // ftruncate only sets the size: tmpfs hands out its pages on first touch,
  // and a full /dev/shm (a container's default is 64 MiB) then kills the
  // rank with SIGBUS in the middle of a call. posix_fallocate takes the
  // pages now, or fails here with ENOSPC, and the node takes the window
  // fallback as it does for any segment node rank 0 could not create.
  if (p.fd >= 0 && (::ftruncate(p.fd, static_cast<off_t>(bytes)) != 0 ||
                    ::posix_fallocate(p.fd, 0, static_cast<off_t>(bytes)) != 0)) {
    ::close(p.fd);
    ::shm_unlink(p.name);
    p.fd = -1;
  }
  if (p.fd < 0) p.name[0] = '\0';
  return p;
}

COLLC_INLINE bool segment_pool::map_shared(arena_state& a) {
  // Node rank 0 creates it (or created it ahead: prepared_) and the others
  // open it by name; one mapping holds every node rank's slot, each on
  // pages of its own.
  const std::size_t stride = shared_stride(a.capacity);
  const std::size_t bytes = stride * static_cast<std::size_t>(node_size_);
  const auto slots = [&](std::byte* at) {
    a.base.resize(static_cast<std::size_t>(node_size_));
    for (int r = 0; r < node_size_; ++r)
      a.base[static_cast<std::size_t>(r)] = at + static_cast<std::size_t>(r) * stride;
  };
  const auto map = [&](const prepared& p) -> void* {
    const int fd = node_rank_ == 0 ? p.fd : ::shm_open(p.name, O_RDWR, 0);
    void* addr = fd >= 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (node_rank_ != 0 && fd >= 0) ::close(fd);
    return addr;
  };
  // Every rank decides alike: the preparation's capacity is set everywhere
  // (its name may be "" everywhere: node rank 0 could not create it).
  if (prepared_.capacity != 0 && prepared_.capacity == a.capacity) {
    prepared p = std::move(prepared_);
    prepared_.capacity = 0;               // used once
    if (p.name[0] == '\0') return false;  // every rank: the window fallback
    void* addr = map(p);
    if (addr == MAP_FAILED) {
      // Private zeros in its place, so that this rank's own bookkeeping
      // works until the agreement fails the plan everywhere (map_failed).
      map_failed_ = true;
      a.own = std::make_unique<std::byte[]>(bytes + 64);
      slots(static_cast<std::byte*>(align_line(a.own.get())));
      return true;
    }
    if (node_rank_ == 0) pending_ = std::move(p);
    a.map = shared_map(addr, bytes);
    slots(static_cast<std::byte*>(addr));
    return true;
  }
  prepared p;
  if (node_rank_ == 0) p = prepare(a.capacity, node_size_);
  COLLC_MPI_CHECK(MPI_Bcast(p.name, sizeof p.name, MPI_CHAR, 0, comm_));
  if (p.name[0] == '\0') return false;  // every rank: the window fallback
  void* addr = map(p);
  const int mapped = addr != MAP_FAILED ? 1 : 0;
  int everywhere = 0;
  // Every rank has mapped it (or failed): the name can go now (node rank 0:
  // p's destructor unlinks and closes).
  const int rc = MPI_Allreduce(&mapped, &everywhere, 1, MPI_INT, MPI_MIN, comm_);
  if (node_rank_ != 0) p.name[0] = '\0';
  p = prepared();
  if (mapped) a.map = shared_map(addr, bytes);
  mpi_check(rc, "MPI_Allreduce");
  if (!everywhere) {
    a.map = shared_map();
    return false;  // every rank alike: the window fallback
  }
  slots(static_cast<std::byte*>(addr));
  return true;
}

}  // namespace collc::mpi
