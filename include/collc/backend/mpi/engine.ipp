#pragma once
/// \file
/// Definitions of the engine's type-independent parts: setup (registry,
/// placement, agreement, segment, binding), the start of a call, the slow
/// paths of waiting and every error report. Header-only mode includes this
/// from engine.hpp; compiled mode builds it once in src/collc.cpp.
#include <collc/backend/mpi/engine.hpp>

#include <collc/backend/mpi/binder.hpp>
#include <collc/backend/mpi/registry.hpp>
#include <collc/backend/mpi/segments.hpp>
#include <collc/backend/mpi/wait.hpp>
#include <collc/ir/sequence.hpp>
#include <collc/ir/verify.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

namespace collc::mpi {

COLLC_INLINE std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// "0-2,5,7" for a sorted list of ranks.
COLLC_INLINE std::string rank_list(const std::vector<int>& r) {
  std::string s;
  for (std::size_t i = 0; i < r.size();) {
    std::size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(r[i]);
    if (j > i) s += "-" + std::to_string(r[j]);
    i = j + 1;
  }
  return (r.size() == 1 ? "rank " : "ranks ") + s;
}

COLLC_INLINE int note_finalize(MPI_Comm, int, void*, void*) {
  // MPI is still whole here (MPI_Finalize deletes MPI_COMM_SELF's
  // attributes first): setup collectives abandoned after a timeout get their
  // last chance to complete before the communicators go.
  registry::settle_abandoned(2.0);
  finalize_seen().store(true, std::memory_order_relaxed);
  return MPI_SUCCESS;
}

COLLC_INLINE void watch_finalize() {
  static const bool watching = [] {
    int kv = MPI_KEYVAL_INVALID;
    COLLC_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, note_finalize, &kv, nullptr));
    COLLC_MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, kv, nullptr));
    return true;
  }();
  (void)watching;
}

/// Online CPUs of this node: the cores the ranks of a node share. Read once
/// per process: glibc answers hardware_concurrency() by opening and parsing
/// /sys/devices/system/cpu/online, two of which made 8 of the 13 us of a
/// one-rank plan's setup (perf, 2026-12-05).
COLLC_INLINE int online_cores() noexcept {
  static const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return cores;
}

COLLC_INLINE engine::engine(MPI_Comm comm, plan_shape shape, const resolved_options& opt)
    : shape_(std::move(shape)), opt_(opt) {
  int initialized = 0;
  COLLC_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) throw error(errc::invalid_argument, "MPI is not initialized");
  if (comm == MPI_COMM_NULL) throw error(errc::invalid_argument, "communicator is MPI_COMM_NULL");
  watch_finalize();
  int inter = 0;
  COLLC_MPI_CHECK(MPI_Comm_test_inter(comm, &inter));
  if (inter) throw error(errc::unsupported, "intercommunicators are not supported");
  COLLC_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  COLLC_MPI_CHECK(MPI_Comm_size(comm, &size_));
  try {
    // Plans started before this first setup on `comm` (on other
    // communicators) get turns while its first round waits, as the
    // agreement gives them: a peer may be waiting in one of them first.
    reg_ = registry_for(comm, opt_.timeout_s, [] { give_turns(MPI_COMM_NULL); });
  } catch (const error& e) {
    if (e.code() == errc::timeout) timed_out(e.what());  // the first plan's round: aborts if asked to
    throw;
  }
  const bool order_sensitive = reduces(shape_.coll) && !shape_.commutative;
  map_ = make_placement(node_keys(reg_->physical_leaders(), opt_.ranks_per_node, opt_.place), order_sensitive);
  // Across nodes the default chunk is the network's (options.hpp,
  // default_net_chunk_bytes); every rank decides alike (same placement).
  if (map_.nodes > 1 && !opt_.chunk_bytes_given) opt_.chunk_bytes = default_net_chunk_bytes;
  prog_rank_ = map_.prog_of_comm[static_cast<std::size_t>(rank_)];
  node_id_ = map_.node_of[static_cast<std::size_t>(prog_rank_)];
  node_first_ = map_.node_first(node_id_);
  node_size_ = map_.node_size(node_id_);
  // The pool of this placement, if an earlier plan made it (a new one is
  // made after agreement: splitting is collective, and ranks that disagree
  // on the placement must get errc::mismatch, not a hang).
  pool_ = reg_->find_pool(map_);
}

