#pragma once
/// \file
/// Definitions of registry.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/registry.hpp>

#include <collc/backend/mpi/options.hpp>

#include <collc/topology.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace collc::mpi {

COLLC_INLINE registry::registry(MPI_Comm user_comm, double timeout_s, const std::function<void()>& idle) {
  // The private duplicate and the hosts of the ranks, in one round: the
  // allgather runs on the user's communicator while the duplicate completes
  // (both nonblocking, issued in the same order on every rank, as any
  // collective on it; a first plan at 8 ranks on 2 cores pays one
  // collective round less). Rank 0 creates the node's first shared memory
  // ahead, and its name goes with the host keys (no broadcast of it later;
  // unused across hosts).
  struct host_entry {
    std::uint64_t key;
    char shm_name[sizeof(segment_pool::prepared::name)];
  };
  // MPI reads `mine` and writes the handle and the keys until the operations
  // complete: heap memory that outlives this constructor if it times out
  // (then it is leaked).
  auto mine = std::make_unique<host_entry>(host_entry{host_key(), {}});
  segment_pool::prepared first_arena;
  int user_rank = 0, user_size = 1;
  COLLC_MPI_CHECK(MPI_Comm_rank(user_comm, &user_rank));
  COLLC_MPI_CHECK(MPI_Comm_size(user_comm, &user_size));
  if (user_rank == 0 && user_size > 1) {
    first_arena = segment_pool::prepare(segment_pool::first_arena_bytes(), user_size);
    std::memcpy(mine->shm_name, first_arena.name, sizeof mine->shm_name);
  }
  std::vector<host_entry> hosts(static_cast<std::size_t>(user_size));
  {
    const int size = user_size;
    auto handle = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
    auto keys = std::make_unique<host_entry[]>(static_cast<std::size_t>(size));
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    // The allgather is issued before the duplication, not after: Open MPI
    // runs a duplication's context-id agreement (nonblocking allreduces on
    // the parent communicator, whose tags are taken in issue order) from its
    // progress engine, at a time that differs between ranks when another
    // thread drives progress or another duplication holds the id lock. An
    // allgather issued after MPI_Comm_idup could then take the tag of an
    // agreement round on one rank and not on another: MPI_ERR_TRUNCATE in
    // libnbc, seen with two threads setting up their first plans at once.
    // Issued first, it takes its tag before any agreement round on every rank.
    COLLC_MPI_CHECK(MPI_Iallgather(mine.get(), sizeof(host_entry), MPI_BYTE, keys.get(), sizeof(host_entry), MPI_BYTE,
                                   user_comm, &req[1]));
    if (const int rc = MPI_Comm_idup(user_comm, handle.get(), &req[0]); rc != MPI_SUCCESS) {
      (void)keys.release();  // the allgather may still write them
      (void)mine.release();
      abandon(req[1]);
      mpi_check(rc, "MPI_Comm_idup");
    }
    const std::function<bool()> turns = [&idle] {
      if (idle) idle();
      return false;
    };
    if (wait_request(req[0], timeout_s, turns) != request_wait::completed ||
        wait_request(req[1], timeout_s, turns) != request_wait::completed) {
      (void)handle.release();
      (void)keys.release();
      (void)mine.release();
      abandon(req[0]);
      abandon(req[1]);
      std::string m = "timeout after ";
      m += format_seconds(timeout_s);
      m += " s in the setup of the first plan on this communicator: not every rank completed its first round in "
           "that time (a rank did not arrive, or the timeout is shorter than the round takes; which ranks is not "
           "known before the first plan exists)";
      throw error(errc::timeout, m);
    }
    *control_.out() = *handle;
    hosts.assign(keys.get(), keys.get() + size);
  }
  const MPI_Comm comm = control_.get();
  COLLC_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  COLLC_MPI_CHECK(MPI_Comm_size(comm, &size_));
  // A communicator on one host is its own node communicator: the host keys
  // replace MPI_Comm_split_type (133 us of a first plan at 8 ranks on 2
  // cores). Across hosts the node communicator is split as MPI sees shared
  // memory.
  const bool one_host =
      std::all_of(hosts.begin(), hosts.end(), [&](const host_entry& h) { return h.key == hosts.front().key; });
  leader_of_.resize(static_cast<std::size_t>(size_));
  node_index_of_.resize(static_cast<std::size_t>(size_));
  if (one_host) {
    node_rank_ = rank_;
    node_size_ = size_;
    for (int r = 0; r < size_; ++r) {
      leader_of_[static_cast<std::size_t>(r)] = 0;
      node_index_of_[static_cast<std::size_t>(r)] = r;
    }
  } else {
    COLLC_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, node_comm_.out()));
    COLLC_MPI_CHECK(MPI_Comm_rank(node_comm_.get(), &node_rank_));
    COLLC_MPI_CHECK(MPI_Comm_size(node_comm_.get(), &node_size_));
    // The node leader is the smallest communicator rank of the node (key =
    // rank): node rank 0, translated locally (no message).
    int leader = rank_;
    {
      MPI_Group node_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
      COLLC_MPI_CHECK(MPI_Comm_group(node_comm_.get(), &node_group));
      COLLC_MPI_CHECK(MPI_Comm_group(comm, &comm_group));
      const int first = 0;
      const int rc = MPI_Group_translate_ranks(node_group, 1, &first, comm_group, &leader);
      MPI_Group_free(&node_group);
      MPI_Group_free(&comm_group);
      mpi_check(rc, "MPI_Group_translate_ranks");
    }
    int mine[2] = {leader, node_rank_};
    std::vector<int> all(2 * static_cast<std::size_t>(size_));
    COLLC_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm));
    for (int r = 0; r < size_; ++r) {
      leader_of_[static_cast<std::size_t>(r)] = all[2 * static_cast<std::size_t>(r)];
      node_index_of_[static_cast<std::size_t>(r)] =
          all[2 * static_cast<std::size_t>(r)] == leader ? all[2 * static_cast<std::size_t>(r) + 1] : -1;
    }
  }
  // The physical node's pool takes the node communicator, and the lines
  // are the first range of its first arena (zeroed, the node synchronized):
  // the communicator's first plan with the default placement then creates
  // no other communicator or window.
  const placement_map physical = make_placement(node_keys(leader_of_, 0, collc::placement::block), false);
  auto pool = one_host ? std::make_unique<segment_pool>(comm) : std::make_unique<segment_pool>(std::move(node_comm_));
  if (one_host && size_ > 1) {
    if (rank_ != 0) std::memcpy(first_arena.name, hosts.front().shm_name, sizeof first_arena.name);
    first_arena.capacity = segment_pool::first_arena_bytes();
    pool->use_prepared(std::move(first_arena));
  }
  const segment_lease lines = pool->take(-1, 0, 2 * sizeof(registry_line), 0, false);
  lines_.resize(static_cast<std::size_t>(node_size_));
  for (int i = 0; i < node_size_; ++i)
    lines_[static_cast<std::size_t>(i)] = reinterpret_cast<registry_line*>(lines.slot[static_cast<std::size_t>(i)]);
  alarm_ = reinterpret_cast<std::uint64_t*>(lines_[0] + 1);
  physical_ = pool.get();
  pools_.emplace(pool_key(physical), std::move(pool));
  auto& l = live();
  const std::lock_guard<std::mutex> lock(l.m);
  l.all.push_back(this);
}

