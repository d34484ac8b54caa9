#pragma once
// Property 0, well_formed (static): the shape of each program of the
// sequence, then every ref, flag and peer of every instruction.
#include <collc/ir/verify.hpp>

#include <collc/ir/verify/sequence.ipp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <variant>

namespace collc::ir::detail::verification {

/// The program-wide rules for program `cur` of the sequence: rank count,
/// node layout, flags, root, block stride, operator, agreement with the first
/// program, and a length the clocks can count.
COLLC_INLINE finding check_shape(const sequence& s, const program& cur) {
  const auto wf = [](std::string why) { return violation(property::well_formed, -1, -1, -1, std::move(why)); };
  const int ranks = s.ranks;
  if (ranks < 1) return wf(cat("program has ", ranks, " ranks, needs at least 1"));
  // P vector clocks of P entries; message channels are keyed by from * P + to in 32 bits.
  if (ranks > 65536) return wf(cat("program has ", ranks, " ranks; verify handles at most 65536"));
  if (cur.code.size() != static_cast<std::size_t>(ranks))
    return wf(cat("program has ", cur.code.size(), " rank programs for ", ranks, " ranks"));
  if (!cur.node_of.empty() && cur.node_of.size() != static_cast<std::size_t>(ranks))
    return wf(cat("node_of has ", cur.node_of.size(), " entries for ", ranks, " ranks"));
  if (cur.flags < 0) return wf(cat("flags is ", cur.flags, ", must not be negative"));
  if ((cur.coll == collective::reduce || cur.coll == collective::bcast) && (cur.root < 0 || cur.root >= ranks))
    return wf(cat("root ", cur.root, " is not a rank (program has ", ranks, " ranks)"));
  if (cur.block_stride != 0 && cur.block_stride < cur.count)
    return wf(cat("block_stride ", cur.block_stride, " is smaller than count ", cur.count, ", so blocks overlap"));
  if (cur.commutative_only && !s.o.commutative)
    return wf(cat("program '", cur.name,
                  "' is correct only for commutative operators (commutative_only), but "
                  "verify_options::commutative is false"));
  const program& first = s.first();
  if (cur.coll != first.coll || cur.ranks != first.ranks || cur.node_of != first.node_of ||
      ((first.coll == collective::reduce || first.coll == collective::bcast) && cur.root != first.root))
    return wf(cat("a sequence runs programs of one collective, rank count, root and node layout; program '", cur.name,
                  "' (", to_string(cur.coll), ", ", cur.ranks, " ranks) differs from '", first.name, "'"));
  if (s.o.in_place && first.coll == collective::allgather && cur.stride() != first.stride())
    return wf(cat("in-place allgather programs of one sequence need the same block_stride (", cur.stride(), " and ",
                  first.stride(), ")"));
  std::uint64_t longest = 0;
  for (int r = 0; r < ranks; ++r) {
    std::uint64_t total = 0;
    for (int e = 0; e < s.executions; ++e) {
      const auto& code = s.at(e).code;  // a later program's shape is checked in its turn
      total += (static_cast<std::size_t>(r) < code.size() ? code[static_cast<std::size_t>(r)].size() : 0) + 1;
    }
    longest = std::max(longest, total);
  }
  if (longest + 3 >= std::numeric_limits<tick>::max())
    return wf(cat("program too long to verify for ", s.executions, " executions"));
  return std::nullopt;
}

/// The references, flags and peers of one instruction (at rank r, index i)
/// of program `cur`: a value the checks below share.
struct instruction_site {
  const sequence& s;
  const program& cur;
  int r;
  std::ptrdiff_t i;

  [[nodiscard]] verify_result fail(std::string why) const {
    return violation(property::well_formed, r, i, -1, std::move(why));
  }

  /// (region, first element) a ref resolves to: aliased send lands in recv.
  [[nodiscard]] std::pair<std::size_t, std::size_t> region_of(const ref& x) const {
    auto buf = x.buf;
    std::size_t off = x.offset;
    if (buf == buffer::send && aliased(cur, s.o, x.owner)) {
      buf = buffer::recv;
      off += send_shift(cur, x.owner);
    }
    return {static_cast<std::size_t>(x.owner) * n_buffers + static_cast<std::size_t>(buf), off};
  }
  /// True if [first, first+count) of the P-block recv touches memory between blocks.
  [[nodiscard]] bool hits_gap(std::size_t first, std::size_t count) const {
    const std::size_t stride = cur.stride();
    if (count == 0 || stride == cur.count) return false;
    if (first % stride >= cur.count) return true;
    return first / stride * stride + cur.count < first + count;
  }