COLLC_INLINE engine::~engine() {
  leave_started();
  if (call_.active) close_call();
  reg_->plan_names.erase(plan_id_);
  // A failed call leaves transfers active (a call in progress otherwise was
  // finished by the typed plan: plan_core::finish_quietly). A receive freed
  // while active may still be matched and write into the staging memory
  // given back below, or into the user's buffer after the plan is gone: it
  // is cancelled, then completed, which MPI guarantees to be local (MPI 4.0,
  // section 3.8.4: a wait on a request marked for cancellation returns
  // whatever the other processes do). A send still active is freed and
  // completes on its own (section 3.7.3): MPI reads its buffer when a
  // receive matches it, maybe long after (a peer on another node that was
  // late, whose receive this rank timed out waiting for). If that buffer is
  // memory this plan owns (scratch, staging, its range of the node segment:
  // a one-rank node's arena is heap memory), freeing it let the late peer
  // read whatever the allocator or a later plan put there and complete the
  // call with it, without an error: across nodes nothing else tells it that
  // this rank gave the call up (test_plan_errors, "a late peer reads what a
  // failed plan sent, not what reused its memory"). A send that has
  // completed meanwhile (an eager one: MPI copied it when it started) needs
  // nothing: one test says which. If any has not, the plan's own memory is
  // kept until the process ends, and its segment range stays leased (no
  // later plan gets it; its arena outlives the pool: segment_pool::keep).
  // The user's buffers are the program's to keep (docs/mpi_backend.md).
  bool sends_pending = false;
  if (!mpi_finalized())
    for (auto& p : progs_)
      for (auto& t : p.transfers) {
        if (t.request == MPI_REQUEST_NULL) continue;
        if (t.active && !t.is_send) {
          MPI_Cancel(&t.request);
          MPI_Wait(&t.request, MPI_STATUS_IGNORE);
        } else if (t.active) {
          int done = 0;
          MPI_Test(&t.request, &done, MPI_STATUS_IGNORE);
          sends_pending = sends_pending || done == 0;
        }
        MPI_Request_free(&t.request);
      }
  if (sends_pending) {
    (void)scratch_.release();  // leaked on purpose: MPI may still read them
    (void)stage_.release();
    if (pool_) pool_->keep(segment_);
  } else if (pool_) {
    pool_->release(segment_);
  }
  if (mpi_finalized()) return;  // too late to free MPI objects; the process is ending
  // A failed call may leave messages sent and never received (peers
  // abandoned it). MPICH 4.0 keeps them after MPI_Comm_free and gives the
  // context id to a later communicator, whose plan then receives them: the
  // old call's data summed in without an error, a false mismatch, or
  // "Message truncated" (test_plan_errors, "different plans in the same
  // call"). They lie on the communicator of whichever plan the sender ran,
  // which on this rank may be a plan that never failed: in a mismatched
  // call the odd rank runs another plan than its peers (the lifecycle fuzz,
  // MPICH), and a bcast root can complete its cached plan while the other
  // ranks set up a new one (pmpi_mismatch_root). So every plan that existed
  // when a call on its communicator failed (on this rank, or on this node:
  // the alarm) keeps its communicator until MPI_Finalize, as the registry
  // keeps one with abandoned rounds, so the id is never reused. Plans made
  // after the failure free theirs.
  std::uint64_t last_failure = reg_->failed_calls.empty() ? 0 : *reg_->failed_calls.rbegin();
  if (const std::uint64_t alarm = reg_->alarm(); alarm > 0) last_failure = std::max(last_failure, alarm - 1);
  if (call_.failed || last_failure > created_seq_) *comm_.ptr() = MPI_COMM_NULL;
  comm_.reset();
}

COLLC_INLINE bool engine::oversubscribed() const noexcept {
  int node_ranks = 0;
  for (int r = 0; r < size_; ++r) node_ranks += reg_->physical_leader(r) == reg_->physical_leader(rank_);
  return node_ranks > node_cores();
}

COLLC_INLINE void engine::build(const std::function<std::string()>& resolve, const lower_fn& lower) {
  std::string resolved;
  std::optional<error> failure;
  try {
    check_shape();
    resolved = resolve();
    lower_chunks(lower);
    layout();
    if (opt_.checks) verify_runs();
  } catch (const error& e) {
    failure = e;
    resolved = std::string("error: ") + e.what();
  }
  settle(resolved, failure);
}

COLLC_INLINE void engine::build_from(std::vector<ir::program> programs) {
  lowered_ = std::move(programs);
  if (!lowered_.empty()) chunk_ = lowered_[0].count == 0 ? 1 : lowered_[0].count;
  std::optional<error> failure;
  try {
    layout();
  } catch (const error& e) {
    failure = e;
  }
  settle(failure ? std::string("error: ") + failure->what() : std::string("programs given"), failure);
}

COLLC_INLINE void engine::begin(const void* send, void* recv, bool in_place, bool discard_recv) {
  refuse_unusable();
  if (call_.pending) throw error(errc::invalid_argument, name_ + ": start() called again before wait()");
  call_.seq = ++reg_->seq;
  reg_->stamp(call_.seq, plan_id_);
  try {
    check_alarm();
  } catch (const error& e) {
    fail(e);
    throw;
  }
  call_.pending = true;
  call_.user_send = static_cast<const std::byte*>(send);
  call_.user_recv = static_cast<std::byte*>(recv);
  call_.discard_recv = discard_recv;
  call_.stage_recv = discard_recv;
  call_.stage_send = false;
  if (in_place && !in_place_safe_) {
    if (shape_.coll == collective::reduce_scatter)
      call_.stage_recv = true;
    else
      call_.stage_send = true;
  }
  call_.exec = 0;
  call_.exec_started = false;
  call_.active = lay_.runs.executions_per_call > 0;
  if (call_.active) reg_->open_calls.push_back(call_.seq);
  if (call_.active && step_) enter_started();
}

COLLC_INLINE void engine::enter_started() {
  reg_->started.push_back(this);
  in_started_ = true;
}

COLLC_INLINE void engine::leave_started() noexcept {
  if (!in_started_) return;
  std::erase(reg_->started, this);
  in_started_ = false;
}

COLLC_INLINE void engine::abandon(const error& e) {
  refuse_unusable();
  if (call_.pending) return;  // the call in progress is not this one
  call_.seq = ++reg_->seq;
  reg_->stamp(call_.seq, plan_id_);
  fail(e);
}

COLLC_INLINE void engine::refuse_unusable() const {
  if (finalized()) throw error(errc::invalid_argument, name_ + ": called after MPI_Finalize");
  if (call_.failed)
    throw error(errc::invalid_argument, name_ + " is unusable after an earlier error: " + call_.failure);
}

COLLC_INLINE void engine::close_call() noexcept { std::erase(reg_->open_calls, call_.seq); }