COLLC_INLINE bool registry::one_thread_calls_mpi() {
  static const bool one = [] {
    int level = MPI_THREAD_SINGLE;
    COLLC_MPI_CHECK(MPI_Query_thread(&level));
    return level != MPI_THREAD_MULTIPLE;
  }();
  return one;
}

COLLC_INLINE std::uint64_t registry::host_key() {
  // The processor name (the host, as MPI reports it) and the kernel's boot
  // id (distinct for every machine and boot, shared by the containers of
  // one host): equal keys on two machines would need both to collide. A
  // wrong "one host" cannot go unseen anyway: the node's shared memory is
  // opened by name on every rank, and a rank that cannot fails it for all.
  // Computed once per process: neither changes while it runs, and the
  // name, the file and the hash took 6-8 us of every first plan (P = 2).
  static const std::uint64_t key = [] {
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
    int len = 0;
    COLLC_MPI_CHECK(MPI_Get_processor_name(name, &len));
    std::string text(name, static_cast<std::size_t>(std::max(len, 0)));
    if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char boot[64] = {};
      if (std::fgets(boot, sizeof boot, f) != nullptr) text += boot;
      std::fclose(f);
    }
    return collc::detail::stable_hash64(text);
  }();
  return key;
}

COLLC_INLINE registry::~registry() {
  {
    auto& l = live();
    const std::lock_guard<std::mutex> lock(l.m);
    std::erase(l.all, this);
  }
  while (!pools_.empty()) pools_.erase(pools_.begin());  // in key order on every rank
  // Collectives abandoned after a timeout complete once the late rank came;
  // one that never completes keeps its buffer (MPI may still write it).
  bool still_pending = false;
  if (!mpi_finalized())
    for (auto& p : pending_) {
      int done = 0;
      if (p.request != MPI_REQUEST_NULL) MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
      if (!done) {
        new std::shared_ptr<void>(std::move(p.buffer));  // leaked on purpose
        abandon(p.request);
        still_pending = true;
      } else if (p.made && *p.made != MPI_COMM_NULL) {
        MPI_Comm_free(p.made);
      }
    }
  // ... and keeps the control communicator: Open MPI 4.1's libnbc goes on
  // progressing the collective on a freed communicator once the late rank
  // comes, and crashes (SIGSEGV in mca_pml_ob1_isend under NBC_Progress).
  if (still_pending) *control_.ptr() = MPI_COMM_NULL;  // left to MPI_Finalize
  control_.reset();
}

