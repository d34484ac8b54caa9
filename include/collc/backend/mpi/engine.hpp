#pragma once
/// \file
/// The type-erased core of an MPI plan: setup (registry, placement, signature
/// agreement, chunk choice, segment, binding) and execution (the chunk
/// pipeline and the bytecode interpreter, the only part templated on T and
/// Op). collc::plan<T, Op> (plan.hpp) is a thin typed handle around it.
///
/// Node segment: a range leased from the communicator's segment pool
/// (segments.hpp: shared windows on the node communicator, reused by later
/// plans); rank l's part is [flags x 64-byte lines][shm data] (or, for a
/// small ring, one line per shm copy headed by a flag word: layout.hpp). A flag word
/// is (signals << 16 | call number mod 2^16 of the last signal): signals
/// since the plan was built, only growing; a wait's target is
///   base(l, f) + value,  base = signals of l on f in all earlier executions,
/// which is the epoch * signals_per_execution + value rule of ir/program.hpp
/// for any sequence of programs (ir/sequence.hpp), and a wait for a signal
/// of this execution checks the call bits (a peer that signalled in another
/// call runs the plans in another order: errc::mismatch). An alternating
/// program spreads a flag over words (layout.hpp, flag_words: those of its
/// line, or one at the head of each shm copy's line): execution e signals in
/// word e % flag_words, each word holding
/// the count and call of its last signal. Counts are global, so a word that
/// shows count >= target proves signal #target was given (and its release
/// store orders what came before it), and signal #target is in the word of
/// its execution, (target - 1) / signals-per-execution, until that word is
/// written again flag_words executions later. Flags start at zero:
/// a range never leased is zero since its arena was zeroed, and a range
/// leased before gets its flag lines zeroed with a node barrier (an earlier
/// plan's data there could read as any flag value; segments.hpp). Open MPI
/// (osc/sm: backing file unlinked once mapped) and MPICH (SysV segment marked
/// for removal once attached) leave nothing behind when a rank is killed,
/// which tests/mpi/kill_check.cmake checks, so the window is used as is.
///
/// Large messages: lowering is asked for a chunk of C elements (per rank, or
/// per block for reduce_scatter / allgather) with C chosen so that shm and
/// scratch of one rank stay within options.chunk_bytes (ir::lower_in_chunks;
/// a large bcast, or reduce on 2 ranks, with a core per rank: 64 KiB, which
/// alternate so that their copies pipeline, layout.hpp lowering_chunk_bytes);
/// a call runs the chunk program for chunks 0, 1, ... and a tail program for
/// the remainder, each run one execution, with the user pointers advanced by
/// the chunk base; the first execution after a switch of programs runs a
/// guarded copy (ir::make_runs). The programs bound are exactly those of
/// ir::make_runs, which COLLC_ENABLE_CHECKS proves in the order they run.
///
/// Waiting: spin (cpu pause) for a bounded number of polls, then yield the
/// core between polls so oversubscribed nodes progress. After the spin, about
/// every millisecond a waiter looks at the registry (mismatch, failed peer)
/// and at the clock (timeout). A rank waiting for a signal keeps testing the
/// sends it has started (test_sends), the only call MPI promises progresses them.
#include <collc/backend/mpi/bound.hpp>
#include <collc/backend/mpi/handles.hpp>
#include <collc/backend/mpi/layout.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/backend/mpi/shm_copy.hpp>
#include <collc/backend/mpi/topology.hpp>
#include <collc/config.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace collc::mpi {

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
  /// Gives up the memory without freeing it (~engine: MPI may still read it).
  std::byte* release() noexcept { return std::exchange(p_, nullptr); }

 private:
  std::byte* p_ = nullptr;
};

