#pragma once
/// \file
/// The type-erased core of an MPI plan: setup (registry, placement, signature
/// agreement, chunk choice, segment, binding) and execution (the chunk
/// pipeline and the bytecode interpreter, the only part templated on T and
/// Op). collc::plan<T, Op> (plan.hpp) is a thin typed handle around it.
///
/// Node segment: a range leased from the communicator's segment pool
/// (segments.hpp: shared windows on the node communicator, reused by later
/// plans); rank l's part is [flags x 64-byte lines][shm data]. A flag word
/// is (signals << 16 | call number mod 2^16 of the last signal): signals
/// since the plan was built, only growing; a wait's target is
///   base(l, f) + value,  base = signals of l on f in all earlier executions,
/// which is the epoch * signals_per_execution + value rule of ir/program.hpp
/// for any sequence of programs (ir/sequence.hpp), and a wait for a signal
/// of this execution checks the call bits (a peer that signalled in another
/// call runs the plans in another order: errc::mismatch). Flags start at zero:
/// a range never leased is zero since its arena was zeroed, and a range
/// leased before gets its flag lines zeroed with a node barrier (an earlier
/// plan's data there could read as any flag value; segments.hpp). Open MPI
/// (osc/sm: backing file unlinked once mapped) and MPICH (SysV segment marked
/// for removal once attached) leave nothing behind when a rank is killed,
/// which tests/mpi/kill_check.cmake checks, so the window is used as is.
///
/// Large messages: lowering is asked for a chunk of C elements (per rank, or
/// per block for reduce_scatter / allgather) with C chosen so that shm and
/// scratch of one rank stay within options.chunk_bytes (ir::lower_in_chunks);
/// a call runs the chunk program for chunks 0, 1, ... and a tail program for
/// the remainder, each run one execution, with the user pointers advanced by
/// the chunk base; the first execution after a switch of programs runs a
/// guarded copy (ir::make_runs). The programs bound are exactly those of
/// ir::make_runs, which COLLC_ENABLE_CHECKS proves in the order they run.
///
/// Waiting: spin (cpu pause) for a bounded number of polls, then yield the
/// core between polls so oversubscribed nodes progress. After the spin, about
/// every millisecond a waiter looks at the registry (mismatch, failed peer)
/// and at the clock (timeout).
#include <collc/backend/mpi/binder.hpp>
#include <collc/backend/mpi/handles.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/backend/mpi/registry.hpp>
#include <collc/backend/mpi/topology.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ir/sequence.hpp>
#include <collc/ir/verify.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace collc::detail {

/// What a plan computes, independent of the schedule: the part of the
/// signature every rank must agree on.
struct plan_shape {
  collective coll = collective::allreduce;
  std::size_t count = 0;  ///< MPI meaning (per block for reduce_scatter / allgather)
  int root = 0;           ///< communicator rank (reduce / bcast)
  std::size_t elem_size = 1;
  std::string type_name;
  std::string op_name;
  bool commutative = true;
  std::string schedule;  ///< the requested schedule, "default" for the selector's choice
};

/// One lowering request, in program ranks.
struct chunk_request {
  int ranks = 1;
  std::size_t count = 0;
  std::size_t block_stride = 0;
  std::size_t granule = 1;
  int root = 0;  ///< program rank
  std::vector<int> node_of;
};

using lower_fn = std::function<ir::program(const chunk_request&)>;

/// Private memory aligned to a cache line.
class aligned_bytes {
 public:
  aligned_bytes() = default;
  explicit aligned_bytes(std::size_t n)
      : p_(n == 0 ? nullptr : static_cast<std::byte*>(::operator new (n, std::align_val_t{64}))) {}
  aligned_bytes(aligned_bytes&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  aligned_bytes& operator=(aligned_bytes&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~aligned_bytes() {
    if (p_) ::operator delete (p_, std::align_val_t{64});
  }
  [[nodiscard]] std::byte* get() const noexcept { return p_; }

 private:
  std::byte* p_ = nullptr;
};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline std::uint64_t fnv1a(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// "0-2,5,7" for a sorted list of ranks.
inline std::string rank_list(const std::vector<int>& r) {
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

/// The element kernels the interpreter runs for copy and reduce: inline on
/// the calling thread. Another backend passes an object with the same three
/// members to run them elsewhere (backend/kokkos: kernels on an execution
/// space); `sync()` is called wherever the results of earlier kernels must be
/// complete: before a signal, a send or a recv, and at the end of each
/// execution (before the staging copy-out and the next execution).
struct host_kernels {
  template <class T>
  void copy(T* dst, const T* src, std::size_t n) const {
    copy_elems(dst, src, n);
  }
  template <class T, class Op>
  void reduce(T* dst, const T* a, const T* b, std::size_t n, const Op& op) const {
    reduce_into(dst, a, b, n, op);
  }
  void sync() const noexcept {}
};

/// A flag word: the signals given so far, above the number of the call (mod
/// 2^16) that gave the last one, so a wait sees at no cost whether its peer
/// signalled in the same call (plans called in different orders do not).
inline constexpr std::uint64_t flag_call_mask = 0xFFFF;
constexpr std::uint64_t flag_word(std::uint64_t signals, std::uint64_t call) noexcept {
  return signals << 16 | (call & flag_call_mask);
}
constexpr std::int64_t signals_of(std::uint64_t word) noexcept { return static_cast<std::int64_t>(word >> 16); }

/// True once MPI_Finalize has begun: it deletes MPI_COMM_SELF's attributes
/// first (MPI-3.1, 8.7.1), whose delete callback sets this, so a plan used
/// afterwards throws instead of touching freed shared windows.
inline std::atomic<bool>& finalize_seen() noexcept {
  static std::atomic<bool> seen{false};
  return seen;
}
inline bool finalized() noexcept { return finalize_seen().load(std::memory_order_relaxed); }
inline int note_finalize(MPI_Comm, int, void*, void*) {
  finalize_seen().store(true, std::memory_order_relaxed);
  return MPI_SUCCESS;
}
inline void watch_finalize() {
  static const bool watching = [] {
    int kv = MPI_KEYVAL_INVALID;
    COLLC_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, note_finalize, &kv, nullptr));
    COLLC_MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, kv, nullptr));
    return true;
  }();
  (void)watching;
}

