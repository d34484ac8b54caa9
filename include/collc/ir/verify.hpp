#pragma once
/// \file
/// collc::verify: runs all P rank programs of an ir::program symbolically and
/// proves, for every execution of a persistent plan, that
///   0. well_formed    every ref, flag and peer is legal (see program.hpp),
///   1. contribution   every result element holds each rank's contribution
///                     exactly once and nothing else (nothing uninitialised,
///                     nothing stale from an earlier execution),
///   2. operand_order  for non-commutative operators the in-order leaves of
///                     each result are ranks 0..P-1,
///   3. identical      every rank holds the same expression tree for an element
///                     (so floating-point results are bitwise identical),
///   4. race           every read is ordered after the write it reads, and no
///                     write is concurrent with another rank's access,
///   5. deadlock       no wait or recv blocks forever; sends and recvs match.
/// The first violation is reported with rank, instruction index, execution and
/// a reason that names the offending buffer element, flag or peer.
///
/// Model. Values are hash-consed expression trees: leaf(rank, element,
/// execution) for the caller's input, node(a, b) for `a op b`, 0 for an
/// undefined value. The caller of each rank is modelled at every execution
/// boundary: it reads the rank's results, then writes fresh leaves (tagged with
/// the execution index) into the rank's send buffer (bcast: the root's recv),
/// so stale reads show up as wrong contributions and late writes as races.
/// Happens-before is tracked with vector clocks (one clock tick per
/// instruction): program order; a wait with threshold t synchronises with the
/// peer's t-th signal of that flag; a recv with its matched send. Accesses are
/// checked FastTrack style: a write epoch and the reads since, per element.
/// A send reads its source at the send; the source counts as being read until
/// the sender's next fence (or the end of the execution), and any write to it
/// before then is reported.
///
/// Scheduling. Ranks run round robin, each until it blocks (wait threshold not
/// reached, recv without a message). This single greedy run is conclusive:
///  - a blocked instruction, once enabled, stays enabled until its own rank
///    executes it: flags only grow, and only the receiving rank removes
///    messages from its channels, while sends never block;
///  - no rank's control flow depends on data, and which signal a wait or which
///    send a recv pairs with is fixed by counting, not by timing.
/// So every schedule executes the same instructions with the same
/// synchronisation (the happens-before relation is schedule independent): if
/// the greedy run gets stuck, every run gets stuck at the same instructions, and
/// vector clocks report a race whenever one exists in some schedule. In a
/// race-free program the values are schedule independent too, so one run
/// decides 1-3.
///
/// Order of reports. Static checks first: property 0, then the pairing of
/// sends with recvs and of waits with signals (reported as deadlock). During
/// the run a race stops it at once; a wrong result (1-3) is kept while the run
/// goes on and is reported unless a race turns up later (the race is the
/// cause) or a deadlock in the same or an earlier execution.
///
/// Cost: O(total instructions * P) for synchronisation plus O(element accesses)
/// for data; about 24 bytes per element of every rank's buffers. At most 65536
/// ranks (P vector clocks of P entries).
///
/// Note: as every execution runs the same code, a stale value (from an earlier
/// execution) in a result comes with a race or an uninitialised read in
/// execution 0, which is what gets reported; the "stale" wording of property 1
/// is kept for completeness but no test program reaches it.
#include <collc/error.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir {

/// The property a program failed (none = verified). Numbered as in the file comment.
enum class property : std::uint8_t { none, well_formed, contribution, operand_order, identical, race, deadlock };

constexpr std::string_view to_string(property p) noexcept {
  switch (p) {
    case property::none: return "none";
    case property::well_formed: return "well_formed";
    case property::contribution: return "contribution";
    case property::operand_order: return "operand_order";
    case property::identical: return "identical";
    case property::race: return "race";
    case property::deadlock: return "deadlock";
  }
  return "?";
}

/// How the program will be used.
struct verify_options {
  /// The operator is commutative: operand order (property 2) is not required,
  /// and `a op b` equals `b op a` when comparing trees (never re-association).
  /// A program with commutative_only set is refused if this is false.
  bool commutative = false;
  /// Run the program this many times back to back (catches cross-execution
  /// hazards such as overwriting shm a peer still reads from the last execution).
  int executions = 2;
  /// send and recv of each rank are the same memory (MPI_IN_PLACE):
  /// allreduce / reduce_scatter: send[i] is recv[i] (the result is the first
  /// `count` elements); allgather: send[i] is recv[rank * stride + i];
  /// reduce: as allreduce, at the root only; bcast: ignored.
  bool in_place = false;
  /// Copies of shm that executions alternate between (1 or 2): execution e
  /// uses copy e % shm_copies, every shm reference moved by (e % shm_copies)
  /// times the largest shm_count of the programs (the engine's alternating
  /// halves, `alt` in Jocksch et al. 2026; see backend/mpi/engine.hpp).
  int shm_copies = 1;
  /// Bytes verify may use (its verify_memory_estimate); a larger program is
  /// refused up front with collc::error(errc::invalid_argument) instead of
  /// exhausting the machine. 0: no limit.
  std::uint64_t memory_limit = std::uint64_t{2} << 30;
};

/// Outcome of collc::verify: the first violation found, or none.
struct verify_result {
  property failed = property::none;
  int rank = -1;              ///< rank whose instruction (or result) is at fault; -1: the whole program
  std::ptrdiff_t index = -1;  ///< instruction index in code[rank]; -1: none (e.g. a result check)
  int execution = -1;         ///< 0-based execution; -1: a static check
  std::string reason;

  /// True when the program verified.
  explicit operator bool() const { return failed == property::none; }

  /// "ok", or e.g. "rank 3, instruction 7 (execution 1): <reason>".
  [[nodiscard]] std::string to_string() const {
    if (failed == property::none) return "ok";
    std::string s;
    if (rank >= 0) {
      s = "rank " + std::to_string(rank);
      if (index >= 0) s += ", instruction " + std::to_string(index);
      if (execution >= 0) s += " (execution " + std::to_string(execution) + ")";
      s += ": ";
    }
    return s + reason;
  }
};

namespace detail {

inline std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Expression trees, hash-consed so that tree equality is id equality. Id 0 is
/// the undefined value. Per node, facts about its in-order leaf sequence are
/// memoised so that checking a correct result is O(1) in the common cases.
class expr_table {
 public:
  struct info {
    std::uint64_t element = 0;   ///< leaf: element index; node: common element when uniform
    std::uint32_t a = 0, b = 0;  ///< node operands; a == 0 marks a leaf
    std::int32_t execution = 0;  ///< common execution of all leaves; -1: leaves differ in element or execution
    std::uint32_t leaves = 1;    ///< number of leaves (with repetition), saturating
    std::int32_t first = 0;      ///< rank of the first leaf in order
    std::int32_t last = 0;       ///< rank of the last leaf in order
    std::int32_t cyclic = 0;     ///< leaves are exactly the distinct ranks cyclic, cyclic+1, ... (mod P); -1: not
    bool ordered = true;         ///< in-order leaves are ranks first, first+1, ..., last (uniform)
    [[nodiscard]] bool is_leaf() const noexcept { return a == 0; }
    [[nodiscard]] bool uniform() const noexcept { return execution >= 0; }
  };

  expr_table(int ranks, bool commutative) : ranks_(ranks), commutative_(commutative) {
    infos_.emplace_back();  // id 0: undefined
    infos_[0].execution = -1;
    infos_[0].cyclic = -1;
    infos_[0].ordered = false;
    infos_[0].leaves = 0;
    rehash(1u << 8);
  }

  /// A fresh leaf; the caller creates each (rank, element, execution) once.
  std::uint32_t leaf(int rank, std::uint64_t element, int execution) {
    info x;
    x.element = element;
    x.execution = execution;
    x.first = x.last = x.cyclic = rank;
    infos_.push_back(x);
    return static_cast<std::uint32_t>(infos_.size() - 1);
  }