/// The element kernels the interpreter runs for copy and reduce: inline on
/// the calling thread. Another backend passes an object with the same three
/// members to run them elsewhere (backend/kokkos: kernels on an execution
/// space); `sync()` is called wherever the results of earlier kernels must be
/// complete: before a signal, a send or a recv, and at the end of each
/// execution (before the staging copy-out and the next execution). A policy
/// may add a fourth, `copy_to_shm`, which the interpreter calls instead of
/// `copy` for copies into shm; its stores must be visible to other cores
/// once it returns (host_kernels: streaming stores, fenced in copy_into_shm).
struct host_kernels {
  template <class T>
  void copy(T* dst, const T* src, std::size_t n) const {
    collc::detail::copy_elems(dst, src, n);
  }
  /// A copy into shm, which peers read next: streamed when misaligned (shm_copy.hpp).
  template <class T>
  void copy_to_shm(T* dst, const T* src, std::size_t n) const {
    static_assert(std::is_trivially_copyable_v<T>, "collc::mpi::host_kernels: T must be trivially copyable");
    copy_into_shm(dst, src, n * sizeof(T));
  }
  template <class T, class Op>
  void reduce(T* dst, const T* a, const T* b, std::size_t n, const Op& op) const {
    collc::detail::reduce_into(dst, a, b, n, op);
  }
  void sync() const noexcept {}
};

/// What the interpreter asks of a kernel policy (host_kernels, or the Kokkos
/// backend's kernels on an execution space): element copies, reductions for
/// operators that apply to T (allgather and bcast plans carry one that need
/// not), and sync() at the points named above.
template <class K, class T, class Op>
concept kernel_policy = requires(const K& k, T* dst, const T* src, std::size_t n) {
  k.copy(dst, src, n);
  k.sync();
}
&&(!std::is_invocable_v<const Op&, const T&, const T&> ||
   requires(const K& k, T* dst, const T* a, const T* b, std::size_t n, const Op& op) { k.reduce(dst, a, b, n, op); });

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
/// Registers the MPI_COMM_SELF attribute that sets finalize_seen() (once per process).
void watch_finalize();

/// Online CPUs of this node: the cores the ranks of a node share.
int online_cores() noexcept;

/// "rank 3" or "ranks 0-2,5,7" for a sorted list of ranks.
std::string rank_list(const std::vector<int>& r);

class registry;      // registry.hpp: per-communicator state shared by its plans
class segment_pool;  // segments.hpp: the node segments plans lease ranges from

class engine {
 public:
  /// Setup part 1: registry and placement (collective over `comm` only for
  /// the communicator's first plan).
  /// Nothing is agreed yet: build() does that, in one allreduce.
  engine(MPI_Comm comm, plan_shape shape, const resolved_options& opt);

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  /// Releases the segment range (local); frees the plan's own communicator if
  /// it has one, and the registry's windows if it was the communicator's last
  /// plan (collective): every rank destroys its plans in the same order, as
  /// with MPI_Comm_free.
  ~engine();

  // --- what the typed plan and the tests ask --------------------------------