COLLC_INLINE registry::request_wait registry::wait_request(MPI_Request& req, double timeout_s,
                                                           const std::function<bool()>& idle) {
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0;; ++i) {
    int done = 0;
    COLLC_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return request_wait::completed;
    if (i > 64) {
      if (idle && (i & 15) == 0 && idle()) return request_wait::stopped;
      std::this_thread::yield();
    }
    if ((i & 63) == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s)
      return request_wait::timed_out;
  }
}

namespace detail {
struct abandoned_requests {
  std::mutex m;
  std::vector<MPI_Request> all;
};
COLLC_INLINE abandoned_requests& abandoned_list() {
  static abandoned_requests l;
  return l;
}
}  // namespace detail

COLLC_INLINE void registry::abandon(MPI_Request req) {
  if (req == MPI_REQUEST_NULL) return;
  auto& l = detail::abandoned_list();
  const std::lock_guard<std::mutex> lock(l.m);
  l.all.push_back(req);
}

COLLC_INLINE void registry::settle_abandoned(double seconds) {
  auto& l = detail::abandoned_list();
  const std::lock_guard<std::mutex> lock(l.m);
  const auto t0 = std::chrono::steady_clock::now();
  for (MPI_Request& r : l.all)
    while (r != MPI_REQUEST_NULL) {
      int done = 0;
      if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (done) break;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) return;
      std::this_thread::yield();
    }
  l.all.clear();
}

COLLC_INLINE void registry::keep_pending(MPI_Request req, std::shared_ptr<void> buffer, MPI_Comm* made) {
  pending_.push_back({req, std::move(buffer), made});
}

COLLC_INLINE segment_pool& registry::pool_for(const placement_map& map, int node, int prog) {
  std::vector<int> key = pool_key(map);
  auto it = pools_.find(key);
  if (it == pools_.end()) {
    comm_owner node_comm;
    COLLC_MPI_CHECK(MPI_Comm_split(control_.get(), node, prog, node_comm.out()));
    it = pools_.emplace(std::move(key), std::make_unique<segment_pool>(std::move(node_comm))).first;
  }
  return *it->second;
}