  /// The tree `a op b`; undefined if either operand is. For a commutative
  /// operator the operands are put in a canonical order, so a op b and b op a
  /// get one id (IEEE + and * are bitwise commutative, not associative).
  std::uint32_t node(std::uint32_t a, std::uint32_t b) {
    if (a == 0 || b == 0) return 0;
    // Canonical operand order for commutative operators: by first leaf rank,
    // then id (any total order works; this one prints naturally).
    if (commutative_ && std::pair{infos_[b].first, b} < std::pair{infos_[a].first, a}) std::swap(a, b);
    const std::uint64_t key = (std::uint64_t{a} << 32) | b;
    std::size_t slot = mix64(key) & mask_;
    while (keys_[slot] != 0) {
      if (keys_[slot] == key) return values_[slot];
      slot = (slot + 1) & mask_;
    }
    const info& x = infos_[a];
    const info& y = infos_[b];
    info n;
    n.a = a;
    n.b = b;
    const bool uniform = x.uniform() && y.uniform() && x.execution == y.execution && x.element == y.element;
    n.element = x.element;
    n.execution = uniform ? x.execution : -1;
    n.leaves = x.leaves > std::numeric_limits<std::uint32_t>::max() - y.leaves
                   ? std::numeric_limits<std::uint32_t>::max()
                   : x.leaves + y.leaves;
    n.first = x.first;
    n.last = y.last;
    n.ordered = uniform && x.ordered && y.ordered && x.last + 1 == y.first;
    n.cyclic = -1;
    const auto p = static_cast<std::int64_t>(ranks_);
    if (uniform && x.cyclic >= 0 && y.cyclic >= 0 && std::int64_t{n.leaves} <= p) {
      // Two adjacent cyclic rank intervals that together fit in P are again one.
      if ((x.cyclic + std::int64_t{x.leaves}) % p == y.cyclic)
        n.cyclic = x.cyclic;
      else if ((y.cyclic + std::int64_t{y.leaves}) % p == x.cyclic)
        n.cyclic = y.cyclic;
    }
    infos_.push_back(n);
    const auto id = static_cast<std::uint32_t>(infos_.size() - 1);
    keys_[slot] = key;
    values_[slot] = id;
    if (++size_ * 2 > keys_.size()) rehash(keys_.size() * 2);
    return id;
  }

  [[nodiscard]] const info& operator[](std::uint32_t id) const { return infos_[id]; }

  /// True if the leaves of `id` are exactly one of each rank 0..P-1 (any
  /// order); the caller checks uniformity. Memoised: results are shared by ranks.
  bool each_rank_once(std::uint32_t id) {
    const info& x = infos_[id];
    if (x.leaves != static_cast<std::uint32_t>(ranks_)) return false;
    if (x.cyclic >= 0) return true;
    if (auto it = exact_.find(id); it != exact_.end()) return it->second;
    std::vector<std::uint32_t> ls;
    in_order(id, ls, static_cast<std::size_t>(ranks_));
    std::vector<bool> seen(static_cast<std::size_t>(ranks_), false);
    bool ok = ls.size() == static_cast<std::size_t>(ranks_);
    for (auto l : ls) {
      const auto r = static_cast<std::size_t>(infos_[l].first);
      if (seen[r]) ok = false;
      seen[r] = true;
    }
    exact_.emplace(id, ok);
    return ok;
  }

  /// The first `limit` leaves of `id` in order (leaf ids).
  void in_order(std::uint32_t id, std::vector<std::uint32_t>& out, std::size_t limit) const {
    out.clear();
    if (id == 0) return;
    std::vector<std::uint32_t> stack{id};
    while (!stack.empty() && out.size() < limit) {
      const auto n = stack.back();
      stack.pop_back();
      if (infos_[n].is_leaf()) {
        out.push_back(n);
      } else {
        stack.push_back(infos_[n].b);
        stack.push_back(infos_[n].a);
      }
    }
  }

  /// Human-readable tree, e.g. "((0+1)+(2+3))"; leaves are ranks when the root
  /// is uniform, else "rank[element]@execution". Cut at about `budget` characters.
  [[nodiscard]] std::string text(std::uint32_t id, std::size_t budget = 160) const {
    std::string s;
    text_into(id, s, budget, infos_[id].uniform());
    return s;
  }

 private:
  void text_into(std::uint32_t id, std::string& s, std::size_t budget, bool short_leaves) const {
    if (s.size() >= budget) {
      if (s.size() < budget + 3) s += "...";
      return;
    }
    if (id == 0) {
      s += "undefined";
      return;
    }
    const info& x = infos_[id];
    if (x.is_leaf()) {
      s += std::to_string(x.first);
      if (!short_leaves) s += "[" + std::to_string(x.element) + "]@" + std::to_string(x.execution);
      return;
    }
    s += '(';
    text_into(x.a, s, budget, short_leaves);
    s += '+';
    text_into(x.b, s, budget, short_leaves);
    s += ')';
  }

  void rehash(std::size_t n) {
    std::vector<std::uint64_t> keys(n, 0);
    std::vector<std::uint32_t> values(n, 0);
    mask_ = n - 1;
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] == 0) continue;
      std::size_t slot = mix64(keys_[i]) & mask_;
      while (keys[slot] != 0) slot = (slot + 1) & mask_;
      keys[slot] = keys_[i];
      values[slot] = values_[i];
    }
    keys_.swap(keys);
    values_.swap(values);
  }

  int ranks_;
  bool commutative_;
  std::vector<info> infos_;
  std::vector<std::uint64_t> keys_;  // open addressing; key 0 is free (operand ids are >= 1)
  std::vector<std::uint32_t> values_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::unordered_map<std::uint32_t, bool> exact_;
};

/// "recv[3]", "shm(rank 2)[3..7)": a buffer range as the instruction names it.
inline std::string name_range(const ref& r, std::size_t count) {
  std::string s{to_string(r.buf)};
  if (r.buf == buffer::shm) s += "(rank " + std::to_string(r.owner) + ")";
  s += "[" + std::to_string(r.offset);
  if (count != 1)
    s += ".." + std::to_string(r.offset + count) + ")";
  else
    s += "]";
  return s;
}

/// One element of a buffer, FastTrack style: the value, the last write's
/// epoch, and the reads since (one epoch, or a read set in a side pool).
struct cell {
  std::uint32_t value = 0;      ///< expression id; 0 = undefined
  std::uint32_t w_clock = 0;    ///< clock of the last write on w_rank
  std::int32_t w_rank = -1;     ///< -1: never written
  std::uint32_t r_clock = 0;    ///< single read: clock; read set: index into the pool
  std::int32_t r_rank = -1;     ///< -1: no read since the write; >= 0: one read; read_set: several
  std::uint32_t in_flight = 0;  ///< sends from this element not yet completed by a fence
  static constexpr std::int32_t read_set = -2;
};

class verifier {
 public:
  /// Execution e runs *programs[order[e]]; every program is of the same
  /// collective, ranks, root and nodes (verify_sequence checks it).
  verifier(std::vector<const program*> programs, std::vector<std::size_t> order, const verify_options& o)
      : progs_(std::move(programs)),
        order_(std::move(order)),
        p_(*progs_.front()),
        cur_(progs_.front()),
        o_(o),
        ranks_(p_.ranks),
        executions_(static_cast<int>(order_.size())),
        exprs_(p_.ranks > 0 ? p_.ranks : 1, o.commutative) {}

  verify_result run() {
    if (executions_ < 1) throw error(errc::invalid_argument, "verify: no execution to run (executions must be >= 1)");
    if (o_.shm_copies != 1 && o_.shm_copies != 2)
      throw error(errc::invalid_argument,
                  "verify_options::shm_copies is " + std::to_string(o_.shm_copies) + ", must be 1 or 2");
    for (std::size_t k = 0; k < progs_.size(); ++k) {
      cur_ = progs_[k];
      if (check_shape() || check_instructions()) return annotate(k);
    }
    count_signals();
    for (std::size_t k = 0; k < progs_.size(); ++k) {
      cur_ = progs_[k];
      if (check_matching()) return annotate(k);
    }
    cur_ = progs_.front();
    setup();
    simulate();
    if (!result_ && progs_.size() > 1 && result_.execution >= 0)
      result_.reason += " [execution " + std::to_string(result_.execution) + " runs program " +
                        std::to_string(order_[static_cast<std::size_t>(result_.execution)]) + " of the sequence]";
    return result_;
  }

 private:
  using tick = std::uint32_t;  // a rank's logical clock: one tick per instruction
  static constexpr int n_buffers = 4;

  struct message {
    std::vector<std::uint32_t> values;
    std::vector<tick> vc;
  };
  struct pending_send {
    std::size_t loc;  // first cell of the source
    std::size_t count;
    std::ptrdiff_t index;
  };
  struct rank_state {
    int execution = 0;
    std::ptrdiff_t pc = -1;  // -1: at the caller's boundary before `execution`
    bool finished = false;
    std::vector<pending_send> pending;
  };
  enum class step { progressed, blocked, failed };

  // ---- reporting -----------------------------------------------------------

  bool fail(property what, int rank, std::ptrdiff_t index, int execution, std::string why) {
    result_.failed = what;
    result_.rank = rank;
    result_.index = index;
    result_.execution = execution;
    result_.reason = std::move(why);
    return true;
  }

  /// A wrong result (properties 1-3) is kept while the run goes on: a race
  /// found later is reported instead, as it is the cause (values read in a
  /// race depend on the schedule). Returns false: stop checking this boundary.
  bool defer(property what, int rank, std::ptrdiff_t index, int execution, std::string why) {
    if (!deferred_) deferred_ = verify_result{what, rank, index, execution, std::move(why)};
    return false;
  }