  [[nodiscard]] const placement_map& placement() const noexcept { return map_; }
  [[nodiscard]] int program_rank() const noexcept { return prog_rank_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] const plan_shape& shape() const noexcept { return shape_; }
  [[nodiscard]] const resolved_options& options() const noexcept { return opt_; }
  [[nodiscard]] std::int64_t id() const noexcept { return plan_id_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool active() const noexcept { return call_.active; }
  [[nodiscard]] bool failed() const noexcept { return call_.failed; }
  /// Like MPI_Start / MPI_Wait: a started call stays pending until wait()
  /// (or a successful test()) acknowledges it, even if it already completed.
  [[nodiscard]] bool pending() const noexcept { return call_.pending; }
  void acknowledge() noexcept { call_.pending = false; }
  /// One turn of the MPI library's progress engine. A program written for MPI
  /// may rely on its pending operations (a rendezvous send it started, a
  /// round of an MPI_Ibarrier) advancing while it is blocked in, or testing,
  /// a collective (MPI 4.0, section 3.7.4, "Progress"); a wait that only
  /// watched shared memory would stall them, and a peer waiting on one of
  /// them would wait for this rank for good (libcollc_mpi under such
  /// programs: tests/pmpi/c_progress.c). Waits call it every wait.hpp's
  /// idle_after once they have lasted that long, and a test() that finds
  /// the call unfinished calls it once (plan_core::test). Not start(): a
  /// call that ends within its first poll pays nothing.
  void progress_mpi() const;
  /// What a rank owes while it waits (every wait.hpp idle_after of a long
  /// wait, and a test() that finds its call unfinished): progress_mpi(), and
  /// a turn for each other plan with a call started and not complete. MPI
  /// lets ranks complete their outstanding collectives in different orders
  /// (MPI 4.0, sections 6.12 and 6.13: started in the same order on every
  /// rank, completed in any), so rank 0 may wait for plan A while rank 1
  /// waits for plan B: each needs the other to advance the plan it is not
  /// waiting for. Other plans of this communicator always get their turn
  /// (its calls come from one thread at a time); plans of other
  /// communicators only where one thread at a time calls MPI (below
  /// MPI_THREAD_MULTIPLE), since another thread may be in their calls.
  /// A plan gets turns once its typed owner set a stepper (set_stepper).
  void progress();
  /// How another plan's wait advances this plan's call without blocking
  /// (collc::plan sets one: the interpreter with host kernels and a copy of
  /// the operator). An error it raises fails this plan and is thrown by this
  /// plan's own next advance (its wait or test), not by the waiter's.
  void set_stepper(std::function<bool(engine&)> step) { step_ = std::move(step); }
  /// progress()'s turns from outside any plan, for a call that blocks in the
  /// MPI library while plans may be started (libcollc_mpi runs a collective
  /// it leaves to MPI, or a wait on MPI's own requests, this way): the
  /// started plans of `comm` (MPI_COMM_NULL: none), and of every
  /// communicator below MPI_THREAD_MULTIPLE.
  static void give_turns(MPI_Comm comm);
  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunk_; }
  [[nodiscard]] std::size_t executions_per_call() const noexcept { return lay_.runs.executions_per_call; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return call_.epoch; }
  /// Bytes of the node segment slot (flags + shm) and of the scratch of this rank.
  [[nodiscard]] std::size_t shm_bytes() const noexcept { return lay_.slot_bytes; }
  [[nodiscard]] std::size_t scratch_bytes() const noexcept { return scratch_bytes_; }
  [[nodiscard]] std::size_t stage_bytes() const noexcept { return stage_bytes_; }
  [[nodiscard]] const std::vector<ir::program>& programs() const noexcept { return lowered_; }
  /// Whether this rank's bound programs send or receive messages (the path between nodes).
  [[nodiscard]] bool has_transfers() const noexcept { return has_transfers_; }
  /// The bound plan as text: signature, placement, layout, chunking, and this
  /// rank's bound programs with their transfers (what `collc show` prints
  /// for a plan; useful in bug reports).
  [[nodiscard]] std::string describe() const;
  /// Where the plan's data lives (layout.hpp).
  [[nodiscard]] const plan_layout& layout_value() const noexcept { return lay_; }
  /// Cores of this rank's physical node (online CPUs).
  [[nodiscard]] int node_cores() const noexcept { return online_cores(); }
  /// Whether this communicator has more ranks on this rank's physical node than it has cores.
  [[nodiscard]] bool oversubscribed() const noexcept;

  /// Setup part 2, collective over the communicator: checks the shape, calls
  /// `resolve` (the schedule's name, e.g. after default selection) and lowers
  /// (chunk and tail) with `lower`, then agrees with every rank in one
  /// allreduce on the signature, the resolved schedule and the segment range,
  /// and binds. An error in the local part (a bad root, a factor set that
  /// does not fit, ...) does not leave the others waiting: it is agreed like
  /// the rest, so every rank throws, its own error where all failed alike,
  /// errc::mismatch naming who differs otherwise.
  void build(const std::function<std::string()>& resolve, const lower_fn& lower);

  /// For tests and tools: bind programs given directly (count = programs[0].count,
  /// one execution per call, or chunk + tail when two are given). Collective.
  void build_from(std::vector<ir::program> programs);

  // --- one call ---------------------------------------------------------------

  /// Starts a call. `send`/`recv` are the user's buffers (recv may be null
  /// with `discard_recv`: reduce at a non-root); `in_place` means they are the
  /// same memory in MPI's in-place layout (see plan.hpp).
  void begin(const void* send, void* recv, bool in_place, bool discard_recv);

