#pragma once
/// \file
/// The per-communicator registry: what every rank of a physical node can see
/// of the plans its node peers are running, so that a wait that takes long can
/// tell "my peer is slow" from "my peer runs a different collective" (a
/// mismatch, reported as errc::mismatch instead of a hang).
///
/// One registry per user communicator and process, cached on the
/// communicator with an MPI attribute and shared by every plan built on it.
/// It owns a communicator of the physical node (MPI_COMM_TYPE_SHARED) and,
/// in the first range of that node's segment pool, one cache line per node
/// rank:
///   status   0, or (seq << 8 | errc + 1) once the rank abandoned call `seq`
///            after an error, so peers waiting on it fail fast too
///   ring[7]  (seq << 24 | plan id) of the rank's last 7 calls, slot seq % 7
/// Every plan call takes the next sequence number `seq` of the communicator;
/// MPI requires all ranks to call collectives on a communicator in the same
/// order, so call number `seq` must run the same plan everywhere. A waiter in
/// call `seq` that finds `seq` with another plan id in its peer's ring has
/// proven a mismatch. Plan setup agrees on seq and plan ids (max over ranks).
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
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace collc::detail {

struct alignas(64) registry_line {
  std::uint64_t status;
  std::uint64_t ring[7];
};
static_assert(sizeof(registry_line) == 64);

inline constexpr int registry_ring = 7;

constexpr std::uint64_t pack_stamp(std::uint64_t seq, int plan_id) noexcept {
  return (seq << 24) | (static_cast<std::uint64_t>(plan_id) & 0xFFFFFFu);
}
constexpr std::uint64_t stamp_seq(std::uint64_t stamp) noexcept { return stamp >> 24; }
constexpr int stamp_plan(std::uint64_t stamp) noexcept { return static_cast<int>(stamp & 0xFFFFFFu); }

/// What a waiter learns about a peer from the registry.
struct peer_report {
  enum kind_t : std::uint8_t { unknown, same_call, other_plan, failed } kind = unknown;
  int plan_id = -1;                       ///< other_plan: the plan the peer runs in this call
  errc failure = errc::invalid_argument;  ///< failed: the peer's error
};

class registry {
 public:
  /// Collective over `comm`.
  explicit registry(MPI_Comm user_comm) {
    COLLC_MPI_CHECK(MPI_Comm_dup(user_comm, control_.out()));
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
    const segment_lease lines = pool->take(-1, 0, sizeof(registry_line), 0, false);
    lines_.resize(static_cast<std::size_t>(node_size_));
    for (int i = 0; i < node_size_; ++i)
      lines_[static_cast<std::size_t>(i)] = reinterpret_cast<registry_line*>(lines.slot[static_cast<std::size_t>(i)]);
    pools_.emplace(pool_key(physical), std::move(pool));
  }

  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;
  ~registry() {
    while (!pools_.empty()) pools_.erase(pools_.begin());  // in key order on every rank
    control_.reset();
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
  int next_plan_id = 1;
  std::map<int, std::string> plan_names;

  [[nodiscard]] std::string plan_name(int id) const {
    auto it = plan_names.find(id);
    return it == plan_names.end() ? "plan " + std::to_string(id) + " (freed)" : it->second;
  }

  /// Announces that this rank runs call `s` with plan `plan_id`.
  void stamp(std::uint64_t s, int plan_id) noexcept {
    std::atomic_ref<std::uint64_t>(own().ring[s % registry_ring])
        .store(pack_stamp(s, plan_id), std::memory_order_release);
  }
  /// Marks call `s` abandoned with `code`; peers waiting on this rank in call `s` fail too.
  void mark_failed(std::uint64_t s, errc code) noexcept {
    std::atomic_ref<std::uint64_t>(own().status)
        .store((s << 8) | (static_cast<std::uint64_t>(code) + 1), std::memory_order_release);
  }

  /// What peer `peer` (communicator rank) shows about call `s`; `unknown` if
  /// the peer is on another physical node or has not reached call `s`.
  [[nodiscard]] peer_report look(int peer, std::uint64_t s) const noexcept {
    peer_report rep;
    const int idx = node_index_of_[static_cast<std::size_t>(peer)];
    if (idx < 0) return rep;
    registry_line& line = *lines_[static_cast<std::size_t>(idx)];
    const std::uint64_t st = std::atomic_ref<std::uint64_t>(line.status).load(std::memory_order_acquire);
    if (st != 0 && (st >> 8) == s) {
      rep.kind = peer_report::failed;
      rep.failure = static_cast<errc>((st & 0xFFu) - 1);
      return rep;
    }
    const std::uint64_t e =
        std::atomic_ref<std::uint64_t>(line.ring[s % registry_ring]).load(std::memory_order_acquire);
    if (stamp_seq(e) != s) return rep;
    rep.plan_id = stamp_plan(e);
    rep.kind = peer_report::same_call;
    return rep;
  }

 private:
  registry_line& own() const noexcept { return *lines_[static_cast<std::size_t>(node_rank_)]; }

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

/// The registry of `comm`, created (collectively) when no plan on `comm` holds one.
inline std::shared_ptr<registry> registry_for(MPI_Comm comm) {
  const int kv = registry_keyval();
  void* value = nullptr;
  int found = 0;
  COLLC_MPI_CHECK(MPI_Comm_get_attr(comm, kv, &value, &found));
  if (found)
    if (auto reg = static_cast<std::weak_ptr<registry>*>(value)->lock()) return reg;
  auto reg = std::make_shared<registry>(comm);
  auto holder = std::make_unique<std::weak_ptr<registry>>(reg);
  COLLC_MPI_CHECK(MPI_Comm_set_attr(comm, kv, holder.get()));  // the delete callback frees the old holder
  holder.release();
  return reg;
}

}  // namespace collc::detail