  /// The program execution e runs (the last one for the final boundary).
  [[nodiscard]] const program& at(int e) const {
    return *progs_[order_[static_cast<std::size_t>(std::min(e, executions_ - 1))]];
  }
  [[nodiscard]] const rank_program& code_of(int r, int e) const { return at(e).code[static_cast<std::size_t>(r)]; }
  /// First clock of execution e of rank r, minus one: executions before e
  /// took one tick per instruction plus one for the caller's boundary.
  [[nodiscard]] std::size_t start_of(int r, int e) const {
    return starts_[static_cast<std::size_t>(r) * static_cast<std::size_t>(executions_ + 1) +
                   static_cast<std::size_t>(e)];
  }
  [[nodiscard]] tick clock_of(int r, int execution, std::ptrdiff_t pc) const {
    // Execution e of rank r owns clocks S+1 (caller boundary) .. S+1+L, S = start_of(r, e).
    return static_cast<tick>(start_of(r, execution) + 1 + static_cast<std::size_t>(pc + 1));
  }
  /// "rank 5 instruction 20 (execution 0)" for the access at clock k of rank u.
  [[nodiscard]] std::string describe_epoch(int u, tick k) const {
    std::size_t e = 0;
    while (static_cast<int>(e) < executions_ && start_of(u, static_cast<int>(e) + 1) + 1 <= k) ++e;
    const std::size_t slot = static_cast<std::size_t>(k) - 1 - start_of(u, static_cast<int>(e));
    if (slot == 0) {
      if (e == 0) return "rank " + std::to_string(u) + "'s caller before execution 0";
      return "rank " + std::to_string(u) + "'s caller between executions " + std::to_string(e - 1) + " and " +
             std::to_string(e);
    }
    return "rank " + std::to_string(u) + " instruction " + std::to_string(slot - 1) + " (execution " +
           std::to_string(e) + ")";
  }

  /// A static violation of program k: say which program of the sequence.
  verify_result annotate(std::size_t k) {
    if (progs_.size() > 1) result_.reason += " [program " + std::to_string(k) + " of the sequence]";
    return result_;
  }

  // ---- 0. well-formedness (static) -----------------------------------------

  bool check_shape() {
    const auto wf = [&](std::string why) { return fail(property::well_formed, -1, -1, -1, std::move(why)); };
    if (ranks_ < 1) return wf("program has " + std::to_string(ranks_) + " ranks, needs at least 1");
    // P vector clocks of P entries; message channels are keyed by from * P + to in 32 bits.
    if (ranks_ > 65536) return wf("program has " + std::to_string(ranks_) + " ranks; verify handles at most 65536");
    if (cur_->code.size() != static_cast<std::size_t>(ranks_))
      return wf("program has " + std::to_string(cur_->code.size()) + " rank programs for " + std::to_string(ranks_) +
                " ranks");
    if (!cur_->node_of.empty() && cur_->node_of.size() != static_cast<std::size_t>(ranks_))
      return wf("node_of has " + std::to_string(cur_->node_of.size()) + " entries for " + std::to_string(ranks_) +
                " ranks");
    if (cur_->flags < 0) return wf("flags is " + std::to_string(cur_->flags) + ", must not be negative");
    if ((cur_->coll == collective::reduce || cur_->coll == collective::bcast) && (cur_->root < 0 || cur_->root >= ranks_))
      return wf("root " + std::to_string(cur_->root) + " is not a rank (program has " + std::to_string(ranks_) +
                " ranks)");
    if (cur_->block_stride != 0 && cur_->block_stride < cur_->count)
      return wf("block_stride " + std::to_string(cur_->block_stride) + " is smaller than count " +
                std::to_string(cur_->count) + ", so blocks overlap");
    if (cur_->commutative_only && !o_.commutative)
      return wf("program '" + cur_->name +
                "' is correct only for commutative operators (commutative_only), but "
                "verify_options::commutative is false");
    const program& first = *progs_.front();
    if (cur_->coll != first.coll || cur_->ranks != first.ranks || cur_->node_of != first.node_of ||
        ((first.coll == collective::reduce || first.coll == collective::bcast) && cur_->root != first.root))
      return wf("a sequence runs programs of one collective, rank count, root and node layout; program '" +
                cur_->name + "' (" + std::string(to_string(cur_->coll)) + ", " + std::to_string(cur_->ranks) +
                " ranks) differs from '" + first.name + "'");
    if (o_.in_place && first.coll == collective::allgather && cur_->stride() != first.stride())
      return wf("in-place allgather programs of one sequence need the same block_stride (" +
                std::to_string(cur_->stride()) + " and " + std::to_string(first.stride()) + ")");
    std::uint64_t longest = 0;
    for (int r = 0; r < ranks_; ++r) {
      std::uint64_t total = 0;
      for (int e = 0; e < executions_; ++e) {
        const auto& code = at(e).code;  // a later program's shape is checked in its turn
        total += (static_cast<std::size_t>(r) < code.size() ? code[static_cast<std::size_t>(r)].size() : 0) + 1;
      }
      longest = std::max(longest, total);
    }
    if (longest + 3 >= std::numeric_limits<tick>::max())
      return wf("program too long to verify for " + std::to_string(executions_) + " executions");
    return false;
  }
  /// send aliases recv on rank r (verify_options::in_place).
  [[nodiscard]] bool aliased(int r) const {
    if (!o_.in_place || cur_->coll == collective::bcast) return false;
    return cur_->coll != collective::reduce || r == cur_->root;
  }
  [[nodiscard]] std::size_t send_shift(int r) const {
    return cur_->coll == collective::allgather ? cur_->stride() * static_cast<std::size_t>(r) : 0;
  }
  /// (region, first element) a ref resolves to: aliased send lands in recv.
  [[nodiscard]] std::pair<std::size_t, std::size_t> region_of(const ref& x) const {
    auto buf = x.buf;
    std::size_t off = x.offset;
    if (buf == buffer::send && aliased(x.owner)) {
      buf = buffer::recv;
      off += send_shift(x.owner);
    }
    return {static_cast<std::size_t>(x.owner) * n_buffers + static_cast<std::size_t>(buf), off};
  }
  /// True if [first, first+count) of the P-block recv touches memory between blocks.
  [[nodiscard]] bool hits_gap(std::size_t first, std::size_t count) const {
    const std::size_t stride = cur_->stride();
    if (count == 0 || stride == cur_->count) return false;
    if (first % stride >= cur_->count) return true;
    return first / stride * stride + cur_->count < first + count;
  }

  bool check_ref(int r, std::ptrdiff_t i, const char* role, const ref& x, std::size_t count, bool writes) {
    const auto wf = [&](std::string why) {
      return fail(property::well_formed, r, i, -1, std::string(role) + " " + std::move(why));
    };
    if (x.owner < 0 || x.owner >= ranks_)
      return wf("refers to " + std::string(to_string(x.buf)) + " of rank " + std::to_string(x.owner) +
                ", which does not exist (program has " + std::to_string(ranks_) + " ranks)");
    if (x.buf != buffer::shm && x.owner != r)
      return wf("refers to " + std::string(to_string(x.buf)) + " of rank " + std::to_string(x.owner) +
                "; send, recv and scratch belong to the executing rank");
    if (x.buf == buffer::shm && !cur_->same_node(r, x.owner))
      return wf("refers to shm of rank " + std::to_string(x.owner) + " on node " + std::to_string(cur_->node(x.owner)) +
                ", not this rank's node " + std::to_string(cur_->node(r)));
    const std::size_t cap = cur_->capacity(x.buf);
    if (x.offset > cap || count > cap - x.offset)
      return wf(name_range(x, count) + " is outside " + std::string(to_string(x.buf)) + " (capacity " +
                std::to_string(cap) + ")");
    if (writes && x.buf == buffer::send && !aliased(r))
      return wf("writes " + name_range(x, count) + ", but send is the caller's read-only input");
    if (writes && cur_->coll == collective::allgather) {
      auto [reg, first] = region_of(x);
      if (reg % n_buffers == static_cast<std::size_t>(buffer::recv) && hits_gap(first, count))
        return wf("writes " + name_range(x, count) + " between blocks (block_stride " + std::to_string(cur_->stride()) +
                  ", count " + std::to_string(cur_->count) + "), memory the caller owns");
    }
    return false;
  }

  /// dst may alias a source element for element, but not partially.
  bool check_overlap(int r, std::ptrdiff_t i, const char* what, const ref& dst, const ref& src, std::size_t count) {
    if (count == 0) return false;
    auto [rd, d] = region_of(dst);
    auto [rs, s] = region_of(src);
    if (rd != rs || d == s || d >= s + count || s >= d + count) return false;
    return fail(property::well_formed, r, i, -1,
                std::string(what) + " dst " + name_range(dst, count) + " partially overlaps " + name_range(src, count) +
                    "; a destination may only alias a source element for element");
  }

  bool check_flag(int r, std::ptrdiff_t i, const char* what, int flag) {
    if (flag >= 0 && flag < cur_->flags) return false;
    return fail(property::well_formed, r, i, -1,
                std::string(what) + " flag " + std::to_string(flag) + " is out of range (program has " +
                    std::to_string(cur_->flags) + " flags)");
  }
  bool check_peer(int r, std::ptrdiff_t i, const char* what, int peer) {
    if (peer < 0 || peer >= ranks_)
      return fail(property::well_formed, r, i, -1,
                  std::string(what) + " peer rank " + std::to_string(peer) + " does not exist (program has " +
                      std::to_string(ranks_) + " ranks)");
    if (peer == r)
      return fail(property::well_formed, r, i, -1, std::string(what) + " to itself (rank " + std::to_string(r) + ")");
    return false;
  }