COLLC_INLINE segment_pool* registry::find_pool(const placement_map& map) const {
  auto it = pools_.find(pool_key(map));
  return it == pools_.end() ? nullptr : it->second.get();
}

COLLC_INLINE int registry::arenas() const noexcept {
  int n = 0;
  for (const auto& [key, pool] : pools_) n += pool->arenas();
  return n;
}

COLLC_INLINE int registry::mpi_windows() const noexcept {
  int n = 0;
  for (const auto& [key, pool] : pools_) n += pool->mpi_windows();
  return n;
}

COLLC_INLINE int registry::windows() const noexcept {
  int n = 0;
  for (const auto& [key, pool] : pools_) n += pool->windows();
  return n;
}

COLLC_INLINE std::string registry::plan_name_by_tag(std::uint64_t tag) const {
  for (auto it = plan_names.rbegin(); it != plan_names.rend(); ++it)
    if (plan_tag(it->first) == tag) return it->second;
  if (tag == plan_tag(library_call_id)) return "a collective left to the MPI library (libcollc_mpi)";
  std::string m = "a plan with id ";
  m += std::to_string(tag);
  m += " mod 2^19 (freed)";
  return m;
}

COLLC_INLINE std::string registry::plan_name(std::int64_t id) const {
  auto it = plan_names.find(id);
  if (it != plan_names.end()) return it->second;
  std::string m = "plan ";
  m += std::to_string(id);
  m += " (freed)";
  return m;
}

COLLC_INLINE void registry::stamp(std::uint64_t s, std::int64_t plan_id) noexcept {
  std::atomic_ref<std::uint64_t>(own().ring[s % registry_ring])
      .store(pack_stamp(s, plan_id), std::memory_order_release);
}

COLLC_INLINE std::pair<std::uint64_t, bool> registry::own_stamp(std::uint64_t s) const noexcept {
  const std::uint64_t e = std::atomic_ref<std::uint64_t>(own().ring[s % registry_ring]).load(std::memory_order_relaxed);
  return {stamp_plan(e), stamp_seq(e) == seq_tag(s)};
}