  /// Runs the call as far as possible; with `block`, to completion. Returns
  /// whether the call is complete. Any collc::error marks the plan failed
  /// and tells peers waiting on this rank (through the registry).
  template <class T, class Op, class Kernels = host_kernels>
  requires kernel_policy<Kernels, T, Op>
  bool advance(const Op& op, bool block, const Kernels& kernels = {}) {
    if (unreported_) std::rethrow_exception(std::exchange(unreported_, nullptr));  // see set_stepper
    if (!call_.active) return true;
    if (finalized()) throw error(errc::invalid_argument, name_ + ": called after MPI_Finalize");
    try {
      while (call_.exec < lay_.runs.executions_per_call) {
        const std::size_t which = lay_.runs.program_for(call_.exec, call_.last_program);
        bound_program& bp = progs_[which];
        if (!call_.exec_started) {
          prepare(bp);
          call_.exec_started = true;
          call_.pc = 0;
        }
        if (!interpret<T>(bp, op, block, kernels)) return false;
        kernels.sync();
        if (!complete_sends(bp, nullptr, block)) return false;
        finish(bp);
        call_.exec_started = false;
        call_.last_program = static_cast<int>(which);
        ++call_.exec;
      }
      call_.active = false;
      close_call();
      if (in_started_) leave_started();
      check_alarm();  // a peer found this call mismatched while this rank needed nothing from it
      return true;
    } catch (const error& e) {
      fail(e);
      throw;
    } catch (...) {
      // Any other exception (the user's operator threw): abandoned as after
      // a collc::error, so peers fail at once instead of reading what this
      // rank never wrote, and the plan refuses further calls (resuming would
      // re-run instructions already run: repeated signals, wrong results).
      // The caller gets the exception as thrown.
      fail(foreign_failure());
      throw;
    }
  }

 public:
  /// A call this rank cannot make (an argument error found before begin()):
  /// takes the call's number and abandons it, so peers waiting on this rank
  /// in it fail at once naming this rank instead of timing out. The plan is
  /// unusable afterwards, on every rank, as after any error in a call.
  void abandon(const error& e);

 private:
  /// Refuses a call of a plan that cannot run: after MPI_Finalize, or after an error.
  void refuse_unusable() const;

  /// The registry's list of started plans (see progress()): a call joins it
  /// when it starts, if this plan has a stepper, and leaves it when it ends.
  void enter_started();
  void leave_started() noexcept;
  /// progress()'s turns: one non-blocking step of every started plan in
  /// `list` but `skip` (stepping may end a plan, which leaves the list).
  static void step_list(std::vector<engine*>& list, const engine* skip);
  /// Turns for the started plans of `own` (may be null) and, below
  /// MPI_THREAD_MULTIPLE, of every other registry; `skip` gets none.
  static void turns(registry* own, const engine* skip);
  /// A turn of this plan from another plan's wait (set_stepper).
  void step_from_other() noexcept;

  /// The call in progress ended here (completed or failed): it leaves the
  /// registry's open calls (see check_alarm).
  void close_call() noexcept;

  /// The node's alarm changed (some rank abandoned a call): is it this plan,
  /// or a call this rank made that a peer found mismatched? One load of a
  /// line written only on errors when nothing happened.
  void check_alarm();

  // --- setup ------------------------------------------------------------------

  [[nodiscard]] std::string signature_text() const;

  /// Argument checks that need the communicator (every rank checks alike).
  void check_shape() const;

  /// Lowers the chunk program (and the tail program) into lowered_
  /// (ir::lower_in_chunks: the chunking the sequence tests prove).
  void lower_chunks(const lower_fn& lower);

  /// With checks on (COLLC_ENABLE_CHECKS): proves the programs this plan
  /// binds in the order it runs them (three calls, up to three chunks each:
  /// every window of three executions the plan can run), as they run: not in
  /// place, and in place where the plan runs in place.
  void verify_runs() const;

  /// lay_ from the lowered programs (layout.hpp: a pure function).
  void layout();

  /// The one agreement of setup (MPI_Allreduce MAX over the control
  /// communicator), then the segment and the binding. Agreed: the signature
  /// with the resolved schedule (or the local error) by hash, the call
  /// sequence number and the next plan id, and the segment range (every
  /// rank's proposal as max and -min, and its size).
  void settle(const std::string& resolved, const std::optional<error>& failure);

  /// The agreement's allreduce, without blocking: a rank that does not
  /// arrive within the timeout is errc::timeout naming the ranks of this
  /// node that did not enter this setup (the others' are not visible). A
  /// late rank whose peers gave up gets errc::timeout too, naming them.
  /// Refused at once once a setup on this communicator timed out here.
  static constexpr int agreed_values = 12;
  void agree(const std::int64_t (&mine)[agreed_values], std::int64_t (&out)[agreed_values], const std::string& text);