COLLC_INLINE void engine::check_alarm() {
  if (!reg_->abandoned.empty()) {
    auto it = reg_->abandoned.find(plan_id_);
    if (it != reg_->abandoned.end() && it->second.seq <= call_.seq) {
      call_.origin = it->second.origin;
      throw error(it->second.code,
                  name_ + ": " + it->second.why + ", so call #" + std::to_string(call_.seq) + " cannot complete");
    }
  }
  const std::uint64_t alarm = reg_->alarm();
  if (alarm == reg_->seen_alarm) return;
  bool deferred = false;  // a mark left for a call still open or still ahead here: look again next time
  for (int q = 0; q < size_; ++q) {
    if (q == rank_ || !reg_->on_node(q)) continue;
    const peer_failure f = reg_->failure_of(q);
    if (f.seq == 0) continue;
    const std::string why = "rank " + std::to_string(q) + " abandoned " + reg_->plan_name(f.plan) + " in call #" +
                            std::to_string(f.seq) + " after an error (" + std::string(to_string(f.code)) + ")" +
                            raised_by(q, f.origin);
    reg_->abandoned.emplace(f.plan, registry::abandoned_plan{f.code, f.seq, why, f.origin});
    if (f.plan == plan_id_ && f.seq <= call_.seq) {
      call_.origin = f.origin;
      throw error(f.code, name_ + ": " + why + ", so call #" + std::to_string(call_.seq) + " cannot complete");
    }
    if (f.code == errc::mismatch && f.seq > reg_->reported_mismatch && !reg_->failed_calls.contains(f.seq)) {
      // Left to another call: one later than this (this rank completed it
      // first, or has not reached it), reported there or after it; or
      // another plan's call begun before this one and not yet ended here
      // (plans started together), which hears of its mismatch itself.
      const bool other_open = f.seq < call_.seq && std::ranges::find(reg_->open_calls, f.seq) != reg_->open_calls.end();
      if (f.seq > call_.seq || other_open) {
        deferred = true;
        continue;
      }
      reg_->reported_mismatch = f.seq;
      const auto [tag, known] = reg_->own_stamp(f.seq);
      // Both sides, as a rank that saw the mismatch itself says them (a mark
      // from a setup that met a mismatch names no plan).
      const std::string peer_ran = f.plan >= 0 ? " (it ran " + reg_->plan_name(f.plan) + ")" : std::string();
      throw error(errc::mismatch,
                  "mismatched collective calls: rank " + std::to_string(q) + " found call #" + std::to_string(f.seq) +
                      " mismatched" + peer_ran + "; rank " + std::to_string(rank_) + " ran " +
                      (known ? reg_->plan_name_by_tag(tag) : std::string("?")) + " in that call (reported in call #" +
                      std::to_string(call_.seq) + ", " + name_ + ")");
    }
  }
  if (!deferred) reg_->seen_alarm = alarm;
}

COLLC_INLINE std::string engine::signature_text() const {
  return std::string(to_string(shape_.coll)) + " count=" + std::to_string(shape_.count) + " type=" + shape_.type_name +
         "(" + std::to_string(shape_.elem_size) + " B) op=" + shape_.op_name + " schedule=" + shape_.schedule +
         (shape_.coll == collective::reduce || shape_.coll == collective::bcast ? " root=" + std::to_string(shape_.root)
                                                                                : "") +
         " ranks_per_node=" + std::to_string(opt_.ranks_per_node) +
         (opt_.place == collc::placement::round_robin ? " placement=round_robin" : "") +
         " chunk_bytes=" + std::to_string(opt_.chunk_bytes);
}

COLLC_INLINE void engine::check_shape() const {
  if ((shape_.coll == collective::reduce || shape_.coll == collective::bcast) &&
      (shape_.root < 0 || shape_.root >= size_))
    throw error(errc::invalid_argument, "root " + std::to_string(shape_.root) +
                                            " is not a rank of the communicator (size " + std::to_string(size_) + ")");
  const bool blocked = shape_.coll == collective::reduce_scatter || shape_.coll == collective::allgather;
  const std::size_t blocks = blocked ? static_cast<std::size_t>(size_) : 1;
  if (shape_.elem_size == 0 || shape_.count > SIZE_MAX / blocks / shape_.elem_size)
    throw error(errc::overflow, "count " + std::to_string(shape_.count) + " x " + std::to_string(blocks) +
                                    " blocks of " + std::to_string(shape_.elem_size) + "-byte elements overflows");
}

COLLC_INLINE void engine::lower_chunks(const lower_fn& lower) {
  if (shape_.count == 0) return;
  const bool blocked = shape_.coll == collective::reduce_scatter || shape_.coll == collective::allgather;
  chunk_request q;
  q.ranks = size_;
  q.granule = ir::line_granule(shape_.elem_size);
  q.root = (shape_.coll == collective::reduce || shape_.coll == collective::bcast)
               ? map_.prog_of_comm[static_cast<std::size_t>(shape_.root)]
               : 0;
  if (map_.nodes > 1) q.node_of = map_.node_of;
  const std::size_t chunk_bytes = lowering_chunk_bytes(shape_.coll, shape_.count * shape_.elem_size, size_,
                                                       map_.nodes == 1, oversubscribed(), opt_.chunk_bytes);
  ir::chunked c = ir::lower_in_chunks(shape_.count, shape_.elem_size, blocked ? static_cast<std::size_t>(size_) : 1,
                                      chunk_bytes, [&](std::size_t n, std::size_t stride) {
                                        q.count = n;
                                        q.block_stride = stride;
                                        return lower(q);
                                      });
  chunk_ = c.chunk;
  lowered_ = std::move(c.programs);
}

COLLC_INLINE void engine::verify_runs() const {
  if (lay_.runs.programs.empty()) return;
  const bool commutative = shape_.commutative || !reduces(shape_.coll);
  const int w = lay_.runs.window();
  const std::vector<std::size_t> order = lay_.runs.sequence(w, static_cast<std::size_t>(w));
  for (bool in_place : {false, true}) {
    if (in_place && !lay_.runs.in_place) continue;
    ir::verify_result r;
    try {
      r = ir::verify_sequence(lay_.runs.programs, order,
                              {.commutative = commutative, .in_place = in_place, .shm_copies = lay_.runs.shm_copies});
    } catch (const error& e) {
      // verify refused the sequence (above all: too large to prove, an
      // estimate over its memory limit): say which plan, and what a user of
      // a plan can change.
      throw error(e.code(), "COLLC_ENABLE_CHECKS: the programs of " + signature_text() +
                                (in_place ? " (in place)" : "") + " cannot be proven at setup: " + e.what() +
                                ". A smaller chunk (COLLC_CHUNK_BYTES / plan_options::chunk_bytes) makes each "
                                "program smaller; or create this plan with checks off (plan_options::checks)");
    }
    if (!r)
      throw error(errc::verification_failed, "COLLC_ENABLE_CHECKS: the programs of " + signature_text() +
                                                 (in_place ? " (in place)" : "") + " fail " +
                                                 std::string(ir::to_string(r.failed)) + ": " + r.to_string());
  }
}