  /// A buffer range the instruction reads (or `writes`): exists, belongs to
  /// this rank (shm: to this node), fits, and is writable.
  [[nodiscard]] finding ref_ok(const char* role, const ref& x, std::size_t count, bool writes) const {
    const auto wf = [&](std::string why) { return fail(cat(role, ' ', why)); };
    if (x.owner < 0 || x.owner >= s.ranks)
      return wf(cat("refers to ", to_string(x.buf), " of rank ", x.owner, ", which does not exist (program has ",
                    s.ranks, " ranks)"));
    if (x.buf != buffer::shm && x.owner != r)
      return wf(cat("refers to ", to_string(x.buf), " of rank ", x.owner,
                    "; send, recv and scratch belong to the executing rank"));
    if (x.buf == buffer::shm && !cur.same_node(r, x.owner))
      return wf(cat("refers to shm of rank ", x.owner, " on node ", cur.node(x.owner), ", not this rank's node ",
                    cur.node(r)));
    const std::size_t cap = cur.capacity(x.buf);
    if (x.offset > cap || count > cap - x.offset)
      return wf(cat(name_range(x, count), " is outside ", to_string(x.buf), " (capacity ", cap, ')'));
    if (writes && x.buf == buffer::send && !aliased(cur, s.o, r))
      return wf(cat("writes ", name_range(x, count), ", but send is the caller's read-only input"));
    if (writes && cur.coll == collective::allgather) {
      auto [reg, first] = region_of(x);
      if (reg % n_buffers == static_cast<std::size_t>(buffer::recv) && hits_gap(first, count))
        return wf(cat("writes ", name_range(x, count), " between blocks (block_stride ", cur.stride(), ", count ",
                      cur.count, "), memory the caller owns"));
    }
    return std::nullopt;
  }

  /// dst may alias a source element for element, but not partially.
  [[nodiscard]] finding overlap_ok(const char* what, const ref& dst, const ref& src, std::size_t count) const {
    if (count == 0) return std::nullopt;
    auto [rd, d] = region_of(dst);
    auto [rs, b] = region_of(src);
    if (rd != rs || d == b || d >= b + count || b >= d + count) return std::nullopt;
    return fail(cat(what, " dst ", name_range(dst, count), " partially overlaps ", name_range(src, count),
                    "; a destination may only alias a source element for element"));
  }

  [[nodiscard]] finding flag_ok(const char* what, int flag) const {
    if (flag >= 0 && flag < cur.flags) return std::nullopt;
    return fail(cat(what, " flag ", flag, " is out of range (program has ", cur.flags, " flags)"));
  }
  [[nodiscard]] finding peer_ok(const char* what, int peer) const {
    if (peer < 0 || peer >= s.ranks)
      return fail(cat(what, " peer rank ", peer, " does not exist (program has ", s.ranks, " ranks)"));
    if (peer == r) return fail(cat(what, " to itself (rank ", r, ')'));
    return std::nullopt;
  }
};

/// Every ref, flag and peer of one instruction, in operand order.
COLLC_INLINE finding check_instruction(const instruction_site& at, const instruction& ins) {
  const program& cur = at.cur;
  const int r = at.r;
  if (const auto* c = std::get_if<copy>(&ins)) {
    if (auto f = at.ref_ok("copy src", c->src, c->count, false)) return f;
    if (auto f = at.ref_ok("copy dst", c->dst, c->count, true)) return f;
    return at.overlap_ok("copy", c->dst, c->src, c->count);
  }
  if (const auto* d = std::get_if<reduce>(&ins)) {
    if (auto f = at.ref_ok("reduce a", d->a, d->count, false)) return f;
    if (auto f = at.ref_ok("reduce b", d->b, d->count, false)) return f;
    if (auto f = at.ref_ok("reduce dst", d->dst, d->count, true)) return f;
    if (auto f = at.overlap_ok("reduce", d->dst, d->a, d->count)) return f;
    return at.overlap_ok("reduce", d->dst, d->b, d->count);
  }
  if (const auto* g = std::get_if<signal>(&ins)) return at.flag_ok("signal", g->flag);
  if (const auto* w = std::get_if<wait>(&ins)) {
    if (w->peer < 0 || w->peer >= at.s.ranks)
      return at.fail(cat("wait on rank ", w->peer, ", which does not exist (program has ", at.s.ranks, " ranks)"));
    if (!cur.same_node(r, w->peer))
      return at.fail(cat("wait on rank ", w->peer, " on node ", cur.node(w->peer),
                         "; flags are only visible on this rank's node ", cur.node(r)));
    return at.flag_ok("wait", w->flag);
  }
  if (const auto* sd = std::get_if<send>(&ins)) {
    if (auto f = at.peer_ok("send", sd->peer)) return f;
    return at.ref_ok("send src", sd->src, sd->count, false);
  }
  if (const auto* rv = std::get_if<recv>(&ins)) {
    if (auto f = at.peer_ok("recv", rv->peer)) return f;
    return at.ref_ok("recv dst", rv->dst, rv->count, true);
  }
  return std::nullopt;  // fence
}

/// Property 0 for every instruction of program `cur`, rank by rank.
COLLC_INLINE finding check_instructions(const sequence& s, const program& cur) {
  for (int r = 0; r < s.ranks; ++r) {
    const auto& code = cur.code[static_cast<std::size_t>(r)];
    for (std::size_t k = 0; k < code.size(); ++k)
      if (auto f = check_instruction({s, cur, r, static_cast<std::ptrdiff_t>(k)}, code[k])) return f;
  }
  return std::nullopt;
}

}  // namespace collc::ir::detail::verification