  bool check_instructions() {
    for (int r = 0; r < ranks_; ++r) {
      const auto& code = cur_->code[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < code.size(); ++k) {
        const auto i = static_cast<std::ptrdiff_t>(k);
        const instruction& ins = code[k];
        if (const auto* c = std::get_if<copy>(&ins)) {
          if (check_ref(r, i, "copy src", c->src, c->count, false) ||
              check_ref(r, i, "copy dst", c->dst, c->count, true) ||
              check_overlap(r, i, "copy", c->dst, c->src, c->count))
            return true;
        } else if (const auto* d = std::get_if<reduce>(&ins)) {
          if (check_ref(r, i, "reduce a", d->a, d->count, false) ||
              check_ref(r, i, "reduce b", d->b, d->count, false) ||
              check_ref(r, i, "reduce dst", d->dst, d->count, true) ||
              check_overlap(r, i, "reduce", d->dst, d->a, d->count) ||
              check_overlap(r, i, "reduce", d->dst, d->b, d->count))
            return true;
        } else if (const auto* s = std::get_if<signal>(&ins)) {
          if (check_flag(r, i, "signal", s->flag)) return true;
        } else if (const auto* w = std::get_if<wait>(&ins)) {
          if (w->peer < 0 || w->peer >= ranks_)
            return fail(property::well_formed, r, i, -1,
                        "wait on rank " + std::to_string(w->peer) + ", which does not exist (program has " +
                            std::to_string(ranks_) + " ranks)");
          if (!cur_->same_node(r, w->peer))
            return fail(property::well_formed, r, i, -1,
                        "wait on rank " + std::to_string(w->peer) + " on node " + std::to_string(cur_->node(w->peer)) +
                            "; flags are only visible on this rank's node " + std::to_string(cur_->node(r)));
          if (check_flag(r, i, "wait", w->flag)) return true;
        } else if (const auto* sd = std::get_if<send>(&ins)) {
          if (check_peer(r, i, "send", sd->peer) || check_ref(r, i, "send src", sd->src, sd->count, false)) return true;
        } else if (const auto* rv = std::get_if<recv>(&ins)) {
          if (check_peer(r, i, "recv", rv->peer) || check_ref(r, i, "recv dst", rv->dst, rv->count, true)) return true;
        }
      }
    }
    return false;
  }

  [[nodiscard]] std::uint64_t channel(int from, int to, int tag) const {
    return (static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(ranks_) + static_cast<std::uint64_t>(to))
               << 32 |
           static_cast<std::uint32_t>(tag);
  }

  /// Static part of property 5. The k-th send on a channel pairs with the k-th
  /// recv in every execution, so per execution the numbers and the element
  /// counts must agree; a wait must name a signal that exists.
  bool check_matching() {
    struct ends {
      std::vector<std::pair<std::ptrdiff_t, std::size_t>> sends, recvs;  // (index, count)
    };
    std::unordered_map<std::uint64_t, ends> channels;
    for (int r = 0; r < ranks_; ++r) {
      const auto& code = cur_->code[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < code.size(); ++k) {
        if (const auto* s = std::get_if<send>(&code[k]))
          channels[channel(r, s->peer, s->tag)].sends.emplace_back(static_cast<std::ptrdiff_t>(k), s->count);
        else if (const auto* v = std::get_if<recv>(&code[k]))
          channels[channel(v->peer, r, v->tag)].recvs.emplace_back(static_cast<std::ptrdiff_t>(k), v->count);
      }
    }
    std::unordered_map<std::uint64_t, std::size_t> sent, received;
    for (int r = 0; r < ranks_; ++r) {
      const auto& code = cur_->code[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < code.size(); ++k) {
        const auto i = static_cast<std::ptrdiff_t>(k);
        if (const auto* w = std::get_if<wait>(&code[k])) {
          // A wait beyond the peer's signals of this execution needs the next
          // execution's, which never comes after the last one.
          const std::int64_t n = signals_[cur_index() * slots() + flag_slot(w->peer, w->flag)];
          if (w->value > n)
            return fail(property::deadlock, r, i, 0,
                        "waits for rank " + std::to_string(w->peer) + " flag " + std::to_string(w->flag) + " >= " +
                            std::to_string(w->value) + ", but rank " + std::to_string(w->peer) + " signals flag " +
                            std::to_string(w->flag) + " only " + std::to_string(n) + " time(s) per execution");
        } else if (const auto* s = std::get_if<send>(&code[k])) {
          const auto key = channel(r, s->peer, s->tag);
          const ends& e = channels[key];
          const std::size_t n = sent[key]++;
          if (n >= e.recvs.size())
            return fail(property::deadlock, r, i, -1,
                        "send to rank " + std::to_string(s->peer) + " tag " + std::to_string(s->tag) +
                            " has no matching recv (rank " + std::to_string(r) + " sends " +
                            std::to_string(e.sends.size()) + " message(s) with this tag to rank " +
                            std::to_string(s->peer) + " per execution, which receives " +
                            std::to_string(e.recvs.size()) + ")");
        } else if (const auto* v = std::get_if<recv>(&code[k])) {
          const auto key = channel(v->peer, r, v->tag);
          const ends& e = channels[key];
          const std::size_t n = received[key]++;
          if (n >= e.sends.size())
            return fail(property::deadlock, r, i, -1,
                        "recv from rank " + std::to_string(v->peer) + " tag " + std::to_string(v->tag) +
                            " has no matching send (rank " + std::to_string(v->peer) + " sends " +
                            std::to_string(e.sends.size()) + " message(s) with this tag to rank " + std::to_string(r) +
                            " per execution, which receives " + std::to_string(e.recvs.size()) + ")");
          if (e.sends[n].second != v->count)
            return fail(property::well_formed, r, i, -1,
                        "recv of " + std::to_string(v->count) + " element(s) from rank " + std::to_string(v->peer) +
                            " tag " + std::to_string(v->tag) + " matches a send of " +
                            std::to_string(e.sends[n].second) + " element(s) (rank " + std::to_string(v->peer) +
                            " instruction " + std::to_string(e.sends[n].first) + ")");
        }
      }
    }
    return false;
  }

  /// program::signals_per_execution for every (rank, flag), in one pass.
  /// and the signals of all executions before each execution (cum_), which
  /// is the base a wait's value counts from (program.hpp's epoch *
  /// signals_per_execution + value when every execution runs one program).
  void count_signals() {
    flags_ = 0;
    for (const program* q : progs_) flags_ = std::max(flags_, q->flags);
    const std::size_t S = slots();
    signals_.assign(progs_.size() * S, 0);
    for (std::size_t k = 0; k < progs_.size(); ++k)
      for (int r = 0; r < ranks_; ++r)
        for (const auto& ins : progs_[k]->code[static_cast<std::size_t>(r)])
          if (const auto* s = std::get_if<signal>(&ins)) ++signals_[k * S + flag_slot(r, s->flag)];
    cum_.assign(static_cast<std::size_t>(executions_ + 1) * S, 0);
    for (int e = 0; e < executions_; ++e)
      for (std::size_t i = 0; i < S; ++i)
        cum_[static_cast<std::size_t>(e + 1) * S + i] =
            cum_[static_cast<std::size_t>(e) * S + i] + signals_[order_[static_cast<std::size_t>(e)] * S + i];
  }
  [[nodiscard]] std::size_t slots() const {
    return static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(flags_);
  }
  [[nodiscard]] std::size_t cur_index() const {
    return static_cast<std::size_t>(std::find(progs_.begin(), progs_.end(), cur_) - progs_.begin());
  }

  // ---- simulation state ----------------------------------------------------

