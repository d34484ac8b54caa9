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
#include <limits>
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
  verifier(const program& p, const verify_options& o)
      : p_(p), o_(o), ranks_(p.ranks), exprs_(p.ranks > 0 ? p.ranks : 1, o.commutative) {}

  verify_result run() {
    if (o_.executions < 1)
      throw error(errc::invalid_argument,
                  "verify_options::executions is " + std::to_string(o_.executions) + ", must be at least 1");
    if (check_shape() || check_instructions()) return result_;
    count_signals();
    if (check_matching()) return result_;
    setup();
    simulate();
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

  [[nodiscard]] std::size_t len(int r) const { return p_.code[static_cast<std::size_t>(r)].size(); }
  [[nodiscard]] tick clock_of(int r, int execution, std::ptrdiff_t pc) const {
    // Execution e of rank r owns clocks e*(L+1)+1 (caller boundary) .. e*(L+1)+1+L.
    return static_cast<tick>(static_cast<std::size_t>(execution) * (len(r) + 1) + 1 + static_cast<std::size_t>(pc + 1));
  }
  /// "rank 5 instruction 20 (execution 0)" for the access at clock k of rank u.
  [[nodiscard]] std::string describe_epoch(int u, tick k) const {
    const std::size_t span = len(u) + 1;
    const auto e = static_cast<std::size_t>(k - 1) / span;
    const auto slot = static_cast<std::size_t>(k - 1) % span;
    if (slot == 0) {
      if (e == 0) return "rank " + std::to_string(u) + "'s caller before execution 0";
      return "rank " + std::to_string(u) + "'s caller between executions " + std::to_string(e - 1) + " and " +
             std::to_string(e);
    }
    return "rank " + std::to_string(u) + " instruction " + std::to_string(slot - 1) + " (execution " +
           std::to_string(e) + ")";
  }

  // ---- 0. well-formedness (static) -----------------------------------------

  bool check_shape() {
    const auto wf = [&](std::string why) { return fail(property::well_formed, -1, -1, -1, std::move(why)); };
    if (ranks_ < 1) return wf("program has " + std::to_string(ranks_) + " ranks, needs at least 1");
    // P vector clocks of P entries; message channels are keyed by from * P + to in 32 bits.
    if (ranks_ > 65536) return wf("program has " + std::to_string(ranks_) + " ranks; verify handles at most 65536");
    if (p_.code.size() != static_cast<std::size_t>(ranks_))
      return wf("program has " + std::to_string(p_.code.size()) + " rank programs for " + std::to_string(ranks_) +
                " ranks");
    if (!p_.node_of.empty() && p_.node_of.size() != static_cast<std::size_t>(ranks_))
      return wf("node_of has " + std::to_string(p_.node_of.size()) + " entries for " + std::to_string(ranks_) +
                " ranks");
    if (p_.flags < 0) return wf("flags is " + std::to_string(p_.flags) + ", must not be negative");
    if ((p_.coll == collective::reduce || p_.coll == collective::bcast) && (p_.root < 0 || p_.root >= ranks_))
      return wf("root " + std::to_string(p_.root) + " is not a rank (program has " + std::to_string(ranks_) +
                " ranks)");
    if (p_.block_stride != 0 && p_.block_stride < p_.count)
      return wf("block_stride " + std::to_string(p_.block_stride) + " is smaller than count " +
                std::to_string(p_.count) + ", so blocks overlap");
    if (p_.commutative_only && !o_.commutative)
      return wf("program '" + p_.name +
                "' is correct only for commutative operators (commutative_only), but "
                "verify_options::commutative is false");
    const auto max_clock = static_cast<std::uint64_t>(o_.executions + 1) * (std::uint64_t{len_max()} + 1) + 2;
    if (max_clock >= std::numeric_limits<tick>::max())
      return wf("program too long to verify for " + std::to_string(o_.executions) + " executions");
    return false;
  }
  [[nodiscard]] std::size_t len_max() const {
    std::size_t m = 0;
    for (const auto& c : p_.code) m = std::max(m, c.size());
    return m;
  }

  /// send aliases recv on rank r (verify_options::in_place).
  [[nodiscard]] bool aliased(int r) const {
    if (!o_.in_place || p_.coll == collective::bcast) return false;
    return p_.coll != collective::reduce || r == p_.root;
  }
  [[nodiscard]] std::size_t send_shift(int r) const {
    return p_.coll == collective::allgather ? p_.stride() * static_cast<std::size_t>(r) : 0;
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
    const std::size_t stride = p_.stride();
    if (count == 0 || stride == p_.count) return false;
    if (first % stride >= p_.count) return true;
    return first / stride * stride + p_.count < first + count;
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
    if (x.buf == buffer::shm && !p_.same_node(r, x.owner))
      return wf("refers to shm of rank " + std::to_string(x.owner) + " on node " + std::to_string(p_.node(x.owner)) +
                ", not this rank's node " + std::to_string(p_.node(r)));
    const std::size_t cap = p_.capacity(x.buf);
    if (x.offset > cap || count > cap - x.offset)
      return wf(name_range(x, count) + " is outside " + std::string(to_string(x.buf)) + " (capacity " +
                std::to_string(cap) + ")");
    if (writes && x.buf == buffer::send && !aliased(r))
      return wf("writes " + name_range(x, count) + ", but send is the caller's read-only input");
    if (writes && p_.coll == collective::allgather) {
      auto [reg, first] = region_of(x);
      if (reg % n_buffers == static_cast<std::size_t>(buffer::recv) && hits_gap(first, count))
        return wf("writes " + name_range(x, count) + " between blocks (block_stride " + std::to_string(p_.stride()) +
                  ", count " + std::to_string(p_.count) + "), memory the caller owns");
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
    if (flag >= 0 && flag < p_.flags) return false;
    return fail(property::well_formed, r, i, -1,
                std::string(what) + " flag " + std::to_string(flag) + " is out of range (program has " +
                    std::to_string(p_.flags) + " flags)");
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
      const auto& code = p_.code[static_cast<std::size_t>(r)];
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
          if (!p_.same_node(r, w->peer))
            return fail(property::well_formed, r, i, -1,
                        "wait on rank " + std::to_string(w->peer) + " on node " + std::to_string(p_.node(w->peer)) +
                            "; flags are only visible on this rank's node " + std::to_string(p_.node(r)));
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
      const auto& code = p_.code[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < code.size(); ++k) {
        if (const auto* s = std::get_if<send>(&code[k]))
          channels[channel(r, s->peer, s->tag)].sends.emplace_back(static_cast<std::ptrdiff_t>(k), s->count);
        else if (const auto* v = std::get_if<recv>(&code[k]))
          channels[channel(v->peer, r, v->tag)].recvs.emplace_back(static_cast<std::ptrdiff_t>(k), v->count);
      }
    }
    std::unordered_map<std::uint64_t, std::size_t> sent, received;
    for (int r = 0; r < ranks_; ++r) {
      const auto& code = p_.code[static_cast<std::size_t>(r)];
      for (std::size_t k = 0; k < code.size(); ++k) {
        const auto i = static_cast<std::ptrdiff_t>(k);
        if (const auto* w = std::get_if<wait>(&code[k])) {
          // A wait beyond the peer's signals of this execution needs the next
          // execution's, which never comes after the last one.
          const std::int64_t n = signals_[flag_slot(w->peer, w->flag)];
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
  void count_signals() {
    signals_.assign(static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(p_.flags), 0);
    for (int r = 0; r < ranks_; ++r)
      for (const auto& ins : p_.code[static_cast<std::size_t>(r)])
        if (const auto* s = std::get_if<signal>(&ins)) ++signals_[flag_slot(r, s->flag)];
  }

  // ---- simulation state ----------------------------------------------------

  void setup() {
    const auto P = static_cast<std::size_t>(ranks_);
    const auto F = static_cast<std::size_t>(p_.flags);
    base_.assign(P * n_buffers, 0);
    std::size_t total = 0;
    for (int r = 0; r < ranks_; ++r) {
      const auto b = static_cast<std::size_t>(r) * n_buffers;
      const bool alias = aliased(r);
      const std::size_t recv_size =
          alias ? std::max(p_.recv_count(), send_shift(r) + p_.send_count()) : p_.recv_count();
      base_[b + static_cast<std::size_t>(buffer::recv)] = total;
      total += recv_size;
      if (alias) {
        base_[b + static_cast<std::size_t>(buffer::send)] =
            base_[b + static_cast<std::size_t>(buffer::recv)] + send_shift(r);
      } else {
        base_[b + static_cast<std::size_t>(buffer::send)] = total;
        total += p_.send_count();
      }
      base_[b + static_cast<std::size_t>(buffer::shm)] = total;
      total += p_.shm_count;
      base_[b + static_cast<std::size_t>(buffer::scratch)] = total;
      total += p_.scratch_count;
    }
    cells_.assign(total, cell{});
    vc_.assign(P * P, 0);
    states_.assign(P, rank_state{});
    flag_count_.assign(P * F, 0);
    snapshots_.assign(P * F, {});
    results_.assign(static_cast<std::size_t>(o_.executions), {});
    results_done_.assign(static_cast<std::size_t>(o_.executions), 0);
  }

  [[nodiscard]] std::size_t loc(const ref& x) const {
    return base_[static_cast<std::size_t>(x.owner) * n_buffers + static_cast<std::size_t>(x.buf)] + x.offset;
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
    return static_cast<std::size_t>(r) * static_cast<std::size_t>(p_.flags) + static_cast<std::size_t>(flag);
  }
  [[nodiscard]] std::int64_t threshold(const wait& w, int execution) const {
    return static_cast<std::int64_t>(execution) * signals_[flag_slot(w.peer, w.flag)] + w.value;
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
    if (e == o_.executions) return true;
    // bcast: the root's data lives in its recv; everything else reads send.
    const bool bcast = p_.coll == collective::bcast;
    if (bcast && r != p_.root) return true;
    const ref input{bcast ? buffer::recv : buffer::send, r, 0};
    const std::size_t at = loc(input);
    for (std::size_t x = 0, n = bcast ? p_.count : p_.send_count(); x < n; ++x)
      if (!write(cells_[at + x], {r, &input, x}, now, exprs_.leaf(r, x, e))) return false;
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
    const std::size_t n = p_.count, stride = p_.stride();
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
    const auto& code = p_.code[static_cast<std::size_t>(r)];
    const auto L = static_cast<std::ptrdiff_t>(code.size());
    bool moved = false;
    while (!st.finished) {
      if (st.pc == -1) {
        if (!boundary(r, st.execution)) return step::failed;
        if (st.execution == o_.executions) {
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
    int e = o_.executions;
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
    const instruction& ins = p_.code[static_cast<std::size_t>(r)][static_cast<std::size_t>(st.pc)];
    if (const auto* w = std::get_if<wait>(&ins)) return w->peer;
    return std::get<recv>(ins).peer;
  }

  /// Why blocked rank r cannot proceed.
  [[nodiscard]] std::string blocked_reason(int r) const {
    const auto& st = states_[static_cast<std::size_t>(r)];
    const instruction& ins = p_.code[static_cast<std::size_t>(r)][static_cast<std::size_t>(st.pc)];
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

  const program& p_;
  const verify_options& o_;
  int ranks_;
  expr_table exprs_;
  verify_result result_;
  std::optional<verify_result> deferred_;

  std::vector<std::size_t> base_;  // first cell of (rank, buffer)
  std::vector<cell> cells_;
  std::vector<std::vector<std::pair<std::int32_t, tick>>> read_sets_;
  std::vector<std::uint32_t> free_sets_;
  std::vector<tick> vc_;  // P vector clocks of P entries
  std::vector<rank_state> states_;
  std::vector<std::int64_t> signals_;         // signals per execution, per (rank, flag)
  std::vector<std::int64_t> flag_count_;      // signals so far, per (rank, flag)
  std::vector<std::vector<tick>> snapshots_;  // per (rank, flag): the vector clock of each signal
  std::unordered_map<std::uint64_t, std::deque<message>> messages_;
  std::vector<std::vector<std::vector<std::uint32_t>>> results_;  // allreduce: [execution][rank] result ids
  std::vector<int> results_done_;
};

}  // namespace detail

/// Runs every rank's program symbolically for `o.executions` back-to-back
/// executions and returns the first violation of properties 0-5 (see the file
/// comment), or a result that converts to true.
///
///   auto r = collc::verify(prog, {.commutative = false});
///   if (!r) std::cerr << r.to_string() << '\n';  // "rank 3, instruction 7 (execution 1): ..."
///
/// Throws collc::error(errc::invalid_argument) only for bad options.
inline verify_result verify(const program& p, const verify_options& o = {}) { return detail::verifier(p, o).run(); }

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
}  // namespace collc
