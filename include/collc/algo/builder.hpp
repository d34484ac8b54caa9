#pragma once
/// \file
/// The program builder every schedule family lowers through. Families describe
/// data movement as *pulls* ("rank r needs q's data at X, valid after q's k-th
/// signal"); the builder turns a pull into a shared-memory read (same node:
/// wait on q's flag, then read q's shm) or a message (other node: q sends,
/// r receives into scratch). It also adds the protocol every program needs:
///  - one flag per rank (flag 0) counting the rank's published stages;
///  - before a rank rewrites its shm in the next execution, it waits until
///    every rank that read that shm has passed the signal following its last
///    read (a wait with value <= 0, see ir/program.hpp), so no entry barrier
///    is needed and a peer never sees half-overwritten data;
///  - a final signal when a rank read peers' shm after its last signal;
///  - a fence at the end of ranks that send, so sources outlive the messages.
/// Families write only their own rank's shm ("pull" model), so the only
/// write-after-read hazard on shm is across executions, handled above.
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

namespace collc::algo::detail {

/// Splits `count` elements into `parts` contiguous parts whose boundaries are
/// multiples of `granule` elements (the cache-line minimum slice of Jocksch et al.
/// 2026). Parts differ in size by at most one granule; when there are
/// fewer granules than parts, trailing parts are empty.
struct partition {
  std::vector<std::size_t> offset;  // parts + 1 boundaries

  constexpr partition(std::size_t count, std::size_t parts, std::size_t granule) : offset(parts + 1, 0) {
    if (granule == 0) granule = 1;
    const std::size_t units = (count + granule - 1) / granule;
    for (std::size_t j = 0; j <= parts; ++j) offset[j] = std::min(count, (units * j / parts) * granule);
    offset[parts] = count;
  }
  [[nodiscard]] constexpr std::size_t begin(std::size_t j) const { return offset[j]; }
  [[nodiscard]] constexpr std::size_t size(std::size_t j) const { return offset[j + 1] - offset[j]; }
};

/// One piece of data rank `consumer` needs from rank `producer`.
struct pull {
  int consumer = 0;
  int producer = 0;
  ir::ref shared;  ///< where same-node consumers read it (producer's shm)
  ir::ref direct;  ///< where the producer sends it from for other nodes
  std::size_t count = 0;
  int ready = 0;          ///< producer's signal index after which the data is valid
  std::size_t first = 0;  ///< family bookkeeping (e.g. first position of the run)
};

class builder {
 public:
  constexpr builder(collective coll, int ranks, std::size_t count, int root, std::size_t block_stride,
                    std::vector<int> node_of)
      : signals_(static_cast<std::size_t>(ranks), 0),
        reads_(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks), -1),
        pending_read_(static_cast<std::size_t>(ranks), false),
        scratch_(static_cast<std::size_t>(ranks), 0),
        sends_(static_cast<std::size_t>(ranks), false),
        user_send_in_flight_(static_cast<std::size_t>(ranks), false),
        waited_(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(ranks), 0) {
    prog_.coll = coll;
    prog_.ranks = ranks;
    prog_.count = count;
    prog_.root = root;
    prog_.block_stride = block_stride;
    prog_.flags = 1;
    prog_.node_of = std::move(node_of);
    prog_.code.resize(static_cast<std::size_t>(ranks));
    // Longer than the small-string buffer: g++ 12 cannot move a short
    // std::string during constant evaluation (lowering is constexpr).
    prog_.name = "schedule lowered by collc::algo";
  }

  [[nodiscard]] constexpr int ranks() const { return prog_.ranks; }
  [[nodiscard]] constexpr const ir::program& program() const { return prog_; }
  [[nodiscard]] constexpr bool same_node(int a, int b) const { return prog_.same_node(a, b); }

  /// Reserves `n` elements of shm at the same offset on every rank.
  constexpr std::size_t alloc_shm(std::size_t n) {
    const std::size_t at = prog_.shm_count;
    prog_.shm_count += n;
    return at;
  }
  /// Reserves `n` elements of rank r's scratch.
  constexpr std::size_t alloc_scratch(int r, std::size_t n) {
    auto& used = scratch_[idx(r)];
    const std::size_t at = used;
    used += n;
    prog_.scratch_count = std::max(prog_.scratch_count, used);
    return at;
  }

  constexpr void copy(int r, ir::ref dst, ir::ref src, std::size_t n) {
    if (n == 0) return;
    note_read(r, src);
    note_write(r, dst);
    auto& code = prog_.code[idx(r)];
    if (!code.empty()) {
      // Adjacent pieces of one logical copy become one instruction.
      if (auto* last = std::get_if<ir::copy>(&code.back());
          last && follows(last->dst, last->count, dst) && follows(last->src, last->count, src)) {
        last->count += n;
        return;
      }
    }
    code.push_back(ir::copy{dst, src, n});
  }