  /// Everyone saw the disagreement (see settle()); gathers the signatures to
  /// say who differs and how, and throws errc::mismatch.
  [[noreturn]] void report_disagreement(std::uint64_t h, const std::string& text);

  /// A setup collective on the control communicator that did not complete
  /// within the timeout: under COLLC_ON_TIMEOUT=abort, `msg` on stderr and
  /// MPI_Abort; else the registry refuses further setups on this rank
  /// (registry::refuse_setups: past this point the ranks' setup collectives
  /// no longer pair up) and errc::timeout.
  [[noreturn]] void setup_timed_out(const std::string& msg);
  /// A node peer that started this rank's next call without entering setup
  /// `k` (a mismatch, agree()): its description, else empty.
  [[nodiscard]] std::string peer_skipped_setup(std::uint64_t k) const;
  /// A wait past the timeout: `msg` on stderr and MPI_Abort under
  /// COLLC_ON_TIMEOUT=abort, else errc::timeout.
  [[noreturn]] void timed_out(const std::string& msg) const;
  /// Waits for the setup collective `req`, bounded by the timeout; on timeout
  /// keeps `buffer` (which MPI still writes) in the registry and calls
  /// setup_timed_out(what()).
  void wait_setup(MPI_Request& req, std::shared_ptr<void> buffer, MPI_Comm* made,
                  const std::function<std::string()>& what);

  /// Takes the segment range (`arena` < 0: a new arena) and binds the programs.
  void bind_all(int arena, std::size_t offset);

  // --- execution ------------------------------------------------------------

  void prepare(bound_program& bp) {
    const std::size_t elem = shape_.elem_size;
    const std::size_t at = call_.exec * chunk_ * elem;  // chunk base in bytes
    const std::byte* send = call_.user_send ? call_.user_send + at : nullptr;
    if (call_.stage_send) {
      std::memcpy(stage_.get(), send, bp.count * elem);
      send = stage_.get();
    }
    bases_[slot_send] = const_cast<std::byte*>(send);  // only read through send ops
    bases_[slot_recv] = call_.stage_recv ? stage_.get() : (call_.user_recv ? call_.user_recv + at : nullptr);
    if (lay_.alternate) {
      const std::size_t shift = (call_.epoch & static_cast<std::uint64_t>(lay_.shm_copies - 1)) * lay_.copy_bytes;
      for (std::size_t l = 0; l < shm_base_.size(); ++l) bases_[slot_shm0 + l] = shm_base_[l] + shift;
    }
    // The previous execution completed every transfer, so these ranges are free.
    for (std::uint32_t t : bp.early_receives) start_transfer(bp.transfers[t]);
  }

  void finish(const bound_program& bp) {
    if (call_.stage_recv && !call_.discard_recv)
      std::memcpy(call_.user_recv + call_.exec * chunk_ * shape_.elem_size, stage_.get(), bp.count * shape_.elem_size);
    for (std::size_t i = 0; i < sig_base_.size(); ++i) sig_base_[i] += bp.signals[i];
    ++call_.epoch;
  }