/// Online CPUs of this node: the cores the ranks of a node share.
inline int online_cores() noexcept { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

class engine {
 public:
  /// Setup part 1: registry and placement (collective over `comm` only for
  /// the communicator's first plan).
  /// Nothing is agreed yet: build() does that, in one allreduce.
  engine(MPI_Comm comm, plan_shape shape, const resolved_options& opt) : shape_(std::move(shape)), opt_(opt) {
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
    reg_ = registry_for(comm, opt_.timeout_s);
    const bool order_sensitive = reduces(shape_.coll) && !shape_.commutative;
    map_ = make_placement(node_keys(reg_->physical_leaders(), opt_.ranks_per_node, opt_.place), order_sensitive);
    prog_rank_ = map_.prog_of_comm[static_cast<std::size_t>(rank_)];
    node_id_ = map_.node_of[static_cast<std::size_t>(prog_rank_)];
    node_first_ = map_.node_first(node_id_);
    node_size_ = map_.node_size(node_id_);
    // The pool of this placement, if an earlier plan made it (a new one is
    // made after agreement: splitting is collective, and ranks that disagree
    // on the placement must get errc::mismatch, not a hang).
    pool_ = reg_->find_pool(map_);
  }

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Releases the segment range (local); frees the plan's own communicator if
  /// it has one, and the registry's windows if it was the communicator's last
  /// plan (collective): every rank destroys its plans in the same order, as
  /// with MPI_Comm_free.
  ~engine() {
    reg_->plan_names.erase(plan_id_);
    if (pool_) pool_->release(segment_);
    if (mpi_finalized()) return;  // too late to free MPI objects; the process is ending
    for (auto& p : progs_)
      for (auto& t : p.transfers) {
        if (t.request == MPI_REQUEST_NULL) continue;
        if (t.active && !t.is_send) {
          MPI_Cancel(&t.request);
        }
        MPI_Request_free(&t.request);
      }
    comm_.reset();
  }

  // --- what the typed plan and the tests ask --------------------------------

  [[nodiscard]] const placement_map& placement() const noexcept { return map_; }
  [[nodiscard]] int program_rank() const noexcept { return prog_rank_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const plan_shape& shape() const noexcept { return shape_; }
  [[nodiscard]] const resolved_options& options() const noexcept { return opt_; }
  [[nodiscard]] std::int64_t id() const noexcept { return plan_id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool active() const noexcept { return active_; }
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  /// Like MPI_Start / MPI_Wait: a started call stays pending until wait()
  /// (or a successful test()) acknowledges it, even if it already completed.
  [[nodiscard]] bool pending() const noexcept { return pending_; }
  void acknowledge() noexcept { pending_ = false; }
  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunk_; }
  [[nodiscard]] std::size_t executions_per_call() const noexcept { return executions_per_call_; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  /// Bytes of the node segment slot (flags + shm) and of the scratch of this rank.
  [[nodiscard]] std::size_t shm_bytes() const noexcept { return slot_bytes_; }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return scratch_bytes_; }
  [[nodiscard]] std::size_t stage_bytes() const noexcept { return stage_bytes_; }
  [[nodiscard]] const std::vector<ir::program>& programs() const noexcept { return lowered_; }
  [[nodiscard]] bool sends_messages() const noexcept { return has_messages_; }
  /// Cores of this rank's physical node (online CPUs).
  [[nodiscard]] int node_cores() const noexcept { return online_cores(); }
  /// Whether this communicator has more ranks on this rank's physical node than it has cores.
  [[nodiscard]] bool oversubscribed() const noexcept {
    int node_ranks = 0;
    for (int r = 0; r < size_; ++r) node_ranks += reg_->physical_leader(r) == reg_->physical_leader(rank_);
    return node_ranks > node_cores();
  }

  /// Setup part 2, collective over the communicator: checks the shape, calls
  /// `resolve` (the schedule's name, e.g. after default selection) and lowers
  /// (chunk and tail) with `lower`, then agrees with every rank in one
  /// allreduce on the signature, the resolved schedule and the segment range,
  /// and binds. An error in the local part (a bad root, a factor set that
  /// does not fit, ...) does not leave the others waiting: it is agreed like
  /// the rest, so every rank throws, its own error where all failed alike,
  /// errc::mismatch naming who differs otherwise.
  void build(const std::function<std::string()>& resolve, const lower_fn& lower) {
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

  /// For tests and tools: bind programs given directly (count = programs[0].count,
  /// one execution per call, or chunk + tail when two are given). Collective.
  void build_from(std::vector<ir::program> programs) {
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

  // --- one call ---------------------------------------------------------------

  /// Starts a call. `send`/`recv` are the user's buffers (recv may be null
  /// with `discard_recv`: reduce at a non-root); `in_place` means they are the
  /// same memory in MPI's in-place layout (see plan.hpp).
  void begin(const void* send, void* recv, bool in_place, bool discard_recv) {
    refuse_unusable();
    if (pending_) throw error(errc::invalid_argument, name_ + ": start() called again before wait()");
    seq_ = ++reg_->seq;
    reg_->stamp(seq_, plan_id_);
    try {
      check_alarm();
    } catch (const error& e) {
      fail(e);
      throw;
    }
    pending_ = true;
    user_send_ = static_cast<const std::byte*>(send);
    user_recv_ = static_cast<std::byte*>(recv);
    discard_recv_ = discard_recv;
    stage_recv_ = discard_recv;
    stage_send_ = false;
    if (in_place && !in_place_safe_) {
      if (shape_.coll == collective::reduce_scatter)
        stage_recv_ = true;
      else
        stage_send_ = true;
    }
    exec_ = 0;
    exec_started_ = false;
    active_ = executions_per_call_ > 0;
  }

  /// Runs the call as far as possible; with `block`, to completion. Returns
  /// whether the call is complete. Any collc::error marks the plan failed
  /// and tells peers waiting on this rank (through the registry).
  template <class T, class Op, class Kernels = host_kernels>
  bool advance(const Op& op, bool block, const Kernels& kernels = {}) {
    if (!active_) return true;
    if (finalized()) throw error(errc::invalid_argument, name_ + ": called after MPI_Finalize");
    try {
      while (exec_ < executions_per_call_) {
        const std::size_t which = runs_.program_for(exec_, last_program_);
        bound_program& bp = progs_[which];
        if (!exec_started_) {
          prepare(bp);
          exec_started_ = true;
          pc_ = 0;
        }
        if (!interpret<T>(bp, op, block, kernels)) return false;
        kernels.sync();
        if (!complete_sends(bp, nullptr, block)) return false;
        finish(bp);
        exec_started_ = false;
        last_program_ = static_cast<int>(which);
        ++exec_;
      }
      active_ = false;
      check_alarm();  // a peer found this call mismatched while this rank needed nothing from it
      return true;
    } catch (const error& e) {
      fail(e);
      throw;
    }
  }

 public:
  /// A call this rank cannot make (an argument error found before begin()):
  /// takes the call's number and abandons it, so peers waiting on this rank
  /// in it fail at once naming this rank instead of timing out. The plan is
  /// unusable afterwards, on every rank, as after any error in a call.
  void abandon(const error& e) {
    refuse_unusable();
    if (pending_) return;  // the call in progress is not this one
    seq_ = ++reg_->seq;
    reg_->stamp(seq_, plan_id_);
    fail(e);
  }

 private:
  /// Refuses a call of a plan that cannot run: after MPI_Finalize, or after an error.
  void refuse_unusable() const {
    if (finalized()) throw error(errc::invalid_argument, name_ + ": called after MPI_Finalize");
    if (failed_) throw error(errc::invalid_argument, name_ + " is unusable after an earlier error: " + failure_);
  }

  /// The node's alarm changed (some rank abandoned a call): is it this plan,
  /// or a call this rank made that a peer found mismatched? One load of a
  /// line written only on errors when nothing happened.
  void check_alarm() {
    if (!reg_->abandoned.empty()) {
      auto it = reg_->abandoned.find(plan_id_);
      if (it != reg_->abandoned.end() && it->second.seq <= seq_) {
        origin_ = it->second.origin;
        throw error(it->second.code, name_ + ": " + it->second.why + ", so call #" + std::to_string(seq_) +
                                         " cannot complete");
      }
    }
    const std::uint64_t alarm = reg_->alarm();
    if (alarm == reg_->seen_alarm) return;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_ || !reg_->on_node(q)) continue;
      const peer_failure f = reg_->failure_of(q);
      if (f.seq == 0) continue;
      const std::string why = "rank " + std::to_string(q) + " abandoned " + reg_->plan_name(f.plan) + " in call #" +
                              std::to_string(f.seq) + " after an error (" + std::string(to_string(f.code)) + ")" +
                              raised_by(q, f.origin);
      reg_->abandoned.emplace(f.plan, registry::abandoned_plan{f.code, f.seq, why, f.origin});
      if (f.plan == plan_id_ && f.seq <= seq_) {
        origin_ = f.origin;
        throw error(f.code, name_ + ": " + why + ", so call #" + std::to_string(seq_) + " cannot complete");
      }
      if (f.code == errc::mismatch && f.seq <= seq_ && f.seq > reg_->reported_mismatch) {
        reg_->reported_mismatch = f.seq;
        const auto [tag, known] = reg_->own_stamp(f.seq);
        throw error(errc::mismatch, "mismatched collective calls: rank " + std::to_string(q) + " found call #" +
                                        std::to_string(f.seq) + " mismatched; rank " + std::to_string(rank_) +
                                        " ran " + (known ? reg_->plan_name_by_tag(tag) : std::string("?")) +
                                        " in that call (reported in call #" + std::to_string(seq_) + ", " + name_ +
                                        ")");
      }
    }
    reg_->seen_alarm = alarm;
  }

  // --- setup ------------------------------------------------------------------

  [[nodiscard]] std::string signature_text() const {
    return std::string(to_string(shape_.coll)) + " count=" + std::to_string(shape_.count) +
           " type=" + shape_.type_name + "(" + std::to_string(shape_.elem_size) + " B) op=" + shape_.op_name +
           " schedule=" + shape_.schedule +
           (shape_.coll == collective::reduce || shape_.coll == collective::bcast
                ? " root=" + std::to_string(shape_.root)
                : "") +
           " ranks_per_node=" + std::to_string(opt_.ranks_per_node) +
           (opt_.place == collc::placement::round_robin ? " placement=round_robin" : "") +
           " chunk_bytes=" + std::to_string(opt_.chunk_bytes);
  }

  /// Argument checks that need the communicator (every rank checks alike).
  void check_shape() const {
    if ((shape_.coll == collective::reduce || shape_.coll == collective::bcast) &&
        (shape_.root < 0 || shape_.root >= size_))
      throw error(errc::invalid_argument, "root " + std::to_string(shape_.root) +
                                              " is not a rank of the communicator (size " + std::to_string(size_) +
                                              ")");
    const bool blocked = shape_.coll == collective::reduce_scatter || shape_.coll == collective::allgather;
    const std::size_t blocks = blocked ? static_cast<std::size_t>(size_) : 1;
    if (shape_.elem_size == 0 || shape_.count > SIZE_MAX / blocks / shape_.elem_size)
      throw error(errc::overflow, "count " + std::to_string(shape_.count) + " x " + std::to_string(blocks) +
                                      " blocks of " + std::to_string(shape_.elem_size) + "-byte elements overflows");
  }

  /// Lowers the chunk program (and the tail program) into lowered_
  /// (ir::lower_in_chunks: the chunking the sequence tests prove).
  void lower_chunks(const lower_fn& lower) {
    if (shape_.count == 0) return;
    const bool blocked = shape_.coll == collective::reduce_scatter || shape_.coll == collective::allgather;
    chunk_request q;
    q.ranks = size_;
    q.granule = shape_.elem_size <= 64 && 64 % shape_.elem_size == 0 ? 64 / shape_.elem_size : 1;
    q.root = (shape_.coll == collective::reduce || shape_.coll == collective::bcast)
                 ? map_.prog_of_comm[static_cast<std::size_t>(shape_.root)]
                 : 0;
    if (map_.nodes > 1) q.node_of = map_.node_of;
    ir::chunked c = ir::lower_in_chunks(shape_.count, shape_.elem_size, blocked ? static_cast<std::size_t>(size_) : 1,
                                        opt_.chunk_bytes, [&](std::size_t n, std::size_t stride) {
                                          q.count = n;
                                          q.block_stride = stride;
                                          return lower(q);
                                        });
    chunk_ = c.chunk;
    lowered_ = std::move(c.programs);
  }

  /// With checks on (COLLC_ENABLE_CHECKS): proves the programs this plan
  /// binds in the order it runs them (three calls, up to three chunks each:
  /// every window of three executions the plan can run), as they run: not in
  /// place, and in place where the plan runs in place.
  void verify_runs() const {
    if (runs_.programs.empty()) return;
    const bool commutative = shape_.commutative || !reduces(shape_.coll);
    const std::vector<std::size_t> order = runs_.sequence(3, 3);
    for (bool in_place : {false, true}) {
      if (in_place && !runs_.in_place) continue;
      const ir::verify_result r = ir::verify_sequence(
          runs_.programs, order,
          {.commutative = commutative, .in_place = in_place, .shm_copies = runs_.alternate ? 2 : 1});
      if (!r)
        throw error(errc::verification_failed, "COLLC_ENABLE_CHECKS: the programs of " + signature_text() +
                                                   (in_place ? " (in place)" : "") + " fail " +
                                                   std::string(ir::to_string(r.failed)) + ": " + r.to_string());
    }
  }

  /// Sizes from the lowered programs: flags, shm, scratch, the segment slot.
  void layout() {
    flags_ = 0;
    shm_elems_ = scratch_elems_ = max_count_ = 0;
    runs_ = {};
    for (const auto& p : lowered_) {
      if (p.ranks != size_)
        throw error(errc::invalid_argument,
                    "program for " + std::to_string(p.ranks) + " ranks on a communicator of " + std::to_string(size_));
      flags_ = std::max(flags_, p.flags);
      shm_elems_ = std::max(shm_elems_, p.shm_count);
      scratch_elems_ = std::max(scratch_elems_, p.scratch_count);
      max_count_ = std::max(max_count_, p.count);
    }
    // A one-flag program whose shm (both halves when alternating) fits in the
    // 56 bytes after its flag keeps it in the flag's line: a peer that sees
    // the signal has the data in the same cache-line transfer (tiny messages
    // are hand-off bound).
    const std::size_t data = shm_elems_ * shape_.elem_size;
    const auto messages = [](const ir::program& p) {
      for (const auto& code : p.code)
        for (const auto& ins : code)
          if (std::holds_alternative<ir::send>(ins) || std::holds_alternative<ir::recv>(ins)) return true;
      return false;
    };
    sends_messages_ = std::any_of(lowered_.begin(), lowered_.end(), messages);
    // Shared-memory programs up to 16 KiB of shm per rank alternate between
    // two copies by execution parity (ir::alternates, the paper's `alt`).
    // Where both copies do not fit in the flag line (29 to 56 bytes),
    // alternating wins: on an oversubscribed node the entry wait costs a
    // context switch (P = 4, 32 B: 10 us alternating, 20 us with the payload
    // in the flag line); on two ranks with a core each the payload in the
    // line gained little (32 B: 0.47-0.50 us against 0.53 us).
    alternate_ = ir::alternates(lowered_, shape_.elem_size, opt_.chunk_bytes);
    // The programs bound and the order they run in (ir/sequence.hpp).
    runs_ = ir::make_runs({lowered_, chunk_}, shape_.count, alternate_);
    full_chunks_ = runs_.full_chunks;
    executions_per_call_ = runs_.executions_per_call;
    for (const auto& p : runs_.programs) flags_ = std::max(flags_, p.flags);
    const std::size_t copies = alternate_ ? 2 : 1;
    data_in_flag_line_ = flags_ == 1 && data > 0 && 8 + copies * data <= 64 && shape_.elem_size <= 8;
    shm_half_ = data_in_flag_line_ ? data : (data + 63) / 64 * 64;
    slot_bytes_ = data_in_flag_line_ ? 64 : static_cast<std::size_t>(flags_) * 64 + copies * shm_half_;
  }

  /// The one agreement of setup (MPI_Allreduce MAX over the control
  /// communicator), then the segment and the binding. Agreed: the signature
  /// with the resolved schedule (or the local error) by hash, the call
  /// sequence number and the next plan id, and the segment range (every
  /// rank's proposal as max and -min, and its size).
  void settle(const std::string& resolved, const std::optional<error>& failure) {
    const std::string text = signature_text() + " -> " + resolved;
    const std::uint64_t h = fnv1a(text);
    const auto [arena, offset] =
        failure || pool_ == nullptr ? std::pair<int, std::size_t>{-1, 0} : pool_->propose(slot_bytes_);
    const auto a = static_cast<std::int64_t>(arena), o = static_cast<std::int64_t>(offset),
               n = static_cast<std::int64_t>(slot_bytes_);
    // The hash as two non-negative halves and their complements: all equal
    // iff every rank's maxima are its own values.
    const auto hi = static_cast<std::int64_t>(h >> 32), lo = static_cast<std::int64_t>(h & 0xFFFFFFFFu);
    const std::int64_t mine[11] = {
        hi, lo, 0xFFFFFFFF - hi, 0xFFFFFFFF - lo, static_cast<std::int64_t>(reg_->seq), reg_->next_plan_id, a, o, n,
        -a, -o};
    std::int64_t v[11];
    agree(mine, v, text);
    if (v[0] != hi || v[1] != lo || v[2] != 0xFFFFFFFF - hi || v[3] != 0xFFFFFFFF - lo) report_disagreement(h, text);
    if (failure) throw *failure;  // every rank failed alike (same text)
    reg_->seq = static_cast<std::uint64_t>(v[4]);
    plan_id_ = v[5];
    reg_->next_plan_id = plan_id_ + 1;
    name_ = "plan " + std::to_string(plan_id_) + " (" + text + ")";
    reg_->plan_names[plan_id_] = name_;
    if (v[8] != n)  // same signature and schedule, yet different programs: a bug, not a user error
      throw error(errc::mismatch, name_ + ": ranks lowered programs of different sizes (" + std::to_string(n) +
                                      " and " + std::to_string(v[8]) + " bytes of segment)");
    const bool agreed = arena >= 0 && v[6] == a && -v[9] == a && v[7] == o && -v[10] == o;
    if (pool_ == nullptr) {  // every rank alike: same placement, pools made in the same order
      pool_ = &reg_->pool_for(map_, node_id_, prog_rank_);
      if (pool_->node_rank() != prog_rank_ - node_first_ || pool_->node_size() != node_size_)
        throw error(errc::mpi_error, "node communicator does not match the placement (rank " +
                                         std::to_string(pool_->node_rank()) + " of " +
                                         std::to_string(pool_->node_size()) + ")");
    }
    bind_all(agreed ? arena : -1, offset);
  }

  /// The agreement's allreduce, without blocking: a rank that does not
  /// arrive within the timeout is errc::timeout naming the ranks of this
  /// node that did not enter this setup (the others' are not visible). A
  /// late rank whose peers gave up gets errc::timeout too, naming them.
  void agree(const std::int64_t (&mine)[11], std::int64_t (&out)[11], const std::string& text) {
    const std::uint64_t k = ++reg_->setups;
    reg_->mark_setup(k, false);
    // MPI writes the result when every rank contributed, maybe after this
    // rank gave up: heap memory the registry keeps in that case.
    auto values = std::make_unique<std::int64_t[]>(11);
    std::copy(std::begin(mine), std::end(mine), values.get());
    MPI_Request req = MPI_REQUEST_NULL;
    COLLC_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values.get(), 11, MPI_INT64_T, MPI_MAX, reg_->control(), &req));
    if (!registry::wait_request(req, opt_.timeout_s)) {
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
      reg_->keep_pending(req, std::move(values));
      std::string who = missing.empty() ? std::string("no rank of this node is missing")
                                        : rank_list(missing) + " did not arrive";
      if (others) who += " (ranks on other nodes are not visible from here)";
      throw error(errc::timeout, "timeout after " + std::to_string(opt_.timeout_s) + " s in the setup of " + text +
                                     " on rank " + std::to_string(rank_) + ": " + who +
                                     "; every rank must build the same plans in the same order");
    }
    std::copy(values.get(), values.get() + 11, std::begin(out));
    std::vector<int> gave_up;
    for (int q = 0; q < size_; ++q)
      if (const auto st = reg_->setup_of(q); q != rank_ && st && st->first == k && st->second) gave_up.push_back(q);
    if (!gave_up.empty())
      throw error(errc::timeout, "setup of " + text + " on rank " + std::to_string(rank_) + ": " +
                                     rank_list(gave_up) + " gave up waiting for this rank (timeout " +
                                     std::to_string(opt_.timeout_s) + " s); the plan was not built");
  }

  /// Everyone saw the disagreement (see settle()); gathers the signatures to
  /// say who differs and how, and throws errc::mismatch.
  [[noreturn]] void report_disagreement(std::uint64_t h, const std::string& text) {
    struct entry {
      std::uint64_t hash;
      char text[504];
    };
    entry mine{};
    mine.hash = h;
    std::strncpy(mine.text, text.c_str(), sizeof(mine.text) - 1);
    std::vector<entry> all(static_cast<std::size_t>(size_));
    COLLC_MPI_CHECK(
        MPI_Allgather(&mine, sizeof(entry), MPI_BYTE, all.data(), sizeof(entry), MPI_BYTE, reg_->control()));
    std::map<std::uint64_t, std::vector<int>> groups;
    std::vector<std::uint64_t> order;  // by first rank
    for (int r = 0; r < size_; ++r) {
      auto& g = groups[all[static_cast<std::size_t>(r)].hash];
      if (g.empty()) order.push_back(all[static_cast<std::size_t>(r)].hash);
      g.push_back(r);
    }
    std::string msg = "ranks disagree on the plan being set up (rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + " reporting):";
    for (std::uint64_t hash : order) {
      const auto& ranks = groups[hash];
      msg += " " + rank_list(ranks) + ": " + all[static_cast<std::size_t>(ranks[0])].text + ";";
    }
    throw error(errc::mismatch, msg);
  }

  /// Takes the segment range (`arena` < 0: a new arena) and binds the programs.
  void bind_all(int arena, std::size_t offset) {
    const std::size_t elem = shape_.elem_size;
    const std::size_t shm = shm_elems_, scratch = scratch_elems_, count = max_count_;
    const int tag_ub = [&] {
      int* ub = nullptr;
      int found = 0;
      MPI_Comm_get_attr(reg_->control(), MPI_TAG_UB, &ub, &found);
      return found && ub ? *ub : 32767;
    }();

    // Messages of a plan travel on its own communicator, so that the
    // transfers of two plans in flight at once cannot match each other.
    // (Every rank takes this branch alike: the programs hold every rank's code.)
    if (sends_messages_) COLLC_MPI_CHECK(MPI_Comm_dup(reg_->control(), comm_.out()));

    // The node segment (see the file comment: flags start at zero).
    const std::size_t flag_bytes = static_cast<std::size_t>(flags_) * 64;
    segment_ = pool_->take(arena, offset, slot_bytes_, flag_bytes, false);
    const std::vector<std::byte*>& slot = segment_.slot;

    scratch_bytes_ = scratch * elem;
    scratch_ = aligned_bytes(scratch_bytes_);
    stage_bytes_ = shape_.coll == collective::bcast ? 0 : count * elem;
    stage_ = aligned_bytes(stage_bytes_);

    bases_.assign(slot_shm0 + static_cast<std::size_t>(node_size_), nullptr);
    bases_[slot_scratch] = scratch_.get();
    const std::size_t data_offset = data_in_flag_line_ ? sizeof(std::uint64_t) : flag_bytes;
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
    ctx.flags = flags_;
    ctx.elem_size = elem;
    ctx.shm_capacity = shm;
    ctx.scratch_capacity = scratch;
    ctx.comm_of_prog = map_.comm_of_prog;
    ctx.comm_rank = rank_;
    ctx.tag_ub = tag_ub;
    ctx.flag_lines.resize(static_cast<std::size_t>(node_size_ * flags_));
    for (int l = 0; l < node_size_; ++l)
      for (int f = 0; f < flags_; ++f)
        ctx.flag_lines[static_cast<std::size_t>(l * flags_ + f)] =
            reinterpret_cast<std::uint64_t*>(slot[static_cast<std::size_t>(l)] + static_cast<std::size_t>(f) * 64);
    // Exactly the programs of runs_ (the ones COLLC_ENABLE_CHECKS proves),
    // alternating waits and guards included: nothing is rewritten here.
    in_place_safe_ = runs_.in_place;
    has_messages_ = false;
    for (const auto& p : runs_.programs) {
      progs_.push_back(bind(p, ctx));
      has_messages_ = has_messages_ || !progs_.back().transfers.empty();
    }
    sig_base_.assign(static_cast<std::size_t>(node_size_ * flags_), 0);
    own_.assign(static_cast<std::size_t>(flags_), 0);
    // Bind transfers on fixed buffers (shm, scratch) once.
    for (auto& p : progs_)
      for (auto& t : p.transfers)
        if (t.slot >= slot_scratch) bind_transfer(t);

    // Spin budget: a core per rank of the physical node, or share them.
    spin_ = oversubscribed() ? 16 : 2048;
  }

  // --- execution ------------------------------------------------------------

  void prepare(const bound_program& bp) {
    const std::size_t elem = shape_.elem_size;
    const std::size_t at = exec_ * chunk_ * elem;  // chunk base in bytes
    const std::byte* send = user_send_ ? user_send_ + at : nullptr;
    if (stage_send_) {
      std::memcpy(stage_.get(), send, bp.count * elem);
      send = stage_.get();
    }
    bases_[slot_send] = const_cast<std::byte*>(send);  // only read through send ops
    bases_[slot_recv] = stage_recv_ ? stage_.get() : (user_recv_ ? user_recv_ + at : nullptr);
    if (alternate_) {
      const std::size_t shift = (epoch_ & 1) * shm_half_;
      for (std::size_t l = 0; l < shm_base_.size(); ++l) bases_[slot_shm0 + l] = shm_base_[l] + shift;
    }
  }

  void finish(const bound_program& bp) {
    if (stage_recv_ && !discard_recv_)
      std::memcpy(user_recv_ + exec_ * chunk_ * shape_.elem_size, stage_.get(), bp.count * shape_.elem_size);
    for (std::size_t i = 0; i < sig_base_.size(); ++i) sig_base_[i] += bp.signals[i];
    ++epoch_;
  }

  template <class T, class Op, class Kernels>
  bool interpret(bound_program& bp, const Op& op, bool block, const Kernels& kernels) {
    std::byte* const* base = bases_.data();
    const auto at = [base](std::uint16_t slot, std::size_t off) { return reinterpret_cast<T*>(base[slot]) + off; };
    const bound_op* ops = bp.ops.data();
    const std::size_t n = bp.ops.size();
    for (std::size_t pc = pc_; pc < n; ++pc) {
      const bound_op& o = ops[pc];
      switch (o.code) {
        case opcode::copy: kernels.copy(at(o.dst_slot, o.dst), at(o.a_slot, o.a), o.n); break;
        case opcode::reduce:
          // Plans of allgather / bcast carry an operator that need not apply
          // to T; their programs have no reduce.
          if constexpr (std::is_invocable_v<const Op&, const T&, const T&>)
            kernels.reduce(at(o.dst_slot, o.dst), at(o.a_slot, o.a), at(o.b_slot, o.b), o.n, op);
          break;
        case opcode::signal:
          kernels.sync();  // peers read what earlier kernels wrote once they see the signal
          std::atomic_ref<std::uint64_t>(*o.flag).store(flag_word(++own_[o.index], seq_), std::memory_order_release);
          break;
        case opcode::wait: {
          const std::int64_t target = sig_base_[o.index] + o.value;
          if (target <= 0) break;  // names no signal of this plan
          std::uint64_t word = load(o.flag);
          if (signals_of(word) < target && !wait_flag(o, target, block, word)) {
            pc_ = pc;
            return false;
          }
          // A signal of this execution comes from the peer's same call, or
          // the ranks call their plans in different orders.
          if (o.value > 0 && ((word ^ seq_) & flag_call_mask) != 0) check_signal_call(o, word, target);
          break;
        }
        case opcode::send:
          kernels.sync();  // MPI reads the source
          start_transfer(bp.transfers[o.index]);
          break;
        case opcode::recv:
          kernels.sync();  // MPI overwrites the destination, which earlier kernels may still read
          if (!complete_recv(bp.transfers[o.index], o, block)) {
            pc_ = pc;
            return false;
          }
          check_message_call(o, bp.transfers[o.index].peer);
          break;
        case opcode::fence:
          if (!complete_sends(bp, &o, block)) {
            pc_ = pc;
            return false;
          }
          break;
      }
    }
    pc_ = n;
    return true;
  }

  static std::uint64_t load(const std::uint64_t* flag) noexcept {
    return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(flag)).load(std::memory_order_acquire);
  }

  /// A positive wait passed on a signal the peer gave in another call (the
  /// flag word's call bits differ): certain when the peer gave exactly the
  /// awaited signal then, or gave it in an earlier call; when the peer has
  /// since signalled more (it ran ahead), its stamp for this call decides.
  void check_signal_call(const bound_op& o, std::uint64_t word, std::int64_t target) {
    const auto delta = static_cast<std::int16_t>(static_cast<std::uint16_t>((word & flag_call_mask) - (seq_ & flag_call_mask)));
    const int peer = map_.comm_of_prog[static_cast<std::size_t>(o.peer)];
    const peer_report rep = reg_->look(peer, seq_);
    const bool other_plan = rep.plan_known && rep.plan_tag != plan_tag(plan_id_);
    if (signals_of(word) > target && delta > 0 && !other_plan) return;  // ran ahead, same plan in this call
    throw error(errc::mismatch,
                "mismatched collective calls: rank " + std::to_string(rank_) + " in call #" + std::to_string(seq_) +
                    " (" + name_ + ") waited for signal " + std::to_string(target - sig_base_[o.index]) +
                    " of rank " + std::to_string(peer) + " at instruction " + std::to_string(o.source) +
                    ", which rank " + std::to_string(peer) + " gave in its call #" +
                    std::to_string(static_cast<std::int64_t>(seq_) + delta) +
                    (other_plan ? "; in call #" + std::to_string(seq_) + " rank " + std::to_string(peer) + " runs " +
                                      reg_->plan_name_by_tag(rep.plan_tag)
                                : std::string()) +
                    " (the ranks call their plans in different orders)");
  }

  /// A message of this plan arrived: the peer (same physical node) must be
  /// in this call with this plan, not behind it or in another plan.
  void check_message_call(const bound_op& o, int peer) {
    const peer_report rep = reg_->look(peer, seq_);
    if (rep.kind == peer_report::failed && !(rep.plan_known && rep.plan_tag != plan_tag(plan_id_))) {
      origin_ = rep.origin;
      throw error(rep.failure, name_ + ": rank " + std::to_string(peer) + " abandoned call #" + std::to_string(seq_) +
                                   " after an error (" + std::string(to_string(rep.failure)) + ")" +
                                   raised_by(peer, rep.origin));
    }
    if (rep.kind == peer_report::behind || (rep.plan_known && rep.plan_tag != plan_tag(plan_id_)))
      throw error(errc::mismatch,
                  "mismatched collective calls: rank " + std::to_string(rank_) + " in call #" + std::to_string(seq_) +
                      " (" + name_ + ") received a message of this plan from rank " + std::to_string(peer) +
                      " at instruction " + std::to_string(o.source) + ", but rank " + std::to_string(peer) +
                      (rep.kind == peer_report::behind ? std::string(" has not started that call")
                                                       : " ran " + reg_->plan_name_by_tag(rep.plan_tag) +
                                                             " in it") +
                      " (the ranks call their plans in different orders)");
  }
  [[nodiscard]] std::uint64_t* flag_line(int l, int f) const {
    return reinterpret_cast<std::uint64_t*>(segment_.slot[static_cast<std::size_t>(l)] +
                                            static_cast<std::size_t>(f) * 64);
  }

  void bind_transfer(transfer& t) {
    const std::byte* addr = bases_[t.slot] + t.offset * shape_.elem_size;
    if (t.request != MPI_REQUEST_NULL && t.bound == addr) return;
    if (t.request != MPI_REQUEST_NULL) COLLC_MPI_CHECK(MPI_Request_free(&t.request));
    if (t.is_send)
      COLLC_MPI_CHECK(MPI_Send_init(addr, t.count, t.type, t.peer, t.tag, comm_.get(), &t.request));
    else
      COLLC_MPI_CHECK(
          MPI_Recv_init(const_cast<std::byte*>(addr), t.count, t.type, t.peer, t.tag, comm_.get(), &t.request));
    t.bound = addr;
  }

  void start_transfer(transfer& t) {
    bind_transfer(t);
    COLLC_MPI_CHECK(MPI_Start(&t.request));
    t.active = true;
  }

  bool test(transfer& t) {
    int done = 0;
    COLLC_MPI_CHECK(MPI_Test(&t.request, &done, MPI_STATUS_IGNORE));
    if (done) t.active = false;
    return done != 0;
  }

  bool complete_recv(transfer& t, const bound_op& o, bool block) {
    if (!t.active) start_transfer(t);
    if (test(t)) return true;
    if (!block) return false;
    block_until([&] { return test(t); }, o, t.peer, "a message");
    return true;
  }

  /// Completes every started send (a fence, or the end of an execution).
  bool complete_sends(bound_program& bp, const bound_op* at, bool block) {
    for (auto& t : bp.transfers) {
      if (!t.active || !t.is_send || test(t)) continue;
      if (!block) return false;
      bound_op o;
      o.code = opcode::fence;
      o.source = at ? at->source : static_cast<std::uint32_t>(bp.ops.size());
      block_until([&] { return test(t); }, o, t.peer, "completion of a send");
    }
    return true;
  }

  bool wait_flag(const bound_op& o, std::int64_t target, bool block, std::uint64_t& word) {
    if (!block) return false;
    const int peer = map_.comm_of_prog[static_cast<std::size_t>(o.peer)];
    int probe = 0;
    block_until(
        [&] {
          // A rank with messages in flight keeps MPI progressing while it waits.
          if (has_messages_ && (++probe & 63) == 0) {
            int flag = 0;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_.get(), &flag, MPI_STATUS_IGNORE);
          }
          word = load(o.flag);
          return signals_of(word) >= target;
        },
        o, peer, "a signal", target);
    return true;
  }

  template <class Ready>
  void block_until(Ready ready, const bound_op& o, int peer, const char* what, std::int64_t target = 0) {
    for (unsigned i = 0; i < spin_; ++i) {
      if (ready()) return;
      cpu_relax();
    }
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    auto last = t0;
    while (!ready()) {
      std::this_thread::yield();
      const auto now = clock::now();
      if (now - last < std::chrono::milliseconds(1) || ready()) continue;
      last = now;
      slow_check(o, peer, what, target, std::chrono::duration<double>(now - t0).count());
    }
  }

  /// The slow path of a wait: a failed or mismatched peer, or a timeout.
  void slow_check(const bound_op& o, int peer, const char* what, std::int64_t target, double waited) {
    auto where = [&] {
      std::string s = "rank " + std::to_string(rank_) + " waits for " + what + " from rank " + std::to_string(peer) +
                      " at instruction " + std::to_string(o.source) + " (";
      if (o.code == opcode::wait)
        s += "flag " + std::to_string(o.index % static_cast<std::uint32_t>(std::max(flags_, 1))) +
             " >= " + std::to_string(target) + ", now " + std::to_string(signals_of(load(o.flag))) + ", ";
      s += "execution " + std::to_string(exec_ + 1) + "/" + std::to_string(executions_per_call_) + " of call #" +
           std::to_string(seq_) + ", " + name_ + ")";
      return s;
    };
    const peer_report rep = reg_->look(peer, seq_);
    if (rep.kind == peer_report::failed) {
      origin_ = rep.origin;
      throw error(rep.failure, where() + ": rank " + std::to_string(peer) + " abandoned this call after an error (" +
                                   std::string(to_string(rep.failure)) + ")" + raised_by(peer, rep.origin));
    }
    // A peer that gave up on this plan in an earlier call never signals it again.
    if (const peer_failure f = reg_->failure_of(peer); f.seq != 0 && f.plan == plan_id_ && f.seq <= seq_) {
      origin_ = f.origin;
      throw error(f.code, where() + ": rank " + std::to_string(peer) + " abandoned this plan in call #" +
                              std::to_string(f.seq) + " after an error (" + std::string(to_string(f.code)) + ")" +
                              raised_by(peer, f.origin));
    }
    if (rep.plan_known && rep.plan_tag != plan_tag(plan_id_))
      throw error(errc::mismatch, "mismatched collective calls: " + where() + ", but rank " + std::to_string(peer) +
                                      " runs " + reg_->plan_name_by_tag(rep.plan_tag) + " in that call");
    if (waited > opt_.timeout_s) {
      const std::string msg = "timeout after " + std::to_string(waited) + " s: " + where();
      if (opt_.timeout_action == on_timeout::abort) {
        std::fprintf(stderr, "collc: %s; aborting\n", msg.c_str());
        std::fflush(stderr);
        MPI_Abort(reg_->control(), 1);
      }
      throw error(errc::timeout, msg);
    }
  }

  /// " raised by rank 7" when a peer passed on another rank's error.
  static std::string raised_by(int peer, int origin) {
    return origin >= 0 && origin != peer ? ", first raised by rank " + std::to_string(origin) : std::string();
  }

  void fail(const error& e) {
    failed_ = true;
    active_ = false;
    pending_ = false;
    failure_ = e.what();
    reg_->mark_failed(seq_, e.code(), plan_id_, origin_ < 0 ? rank_ : origin_);
  }

  plan_shape shape_;
  resolved_options opt_;
  std::shared_ptr<registry> reg_;
  comm_owner comm_;               ///< plans with messages only (see bind_all)
  segment_pool* pool_ = nullptr;  ///< owned by the registry
  segment_lease segment_;
  int rank_ = 0, size_ = 1, prog_rank_ = 0, node_id_ = 0, node_first_ = 0, node_size_ = 1;
  placement_map map_;
  std::int64_t plan_id_ = 0;
  std::string name_;

  std::vector<ir::program> lowered_;
  std::vector<bound_program> progs_;  // [0] chunk (or the only program), [1] tail
  std::size_t chunk_ = 0, full_chunks_ = 0, executions_per_call_ = 0;
  int flags_ = 0;
  ir::runs runs_;                     // what binds and in which order (layout())
  bool in_place_safe_ = true, has_messages_ = false;
  std::size_t slot_bytes_ = 0, scratch_bytes_ = 0, stage_bytes_ = 0;
  std::size_t shm_elems_ = 0, scratch_elems_ = 0, max_count_ = 0;  // over the programs (layout())
  bool data_in_flag_line_ = false;                                 // see layout()
  bool alternate_ = false, sends_messages_ = false;  // see layout()
  std::size_t shm_half_ = 0;                         // bytes between the two halves
  std::vector<std::byte*> shm_base_;                 // [node rank] first half
  aligned_bytes scratch_, stage_;
  std::vector<std::byte*> bases_;
  std::vector<std::int64_t> sig_base_;  // [l * flags + f]: signals of node rank l on f, earlier executions
  std::vector<std::uint64_t> own_;      // [f]: this rank's signals on f so far
  unsigned spin_ = 2048;

  // The call in progress.
  bool active_ = false, failed_ = false, pending_ = false;
  std::string failure_;
  int origin_ = -1;  ///< the rank whose error failed this plan, if a peer passed it on
  std::uint64_t seq_ = 0, epoch_ = 0;
  std::size_t exec_ = 0, pc_ = 0;
  bool exec_started_ = false;
  int last_program_ = -1;
  const std::byte* user_send_ = nullptr;
  std::byte* user_recv_ = nullptr;
  bool stage_send_ = false, stage_recv_ = false, discard_recv_ = false;
};

}  // namespace collc::detail