COLLC_INLINE void engine::layout() {
  lay_ = layout_of(lowered_, chunk_, shape_.count, shape_.elem_size, opt_.chunk_bytes, size_);
}

COLLC_INLINE void engine::settle(const std::string& resolved, const std::optional<error>& failure) {
  const std::string text = signature_text() + " -> " + resolved;
  // The agreement covers how the plan was lowered too: the chunk and the shm
  // copies depend on this rank's view of its node (lowering_chunk_bytes:
  // its core count), and ranks that ran different chunk programs of the same
  // size would read each other's halves at the wrong time, with no error.
  const std::string lowered = failure ? text
                                      : text + " (chunk " + std::to_string(chunk_) + ", " +
                                            std::to_string(lay_.shm_copies) + " shm copies)";
  const std::uint64_t h = fnv1a(lowered);
  const auto [arena, offset] =
      failure || pool_ == nullptr ? std::pair<int, std::size_t>{-1, 0} : pool_->propose(lay_.slot_bytes);
  const auto a = static_cast<std::int64_t>(arena), o = static_cast<std::int64_t>(offset),
             n = static_cast<std::int64_t>(lay_.slot_bytes);
  // The proposal as one key (arena above offset: an arena holds far less than
  // 2^40 bytes per rank), so that its minimum over the ranks is one rank's
  // proposal (retired below when the ranks disagree).
  const std::int64_t key = arena >= 0 ? a << 40 | o : -1;
  // The hash as two non-negative halves and their complements: all equal
  // iff every rank's maxima are its own values.
  const auto hi = static_cast<std::int64_t>(h >> 32), lo = static_cast<std::int64_t>(h & 0xFFFFFFFFu);
  const std::int64_t mine[agreed_values] = {hi,
                                            lo,
                                            0xFFFFFFFF - hi,
                                            0xFFFFFFFF - lo,
                                            static_cast<std::int64_t>(reg_->seq),
                                            reg_->next_plan_id,
                                            a,
                                            o,
                                            n,
                                            -a,
                                            -key,
                                            reg_->shared_memory_failed() ? 1 : 0};
  std::int64_t v[agreed_values];
  agree(mine, v, text);
  if (v[0] != hi || v[1] != lo || v[2] != 0xFFFFFFFF - hi || v[3] != 0xFFFFFFFF - lo) report_disagreement(h, lowered);
  // The node's first shared memory is mapped everywhere, or nowhere usable
  // (segments.hpp, map_failed): the registry's first plan says which.
  if (v[11] != 0)
    throw error(errc::mpi_error,
                "the node's shared memory (POSIX shm_open / mmap) could not be mapped on every rank "
                "of the communicator; is /dev/shm usable by all of them?");
  reg_->confirm_shared_memory();
  if (failure) throw *failure;  // every rank failed alike (same text)
  reg_->seq = static_cast<std::uint64_t>(v[4]);
  created_seq_ = reg_->seq;
  plan_id_ = v[5];
  reg_->next_plan_id = plan_id_ + 1;
  name_ = "plan " + std::to_string(plan_id_) + " (" + text + ")";
  reg_->plan_names[plan_id_] = name_;
  if (v[8] != n)  // same signature and schedule, yet different programs: a bug, not a user error
    throw error(errc::mismatch, name_ + ": ranks lowered programs of different sizes (" + std::to_string(n) + " and " +
                                    std::to_string(v[8]) + " bytes of segment)");
  // Every rank proposed (a, o): the maxima of arena and offset are this
  // rank's, and so is the minimum key (whose arena is then the largest).
  const bool agreed = arena >= 0 && v[6] == a && -v[9] == a && v[7] == o && -v[10] == key;
  if (pool_ == nullptr) {  // every rank alike: same placement, pools made in the same order
    pool_ = &reg_->pool_for(map_, node_id_, prog_rank_);
    if (pool_->node_rank() != prog_rank_ - node_first_ || pool_->node_size() != node_size_)
      throw error(errc::mpi_error, "node communicator does not match the placement (rank " +
                                       std::to_string(pool_->node_rank()) + " of " +
                                       std::to_string(pool_->node_size()) + ")");
  }
  // Ranks that proposed different ranges: a range kept on some rank (a failed
  // plan's sends still read it, ~engine) is free on the others, who would
  // propose it again at every later setup and make each take a new arena.
  // The lowest proposal, a range some rank proposed and so holds free, is
  // retired wherever it is free: each disagreement takes one such range out
  // of that rank's proposals for good.
  if (const std::int64_t lowest = -v[10]; !agreed && -v[9] >= 0 && lowest >= 0)
    pool_->retire(static_cast<int>(lowest >> 40), static_cast<std::size_t>(lowest & ((std::int64_t{1} << 40) - 1)),
                  static_cast<std::size_t>(n));
  bind_all(agreed ? arena : -1, offset);
}

