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
/// It owns a communicator of the physical node (MPI_COMM_TYPE_SHARED; a
/// communicator whose ranks are all on one host is its own) and,
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
#include <collc/config.hpp>
#include <collc/error.hpp>

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace collc::mpi {

class engine;  // engine.hpp: a plan's engine, listed in registry::started while it runs a call

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
/// The plan id that stamps a call the MPI library runs: libcollc_mpi leaves
/// some calls to MPI (a signature's first calls, sizes MPI is faster at) on a
/// communicator that has plans, and such a call takes its call number too
/// (registry::stamp_library_call). No plan gets it before 2^19 - 1 plans were
/// set up on the communicator; a plan whose id shares its 19 bits later only
/// hides a mismatch, as any two such plans do.
inline constexpr std::int64_t library_call_id = static_cast<std::int64_t>(stamp_plan_mask);
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
  /// `idle` runs between polls of that first round: the engine gives turns
  /// to plans started before (a rank completing them in another order may
  /// wait in one of them before it comes here).
  registry(MPI_Comm user_comm, double timeout_s, const std::function<void()>& idle = {});

  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;
  ~registry();

  /// How wait_request ended.
  enum class request_wait { completed, timed_out, stopped };
  /// Polls `req` until it completes, `timeout_s` passed, or `idle` returned
  /// true, yielding the core between polls (oversubscribed nodes). `idle`, if
  /// given, runs between polls: engine::agree gives the started plans their
  /// turns there (a peer may wait in one before it comes) and stops the wait
  /// when it sees that a peer will never come.
  static request_wait wait_request(MPI_Request& req, double timeout_s, const std::function<bool()>& idle = nullptr);
  /// A collective a timed-out setup left behind (its agreement, the
  /// duplication of a plan's communicator, a disagreement report): its
  /// request, the buffer MPI writes when the late ranks complete it, and the
  /// communicator it creates, if any (freed once complete).
  struct pending_collective {
    MPI_Request request = MPI_REQUEST_NULL;
    std::shared_ptr<void> buffer;
    MPI_Comm* made = nullptr;  ///< inside `buffer`, for MPI_Comm_idup
  };
  /// Setup collectives abandoned after a timeout whose buffers and handles
  /// live to the end of the process (a registry's first round; a registry
  /// that dies before its late ranks came): at MPI_Finalize (engine's
  /// note_finalize, the first thing MPI_Finalize does) each gets up to
  /// `seconds` in all to complete, as every rank is there then. Open MPI 4.1
  /// crashed tearing down a communicator whose MPI_Comm_idup was left
  /// pending (SIGSEGV in mca_pml_ob1_del_comm, seen with COLLC_TIMEOUT=1e-6).
  static void abandon(MPI_Request req);
  static void settle_abandoned(double seconds);
  /// Keeps `buffer`, which the collective `req` writes, alive until the registry dies (see ~registry).
  void keep_pending(MPI_Request req, std::shared_ptr<void> buffer, MPI_Comm* made = nullptr);

  /// Why this rank sets up no more plans on this communicator: the first
  /// setup that timed out here; empty while setups are allowed. A rank
  /// cannot take back a collective it gave up waiting for, and a late peer
  /// completes it with its next one: past such a timeout the ranks no longer
  /// agree on which setup collective comes next, and one more would pair
  /// with the wrong call or hang (engine::setup_timed_out).
  [[nodiscard]] const std::string& setups_refused() const noexcept { return setups_refused_; }
  void refuse_setups(const std::string& why) {
    if (setups_refused_.empty()) setups_refused_ = why;
  }

  /// collc's private duplicate of the user's communicator, for setup collectives.
  [[nodiscard]] MPI_Comm control() const noexcept { return control_.get(); }

  /// The segment pool of this rank's node under placement `map` (rank `prog`
  /// on node `node`); the first request for a placement splits the control
  /// communicator, collectively over it (every rank asks for the same
  /// placement in the same order, as plan setup is collective).
  segment_pool& pool_for(const placement_map& map, int node, int prog);
  /// The pool of placement `map` if one was made, else null (local).
  [[nodiscard]] segment_pool* find_pool(const placement_map& map) const;
  /// Arenas of all pools (for tests: a reused segment range adds none).
  [[nodiscard]] int arenas() const noexcept;
  /// Of the shared arenas, the MPI windows (the fallback of segments.hpp).
  [[nodiscard]] int mpi_windows() const noexcept;
  /// The node's first shared memory could not be mapped on this rank
  /// (segment_pool::map_failed): plan setup agreements carry it, so every
  /// rank fails the plan alike.
  [[nodiscard]] bool shared_memory_failed() const noexcept { return physical_->map_failed(); }
  /// Every rank has mapped it (an agreement said so): its name can go.
  void confirm_shared_memory() noexcept { physical_->confirm(); }
  /// Of them, the shared windows (a one-rank node's arenas are private memory).
  [[nodiscard]] int windows() const noexcept;

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  /// Communicator rank of the leader (smallest rank) of `r`'s physical node.
  [[nodiscard]] int physical_leader(int r) const { return leader_of_[static_cast<std::size_t>(r)]; }
  [[nodiscard]] const std::vector<int>& physical_leaders() const noexcept { return leader_of_; }

  /// This communicator's plans with a call started and not complete, that
  /// another plan's wait advances (engine::progress). Only calls of this
  /// communicator touch it, and they come from one thread at a time.
  std::vector<engine*> started;
  /// Every registry of this process, for engine::progress across
  /// communicators (a registry joins at the end of its construction).
  struct registry_list {
    std::mutex m;
    std::vector<registry*> all;
  };
  static registry_list& live() noexcept {
    static registry_list l;
    return l;
  }
  /// True below MPI_THREAD_MULTIPLE: one thread at a time is in MPI, and so
  /// in collc's calls (asked once; the level is fixed by MPI_Init_thread).
  static bool one_thread_calls_mpi();

  /// Sequence number and plan id bookkeeping (see the file comment).
  std::uint64_t seq = 0;
  std::int64_t next_plan_id = 1;
  std::map<std::int64_t, std::string> plan_names;
  /// Plan setups entered on this communicator (the same count on every rank).
  std::uint64_t setups = 0;

  /// The name of the live plan whose id is `tag` mod 2^19 (the newest such), for messages.
  [[nodiscard]] std::string plan_name_by_tag(std::uint64_t tag) const;
  /// The name of the live plan `id`, for messages.
  [[nodiscard]] std::string plan_name(std::int64_t id) const;

  /// Announces that this rank runs call `s` with plan `plan_id`.
  void stamp(std::uint64_t s, std::int64_t plan_id) noexcept;
  /// libcollc_mpi leaves this rank's next call on the communicator to the
  /// MPI library: it takes its number all the same, stamped library_call_id.
  /// Every rank runs a call on collc or on MPI alike (docs/pmpi.md), so a
  /// peer whose plan runs that call sees the stamp as a mismatch (a rank
  /// passed another count, whose first calls go to MPI): before, it waited
  /// for good for a rank that waited in MPI for it. One store, on calls that
  /// go to MPI only.
  void stamp_library_call() noexcept { stamp(++seq, library_call_id); }
  /// The plan this rank stamped for call `s`, if the ring still holds it (tag, found).
  [[nodiscard]] std::pair<std::uint64_t, bool> own_stamp(std::uint64_t s) const noexcept;
  /// Marks call `s` of plan `plan_id` abandoned with `code`: peers waiting on
  /// this rank in call `s`, or in any later call of that plan, fail too, and
  /// the node's alarm tells every rank at its next call.
  void mark_failed(std::uint64_t s, errc code, std::int64_t plan_id, int origin) noexcept;
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
  /// Calls this process failed (engine::fail): it has had their error, so a
  /// peer's mismatch mark for one of them is not reported again in a later
  /// call. Grows by one per failed call.
  std::set<std::uint64_t> failed_calls;
  /// Calls this process has begun and not yet completed or failed, of any
  /// plan on the communicator. A peer's mismatch mark for one of them is that
  /// call's to report (its own waits or its completion see it), not a later
  /// call's: plans started together may be completed in any order, and a
  /// later call that reported it failed on every rank (one mismatched call
  /// took the next started call of another plan down with it). A vector:
  /// every call adds and removes its number (a few entries at most, and no
  /// allocation once it has grown), and only the slow path searches it.
  std::vector<std::uint64_t> open_calls;

  /// Posts that this rank entered setup number `k` (gave_up: and timed out in it).
  void mark_setup(std::uint64_t k, bool gave_up) noexcept;
  /// Setup state of `peer` (communicator rank): (setups entered, gave up in the last); nullopt on another node.
  [[nodiscard]] std::optional<std::pair<std::uint64_t, bool>> setup_of(int peer) const noexcept;
  /// Whether `peer` shares this rank's physical node (its line is visible).
  [[nodiscard]] bool on_node(int peer) const noexcept { return line_of(peer) != nullptr; }

  /// The last call `peer` (communicator rank) abandoned, if on this node.
  [[nodiscard]] peer_failure failure_of(int peer) const noexcept;

  /// What peer `peer` (communicator rank) shows about call `s`: its ring
  /// slot first (it names the plan, also of an abandoned call), then its
  /// status (a failure of call s whose slot a later call reused).
  [[nodiscard]] peer_report look(int peer, std::uint64_t s) const noexcept;

 private:
  registry_line& own() const noexcept { return *lines_[static_cast<std::size_t>(node_rank_)]; }
  /// The line of `peer` (communicator rank), null if it is on another node.
  registry_line* line_of(int peer) const noexcept;

  /// The key of placement `map` in pools_: its nodes and its renumbering.
  static std::vector<int> pool_key(const placement_map& map);

  int rank_ = 0, size_ = 1, node_rank_ = 0, node_size_ = 1;
  comm_owner control_;
  comm_owner node_comm_;  ///< across hosts: moved into the physical node's pool at the end of construction
  /// This process's host: processor name and boot id, hashed (registry.ipp).
  static std::uint64_t host_key();
  std::map<std::vector<int>, std::unique_ptr<segment_pool>> pools_;
  segment_pool* physical_ = nullptr;  ///< the physical node's pool (in pools_)
  std::vector<registry_line*> lines_;
  std::uint64_t* alarm_ = nullptr;  ///< node rank 0's second line
  std::vector<pending_collective> pending_;
  std::string setups_refused_;
  std::vector<int> leader_of_;
  std::vector<int> node_index_of_;
};

/// The attribute's delete callback: frees the weak_ptr it holds.
int registry_delete_attr(MPI_Comm, int, void* value, void*);

/// The keyval of the registry attribute, created on first use (one per process).
int registry_keyval();

/// The registry of `comm`, created (collectively, errc::timeout after
/// `timeout_s` if a rank does not arrive) when no plan on `comm` holds one.
std::shared_ptr<registry> registry_for(MPI_Comm comm, double timeout_s = 60, const std::function<void()>& idle = {});

/// The registry of `comm` if a plan on it holds one, else null (local).
std::shared_ptr<registry> registry_find(MPI_Comm comm);

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/registry.ipp>
#endif