  void setup() {
    const auto P = static_cast<std::size_t>(ranks_);
    const auto F = static_cast<std::size_t>(flags_);
    // Buffers as large as the largest program of the sequence needs; shm
    // holds shm_copies copies of the largest shm.
    std::size_t recv_n = 0, send_n = 0, scratch_n = 0;
    shm_max_ = 0;
    for (const program* q : progs_) {
      recv_n = std::max(recv_n, q->recv_count());
      send_n = std::max(send_n, q->send_count());
      shm_max_ = std::max(shm_max_, q->shm_count);
      scratch_n = std::max(scratch_n, q->scratch_count);
    }
    const std::size_t shm_n = shm_max_ * static_cast<std::size_t>(o_.shm_copies);
    base_.assign(P * n_buffers, 0);
    std::size_t total = 0;
    for (int r = 0; r < ranks_; ++r) {
      const auto b = static_cast<std::size_t>(r) * n_buffers;
      const bool alias = aliased(r);
      const std::size_t recv_size = alias ? std::max(recv_n, send_shift(r) + send_n) : recv_n;
      base_[b + static_cast<std::size_t>(buffer::recv)] = total;
      total += recv_size;
      if (alias) {
        base_[b + static_cast<std::size_t>(buffer::send)] =
            base_[b + static_cast<std::size_t>(buffer::recv)] + send_shift(r);
      } else {
        base_[b + static_cast<std::size_t>(buffer::send)] = total;
        total += send_n;
      }
      base_[b + static_cast<std::size_t>(buffer::shm)] = total;
      total += shm_n;
      base_[b + static_cast<std::size_t>(buffer::scratch)] = total;
      total += scratch_n;
    }
    starts_.assign(P * static_cast<std::size_t>(executions_ + 1), 0);
    for (int r = 0; r < ranks_; ++r)
      for (int e = 0; e < executions_; ++e)
        starts_[static_cast<std::size_t>(r) * static_cast<std::size_t>(executions_ + 1) +
                static_cast<std::size_t>(e + 1)] = start_of(r, e) + code_of(r, e).size() + 1;
    cells_.assign(total, cell{});
    vc_.assign(P * P, 0);
    states_.assign(P, rank_state{});
    flag_count_.assign(P * F, 0);
    snapshots_.assign(P * F, {});
    results_.assign(static_cast<std::size_t>(executions_), {});
    results_done_.assign(static_cast<std::size_t>(executions_), 0);
  }

  /// The cell of `x` for the executing rank (shm: in the copy of its current execution).
  [[nodiscard]] std::size_t loc(const ref& x) const {
    return base_[static_cast<std::size_t>(x.owner) * n_buffers + static_cast<std::size_t>(x.buf)] + x.offset +
           (x.buf == buffer::shm ? shm_shift_ : 0);
  }
  tick* vc(int r) { return vc_.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(ranks_); }
  void join(int r, const tick* other) {
    tick* v = vc(r);
    for (int q = 0; q < ranks_; ++q) v[q] = std::max(v[q], other[q]);
  }

  // ---- 4. races: FastTrack checks per element access ------------------------

  struct access {
    int rank;
    const ref* via;  // how the instruction names the element (for messages)
    std::size_t element;
  };
  [[nodiscard]] static std::string name_of(const access& a) {
    ref x = *a.via;
    x.offset += a.element;
    return name_range(x, 1);
  }
  bool race(const access& a, std::string why) {
    const auto& st = states_[static_cast<std::size_t>(a.rank)];
    return fail(property::race, a.rank, st.pc, st.execution, std::move(why));
  }

  /// Read cell c as rank a.rank; false after reporting a race.
  bool read(cell& c, const access& a, tick now) {
    const tick* v = vc(a.rank);
    if (c.w_rank >= 0 && c.w_rank != a.rank && c.w_clock > v[c.w_rank])
      return !race(a, "reads " + name_of(a) + ", written by " + describe_epoch(c.w_rank, c.w_clock) +
                          ", but no wait or recv orders that write before this read");
    record_read(c, a.rank, now);
    return true;
  }
  void record_read(cell& c, int t, tick now) {
    const tick* v = vc(t);
    if (c.r_rank == -1 || c.r_rank == t || (c.r_rank >= 0 && c.r_clock <= v[c.r_rank])) {
      c.r_rank = t;  // the previous read happens before this one: one epoch suffices
      c.r_clock = now;
    } else if (c.r_rank >= 0) {
      std::uint32_t slot;
      if (free_sets_.empty()) {
        slot = static_cast<std::uint32_t>(read_sets_.size());
        read_sets_.emplace_back();
      } else {
        slot = free_sets_.back();
        free_sets_.pop_back();
      }
      read_sets_[slot] = {{c.r_rank, c.r_clock}, {t, now}};
      c.r_rank = cell::read_set;
      c.r_clock = slot;
    } else {
      auto& set = read_sets_[c.r_clock];
      if (set.back().first == t)
        set.back().second = now;
      else
        set.emplace_back(t, now);
    }
  }
  /// Write `value` into cell c as rank a.rank; false after reporting a race.
  bool write(cell& c, const access& a, tick now, std::uint32_t value) {
    const tick* v = vc(a.rank);
    if (c.in_flight != 0)
      return !race(
          a, "writes " + name_of(a) + " while " + in_flight_sender(c) + " from it is in flight (no fence in between)");
    if (c.w_rank >= 0 && c.w_rank != a.rank && c.w_clock > v[c.w_rank])
      return !race(a,
                   "writes " + name_of(a) + " concurrently with its write by " + describe_epoch(c.w_rank, c.w_clock));
    if (c.r_rank >= 0) {
      if (c.r_rank != a.rank && c.r_clock > v[c.r_rank])
        return !race(a, "writes " + name_of(a) + " while " + describe_epoch(c.r_rank, c.r_clock) +
                            " may still be reading it (no wait or recv orders that read before this write)");
    } else if (c.r_rank == cell::read_set) {
      for (const auto& [q, k] : read_sets_[c.r_clock])
        if (q != a.rank && k > v[q])
          return !race(a, "writes " + name_of(a) + " while " + describe_epoch(q, k) +
                              " may still be reading it (no wait or recv orders that read before this write)");
      read_sets_[c.r_clock].clear();
      free_sets_.push_back(c.r_clock);
    }
    c.r_rank = -1;
    c.w_rank = a.rank;
    c.w_clock = now;
    c.value = value;
    return true;
  }
  /// Which send keeps a cell busy (only for the message).
  std::string in_flight_sender(const cell& c) const {
    const auto at = static_cast<std::size_t>(&c - cells_.data());
    for (int r = 0; r < ranks_; ++r)
      for (const auto& s : states_[static_cast<std::size_t>(r)].pending)
        if (at >= s.loc && at < s.loc + s.count)
          return "the send at rank " + std::to_string(r) + " instruction " + std::to_string(s.index) + " (execution " +
                 std::to_string(states_[static_cast<std::size_t>(r)].execution) + ")";
    return "a send";
  }

  /// Fence: every started send has read its source; the read ends here.
  void complete_sends(int r, tick now) {
    auto& st = states_[static_cast<std::size_t>(r)];
    for (const auto& s : st.pending)
      for (std::size_t i = 0; i < s.count; ++i) {
        cell& c = cells_[s.loc + i];
        --c.in_flight;
        record_read(c, r, now);
      }
    st.pending.clear();
  }

  // ---- instructions ----------------------------------------------------------

  step exec_copy(int r, const copy& ins, tick now) {
    const std::size_t d = loc(ins.dst), s = loc(ins.src);
    for (std::size_t i = 0; i < ins.count; ++i) {
      if (!read(cells_[s + i], {r, &ins.src, i}, now)) return step::failed;
      const std::uint32_t v = cells_[s + i].value;
      if (!write(cells_[d + i], {r, &ins.dst, i}, now, v)) return step::failed;
    }
    return step::progressed;
  }
  step exec_reduce(int r, const reduce& ins, tick now) {
    const std::size_t d = loc(ins.dst), a = loc(ins.a), b = loc(ins.b);
    for (std::size_t i = 0; i < ins.count; ++i) {
      if (!read(cells_[a + i], {r, &ins.a, i}, now) || !read(cells_[b + i], {r, &ins.b, i}, now)) return step::failed;
      const std::uint32_t v = exprs_.node(cells_[a + i].value, cells_[b + i].value);
      if (!write(cells_[d + i], {r, &ins.dst, i}, now, v)) return step::failed;
    }
    return step::progressed;
  }
  [[nodiscard]] std::size_t flag_slot(int r, int flag) const {
    return static_cast<std::size_t>(r) * static_cast<std::size_t>(flags_) + static_cast<std::size_t>(flag);
  }
  [[nodiscard]] std::int64_t threshold(const wait& w, int execution) const {
    return cum_[static_cast<std::size_t>(execution) * slots() + flag_slot(w.peer, w.flag)] + w.value;
  }
  step exec_signal(int r, const signal& ins) {
    const auto f = flag_slot(r, ins.flag);
    ++flag_count_[f];
    const tick* v = vc(r);
    snapshots_[f].insert(snapshots_[f].end(), v, v + ranks_);
    return step::progressed;
  }
  step exec_wait(int r, const wait& ins, int execution) {
    const std::int64_t t = threshold(ins, execution);
    if (t <= 0) return step::progressed;  // names no signal: nothing to wait for or order
    const auto f = flag_slot(ins.peer, ins.flag);
    if (flag_count_[f] < t) return step::blocked;
    // Synchronises with the t-th signal (and so everything before it), not the latest.
    join(r, snapshots_[f].data() + static_cast<std::size_t>(t - 1) * static_cast<std::size_t>(ranks_));
    return step::progressed;
  }
  step exec_send(int r, const send& ins, std::ptrdiff_t pc) {
    message m;
    m.values.resize(ins.count);
    const std::size_t s = loc(ins.src);
    for (std::size_t i = 0; i < ins.count; ++i) {
      cell& c = cells_[s + i];
      const tick* v = vc(r);
      if (c.w_rank >= 0 && c.w_rank != r && c.w_clock > v[c.w_rank]) {
        race({r, &ins.src, i}, "sends " + name_of({r, &ins.src, i}) + ", written by " +
                                   describe_epoch(c.w_rank, c.w_clock) +
                                   ", but no wait or recv orders that write before this send");
        return step::failed;
      }
      m.values[i] = c.value;
      ++c.in_flight;
    }
    const tick* v = vc(r);
    m.vc.assign(v, v + ranks_);
    states_[static_cast<std::size_t>(r)].pending.push_back({s, ins.count, pc});
    messages_[channel(r, ins.peer, ins.tag)].push_back(std::move(m));
    return step::progressed;
  }
  step exec_recv(int r, const recv& ins, tick now) {
    auto it = messages_.find(channel(ins.peer, r, ins.tag));
    if (it == messages_.end() || it->second.empty()) return step::blocked;
    message m = std::move(it->second.front());
    it->second.pop_front();
    join(r, m.vc.data());
    const std::size_t d = loc(ins.dst);
    for (std::size_t i = 0; i < ins.count; ++i)
      if (!write(cells_[d + i], {r, &ins.dst, i}, now, m.values[i])) return step::failed;
    return step::progressed;
  }