COLLC_INLINE void registry::mark_failed(std::uint64_t s, errc code, std::int64_t plan_id, int origin) noexcept {
  std::atomic_ref<std::uint64_t>(own().failed_plan)
      .store(static_cast<std::uint64_t>(plan_id), std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(own().origin).store(static_cast<std::uint64_t>(origin), std::memory_order_relaxed);
  std::atomic_ref<std::uint64_t>(own().ring[s % registry_ring])
      .store(pack_stamp(s, plan_id) | stamp_abandoned | static_cast<std::uint64_t>(code) << stamp_code_shift,
             std::memory_order_release);
  std::atomic_ref<std::uint64_t>(own().status)
      .store((s << 8) | (static_cast<std::uint64_t>(code) + 1), std::memory_order_release);
  std::atomic_ref<std::uint64_t> alarm(*alarm_);
  std::uint64_t now = alarm.load(std::memory_order_relaxed);
  while (now < s + 1 && !alarm.compare_exchange_weak(now, s + 1, std::memory_order_acq_rel)) {
  }
}

COLLC_INLINE void registry::mark_setup(std::uint64_t k, bool gave_up) noexcept {
  std::atomic_ref<std::uint64_t>(own().setup).store(k << 1 | (gave_up ? 1 : 0), std::memory_order_release);
}

COLLC_INLINE std::optional<std::pair<std::uint64_t, bool>> registry::setup_of(int peer) const noexcept {
  registry_line* line = line_of(peer);
  if (!line) return std::nullopt;
  const std::uint64_t v = std::atomic_ref<std::uint64_t>(line->setup).load(std::memory_order_acquire);
  return std::pair{v >> 1, (v & 1) != 0};
}

COLLC_INLINE peer_failure registry::failure_of(int peer) const noexcept {
  peer_failure f;
  registry_line* line = line_of(peer);
  if (!line) return f;
  const std::uint64_t st = std::atomic_ref<std::uint64_t>(line->status).load(std::memory_order_acquire);
  if (st == 0) return f;
  f.seq = st >> 8;
  f.code = static_cast<errc>((st & 0xFFu) - 1);
  f.plan = static_cast<std::int64_t>(std::atomic_ref<std::uint64_t>(line->failed_plan).load(std::memory_order_relaxed));
  f.origin = static_cast<int>(std::atomic_ref<std::uint64_t>(line->origin).load(std::memory_order_relaxed));
  return f;
}

COLLC_INLINE peer_report registry::look(int peer, std::uint64_t s) const noexcept {
  peer_report rep;
  registry_line* line = line_of(peer);
  if (!line) return rep;
  const std::uint64_t e = std::atomic_ref<std::uint64_t>(line->ring[s % registry_ring]).load(std::memory_order_acquire);
  if (stamp_seq(e) == seq_tag(s)) {
    rep.plan_tag = stamp_plan(e);
    rep.plan_known = true;
    if ((e & stamp_abandoned) != 0) {
      rep.kind = peer_report::failed;
      rep.failure = static_cast<errc>((e >> stamp_code_shift) & 0xFu);
      rep.origin = static_cast<int>(std::atomic_ref<std::uint64_t>(line->origin).load(std::memory_order_relaxed));
    } else {
      rep.kind = peer_report::same_call;
    }
    return rep;
  }
  const std::uint64_t st = std::atomic_ref<std::uint64_t>(line->status).load(std::memory_order_acquire);
  if (st != 0 && (st >> 8) == s) {
    rep.kind = peer_report::failed;
    rep.failure = static_cast<errc>((st & 0xFFu) - 1);
    rep.origin = static_cast<int>(std::atomic_ref<std::uint64_t>(line->origin).load(std::memory_order_relaxed));
    return rep;
  }
  if (stamp_seq(e) < seq_tag(s)) rep.kind = peer_report::behind;  // the slot's last call is older: s not started
  return rep;
}

COLLC_INLINE registry_line* registry::line_of(int peer) const noexcept {
  const int idx = node_index_of_[static_cast<std::size_t>(peer)];
  return idx < 0 ? nullptr : lines_[static_cast<std::size_t>(idx)];
}

COLLC_INLINE std::vector<int> registry::pool_key(const placement_map& map) {
  std::vector<int> key = map.node_of;
  key.insert(key.end(), map.comm_of_prog.begin(), map.comm_of_prog.end());
  return key;
}

COLLC_INLINE int registry_delete_attr(MPI_Comm, int, void* value, void*) {
  delete static_cast<std::weak_ptr<registry>*>(value);
  return MPI_SUCCESS;
}

// One keyval per process in both modes: the static of an inline function is
// one object across translation units, and in compiled mode this function is
// defined once, in libcollc_compiled.
COLLC_INLINE int registry_keyval() {
  static const int keyval = [] {
    int kv = MPI_KEYVAL_INVALID;
    // Not copied to duplicates: a duplicated communicator gets its own
    // registry, as its calls are ordered independently of the original's.
    COLLC_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, registry_delete_attr, &kv, nullptr));
    return kv;
  }();
  return keyval;
}

COLLC_INLINE std::shared_ptr<registry> registry_find(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  COLLC_MPI_CHECK(MPI_Comm_get_attr(comm, registry_keyval(), &value, &found));
  return found ? static_cast<std::weak_ptr<registry>*>(value)->lock() : nullptr;
}

COLLC_INLINE std::shared_ptr<registry> registry_for(MPI_Comm comm, double timeout_s,
                                                    const std::function<void()>& idle) {
  if (auto reg = registry_find(comm)) return reg;
  const int kv = registry_keyval();
  auto reg = std::make_shared<registry>(comm, timeout_s, idle);
  auto holder = std::make_unique<std::weak_ptr<registry>>(reg);
  COLLC_MPI_CHECK(MPI_Comm_set_attr(comm, kv, holder.get()));  // the delete callback frees the old holder
  holder.release();
  return reg;
}

}  // namespace collc::mpi