COLLC_INLINE void engine::agree(const std::int64_t (&mine)[agreed_values], std::int64_t (&out)[agreed_values],
                                const std::string& text) {
  if (const std::string& why = reg_->setups_refused(); !why.empty())
    throw error(errc::timeout, "setup of " + text + " on rank " + std::to_string(rank_) +
                                   " refused: an earlier setup on this communicator timed out here (" + why +
                                   "), and past that the ranks' setup collectives no longer pair up (a rank cannot "
                                   "take back a collective it gave up waiting for). Plans built before keep working; "
                                   "build new plans on a new communicator (MPI_Comm_dup), or make timeouts fatal "
                                   "(COLLC_ON_TIMEOUT=abort)");
  const std::uint64_t k = ++reg_->setups;
  reg_->mark_setup(k, false);
  // MPI writes the result when every rank contributed, maybe after this
  // rank gave up: heap memory the registry keeps in that case.
  auto values = std::make_unique<std::int64_t[]>(agreed_values);
  std::copy(std::begin(mine), std::end(mine), values.get());
  MPI_Request req = MPI_REQUEST_NULL;
  COLLC_MPI_CHECK(
      MPI_Iallreduce(MPI_IN_PLACE, values.get(), agreed_values, MPI_INT64_T, MPI_MAX, reg_->control(), &req));
  // Plans started before this setup get turns: a rank that completes them
  // in another order may be waiting in one of them before it comes here.
  // A node peer that started this rank's next call without entering this
  // setup runs a plan it has cached where this rank builds one: the ranks
  // called different collectives (a correct program builds the same plans
  // at the same calls everywhere, and a peer that completed this agreement
  // has entered it), and the peer never comes here. That is a mismatch, as
  // the peer's plan reports it from its side (slow_check); without this
  // check the setup waited forever (COLLC_TIMEOUT is unlimited under
  // libcollc_mpi).
  std::string crossed;
  const auto end = registry::wait_request(req, opt_.timeout_s, [this, k, &crossed] {
    turns(reg_.get(), this);
    crossed = peer_skipped_setup(k);
    return !crossed.empty();
  });
  if (end == registry::request_wait::stopped) {
    reg_->keep_pending(req, std::shared_ptr<void>(std::move(values)));
    const std::string msg =
        "mismatched collective calls: setup of " + text + " on rank " + std::to_string(rank_) + ": " + crossed;
    // This setup's agreement stays pending, so the ranks' setup collectives
    // no longer pair up: no more setups here, and a peer whose next setup
    // meets the abandoned agreement learns from the gave-up mark that this
    // rank left it (as after a timeout). Plans built before keep working.
    reg_->mark_setup(k, true);
    reg_->refuse_setups(msg);
    // The peers ran (and abandon) the next call: it is this call, which
    // runs no plan here. Taking its number keeps the ranks' later calls
    // paired, and marking it abandoned tells a peer still waiting in it.
    const std::uint64_t next = reg_->seq + 1;
    reg_->seq = next;
    reg_->failed_calls.insert(next);
    reg_->mark_failed(next, errc::mismatch, -1, rank_);
    throw error(errc::mismatch, msg);
  }
  if (end == registry::request_wait::timed_out) {
    reg_->mark_setup(k, true);
    std::vector<int> missing;
    bool others = false;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const auto st = reg_->setup_of(q);
      if (!st)
        others = true;
      else if (st->first < k)
        missing.push_back(q);
    }
    reg_->keep_pending(req, std::shared_ptr<void>(std::move(values)));
    std::string who =
        missing.empty() ? std::string("no rank of this node is missing") : rank_list(missing) + " did not arrive";
    if (others) who += " (ranks on other nodes are not visible from here)";
    setup_timed_out("timeout after " + std::to_string(opt_.timeout_s) + " s in the setup of " + text + " on rank " +
                    std::to_string(rank_) + ": " + who + "; every rank must build the same plans in the same order");
  }
  std::copy(values.get(), values.get() + agreed_values, std::begin(out));
  std::vector<int> gave_up;
  for (int q = 0; q < size_; ++q)
    if (const auto st = reg_->setup_of(q); q != rank_ && st && st->first == k && st->second) gave_up.push_back(q);
  if (!gave_up.empty())
    setup_timed_out("setup of " + text + " on rank " + std::to_string(rank_) + ": " + rank_list(gave_up) +
                    " gave up waiting for this rank (timeout " + std::to_string(opt_.timeout_s) +
                    " s); the plan was not built");
}

COLLC_INLINE std::string engine::peer_skipped_setup(std::uint64_t k) const {
  const std::uint64_t next = reg_->seq + 1;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const peer_report rep = reg_->look(q, next);
    if (rep.kind != peer_report::same_call && rep.kind != peer_report::failed) continue;
    const auto st = reg_->setup_of(q);
    if (!st || st->first >= k) continue;
    return "rank " + std::to_string(q) + " runs call #" + std::to_string(next) +
           (rep.plan_known ? " (" + reg_->plan_name_by_tag(rep.plan_tag) + ")" : std::string()) +
           " without this plan setup (its setups: " + std::to_string(st->first) + ", this one is #" +
           std::to_string(k) + ")";
  }
  return {};
}

COLLC_INLINE void engine::setup_timed_out(const std::string& msg) {
  reg_->refuse_setups(msg);
  timed_out(msg);
}

COLLC_INLINE void engine::timed_out(const std::string& msg) const {
  if (opt_.timeout_action == on_timeout::abort) {
    std::fprintf(stderr, "collc: %s; aborting\n", msg.c_str());
    std::fflush(stderr);
    MPI_Abort(reg_ ? reg_->control() : MPI_COMM_WORLD, 1);
  }
  throw error(errc::timeout, msg);
}

COLLC_INLINE void engine::wait_setup(MPI_Request& req, std::shared_ptr<void> buffer, MPI_Comm* made,
                                     const std::function<std::string()>& what) {
  if (registry::wait_request(req, opt_.timeout_s) == registry::request_wait::completed) return;
  reg_->keep_pending(req, std::move(buffer), made);
  setup_timed_out(what());
}

