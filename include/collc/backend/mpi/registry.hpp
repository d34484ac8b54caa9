#pragma once
/// \file
/// The per-communicator registry: what every rank of a physical node can see
/// of the plans its node peers are running, so that a wait can tell "my peer
/// is slow" from "my peer runs a different collective" (a mismatch, reported
/// as errc::mismatch instead of a hang or wrong data) and from "my peer gave
/// up" (its error, at once, instead of a timeout).
///
/// One registry per user communicator and process, cached on the
/// communicator with an MPI attribute and shared by every plan built on it.
/// It owns a communicator of the physical node (MPI_COMM_TYPE_SHARED) and,
/// in the first range of that node's segment pool, two cache lines per node
/// rank. The first is the rank's own (registry_line):
///   status       0, or (seq << 8 | errc + 1) once the rank abandoned call
///                `seq` after an error
///   failed_plan  the plan of that call: a peer waiting in a later call of
///                that plan learns at once that it was abandoned
///   setup        (setups entered << 1) | 1 if the rank gave up waiting in
///                the last one (setup timeouts name the ranks missing)
///   origin       the rank whose error it was (a rank that fails because a
///                peer failed passes the peer's error on, and names its origin)
///   ring[4]      (seq << 24 | abandoned, errc | plan id mod 2^19) of the rank's last 4 calls,
///                slot seq % 4
/// The second line of node rank 0 is the node's alarm: the largest call
/// number (+1) any rank of the node abandoned. Every call reads it (one load
/// of a line that is written only on errors, so it stays in cache), and a
/// rank whose part of a call needed nothing from a peer that found the call
/// mismatched (a bcast root, a reduce leaf) learns it at the end of that call
/// or the start of its next one.
/// Every plan call takes the next sequence number `seq` of the communicator;
/// MPI requires all ranks to call collectives on a communicator in the same
/// order, so call number `seq` must run the same plan everywhere. Plan ids
/// are 64-bit; stamps keep 19 bits of them and compare those 19 bits only
/// (two plans whose ids differ by a multiple of 2^19 look alike: a mismatch
/// between them would go unseen, never a false one). Plan setup agrees on
/// seq and plan ids (max over ranks).
///
/// The registry also owns what plans share so that only the first plan on a
/// communicator creates MPI objects: a duplicate of the communicator for
/// collc's own setup collectives (`control()`), and a segment_pool per
/// placement (segments.hpp).
///
/// Lifetime: plans hold a shared_ptr; the attribute holds only a weak_ptr, so
/// the last plan destroyed frees the pools (the lines with them) and the communicators
/// (which is collective over the node, like destroying a plan).
#include <collc/backend/mpi/handles.hpp>
#include <collc/backend/mpi/segments.hpp>
#include <collc/backend/mpi/topology.hpp>

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace collc::detail {

struct alignas(64) registry_line {
  std::uint64_t status;
  std::uint64_t failed_plan;
  std::uint64_t setup;
  std::uint64_t origin;
  std::uint64_t ring[4];
};
static_assert(sizeof(registry_line) == 64);

inline constexpr int registry_ring = 4;
/// A stamp: seq << 24 | abandoned << 23 | errc << 19 | plan id mod 2^19.
/// The abandoned bit and code stay with the call in the ring, so a peer still
/// waiting in call s learns that this rank gave it up even after this rank
/// failed later calls too (status keeps only the last).
inline constexpr std::uint64_t stamp_plan_mask = 0x7FFFFu;
inline constexpr std::uint64_t stamp_abandoned = std::uint64_t{1} << 23;
inline constexpr int stamp_code_shift = 19;

constexpr std::uint64_t pack_stamp(std::uint64_t seq, std::int64_t plan_id) noexcept {
  return (seq << 24) | (static_cast<std::uint64_t>(plan_id) & stamp_plan_mask);
}
constexpr std::uint64_t stamp_seq(std::uint64_t stamp) noexcept { return stamp >> 24; }
/// The 19 bits of a plan id a stamp keeps.
constexpr std::uint64_t stamp_plan(std::uint64_t stamp) noexcept { return stamp & stamp_plan_mask; }
constexpr std::uint64_t plan_tag(std::int64_t plan_id) noexcept {
  return static_cast<std::uint64_t>(plan_id) & stamp_plan_mask;
}
/// The 40 bits of a call number a stamp keeps.
constexpr std::uint64_t seq_tag(std::uint64_t seq) noexcept { return seq & ((std::uint64_t{1} << 40) - 1); }

/// What a waiter learns about a peer from the registry.
struct peer_report {
  /// same_call: the peer stamped the call (plan_tag says with which plan);
  /// behind: the peer has not started the call; failed: it abandoned the
  /// call; unknown: another node, or the ring slot already holds a later call.
  enum kind_t : std::uint8_t { unknown, same_call, behind, failed } kind = unknown;
  std::uint64_t plan_tag = 0;             ///< the plan the peer runs (ran) in the call: id mod 2^19
  bool plan_known = false;                ///< plan_tag is set (same_call, or failed from its stamp)
  errc failure = errc::invalid_argument;  ///< failed: the peer's error
  int origin = -1;                        ///< failed: the rank whose error it was
};

/// A peer's last abandoned call, as its line shows it.
struct peer_failure {
  std::uint64_t seq = 0;  ///< 0: none
  std::int64_t plan = -1;
  errc code = errc::invalid_argument;
  int origin = -1;  ///< the rank whose error it was
};

class registry {
 public:
  /// Collective over `comm`. The duplicate is made without blocking, so a
  /// rank that never arrives is a timeout after `timeout_s`, not a hang.
  registry(MPI_Comm user_comm, double timeout_s) {
    {
      // MPI writes the new handle when the duplicate completes: heap memory
      // that outlives this constructor if it times out (then it is leaked).
      auto handle = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
      MPI_Request req = MPI_REQUEST_NULL;
      COLLC_MPI_CHECK(MPI_Comm_idup(user_comm, handle.get(), &req));
      if (!wait_request(req, timeout_s)) {
        (void)handle.release();
        throw error(errc::timeout, "timeout after " + std::to_string(timeout_s) +
                                       " s in the setup of the first plan on this communicator: a rank did not "
                                       "arrive (which ranks is not known before the first plan exists)");
      }
      *control_.out() = *handle;
    }
    const MPI_Comm comm = control_.get();
    COLLC_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
    COLLC_MPI_CHECK(MPI_Comm_size(comm, &size_));
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
    leader_of_.resize(static_cast<std::size_t>(size_));
    node_index_of_.resize(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      leader_of_[static_cast<std::size_t>(r)] = all[2 * static_cast<std::size_t>(r)];
      node_index_of_[static_cast<std::size_t>(r)] =
          all[2 * static_cast<std::size_t>(r)] == leader ? all[2 * static_cast<std::size_t>(r) + 1] : -1;
    }
    // The physical node's pool takes the node communicator, and the lines
    // are the first range of its first arena (zeroed, the node synchronized):
    // the communicator's first plan with the default placement then creates
    // no other communicator or window.
    const placement_map physical = make_placement(node_keys(leader_of_, 0, collc::placement::block), false);
    auto pool = std::make_unique<segment_pool>(std::move(node_comm_));
    const segment_lease lines = pool->take(-1, 0, 2 * sizeof(registry_line), 0, false);
    lines_.resize(static_cast<std::size_t>(node_size_));
    for (int i = 0; i < node_size_; ++i)
      lines_[static_cast<std::size_t>(i)] = reinterpret_cast<registry_line*>(lines.slot[static_cast<std::size_t>(i)]);
    alarm_ = reinterpret_cast<std::uint64_t*>(lines_[0] + 1);
    pools_.emplace(pool_key(physical), std::move(pool));
  }

  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;
  ~registry() {
    while (!pools_.empty()) pools_.erase(pools_.begin());  // in key order on every rank
    // Agreements abandoned after a timeout complete once the late rank came;
    // one that never completes keeps its buffer (MPI may still write it).
    if (!mpi_finalized())
      for (auto& p : pending_) {
        int done = 0;
        if (p.request != MPI_REQUEST_NULL) MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
        if (!done) (void)p.values.release();
      }
    control_.reset();
  }

  /// Polls `req` until it completes (true) or `timeout_s` passed (false),
  /// yielding the core between polls (oversubscribed nodes).
  static bool wait_request(MPI_Request& req, double timeout_s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 0;; ++i) {
      int done = 0;
      COLLC_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (done) return true;
      if (i > 64) std::this_thread::yield();
      if ((i & 63) == 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s)
        return false;
    }
  }
  /// An agreement a timed-out setup left behind: its request and the buffer
  /// MPI writes when the late ranks complete it.
  struct pending_agreement {
    MPI_Request request = MPI_REQUEST_NULL;
    std::unique_ptr<std::int64_t[]> values;
  };
  void keep_pending(MPI_Request req, std::unique_ptr<std::int64_t[]> values) {
    pending_.push_back({req, std::move(values)});
  }

  /// collc's private duplicate of the user's communicator, for setup collectives.
  [[nodiscard]] MPI_Comm control() const noexcept { return control_.get(); }

  /// The segment pool of this rank's node under placement `map` (rank `prog`
  /// on node `node`); the first request for a placement splits the control
  /// communicator, collectively over it (every rank asks for the same
  /// placement in the same order, as plan setup is collective).
  segment_pool& pool_for(const placement_map& map, int node, int prog) {
    std::vector<int> key = pool_key(map);
    auto it = pools_.find(key);
    if (it == pools_.end()) {
      comm_owner node_comm;
      COLLC_MPI_CHECK(MPI_Comm_split(control_.get(), node, prog, node_comm.out()));
      it = pools_.emplace(std::move(key), std::make_unique<segment_pool>(std::move(node_comm))).first;
    }
    return *it->second;
  }
  /// The pool of placement `map` if one was made, else null (local).
  [[nodiscard]] segment_pool* find_pool(const placement_map& map) const {
    auto it = pools_.find(pool_key(map));
    return it == pools_.end() ? nullptr : it->second.get();
  }
  /// Shared windows of all pools (for tests: a reused segment range adds none).
  [[nodiscard]] int arenas() const noexcept {
    int n = 0;
    for (const auto& [key, pool] : pools_) n += pool->arenas();
    return n;
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// Communicator rank of the leader (smallest rank) of `r`'s physical node.
  [[nodiscard]] int physical_leader(int r) const { return leader_of_[static_cast<std::size_t>(r)]; }
  [[nodiscard]] const std::vector<int>& physical_leaders() const noexcept { return leader_of_; }

  /// Sequence number and plan id bookkeeping (see the file comment).
  std::uint64_t seq = 0;
  std::int64_t next_plan_id = 1;
  std::map<std::int64_t, std::string> plan_names;
  /// Plan setups entered on this communicator (the same count on every rank).
  std::uint64_t setups = 0;

  /// The name of the live plan whose id is `tag` mod 2^19 (the newest such), for messages.
  [[nodiscard]] std::string plan_name_by_tag(std::uint64_t tag) const {
    for (auto it = plan_names.rbegin(); it != plan_names.rend(); ++it)
      if (plan_tag(it->first) == tag) return it->second;
    return "a plan with id " + std::to_string(tag) + " mod 2^19 (freed)";
  }
  [[nodiscard]] std::string plan_name(std::int64_t id) const {
    auto it = plan_names.find(id);
    return it == plan_names.end() ? "plan " + std::to_string(id) + " (freed)" : it->second;
  }

  /// Announces that this rank runs call `s` with plan `plan_id`.
  void stamp(std::uint64_t s, std::int64_t plan_id) noexcept {
    std::atomic_ref<std::uint64_t>(own().ring[s % registry_ring])
        .store(pack_stamp(s, plan_id), std::memory_order_release);
  }
  /// The plan this rank stamped for call `s`, if the ring still holds it (tag, found).
  [[nodiscard]] std::pair<std::uint64_t, bool> own_stamp(std::uint64_t s) const noexcept {
    const std::uint64_t e =
        std::atomic_ref<std::uint64_t>(own().ring[s % registry_ring]).load(std::memory_order_relaxed);
    return {stamp_plan(e), stamp_seq(e) == seq_tag(s)};
  }
  /// Marks call `s` of plan `plan_id` abandoned with `code`: peers waiting on
  /// this rank in call `s`, or in any later call of that plan, fail too, and
  /// the node's alarm tells every rank at its next call.
  void mark_failed(std::uint64_t s, errc code, std::int64_t plan_id, int origin) noexcept {
    std::atomic_ref<std::uint64_t>(own().failed_plan).store(static_cast<std::uint64_t>(plan_id), std::memory_order_relaxed);
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
  /// The node's alarm (the largest abandoned call + 1); changes only on errors.
  [[nodiscard]] std::uint64_t alarm() const noexcept {
    return std::atomic_ref<std::uint64_t>(*alarm_).load(std::memory_order_acquire);
  }
  /// Alarm value this process has looked at (see engine::check_alarm).
  std::uint64_t seen_alarm = 0;
  /// Plans node peers abandoned (seen through the alarm): code and why.
  struct abandoned_plan {
    errc code;
    std::uint64_t seq;  ///< the call it was abandoned in
    std::string why;
    int origin;  ///< the rank whose error it was
  };
  std::map<std::int64_t, abandoned_plan> abandoned;
  /// Mismatches peers reported that this process has passed on: calls up to this one.
  std::uint64_t reported_mismatch = 0;

  /// Posts that this rank entered setup number `k` (gave_up: and timed out in it).
  void mark_setup(std::uint64_t k, bool gave_up) noexcept {
    std::atomic_ref<std::uint64_t>(own().setup).store(k << 1 | (gave_up ? 1 : 0), std::memory_order_release);
  }
  /// Setup state of `peer` (communicator rank): (setups entered, gave up in the last); nullopt on another node.
  [[nodiscard]] std::optional<std::pair<std::uint64_t, bool>> setup_of(int peer) const noexcept {
    registry_line* line = line_of(peer);
    if (!line) return std::nullopt;
    const std::uint64_t v = std::atomic_ref<std::uint64_t>(line->setup).load(std::memory_order_acquire);
    return std::pair{v >> 1, (v & 1) != 0};
  }
  /// Whether `peer` shares this rank's physical node (its line is visible).
  [[nodiscard]] bool on_node(int peer) const noexcept { return line_of(peer) != nullptr; }

  /// The last call `peer` (communicator rank) abandoned, if on this node.
  [[nodiscard]] peer_failure failure_of(int peer) const noexcept {
    peer_failure f;
    registry_line* line = line_of(peer);
    if (!line) return f;
    const std::uint64_t st = std::atomic_ref<std::uint64_t>(line->status).load(std::memory_order_acquire);
    if (st == 0) return f;
    f.seq = st >> 8;
    f.code = static_cast<errc>((st & 0xFFu) - 1);
    f.plan = static_cast<std::int64_t>(
        std::atomic_ref<std::uint64_t>(line->failed_plan).load(std::memory_order_relaxed));
    f.origin = static_cast<int>(std::atomic_ref<std::uint64_t>(line->origin).load(std::memory_order_relaxed));
    return f;
  }

  /// What peer `peer` (communicator rank) shows about call `s`: its ring
  /// slot first (it names the plan, also of an abandoned call), then its
  /// status (a failure of call s whose slot a later call reused).
  [[nodiscard]] peer_report look(int peer, std::uint64_t s) const noexcept {
    peer_report rep;
    registry_line* line = line_of(peer);
    if (!line) return rep;
    const std::uint64_t e =
        std::atomic_ref<std::uint64_t>(line->ring[s % registry_ring]).load(std::memory_order_acquire);
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

 private:
  registry_line& own() const noexcept { return *lines_[static_cast<std::size_t>(node_rank_)]; }
  registry_line* line_of(int peer) const noexcept {
    const int idx = node_index_of_[static_cast<std::size_t>(peer)];
    return idx < 0 ? nullptr : lines_[static_cast<std::size_t>(idx)];
  }

  static std::vector<int> pool_key(const placement_map& map) {
    std::vector<int> key = map.node_of;
    key.insert(key.end(), map.comm_of_prog.begin(), map.comm_of_prog.end());
    return key;
  }

  int rank_ = 0, size_ = 1, node_rank_ = 0, node_size_ = 1;
  comm_owner control_;
  comm_owner node_comm_;  ///< moved into the physical node's pool at the end of construction
  std::map<std::vector<int>, std::unique_ptr<segment_pool>> pools_;
  std::vector<registry_line*> lines_;
  std::uint64_t* alarm_ = nullptr;  ///< node rank 0's second line
  std::vector<pending_agreement> pending_;
  std::vector<int> leader_of_;
  std::vector<int> node_index_of_;
};

inline int registry_delete_attr(MPI_Comm, int, void* value, void*) {
  delete static_cast<std::weak_ptr<registry>*>(value);
  return MPI_SUCCESS;
}

inline int registry_keyval() {
  static const int keyval = [] {
    int kv = MPI_KEYVAL_INVALID;
    // Not copied to duplicates: a duplicated communicator gets its own
    // registry, as its calls are ordered independently of the original's.
    COLLC_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, registry_delete_attr, &kv, nullptr));
    return kv;
  }();
  return keyval;
}

/// The registry of `comm`, created (collectively, errc::timeout after
/// `timeout_s` if a rank does not arrive) when no plan on `comm` holds one.
inline std::shared_ptr<registry> registry_for(MPI_Comm comm, double timeout_s = 60) {
  const int kv = registry_keyval();
  void* value = nullptr;
  int found = 0;
  COLLC_MPI_CHECK(MPI_Comm_get_attr(comm, kv, &value, &found));
  if (found)
    if (auto reg = static_cast<std::weak_ptr<registry>*>(value)->lock()) return reg;
  auto reg = std::make_shared<registry>(comm, timeout_s);
  auto holder = std::make_unique<std::weak_ptr<registry>>(reg);
  COLLC_MPI_CHECK(MPI_Comm_set_attr(comm, kv, holder.get()));  // the delete callback frees the old holder
  holder.release();
  return reg;
}

}  // namespace collc::detail