  // ---- the caller at execution boundaries, and properties 1-3 -----------------

  /// The caller reads rank r's results of execution e-1, then writes inputs for e.
  bool boundary(int r, int e) {
    const tick now = clock_of(r, e, -1);
    vc(r)[r] = now;
    if (e > 0) {
      complete_sends(r, now);  // the end of an execution completes its sends
      if (!check_results(r, e - 1, now) && result_.failed != property::none) return false;
    }
    if (e == executions_) return true;
    // bcast: the root's data lives in its recv; everything else reads send.
    const bool bcast = p_.coll == collective::bcast;
    if (bcast && r != p_.root) return true;
    const ref input{bcast ? buffer::recv : buffer::send, r, 0};
    const std::size_t first = loc(input);
    for (std::size_t x = 0, n = bcast ? at(e).count : at(e).send_count(); x < n; ++x)
      if (!write(cells_[first + x], {r, &input, x}, now, exprs_.leaf(r, x, e))) return false;
    return true;
  }

  /// Property 1 (and 2) for one result element of rank r; the expected value
  /// is leaf(leaf_rank, element, e), or with leaf_rank < 0 the reduction over
  /// all ranks of `element`.
  bool check_element(int r, int e, std::size_t offset, int leaf_rank, std::uint64_t element, tick now) {
    cell& c = cells_[base_[static_cast<std::size_t>(r) * n_buffers + static_cast<std::size_t>(buffer::recv)] + offset];
    const ref where{buffer::recv, r, 0};
    if (!read(c, {r, &where, offset}, now)) return false;
    const std::uint32_t id = c.value;
    if (p_.coll == collective::allreduce)
      results_[static_cast<std::size_t>(e)][static_cast<std::size_t>(r)].push_back(id);
    const auto& x = exprs_[id];
    bool ok;
    if (leaf_rank >= 0)
      ok = id != 0 && x.is_leaf() && x.first == leaf_rank && x.element == element && x.execution == e;
    else
      ok = id != 0 && x.uniform() && x.element == element && x.execution == e &&
           ((x.ordered && x.first == 0 && x.last == ranks_ - 1) || exprs_.each_rank_once(id));
    const bool in_order = leaf_rank >= 0 || o_.commutative || (x.ordered && x.first == 0 && x.last == ranks_ - 1);
    if (ok && in_order) return true;
    // Point at the instruction that wrote the element in this execution, if any.
    std::ptrdiff_t index = -1;
    if (c.w_rank == r && c.w_clock > clock_of(r, e, -1))
      index = static_cast<std::ptrdiff_t>(c.w_clock - clock_of(r, e, 0));
    std::string at = "recv[" + std::to_string(offset) + "]";
    if (p_.coll == collective::allgather)
      at += " (block of rank " + std::to_string(leaf_rank) + ", element " + std::to_string(element) + ")";
    if (!ok) return defer(property::contribution, r, index, e, at + " " + mismatch(id, leaf_rank, element, e));
    return defer(property::operand_order, r, index, e, at + " " + disorder(id));
  }

  bool check_results(int r, int e, tick now) {
    auto& all = results_[static_cast<std::size_t>(e)];
    if (all.empty()) all.resize(static_cast<std::size_t>(ranks_));
    const std::size_t n = at(e).count, stride = at(e).stride();
    switch (p_.coll) {
      case collective::allreduce:
        for (std::size_t i = 0; i < n; ++i)
          if (!check_element(r, e, i, -1, i, now)) return false;
        break;
      case collective::reduce:
        if (r == p_.root)
          for (std::size_t i = 0; i < n; ++i)
            if (!check_element(r, e, i, -1, i, now)) return false;
        break;
      case collective::reduce_scatter:
        for (std::size_t i = 0; i < n; ++i)
          if (!check_element(r, e, i, -1, static_cast<std::size_t>(r) * stride + i, now)) return false;
        break;
      case collective::allgather:
        for (int q = 0; q < ranks_; ++q)
          for (std::size_t i = 0; i < n; ++i)
            if (!check_element(r, e, static_cast<std::size_t>(q) * stride + i, q, i, now)) return false;
        break;
      case collective::bcast:
        for (std::size_t i = 0; i < n; ++i)
          if (!check_element(r, e, i, p_.root, i, now)) return false;
        break;
    }
    if (++results_done_[static_cast<std::size_t>(e)] == ranks_) return check_identical(e);
    return true;
  }

  /// Property 3: all ranks hold the same tree per element. Only allreduce
  /// needs it: allgather and bcast results are pinned to a single leaf by the
  /// contribution check, and reduce / reduce_scatter results have one owner.
  bool check_identical(int e) {
    auto& res = results_[static_cast<std::size_t>(e)];
    if (p_.coll == collective::allreduce) {
      const auto& ref0 = res[0];
      for (int r = 1; r < ranks_; ++r) {
        const auto& mine = res[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < mine.size(); ++i)
          if (mine[i] != ref0[i])
            return defer(property::identical, r, -1, e,
                         "recv[" + std::to_string(i) + "] is computed as " + exprs_.text(mine[i]) +
                             ", but rank 0 computes " + exprs_.text(ref0[i]) +
                             "; the ranks' floating-point results could differ");
      }
    }
    res.clear();
    res.shrink_to_fit();
    return true;
  }

  /// Why a result is not the expected one (property 1), from its leaves.
  std::string mismatch(std::uint32_t id, int leaf_rank, std::uint64_t element, int e) {
    if (id == 0)
      return "holds an uninitialised value (nothing wrote it, or it was computed from an element nothing wrote)";
    const auto& x = exprs_[id];
    const auto P = static_cast<std::uint64_t>(ranks_);
    const std::uint64_t want = leaf_rank >= 0 ? 1 : P;
    if (x.leaves > 4 * P + 4)
      return "combines " + std::to_string(x.leaves) + " contributions, expected " + std::to_string(want) +
             " (some contribution is counted more than once)";
    std::vector<std::uint32_t> ls;
    exprs_.in_order(id, ls, x.leaves);
    for (auto l : ls) {
      const auto& y = exprs_[l];
      if (y.execution != e)
        return "holds rank " + std::to_string(y.first) + "'s input element " + std::to_string(y.element) +
               " of execution " + std::to_string(y.execution) + ", expected execution " + std::to_string(e) +
               (y.execution < e ? " (a stale value)" : " (overwritten too early)");
    }
    for (auto l : ls) {
      const auto& y = exprs_[l];
      if (y.element != element)
        return "holds element " + std::to_string(y.element) + " of rank " + std::to_string(y.first) +
               "'s input, expected element " + std::to_string(element);
    }
    if (leaf_rank >= 0) {
      if (!x.is_leaf())
        return "holds a combination of " + std::to_string(x.leaves) + " contributions, expected rank " +
               std::to_string(leaf_rank) + "'s input alone";
      return "holds rank " + std::to_string(x.first) + "'s input, expected rank " + std::to_string(leaf_rank) + "'s";
    }
    std::vector<std::uint32_t> times(static_cast<std::size_t>(ranks_), 0);
    for (auto l : ls) ++times[static_cast<std::size_t>(exprs_[l].first)];
    for (int q = 0; q < ranks_; ++q)
      if (times[static_cast<std::size_t>(q)] > 1)
        return "holds rank " + std::to_string(q) + "'s contribution " +
               std::to_string(times[static_cast<std::size_t>(q)]) + " times: " + exprs_.text(id);
    for (int q = 0; q < ranks_; ++q)
      if (times[static_cast<std::size_t>(q)] == 0)
        return "lacks rank " + std::to_string(q) + "'s contribution: " + exprs_.text(id);
    return "holds an unexpected value " + exprs_.text(id);
  }