[[noreturn]] COLLC_INLINE void engine::report_disagreement(std::uint64_t h, const std::string& text) {
  struct entry {
    std::uint64_t hash;
    char text[504];
  };
  // Without blocking: a peer that gave up this setup after its timeout
  // never comes (the late rank's agreement completed with its abandoned one).
  struct exchange {
    entry mine{};
    std::vector<entry> all;
  };
  auto ex = std::make_shared<exchange>();
  ex->mine.hash = h;
  std::strncpy(ex->mine.text, text.c_str(), sizeof(ex->mine.text) - 1);
  ex->all.resize(static_cast<std::size_t>(size_));
  MPI_Request req = MPI_REQUEST_NULL;
  COLLC_MPI_CHECK(MPI_Iallgather(&ex->mine, sizeof(entry), MPI_BYTE, ex->all.data(), sizeof(entry), MPI_BYTE,
                                 reg_->control(), &req));
  wait_setup(req, ex, nullptr, [&] {
    return "timeout after " + std::to_string(opt_.timeout_s) + " s in the setup of " + text + " on rank " +
           std::to_string(rank_) +
           ": the ranks disagree on the plan, and not every rank joined the exchange that says how (a peer gave up "
           "this setup after its timeout?)";
  });
  const std::vector<entry>& all = ex->all;
  std::map<std::uint64_t, std::vector<int>> groups;
  std::vector<std::uint64_t> order;  // by first rank
  for (int r = 0; r < size_; ++r) {
    auto& g = groups[all[static_cast<std::size_t>(r)].hash];
    if (g.empty()) order.push_back(all[static_cast<std::size_t>(r)].hash);
    g.push_back(r);
  }
  // Appended piece by piece: g++ 12 -O3 reports a false -Wrestrict on
  // operator+ chains of std::string once they are inlined here.
  std::string msg = "ranks disagree on the plan being set up (rank ";
  msg += std::to_string(rank_);
  msg += " of ";
  msg += std::to_string(size_);
  msg += " reporting):";
  for (std::uint64_t hash : order) {
    const auto& ranks = groups[hash];
    msg += " ";
    msg += rank_list(ranks);
    msg += ": ";
    msg += all[static_cast<std::size_t>(ranks[0])].text;
    msg += ";";
  }
  throw error(errc::mismatch, msg);
}

COLLC_INLINE void engine::bind_all(int arena, std::size_t offset) {
  const std::size_t elem = shape_.elem_size;
  const std::size_t shm = lay_.shm_elems, scratch = lay_.scratch_elems, count = lay_.max_count;
  const int tag_ub = [&] {
    int* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(reg_->control(), MPI_TAG_UB, &ub, &found);
    return found && ub ? *ub : 32767;
  }();

  // Messages of a plan travel on its own communicator, so that the
  // transfers of two plans in flight at once cannot match each other.
  // (Every rank takes this branch alike: the programs hold every rank's code.)
  // Without blocking, as the agreement: a late rank whose agreement completed
  // with the round its peers abandoned (peers on other nodes, whose setup
  // state it cannot see) learns here, by a timeout, that they are gone.
  if (lay_.any_rank_messages) {
    auto made = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
    MPI_Request req = MPI_REQUEST_NULL;
    COLLC_MPI_CHECK(MPI_Comm_idup(reg_->control(), made.get(), &req));
    wait_setup(req, made, made.get(), [&] {
      return "timeout after " + std::to_string(opt_.timeout_s) + " s in the setup of " + name_ + " on rank " +
             std::to_string(rank_) +
             ": not every rank joined the duplication of its communicator (a peer gave up this setup after its "
             "timeout, or builds another plan)";
    });
    *comm_.out() = *made;
  }

  // The node segment (see the file comment: flags start at zero).
  const std::size_t flag_bytes = static_cast<std::size_t>(lay_.flags) * 64;
  // Beside the data, flag words sit in every copy's line: zero them all.
  segment_ = pool_->take(arena, offset, lay_.slot_bytes, lay_.signal_beside_data ? lay_.slot_bytes : flag_bytes, false);
  const std::vector<std::byte*>& slot = segment_.slot;

  scratch_bytes_ = scratch * elem;
  scratch_ = aligned_bytes(scratch_bytes_);
  stage_bytes_ = shape_.coll == collective::bcast ? 0 : count * elem;
  stage_ = aligned_bytes(stage_bytes_);

  bases_.assign(slot_shm0 + static_cast<std::size_t>(node_size_), nullptr);
  bases_[slot_scratch] = scratch_.get();
  const std::size_t data_offset =
      lay_.data_in_flag_line || lay_.signal_beside_data ? sizeof(std::uint64_t) : flag_bytes;
  shm_base_.assign(static_cast<std::size_t>(node_size_), nullptr);
  for (int l = 0; l < node_size_; ++l) {
    shm_base_[static_cast<std::size_t>(l)] =
        slot[static_cast<std::size_t>(l)] == nullptr ? nullptr : slot[static_cast<std::size_t>(l)] + data_offset;
    bases_[slot_shm0 + static_cast<std::size_t>(l)] = shm_base_[static_cast<std::size_t>(l)];
  }

  bind_context ctx;
  ctx.prog_rank = prog_rank_;
  ctx.node_first = node_first_;
  ctx.node_size = node_size_;
  ctx.flags = lay_.flags;
  ctx.elem_size = elem;
  ctx.shm_capacity = shm;
  ctx.scratch_capacity = scratch;
  ctx.comm_of_prog = map_.comm_of_prog;
  ctx.comm_rank = rank_;
  ctx.tag_ub = tag_ub;
  ctx.flag_lines.resize(static_cast<std::size_t>(node_size_ * lay_.flags));
  for (int l = 0; l < node_size_; ++l)
    for (int f = 0; f < lay_.flags; ++f)
      ctx.flag_lines[static_cast<std::size_t>(l * lay_.flags + f)] =
          reinterpret_cast<std::uint64_t*>(slot[static_cast<std::size_t>(l)] + static_cast<std::size_t>(f) * 64);
  // Exactly the programs of lay_.runs (the ones COLLC_ENABLE_CHECKS proves),
  // alternating waits and guards included: nothing is rewritten here.
  in_place_safe_ = lay_.runs.in_place;
  has_transfers_ = false;
  for (const auto& p : lay_.runs.programs) {
    progs_.push_back(bind(p, ctx));
    has_transfers_ = has_transfers_ || !progs_.back().transfers.empty();
  }
  sig_base_.assign(static_cast<std::size_t>(node_size_ * lay_.flags), 0);
  own_.assign(static_cast<std::size_t>(lay_.flags), 0);
  flag_word_mask_ = static_cast<std::uint64_t>(lay_.flag_words - 1);
  flag_word_stride_ = lay_.flag_word_stride();
  // With one program every execution signals alike (c per flag and rank), so
  // a wait's target is c * epoch + value: its signal is in execution
  // epoch + floor((value - 1) / c).
  if (flag_word_mask_ != 0)
    for (auto& p : progs_)
      for (auto& o : p.ops)
        if (o.code == opcode::wait) {
          const std::int64_t c = std::max<std::int64_t>(p.signals[o.index], 1), v = o.value - 1;
          o.exec_offset = static_cast<std::int32_t>(v >= 0 ? v / c : -((-v + c - 1) / c));
        }
  // Bind transfers on fixed buffers (shm, scratch) once.
  for (auto& p : progs_)
    for (auto& t : p.transfers)
      if (t.slot >= slot_scratch) bind_transfer(t);

  // Spin budget: a core per rank of the physical node, or share them.
  spin_ = oversubscribed() ? 16 : 2048;
}