  template <class T, class Op, class Kernels>
  bool interpret(bound_program& bp, const Op& op, bool block, const Kernels& kernels) {
    std::byte* const* base = bases_.data();
    const auto at = [base](std::uint16_t slot, std::size_t off) { return reinterpret_cast<T*>(base[slot]) + off; };
    const bound_op* ops = bp.ops.data();
    const std::size_t n = bp.ops.size();
    for (std::size_t pc = call_.pc; pc < n; ++pc) {
      const bound_op& o = ops[pc];
      switch (o.code) {
        case opcode::copy:
          // A policy may copy into shm its own way (host_kernels: shm_copy.hpp).
          if constexpr (requires { kernels.copy_to_shm(at(0, 0), at(0, 0), o.n); }) {
            if (o.dst_slot >= slot_shm0) {
              kernels.copy_to_shm(at(o.dst_slot, o.dst), at(o.a_slot, o.a), o.n);
              break;
            }
          }
          kernels.copy(at(o.dst_slot, o.dst), at(o.a_slot, o.a), o.n);
          break;
        case opcode::reduce:
          // Plans of allgather / bcast carry an operator that need not apply
          // to T; their programs have no reduce.
          if constexpr (std::is_invocable_v<const Op&, const T&, const T&>)
            kernels.reduce(at(o.dst_slot, o.dst), at(o.a_slot, o.a), at(o.b_slot, o.b), o.n, op);
          break;
        case opcode::signal:
          kernels.sync();  // peers read what earlier kernels wrote once they see the signal
          std::atomic_ref<std::uint64_t>(o.flag[(call_.epoch & flag_word_mask_) * flag_word_stride_])
              .store(flag_word(++own_[o.index], call_.seq), std::memory_order_release);
          break;
        case opcode::wait: {
          const std::int64_t target = sig_base_[o.index] + o.value;
          if (target <= 0) break;  // names no signal of this plan
          const std::uint64_t* at_word = wait_word(o);
          std::uint64_t word = load(at_word);
          if (signals_of(word) < target && !wait_flag(bp, o, at_word, target, block, word)) {
            call_.pc = pc;
            return false;
          }
          // A signal of this execution comes from the peer's same call, or
          // the ranks call their plans in different orders.
          if (o.value > 0 && ((word ^ call_.seq) & flag_call_mask) != 0) check_signal_call(o, word, target);
          break;
        }
        case opcode::send:
          kernels.sync();  // MPI reads the source
          start_transfer(bp.transfers[o.index]);
          break;
        case opcode::recv:
          kernels.sync();  // MPI overwrites the destination, which earlier kernels may still read
          if (!complete_recv(bp.transfers[o.index], o, block)) {
            call_.pc = pc;
            return false;
          }
          check_message_call(o, bp.transfers[o.index].peer);
          break;
        case opcode::fence:
          if (!complete_sends(bp, &o, block)) {
            call_.pc = pc;
            return false;
          }
          break;
      }
    }
    call_.pc = n;
    return true;
  }

  /// The word of flag `o.flag` that holds the awaited signal: that of its
  /// execution (see the file comment; the flag's only word when it has one).
  const std::uint64_t* wait_word(const bound_op& o) const noexcept {
    return o.flag +
           ((call_.epoch + static_cast<std::uint64_t>(static_cast<std::int64_t>(o.exec_offset))) & flag_word_mask_) *
               flag_word_stride_;
  }

  /// The signals given on flag `flag` so far: the largest count of its words.
  std::int64_t signals_now(const std::uint64_t* flag) const noexcept {
    std::int64_t n = 0;
    for (std::uint64_t w = 0; w <= flag_word_mask_; ++w)
      n = std::max(n, signals_of(load(flag + w * flag_word_stride_)));
    return n;
  }

  static std::uint64_t load(const std::uint64_t* flag) noexcept {
    return std::atomic_ref<std::uint64_t>(*const_cast<std::uint64_t*>(flag)).load(std::memory_order_acquire);
  }

  /// A positive wait passed on a signal the peer gave in another call (the
  /// flag word's call bits differ): certain when the peer gave exactly the
  /// awaited signal then, or gave it in an earlier call; when the peer has
  /// since signalled more (it ran ahead), its stamp for this call decides.
  void check_signal_call(const bound_op& o, std::uint64_t word, std::int64_t target);

  /// A message of this plan arrived: the peer (same physical node) must be
  /// in this call with this plan, not behind it or in another plan.
  void check_message_call(const bound_op& o, int peer);