  /// Why a complete result is out of rank order (property 2).
  std::string disorder(std::uint32_t id) {
    std::vector<std::uint32_t> ls;
    exprs_.in_order(id, ls, static_cast<std::size_t>(ranks_));
    std::string seq;
    std::string first_wrong;
    for (std::size_t k = 0; k < ls.size(); ++k) {
      const int q = exprs_[ls[k]].first;
      if (first_wrong.empty() && q != static_cast<int>(k))
        first_wrong = "rank " + std::to_string(q) + " is operand " + std::to_string(k);
      if (k < 16) seq += (k ? " " : "") + std::to_string(q);
    }
    if (ls.size() > 16) seq += " ...";
    return "combines operands out of rank order (" + first_wrong + "; in-order ranks " + seq +
           "); a non-commutative operator needs ranks 0.." + std::to_string(ranks_ - 1) + " in order";
  }

  // ---- 5. the greedy run and deadlock report ---------------------------------

  step run_rank(int r) {
    auto& st = states_[static_cast<std::size_t>(r)];
    bool moved = false;
    while (!st.finished) {
      const auto& code = code_of(r, st.execution);
      const auto L = static_cast<std::ptrdiff_t>(code.size());
      shm_shift_ = static_cast<std::size_t>(st.execution % o_.shm_copies) * shm_max_;
      if (st.pc == -1) {
        if (!boundary(r, st.execution)) return step::failed;
        if (st.execution == executions_) {
          st.finished = true;
          break;
        }
        st.pc = 0;
        moved = true;
        continue;
      }
      if (st.pc == L) {
        ++st.execution;
        st.pc = -1;
        continue;
      }
      const tick now = clock_of(r, st.execution, st.pc);
      vc(r)[r] = now;
      const instruction& ins = code[static_cast<std::size_t>(st.pc)];
      step s = step::progressed;
      switch (ins.index()) {
        case 0: s = exec_copy(r, std::get<copy>(ins), now); break;
        case 1: s = exec_reduce(r, std::get<reduce>(ins), now); break;
        case 2: s = exec_signal(r, std::get<signal>(ins)); break;
        case 3: s = exec_wait(r, std::get<wait>(ins), st.execution); break;
        case 4: s = exec_send(r, std::get<send>(ins), st.pc); break;
        case 5: s = exec_recv(r, std::get<recv>(ins), now); break;
        case 6: complete_sends(r, now); break;
      }
      if (s == step::failed) return s;
      if (s == step::blocked) return moved ? step::progressed : step::blocked;
      ++st.pc;
      moved = true;
    }
    return moved ? step::progressed : step::blocked;
  }

  void simulate() {
    for (;;) {
      bool progress = false, all_done = true;
      for (int r = 0; r < ranks_; ++r) {
        if (states_[static_cast<std::size_t>(r)].finished) continue;
        const step s = run_rank(r);
        if (s == step::failed) return;  // a race
        progress = progress || s == step::progressed;
        all_done = all_done && states_[static_cast<std::size_t>(r)].finished;
      }
      if (all_done) break;
      if (!progress) {
        // A deadlock outranks a wrong result of a later execution.
        if (!deferred_ || deferred_->execution >= blocked_execution()) {
          deferred_.reset();
          report_deadlock();
        }
        break;
      }
    }
    if (deferred_) result_ = *deferred_;
  }

  [[nodiscard]] int blocked_execution() const {
    int e = executions_;
    for (const auto& st : states_)
      if (!st.finished) e = std::min(e, st.execution);
    return e;
  }

  [[nodiscard]] std::string where_is(int q) const {
    const auto& st = states_[static_cast<std::size_t>(q)];
    if (st.finished) return "rank " + std::to_string(q) + " has finished";
    return "rank " + std::to_string(q) + " is itself blocked at instruction " + std::to_string(st.pc) + " (execution " +
           std::to_string(st.execution) + ")";
  }

  /// The rank a blocked rank r waits for (its wait's or recv's peer).
  [[nodiscard]] int blocker(int r) const {
    const auto& st = states_[static_cast<std::size_t>(r)];
    const instruction& ins = code_of(r, st.execution)[static_cast<std::size_t>(st.pc)];
    if (const auto* w = std::get_if<wait>(&ins)) return w->peer;
    return std::get<recv>(ins).peer;
  }

  /// Why blocked rank r cannot proceed.
  [[nodiscard]] std::string blocked_reason(int r) const {
    const auto& st = states_[static_cast<std::size_t>(r)];
    const instruction& ins = code_of(r, st.execution)[static_cast<std::size_t>(st.pc)];
    if (const auto* w = std::get_if<wait>(&ins))
      return "waits for rank " + std::to_string(w->peer) + " flag " + std::to_string(w->flag) +
             " >= " + std::to_string(threshold(*w, st.execution)) + " (reached " +
             std::to_string(flag_count_[flag_slot(w->peer, w->flag)]) + "), but " + where_is(w->peer);
    const auto& v = std::get<recv>(ins);
    if (states_[static_cast<std::size_t>(v.peer)].finished)
      return "recv from rank " + std::to_string(v.peer) + " tag " + std::to_string(v.tag) + " has no matching send";
    return "recv from rank " + std::to_string(v.peer) + " tag " + std::to_string(v.tag) +
           " waits for a message not yet sent, and " + where_is(v.peer);
  }

  /// Reports the lowest blocked rank and the chain of ranks it waits for.
  /// With sends and recvs matched and waits within the signals of an
  /// execution (both checked statically), a blocked rank never waits for a
  /// finished one, so the chain ends in a cycle.
  void report_deadlock() {
    int blocked = 0, primary = -1;
    for (int r = 0; r < ranks_; ++r) {
      if (states_[static_cast<std::size_t>(r)].finished) continue;
      ++blocked;
      if (primary < 0) primary = r;
    }
    std::string why = blocked_reason(primary);
    std::vector<int> seen(static_cast<std::size_t>(ranks_), 0);
    std::string chain = "rank " + std::to_string(primary);
    int hops = 0;
    for (int q = primary; !states_[static_cast<std::size_t>(q)].finished && !seen[static_cast<std::size_t>(q)];) {
      seen[static_cast<std::size_t>(q)] = 1;
      q = blocker(q);
      if (++hops > 8) {
        chain += " -> ...";
        break;
      }
      chain += " -> rank " + std::to_string(q);
    }
    why += "; " + std::to_string(blocked) + " rank(s) blocked, waiting in a chain " + chain;
    const auto& st = states_[static_cast<std::size_t>(primary)];
    fail(property::deadlock, primary, st.pc, st.execution, std::move(why));
  }

  std::vector<const program*> progs_;  // distinct programs of the sequence
  std::vector<std::size_t> order_;     // [execution] index into progs_
  const program& p_;                   // the first: collective, ranks, root, nodes of all
  const program* cur_;                 // the program the static checks look at
  const verify_options& o_;
  int ranks_;
  int executions_;
  int flags_ = 0;                      // the most flags of any program
  std::size_t shm_max_ = 0;            // the largest shm_count of any program
  std::size_t shm_shift_ = 0;          // shm copy of the executing rank's execution
  std::vector<std::size_t> starts_;    // [rank][execution]: see start_of()
  expr_table exprs_;
  verify_result result_;
  std::optional<verify_result> deferred_;

  std::vector<std::size_t> base_;  // first cell of (rank, buffer)
  std::vector<cell> cells_;
  std::vector<std::vector<std::pair<std::int32_t, tick>>> read_sets_;
  std::vector<std::uint32_t> free_sets_;
  std::vector<tick> vc_;  // P vector clocks of P entries
  std::vector<rank_state> states_;
  std::vector<std::int64_t> signals_;         // [program][rank, flag]: signals per execution
  std::vector<std::int64_t> cum_;             // [execution][rank, flag]: signals of all earlier executions
  std::vector<std::int64_t> flag_count_;      // signals so far, per (rank, flag)
  std::vector<std::vector<tick>> snapshots_;  // per (rank, flag): the vector clock of each signal
  std::unordered_map<std::uint64_t, std::deque<message>> messages_;
  std::vector<std::vector<std::vector<std::uint32_t>>> results_;  // allreduce: [execution][rank] result ids
  std::vector<int> results_done_;
};

}  // namespace detail