COLLC_INLINE void engine::check_signal_call(const bound_op& o, std::uint64_t word, std::int64_t target) {
  const auto delta =
      static_cast<std::int16_t>(static_cast<std::uint16_t>((word & flag_call_mask) - (call_.seq & flag_call_mask)));
  // The peer ran ahead (it has signalled more, in a later call). Its stamp
  // for this call says which plan it ran here, but its ring keeps only its
  // last registry_ring calls: from that many calls ahead the stamp is gone,
  // and reading the line the peer rewrites every call would only cost a
  // cache-line transfer per call (a bcast root that runs ahead over its shm
  // ring: half of the reader's time).
  if (signals_of(word) > target && delta >= registry_ring) return;
  const int peer = map_.comm_of_prog[static_cast<std::size_t>(o.peer)];
  const peer_report rep = reg_->look(peer, call_.seq);
  const bool other_plan = rep.plan_known && rep.plan_tag != plan_tag(plan_id_);
  if (signals_of(word) > target && delta > 0 && !other_plan) return;  // ran ahead, same plan in this call
  throw error(errc::mismatch,
              "mismatched collective calls: rank " + std::to_string(rank_) + " in call #" + std::to_string(call_.seq) +
                  " (" + name_ + ") waited for signal " + std::to_string(target - sig_base_[o.index]) + " of rank " +
                  std::to_string(peer) + " at instruction " + std::to_string(o.source) + ", which rank " +
                  std::to_string(peer) + " gave in its call #" +
                  std::to_string(static_cast<std::int64_t>(call_.seq) + delta) +
                  (other_plan ? "; in call #" + std::to_string(call_.seq) + " rank " + std::to_string(peer) + " runs " +
                                    reg_->plan_name_by_tag(rep.plan_tag)
                              : std::string()) +
                  " (the ranks call their plans in different orders)");
}

COLLC_INLINE void engine::check_message_call(const bound_op& o, int peer) {
  const peer_report rep = reg_->look(peer, call_.seq);
  if (rep.kind == peer_report::failed && !(rep.plan_known && rep.plan_tag != plan_tag(plan_id_))) {
    call_.origin = rep.origin;
    throw error(rep.failure, name_ + ": rank " + std::to_string(peer) + " abandoned call #" +
                                 std::to_string(call_.seq) + " after an error (" + std::string(to_string(rep.failure)) +
                                 ")" + raised_by(peer, rep.origin));
  }
  if (rep.kind == peer_report::behind || (rep.plan_known && rep.plan_tag != plan_tag(plan_id_)))
    throw error(errc::mismatch,
                "mismatched collective calls: rank " + std::to_string(rank_) + " in call #" +
                    std::to_string(call_.seq) + " (" + name_ + ") received a message of this plan from rank " +
                    std::to_string(peer) + " at instruction " + std::to_string(o.source) + ", but rank " +
                    std::to_string(peer) +
                    (rep.kind == peer_report::behind ? std::string(" has not started that call")
                                                     : " ran " + reg_->plan_name_by_tag(rep.plan_tag) + " in it") +
                    " (the ranks call their plans in different orders)");
}

template <class Ready>
void engine::block_until(Ready ready, const bound_op& o, int peer, const char* what, std::int64_t target) {
  wait_until(
      spin_, ready, [&](double waited) { slow_check(o, peer, what, target, waited); }, [&] { progress(); });
}

COLLC_INLINE void engine::progress() {
  progress_mpi();
  turns(reg_.get(), this);
}

COLLC_INLINE void engine::give_turns(MPI_Comm comm) {
  std::shared_ptr<registry> own = comm == MPI_COMM_NULL ? nullptr : registry_find(comm);
  turns(own.get(), nullptr);
}

COLLC_INLINE void engine::turns(registry* own, const engine* skip) {
  if (own) step_list(own->started, skip);
  if (!registry::one_thread_calls_mpi()) return;
  auto& live = registry::live();
  const std::unique_lock<std::mutex> lock(live.m, std::try_to_lock);  // a registry being made or freed: next turn
  if (!lock.owns_lock()) return;
  for (registry* r : live.all)
    if (r != own) step_list(r->started, skip);
}

COLLC_INLINE void engine::step_list(std::vector<engine*>& list, const engine* skip) {
  // Backwards: a plan that ends leaves the list, which moves only the entries after it.
  for (std::size_t i = list.size(); i-- > 0;)
    if (i < list.size() && list[i] != skip) list[i]->step_from_other();
}

COLLC_INLINE void engine::step_from_other() noexcept {
  try {
    (void)step_(*this);
  } catch (...) {
    unreported_ = std::current_exception();  // advance() failed the plan; its owner hears of it (set_stepper)
  }
}

COLLC_INLINE void engine::progress_mpi() const {
  // Nothing is ever sent point to point on the control communicator (collc's
  // messages use comm_, its own duplicate), so this probe cannot match: it
  // runs the progress engine and returns.
  int flag = 0;
  COLLC_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, reg_->control(), &flag, MPI_STATUS_IGNORE));
}

COLLC_INLINE void engine::test_sends(bound_program& bp) {
  for (transfer& t : bp.transfers)
    if (t.active && t.is_send) test(t);
}

COLLC_INLINE bool engine::wait_flag(bound_program& bp, const bound_op& o, const std::uint64_t* at_word,
                                    std::int64_t target, bool block, std::uint64_t& word) {
  if (!block) {
    test_sends(bp);  // a caller polling test() progresses its sends too
    return false;
  }
  const int peer = map_.comm_of_prog[static_cast<std::size_t>(o.peer)];
  int poll = 0;
  block_until(
      [&] {
        if ((++poll & 63) == 0) test_sends(bp);
        word = load(at_word);
        return signals_of(word) >= target;
      },
      o, peer, "a signal", target);
  return true;
}