  /// Every peer is a real rank (the binder refuses others), which also keeps
  /// the requests freed here clear of MPICH 4.0.2's reuse of a freed
  /// MPI_PROC_NULL request's object by a persistent collective that then
  /// never starts (see src/pmpi/persistent.cpp, request_table::spare).
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
    wait_transfer(t, o, "a message");
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
      wait_transfer(t, o, "completion of a send");
    }
    return true;
  }

  /// Tests this rank's started sends of `bp`. A rank waiting for a signal
  /// may have started sends its peers wait for, and MPI promises that such a
  /// send completes only to a sender that keeps testing it (MPI 4.0, section
  /// 3.7.4, "Progress"): under a rendezvous protocol the sender answers the
  /// receiver's acknowledgement and pushes the rest of the message. No other
  /// call is enough. MPI_Iprobe, used before, returns without progressing
  /// anything when an early message of the next execution is already queued;
  /// two such senders, each waiting on its node's signal, hung an allgather
  /// between pseudo-nodes for good (mpi_test_plan_progress).
  void test_sends(bound_program& bp);

  /// Waits for flag `o` to reach `target`, testing this rank's sends of `bp`
  /// meanwhile (test_sends); without `block`, tests them once and returns false.
  bool wait_flag(bound_program& bp, const bound_op& o, const std::uint64_t* at_word, std::int64_t target, bool block,
                 std::uint64_t& word);

  /// Blocks until `t` completes (waiting policy of wait.hpp).
  void wait_transfer(transfer& t, const bound_op& at, const char* what);

  /// Blocks until `ready()`, spinning then yielding (wait.hpp), with slow_check() every millisecond
  /// and progress_mpi() between polls once the wait is long.
  template <class Ready>
  void block_until(Ready ready, const bound_op& o, int peer, const char* what, std::int64_t target = 0);

  /// The slow path of a wait: a failed or mismatched peer, or a timeout.
  void slow_check(const bound_op& o, int peer, const char* what, std::int64_t target, double waited);

  /// " raised by rank 7" when a peer passed on another rank's error.
  static std::string raised_by(int peer, int origin);

  void fail(const error& e);
  /// Inside a catch block of an exception that is not a collc::error: what
  /// fail() records and peers hear (errc::invalid_argument, naming the plan
  /// and the exception's what()).
  [[nodiscard]] error foreign_failure() const;

  plan_shape shape_;
  resolved_options opt_;
  std::shared_ptr<registry> reg_;
  comm_owner comm_;               ///< plans with messages only (see bind_all)
  segment_pool* pool_ = nullptr;  ///< owned by the registry
  segment_lease segment_;
  int rank_ = 0, size_ = 1, prog_rank_ = 0, node_id_ = 0, node_first_ = 0, node_size_ = 1;
  placement_map map_;
  std::int64_t plan_id_ = 0;
  std::uint64_t created_seq_ = 0;  ///< the communicator's call number when this plan was set up (~engine)
  std::string name_;

  std::vector<ir::program> lowered_;
  std::vector<bound_program> progs_;  // [0] chunk (or the only program), [1] tail
  std::size_t chunk_ = 0;             ///< elements per chunk
  plan_layout lay_;                   ///< flags, shm, scratch, runs (layout.hpp)
  bool in_place_safe_ = true;         ///< the bound programs may run with send and recv aliased
  bool has_transfers_ = false;        ///< this rank's programs send or receive
  std::size_t scratch_bytes_ = 0, stage_bytes_ = 0;
  std::vector<std::byte*> shm_base_;  // [node rank] first half
  aligned_bytes scratch_, stage_;
  std::vector<std::byte*> bases_;
  std::vector<std::int64_t> sig_base_;  // [l * flags + f]: signals of node rank l on f, earlier executions
  std::vector<std::uint64_t> own_;      // [f]: this rank's signals on f so far
  std::uint64_t flag_word_mask_ = 0;    // lay_.flag_words - 1: the word of execution e is e & mask
  std::size_t flag_word_stride_ = 1;    // lay_.flag_word_stride: words from one execution's flag word to the next
  unsigned spin_ = 2048;
  std::function<bool(engine&)> step_;  ///< see set_stepper; empty: other waits leave this plan alone
  bool in_started_ = false;            ///< this plan's call is in the registry's started list
  std::exception_ptr unreported_;      ///< an error raised in another plan's wait, for this plan's next advance

  /// The call in progress: everything a call changes (the bound plan above
  /// stays as setup left it, except the signal counts, which carry over from
  /// call to call by design: a signal's expected value is its count so far).
  struct call_state {
    bool active = false, failed = false, pending = false;
    std::string failure;
    int origin = -1;  ///< the rank whose error failed this plan, if a peer passed it on
    std::uint64_t seq = 0, epoch = 0;
    std::size_t exec = 0, pc = 0;  ///< execution of this call and instruction in it
    bool exec_started = false;
    int last_program = -1;
    const std::byte* user_send = nullptr;
    std::byte* user_recv = nullptr;
    bool stage_send = false, stage_recv = false, discard_recv = false;
  };
  call_state call_;
};

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/engine.ipp>
#endif