/// Bytes collc::verify (and verify_sequence) would hold at its peak for
/// `programs`, program k running in runs[k] of the executions, with options
/// `o`: an estimate from the sizes only, in O(instructions), saturating
/// instead of overflowing. It counts the cells of every rank's buffers (24 B
/// per element), the vector clocks (4 B * P each: one per rank, one per
/// signal of every execution, one per message in flight), the expression
/// trees (inputs and reductions of every execution), the allreduce results
/// and the per-(rank, flag) counters; not the read sets of elements read
/// concurrently by several ranks. Programs whose shape alone verify refuses
/// (ranks < 1 or > 65536, not one rank program per rank) count nothing:
/// they are reported without simulating. verify refuses a program whose
/// estimate exceeds verify_options::memory_limit.
///
///   auto bytes = collc::ir::verify_memory_estimate({&prog}, {2}, {});  // what verify(prog) needs
inline std::uint64_t verify_memory_estimate(const std::vector<const program*>& programs,
                                            const std::vector<std::uint64_t>& runs, const verify_options& o = {}) {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  auto add = [](std::uint64_t a, std::uint64_t b) { return a > max - b ? max : a + b; };
  auto mul = [](std::uint64_t a, std::uint64_t b) { return b != 0 && a > max / b ? max : a * b; };
  std::uint64_t P = 0, flags = 0, executions = 0, recv_n = 0, send_n = 0, shm_n = 0, scratch_n = 0;
  std::uint64_t snapshots = 0, expressions = 0, messages = 0, results = 0;
  for (std::size_t k = 0; k < programs.size(); ++k) {
    const program& q = *programs[k];
    if (q.ranks < 1 || q.ranks > 65536 || q.code.size() != static_cast<std::size_t>(q.ranks)) continue;
    const std::uint64_t runs_k = k < runs.size() ? runs[k] : 0;
    P = std::max<std::uint64_t>(P, static_cast<std::uint64_t>(q.ranks));
    flags = std::max<std::uint64_t>(flags, static_cast<std::uint64_t>(std::max(q.flags, 0)));
    executions = add(executions, runs_k);
    recv_n = std::max<std::uint64_t>(recv_n, q.recv_count());
    send_n = std::max<std::uint64_t>(send_n, q.send_count());
    shm_n = std::max<std::uint64_t>(shm_n, q.shm_count);
    scratch_n = std::max<std::uint64_t>(scratch_n, q.scratch_count);
    std::uint64_t signals = 0, sends = 0, sent = 0, reduced = 0;
    for (const auto& code : q.code)
      for (const auto& ins : code) {
        if (std::holds_alternative<signal>(ins)) ++signals;
        if (const auto* s = std::get_if<send>(&ins)) ++sends, sent = add(sent, s->count);
        if (const auto* d = std::get_if<reduce>(&ins)) reduced = add(reduced, d->count);
      }
    const std::uint64_t P_k = static_cast<std::uint64_t>(q.ranks);
    // Every signal of every execution keeps a snapshot of the signer's clock
    // (6 B per entry: 4, and half as much for the lists' growth).
    snapshots = add(snapshots, mul(mul(runs_k, signals), mul(P_k, 6)));
    // Fresh inputs (bcast: the root's) and one node per reduced element, per
    // execution: 40 B of node info and slack, plus hash slots per node.
    // (Measured against the peak RSS of recursive-exchange allreduces from
    // P = 8 at 1e6 elements to P = 2048 at 16: within 10%.)
    const std::uint64_t leaves = q.coll == collective::bcast ? q.count : mul(P_k, q.send_count());
    expressions = add(expressions, mul(runs_k, add(mul(leaves, 48), mul(reduced, 80))));
    // Messages of one execution in flight: a clock and the values each.
    messages = std::max(messages, add(mul(sends, add(mul(P_k, 4), 96)), mul(sent, 4)));
    // allreduce keeps the result ids of two executions at most for property 3.
    if (q.coll == collective::allreduce)
      results = std::max(results, mul(mul(P_k, q.count), mul(std::min<std::uint64_t>(runs_k, 2), 4)));
  }
  const std::uint64_t per_rank =
      add(add(recv_n, send_n), add(mul(shm_n, static_cast<std::uint64_t>(std::max(o.shm_copies, 1))), scratch_n));
  std::uint64_t bytes = mul(mul(P, per_rank), 24);  // cells (sizeof(cell))
  bytes = add(bytes, mul(mul(P, P), 4));            // the P vector clocks
  bytes = add(bytes, add(snapshots, add(expressions, add(messages, results))));
  // Flag counters and snapshot lists per (rank, flag); signals before each
  // execution; rank states and starts; the execution order.
  bytes = add(bytes, mul(mul(P, flags), add(48, mul(add(executions, programs.size() + 1), 8))));
  bytes = add(bytes, add(mul(P, add(96, mul(add(executions, 1), 8))), mul(executions, 8)));
  return bytes;
}

/// Runs every rank's program symbolically for `o.executions` back-to-back
/// executions and returns the first violation of properties 0-5 (see the file
/// comment), or a result that converts to true.
///
///   auto r = collc::verify(prog, {.commutative = false});
///   if (!r) std::cerr << r.to_string() << '\n';  // "rank 3, instruction 7 (execution 1): ..."
///
/// Throws collc::error(errc::invalid_argument) only for bad options.
namespace detail {

/// "6.6 GiB"
inline std::string byte_size(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  for (; v >= 1024 && u + 1 < std::size(units); ++u) v /= 1024;
  const auto tenths = static_cast<std::uint64_t>(v * 10 + 0.5);
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " " + units[u];
}

/// Runs the verifier on a sequence, refusing up front what would exhaust the
/// machine (the simulation holds every element of every rank and a clock
/// per signal), and turning a failed allocation the estimate missed into an
/// error that names the program (`what`).
inline verify_result run_within_limit(std::vector<const program*> ps, std::vector<std::size_t> order,
                                      const verify_options& o, const std::string& what) {
  std::vector<std::uint64_t> runs(ps.size(), 0);
  for (std::size_t k : order) ++runs[k];
  const std::uint64_t need = verify_memory_estimate(ps, runs, o);
  if (o.memory_limit != 0 && need > o.memory_limit)
    throw error(errc::invalid_argument, "verify: " + what + " needs an estimated " + byte_size(need) +
                                            " of memory, more than verify_options::memory_limit (" +
                                            byte_size(o.memory_limit) +
                                            "); verify fewer ranks, a smaller count or fewer executions, or raise "
                                            "the limit");
  try {
    return verifier(std::move(ps), std::move(order), o).run();
  } catch (const std::bad_alloc&) {
    throw error(errc::invalid_argument, "verify: out of memory verifying " + what + " (estimated " + byte_size(need) + ")");
  } catch (const std::length_error&) {
    throw error(errc::invalid_argument, "verify: out of memory verifying " + what + " (estimated " + byte_size(need) + ")");
  }
}

inline std::string describe(const program& p, std::size_t executions) {
  return "program '" + p.name + "' (" + std::string(to_string(p.coll)) + ", " + std::to_string(p.ranks) +
         " ranks, count " + std::to_string(p.count) + ", " + std::to_string(executions) + " executions)";
}

}  // namespace detail

inline verify_result verify(const program& p, const verify_options& o = {}) {
  if (o.executions < 1)
    throw error(errc::invalid_argument,
                "verify_options::executions is " + std::to_string(o.executions) + ", must be at least 1");
  const auto n = static_cast<std::size_t>(o.executions);
  return detail::run_within_limit({&p}, std::vector<std::size_t>(n, 0), o, detail::describe(p, n));
}

/// Runs a sequence of executions, execution e running programs[order[e]]
/// (o.executions is ignored), and proves properties 0-5 for it: what a
/// persistent plan runs when its calls alternate between programs, e.g. the
/// chunk program k times, a tail program, then the next call's chunks
/// (ir/sequence.hpp). A wait's value counts from the signals the peer gave
/// in all earlier executions, whichever programs they ran. The programs must
/// share collective, rank count, root and node layout.
///
///   auto r = collc::verify_sequence({chunk, tail}, {0, 0, 1, 0, 0, 1}, {.commutative = true});
inline verify_result verify_sequence(const std::vector<program>& programs, const std::vector<std::size_t>& order,
                                     const verify_options& o = {}) {
  if (programs.empty()) throw error(errc::invalid_argument, "verify_sequence: no programs");
  if (order.empty()) throw error(errc::invalid_argument, "verify_sequence: no execution to run (order is empty)");
  for (std::size_t e = 0; e < order.size(); ++e)
    if (order[e] >= programs.size())
      throw error(errc::invalid_argument, "verify_sequence: execution " + std::to_string(e) + " runs program " +
                                              std::to_string(order[e]) + ", but there are " +
                                              std::to_string(programs.size()));
  std::vector<const program*> ps;
  for (const auto& p : programs) ps.push_back(&p);
  return detail::run_within_limit(std::move(ps), order, o,
                                  "a sequence of " + std::to_string(programs.size()) + " programs, first " +
                                      detail::describe(programs.front(), order.size()));
}

/// verify(), throwing collc::error(errc::verification_failed) naming the
/// program, the property and the violation when it fails.
///
///   collc::verify_or_throw(prog, {.commutative = true, .executions = 3});
inline void verify_or_throw(const program& p, const verify_options& o = {}) {
  const verify_result r = verify(p, o);
  if (r) return;
  throw error(errc::verification_failed, "program '" + p.name + "' (" + std::string(to_string(p.coll)) + ", " +
                                             std::to_string(p.ranks) + " ranks) fails " +
                                             std::string(to_string(r.failed)) + ": " + r.to_string());
}

}  // namespace collc::ir

namespace collc {
using ir::verify;
using ir::verify_or_throw;
using ir::verify_sequence;
}  // namespace collc