COLLC_INLINE void engine::slow_check(const bound_op& o, int peer, const char* what, std::int64_t target,
                                     double waited) {
  auto where = [&] {
    std::string s = "rank " + std::to_string(rank_) + " waits for " + what + " from rank " + std::to_string(peer) +
                    " at instruction " + std::to_string(o.source) + " (";
    if (o.code == opcode::wait)
      s += "flag " + std::to_string(o.index % static_cast<std::uint32_t>(std::max(lay_.flags, 1))) +
           " >= " + std::to_string(target) + ", now " + std::to_string(signals_now(o.flag)) + ", ";
    s += "execution " + std::to_string(call_.exec + 1) + "/" + std::to_string(lay_.runs.executions_per_call) +
         " of call #" + std::to_string(call_.seq) + ", " + name_ + ")";
    return s;
  };
  const peer_report rep = reg_->look(peer, call_.seq);
  if (rep.kind == peer_report::failed) {
    call_.origin = rep.origin;
    throw error(rep.failure, where() + ": rank " + std::to_string(peer) + " abandoned this call after an error (" +
                                 std::string(to_string(rep.failure)) + ")" + raised_by(peer, rep.origin));
  }
  // A peer that gave up on this plan in an earlier call never signals it again.
  if (const peer_failure f = reg_->failure_of(peer); f.seq != 0 && f.plan == plan_id_ && f.seq <= call_.seq) {
    call_.origin = f.origin;
    throw error(f.code, where() + ": rank " + std::to_string(peer) + " abandoned this plan in call #" +
                            std::to_string(f.seq) + " after an error (" + std::string(to_string(f.code)) + ")" +
                            raised_by(peer, f.origin));
  }
  if (rep.plan_known && rep.plan_tag != plan_tag(plan_id_))
    throw error(errc::mismatch, "mismatched collective calls: " + where() + ", but rank " + std::to_string(peer) +
                                    " runs " + reg_->plan_name_by_tag(rep.plan_tag) + " in that call");
  // A peer that has not started this call, yet entered more plan setups than
  // this rank: it builds a plan where this rank ran one it had (the ranks
  // called different collectives; in a correct program the setups before a
  // call are the same on every rank). It waits in that setup for this rank,
  // which never comes there.
  if (rep.kind == peer_report::behind)
    if (const auto st = reg_->setup_of(peer); st && st->first > reg_->setups)
      throw error(errc::mismatch, "mismatched collective calls: " + where() + ", but rank " + std::to_string(peer) +
                                      " has not started that call and sets up a plan instead (its setup #" +
                                      std::to_string(st->first) + "; this rank's last: #" +
                                      std::to_string(reg_->setups) + ")");
  if (waited > opt_.timeout_s) timed_out("timeout after " + std::to_string(waited) + " s: " + where());
}

COLLC_INLINE std::string engine::raised_by(int peer, int origin) {
  return origin >= 0 && origin != peer ? ", first raised by rank " + std::to_string(origin) : std::string();
}

COLLC_INLINE error engine::foreign_failure() const {
  const std::string head = name_ + ": the call was abandoned after an exception from inside it (the operator's?)";
  try {
    throw;
  } catch (const std::exception& x) {
    return error(errc::invalid_argument, head + ": " + x.what());
  } catch (...) {
    return error(errc::invalid_argument, head);
  }
}

COLLC_INLINE void engine::fail(const error& e) {
  leave_started();
  call_.failed = true;
  call_.active = false;
  call_.pending = false;
  call_.failure = e.what();
  reg_->failed_calls.insert(call_.seq);
  close_call();
  reg_->mark_failed(call_.seq, e.code(), plan_id_, call_.origin < 0 ? rank_ : call_.origin);
}

COLLC_INLINE void engine::wait_transfer(transfer& t, const bound_op& at, const char* what) {
  block_until([&] { return test(t); }, at, t.peer, what);
}

COLLC_INLINE std::string engine::describe() const {
  std::string s = name_.empty() ? signature_text() : name_;
  s += "\n  rank ";
  s += std::to_string(rank_);
  s += " of ";
  s += std::to_string(size_);
  s += ", program rank ";
  s += std::to_string(prog_rank_);
  s += ", node ";
  s += std::to_string(node_id_);
  s += " of ";
  s += std::to_string(map_.nodes);
  s += " (node ranks ";
  s += std::to_string(node_first_);
  s += "..";
  s += std::to_string(node_first_ + node_size_ - 1);
  s += ")\n  layout: ";
  s += lay_.to_string(shape_.elem_size);
  s += "\n  scratch ";
  s += std::to_string(scratch_bytes_);
  s += " B, staging ";
  s += std::to_string(stage_bytes_);
  s += " B, in place ";
  s += in_place_safe_ ? "direct" : "staged";
  for (std::size_t k = 0; k < progs_.size(); ++k) {
    const bound_program& bp = progs_[k];
    s += "\n  program ";
    s += std::to_string(k);
    s += ": ";
    s += std::to_string(bp.ops.size());
    s += " ops, count ";
    s += std::to_string(bp.count);
    for (std::size_t i = 0; i < bp.transfers.size(); ++i) {
      const transfer& t = bp.transfers[i];
      s += "\n    ";
      s += t.is_send ? "send to rank " : "recv from rank ";
      s += std::to_string(t.peer);
      s += " tag ";
      s += std::to_string(t.tag);
      s += ", ";
      s += std::to_string(t.count);
      s += " x ";
      s += t.owned_type ? "indexed type" : "bytes";
      s += " at slot ";
      s += std::to_string(t.slot);
      s += " + ";
      s += std::to_string(t.offset);
      if (std::find(bp.early_receives.begin(), bp.early_receives.end(), i) != bp.early_receives.end())
        s += ", posted when the execution starts";
    }
  }
  return s;
}

}  // namespace collc::mpi