  constexpr void reduce(int r, ir::ref dst, ir::ref a, ir::ref b, std::size_t n) {
    if (n == 0) return;
    note_read(r, a);
    note_read(r, b);
    note_write(r, dst);
    auto& code = prog_.code[idx(r)];
    if (!code.empty()) {
      if (auto* last = std::get_if<ir::reduce>(&code.back()); last && follows(last->dst, last->count, dst) &&
                                                              follows(last->a, last->count, a) &&
                                                              follows(last->b, last->count, b)) {
        last->count += n;
        return;
      }
    }
    code.push_back(ir::reduce{dst, a, b, n});
  }

  /// dst = in[0] op in[1] op ... in rank order (left fold, the expression
  /// every rank that computes this value must share).
  /// When dst is the user's recv and a later operand is a user buffer, the
  /// partial folds run in scratch: with MPI_IN_PLACE, send and recv are the
  /// same memory, so recv may only be written once every operand was read.
  constexpr void reduce_chain(int r, ir::ref dst, const std::vector<ir::ref>& in, std::size_t n) {
    if (in.size() == 1) {
      if (in[0] != dst) copy(r, dst, in[0], n);
      return;
    }
    bool user_later = false;
    for (std::size_t t = 2; t < in.size(); ++t) user_later = user_later || is_user(in[t]);
    const ir::ref acc = (is_user(dst) && user_later) ? ir::ref{ir::buffer::scratch, r, alloc_scratch(r, n)} : dst;
    ir::ref prev = in[0];
    for (std::size_t t = 1; t < in.size(); ++t) {
      const ir::ref out = t + 1 == in.size() ? dst : acc;
      reduce(r, out, prev, in[t], n);
      prev = out;
    }
  }

  /// Signals that rank r finished its reads so far and published its writes;
  /// returns the signal's index in the execution (1-based).
  constexpr int publish(int r) {
    prog_.code[idx(r)].push_back(ir::signal{0});
    pending_read_[idx(r)] = false;
    return ++signals_[idx(r)];
  }
  [[nodiscard]] constexpr int published(int r) const { return signals_[idx(r)]; }

  /// Makes q's data visible to r: a wait on q's signal `ready` (skipped when
  /// r already waited for that or a later signal of q in this execution).
  constexpr void wait_for(int r, int q, int ready) {
    if (r == q || ready <= 0) return;
    auto& seen = waited_[idx(r) * idx_n() + idx(q)];
    if (seen >= ready) return;
    seen = ready;
    prog_.code[idx(r)].push_back(ir::wait{q, 0, ready});
  }

  /// Resolves one step's pulls: first every producer sends what other nodes
  /// need (so messages are in flight before anyone blocks), then every
  /// consumer waits (same node) or receives into fresh scratch (other node).
  /// Returns, per pull, the ref the consumer reads.
  constexpr std::vector<ir::ref> fetch(const std::vector<pull>& pulls) {
    std::vector<ir::ref> where(pulls.size());
    ++tag_;
    for (const auto& p : pulls) {
      if (p.count == 0 || p.consumer == p.producer || same_node(p.consumer, p.producer)) continue;
      prog_.code[idx(p.producer)].push_back(ir::send{p.consumer, p.direct, p.count, tag_});
      sends_[idx(p.producer)] = true;
      if (is_user(p.direct)) user_send_in_flight_[idx(p.producer)] = true;
    }
    for (std::size_t i = 0; i < pulls.size(); ++i) {
      const auto& p = pulls[i];
      if (p.consumer == p.producer) {
        where[i] = p.direct;
      } else if (same_node(p.consumer, p.producer)) {
        if (p.count != 0) wait_for(p.consumer, p.producer, p.ready);
        where[i] = p.shared;
      } else {
        const std::size_t at = alloc_scratch(p.consumer, p.count);
        where[i] = ir::ref{ir::buffer::scratch, p.consumer, at};
        if (p.count != 0) prog_.code[idx(p.consumer)].push_back(ir::recv{p.producer, where[i], p.count, tag_});
      }
    }
    return where;
  }

  /// Completes the protocol (see the file comment) and returns the program.
  constexpr ir::program finish(bool commutative_only, std::string_view name) && {
    const int n = ranks();
    for (int r = 0; r < n; ++r) {
      if (pending_read_[idx(r)]) publish(r);
      if (sends_[idx(r)]) prog_.code[idx(r)].push_back(ir::fence{});
    }
    for (int owner = 0; owner < n; ++owner) {
      std::vector<ir::instruction> guard;
      for (int reader = 0; reader < n; ++reader) {
        const int done = reads_[idx(owner) * idx_n() + idx(reader)];
        if (reader == owner || done < 0) continue;
        // `done` is the reader's first signal after its last read of owner's
        // shm; relative to the next execution it is done - S(reader) <= 0.
        guard.push_back(ir::wait{reader, 0, static_cast<std::int64_t>(done) - signals_[idx(reader)]});
      }
      auto& code = prog_.code[idx(owner)];
      code.insert(code.begin(), guard.begin(), guard.end());
    }
    prog_.commutative_only = commutative_only;
    if (!std::is_constant_evaluated() && !name.empty()) prog_.name = std::string(name);
    return std::move(prog_);
  }

 private:
  [[nodiscard]] static constexpr std::size_t idx(int r) { return static_cast<std::size_t>(r); }
  [[nodiscard]] constexpr std::size_t idx_n() const { return static_cast<std::size_t>(prog_.ranks); }

  static constexpr bool follows(const ir::ref& prev, std::size_t prev_count, const ir::ref& next) {
    return prev.buf == next.buf && prev.owner == next.owner && prev.offset + prev_count == next.offset;
  }

  static constexpr bool is_user(const ir::ref& x) { return x.buf == ir::buffer::send || x.buf == ir::buffer::recv; }

  // Messages read their source until a fence; with MPI_IN_PLACE a send from
  // the user's buffer and a later write to recv touch the same memory, so a
  // write to a user buffer first completes such sends.
  constexpr void note_write(int r, const ir::ref& dst) {
    if (!is_user(dst) || !user_send_in_flight_[idx(r)]) return;
    prog_.code[idx(r)].push_back(ir::fence{});
    user_send_in_flight_[idx(r)] = false;
  }

  // A read of another rank's shm: remember the reader's next signal index.
  constexpr void note_read(int r, const ir::ref& src) {
    if (src.buf != ir::buffer::shm || src.owner == r) return;
    reads_[idx(src.owner) * idx_n() + idx(r)] = signals_[idx(r)] + 1;
    pending_read_[idx(r)] = true;
  }

  ir::program prog_;
  std::vector<int> signals_;        // signals emitted so far, per rank
  std::vector<int> reads_;          // [owner][reader]: reader's signal index after its last read
  std::vector<bool> pending_read_;  // rank read a peer's shm since its last signal
  std::vector<std::size_t> scratch_;
  std::vector<bool> sends_;
  std::vector<bool> user_send_in_flight_;
  std::vector<int> waited_;  // [r][q]: highest signal of q that r already waited for
  int tag_ = 0;
};

/// A builder seen through a subset of its ranks: virtual rank v is real rank
/// members[v]. Lets a family lower over P' < P ranks (recursive doubling with
/// the remainder folded in) without knowing about the other ranks. Refs are
/// translated on the way in (virtual owner -> real) and out (real -> virtual).
class builder_view {
 public:
  constexpr builder_view(builder& b, std::vector<int> members) : b_(b), real_(std::move(members)) {
    virt_.assign(static_cast<std::size_t>(b.ranks()), -1);
    for (std::size_t v = 0; v < real_.size(); ++v) virt_[static_cast<std::size_t>(real_[v])] = static_cast<int>(v);
  }
  [[nodiscard]] constexpr int ranks() const { return static_cast<int>(real_.size()); }
  [[nodiscard]] constexpr int real(int v) const { return real_[static_cast<std::size_t>(v)]; }
  [[nodiscard]] constexpr bool same_node(int a, int c) const { return b_.same_node(real(a), real(c)); }
  constexpr std::size_t alloc_shm(std::size_t n) { return b_.alloc_shm(n); }
  constexpr std::size_t alloc_scratch(int r, std::size_t n) { return b_.alloc_scratch(real(r), n); }
  constexpr void copy(int r, ir::ref dst, ir::ref src, std::size_t n) { b_.copy(real(r), in(dst), in(src), n); }
  constexpr void reduce(int r, ir::ref dst, ir::ref a, ir::ref c, std::size_t n) {
    b_.reduce(real(r), in(dst), in(a), in(c), n);
  }
  constexpr int publish(int r) { return b_.publish(real(r)); }
  constexpr std::vector<ir::ref> fetch(std::vector<pull> pulls) {
    for (auto& p : pulls) {
      p.consumer = real(p.consumer);
      p.producer = real(p.producer);
      p.shared = in(p.shared);
      p.direct = in(p.direct);
    }
    auto got = b_.fetch(pulls);
    for (auto& g : got) g.owner = virt_[static_cast<std::size_t>(g.owner)];
    return got;
  }

 private:
  [[nodiscard]] constexpr ir::ref in(ir::ref x) const { return {x.buf, real(x.owner), x.offset}; }
  builder& b_;
  std::vector<int> real_, virt_;
};

}  // namespace collc::algo::detail
