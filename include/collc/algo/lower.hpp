#pragma once
/// \file
/// L1 -> L2: a schedule (family + parameters, a plain value) lowered for one
/// collective, rank count and element count into a per-rank program.
///
///   auto s = collc::algo::schedule::recursive({-2, -2, 2, 2});
///   auto prog = collc::algo::lower(s, {.coll = collective::allreduce, .ranks = 4, .count = 1000});
///   assert(collc::verify(prog));
///
/// Every family lowers through detail::builder, so shared-memory reads and
/// point-to-point messages between nodes come from the same code (a step
/// whose group spans nodes simply becomes messages): hierarchical schedules
/// are factor sets whose middle (reduce-exchange) steps cross nodes.
#include <collc/algo/builder.hpp>
#include <collc/algo/cyclic_shift.hpp>
#include <collc/algo/recursive_exchange.hpp>
#include <collc/algo/schedule.hpp>
#include <collc/algo/tree.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include <collc/ir/program.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace collc::algo {

/// What to lower a schedule for.
struct lower_request {
  collective coll = collective::allreduce;
  int ranks = 1;
  std::size_t count = 0;          ///< elements (MPI meaning, see collective)
  int root = 0;                   ///< reduce / bcast
  std::size_t granule = 1;        ///< elements per cache line: the minimum slice
  std::size_t block_stride = 0;   ///< reduce_scatter / allgather: block distance, 0 = count
  std::vector<int> node_of = {};  ///< node id of each rank; empty = one node
};

namespace detail {

using collc::detail::constexpr_cat;

constexpr void check_request(const lower_request& q) {
  if (q.ranks < 1) throw error(errc::invalid_argument, constexpr_cat("number of ranks must be >= 1, got ", q.ranks));
  if ((q.coll == collective::reduce || q.coll == collective::bcast) && (q.root < 0 || q.root >= q.ranks))
    throw error(errc::invalid_argument, constexpr_cat("root ", q.root, " is not a rank of ", q.ranks));
  if (!q.node_of.empty() && q.node_of.size() != static_cast<std::size_t>(q.ranks))
    throw error(errc::invalid_argument,
                constexpr_cat("node_of has ", q.node_of.size(), " entries for ", q.ranks, " ranks"));
  if (q.block_stride != 0 && q.block_stride < q.count)
    throw error(errc::invalid_argument,
                constexpr_cat("block_stride ", q.block_stride, " is smaller than the block count ", q.count));
}

constexpr builder make_builder(const lower_request& q) {
  return builder(q.coll, q.ranks, q.count, q.root, q.block_stride, q.node_of);
}

/// One rank: the result is its own data (or nothing to do for bcast).
constexpr ir::program lower_single(const lower_request& q) {
  builder b = make_builder(q);
  if (q.coll != collective::bcast) b.copy(0, ir::ref{ir::buffer::recv, 0, 0}, ir::ref{ir::buffer::send, 0, 0}, q.count);
  return std::move(b).finish(false, "single");
}

/// A factor set as its two runs of steps: the magnitudes of the negative
/// (reduce-scatter) radices and the positive radices, in order. Only for sets
/// the rules of factors.hpp have accepted (signs ordered, no 0 or +-1).
struct phases {
  std::vector<int> rs, ag;
};
constexpr phases split(const factor_set& f) {
  phases ph;
  for (int x : f) {
    if (x < 0)
      ph.rs.push_back(-x);
    else
      ph.ag.push_back(x);
  }
  return ph;
}

/// Product of accepted radices: each sign's product fits in int (factors.hpp
/// checks it), so this cannot overflow.
constexpr std::int64_t product(const std::vector<int>& v) {
  std::int64_t p = 1;
  for (int a : v) p *= a;
  return p;
}

/// Recursive exchange over F < P ranks with the remainder folded in (the
/// non-power-of-two step of Thakur, Rabenseifner & Gropp 2005): for i < P - F, rank 2i hands its vector to rank 2i+1,
/// which adds it (2i's contribution first, rank order) and stands in for both as virtual rank i; ranks from 2(P-F) on
/// are virtual ranks i - (P-F). After the allreduce among the F virtual ranks, 2i+1 passes the result back to 2i.
constexpr ir::program lower_folded(const std::vector<int>& rs, const std::vector<int>& re, const lower_request& q,
                                   const std::string& name) {
  const int P = q.ranks;
  const int F = static_cast<int>(product(rs) * product(re));
  const int rem = P - F;
  builder b = make_builder(q);
  std::vector<int> members;
  for (int i = 0; i < F; ++i) members.push_back(i < rem ? 2 * i + 1 : i + rem);
  // Fold in: 2i+1 pulls 2i's vector (through shm on one node, a message otherwise).
  const std::size_t in_copy = b.alloc_shm(q.count), partial = b.alloc_shm(q.count);
  std::vector<pull> pulls;
  for (int i = 0; i < rem; ++i) {
    const int from = 2 * i, to = 2 * i + 1;
    int ready = 0;
    if (b.same_node(from, to)) {
      b.copy(from, ir::ref{ir::buffer::shm, from, in_copy}, ir::ref{ir::buffer::send, from, 0}, q.count);
      ready = b.publish(from);
    }
    pulls.push_back(
        pull{to, from, ir::ref{ir::buffer::shm, from, in_copy}, ir::ref{ir::buffer::send, from, 0}, q.count, ready, 0});
  }
  const auto got = b.fetch(pulls);
  positions pos;
  const auto npos = static_cast<std::size_t>(product(rs));
  const partition part(q.count, npos, q.granule);
  for (std::size_t p = 0; p < npos; ++p) {
    pos.len.push_back(part.size(p));
    pos.send_at.push_back(part.begin(p));
    pos.recv_at.push_back(part.begin(p));
  }
  pos.finish();
  builder_view view(b, members);
  recursive_exchange_lowering<builder_view> low(view, pos, rs, re);
  low.start_all(holding::kind::user_send);
  for (int i = 0; i < rem; ++i) {
    const int to = 2 * i + 1;
    b.reduce(to, ir::ref{ir::buffer::shm, to, partial}, got[static_cast<std::size_t>(i)],
             ir::ref{ir::buffer::send, to, 0}, q.count);
    low.start_shm(i, partial, b.publish(to));
  }
  std::vector<std::vector<int>> readers(static_cast<std::size_t>(F));
  std::vector<std::size_t> skip_lo(static_cast<std::size_t>(F), 0), skip_hi(static_cast<std::size_t>(F), 0);
  const int a0 = rs.empty() ? re[0] : rs[0];
  for (int v = 0; v < F; ++v)
    for (int t = 0; t < a0; ++t) readers[static_cast<std::size_t>(v)].push_back(v - v % a0 + t);
  low.copy_in(readers, skip_lo, skip_hi);
  for (std::size_t i = 0; i < rs.size(); ++i) low.reduce_scatter_step(i, false);
  for (std::size_t j = 0; j < re.size(); ++j)
    low.reduce_exchange_step(j, j + 1 == re.size() && rs.empty(), [](int) { return true; });
  for (std::size_t i = rs.size(); i-- > 0;) low.allgather_step(i, i == 0, [](int) { return true; });
  // Fold out: 2i+1 shares its result, 2i copies it.
  const std::size_t out = b.alloc_shm(q.count);
  pulls.clear();
  for (int i = 0; i < rem; ++i) {
    const int from = 2 * i + 1, to = 2 * i;
    int ready = 0;
    if (b.same_node(from, to)) {
      b.copy(from, ir::ref{ir::buffer::shm, from, out}, ir::ref{ir::buffer::recv, from, 0}, q.count);
      ready = b.publish(from);
    }
    pulls.push_back(
        pull{to, from, ir::ref{ir::buffer::shm, from, out}, ir::ref{ir::buffer::recv, from, 0}, q.count, ready, 0});
  }
  const auto back = b.fetch(pulls);
  for (int i = 0; i < rem; ++i)
    b.copy(2 * i, ir::ref{ir::buffer::recv, 2 * i, 0}, back[static_cast<std::size_t>(i)], q.count);
  return std::move(b).finish(false, name);
}

/// The steps a recursive-exchange schedule runs for a collective, checked
/// against P (the errors name the set and the rule): reduce-scatter radices
/// `rs` and reduce-exchange radices `re`; allgather and bcast run the
/// allgather tail of {-rs.., rs reversed}. `product` is the ranks the
/// exchange spans: P, or fewer with `fold`. Shared by lowering and the cost model.
struct exchange_steps {
  std::vector<int> rs, re;
  std::int64_t product = 1;
};

constexpr exchange_steps recursive_steps(const schedule& s, collective c, int P) {
  // The factor-set rules are factors.hpp's, with its messages; a folded
  // schedule spans fewer ranks than P, so only its shape is checked there and
  // the folding limits here.
  if (s.fold)
    collc::detail::validate_shape_or_throw(s.factors, c);
  else
    collc::validate_or_throw(s.factors, P, c, schedule_kind::recursive);
  const phases ph = split(s.factors);
  exchange_steps st{ph.rs, {}, 1};
  switch (c) {
    case collective::allreduce:
    case collective::reduce:  // {-a.., b.., a reversed}: the first m-k positives are reduce-exchange steps
      st.re.assign(ph.ag.begin(), ph.ag.begin() + static_cast<std::ptrdiff_t>(ph.ag.size() - ph.rs.size()));
      break;
    case collective::reduce_scatter: break;
    case collective::allgather:
    case collective::bcast: st.rs.assign(ph.ag.rbegin(), ph.ag.rend()); break;
  }
  st.product = product(st.rs) * product(st.re);
  if (s.fold) {
    const auto bad = [&](std::string_view why) {
      return error(errc::invalid_factor_set,
                   constexpr_cat("recursive exchange ", s.factors.to_string(), " for ", P, " ranks: ", why));
    };
    if (c != collective::allreduce) throw bad("folding is implemented for allreduce only");
    if (st.product >= P || 2 * st.product < P)
      throw bad(constexpr_cat("folding needs a radix product (", st.product,
                              ") below the number of ranks and at least half of it"));
  }
  return st;
}

constexpr ir::program lower_recursive(const schedule& s, const lower_request& q) {
  const int P = q.ranks;
  std::string name;  // for humans; not built during constant evaluation
  if (!std::is_constant_evaluated()) name = s.to_string();
  const exchange_steps st = recursive_steps(s, q.coll, P);
  if (s.fold) return lower_folded(st.rs, st.re, q, name);
  const std::vector<int>& rs = st.rs;
  const std::vector<int>& re = st.re;

  builder b = make_builder(q);
  positions pos;
  const auto npos = static_cast<std::size_t>(product(rs));
  const bool blocked = q.coll == collective::reduce_scatter || q.coll == collective::allgather;
  const std::size_t stride = q.block_stride == 0 ? q.count : q.block_stride;
  if (blocked) {
    // Position p holds block sigma(p), where sigma(final_position(r)) = r.
    std::vector<std::size_t> block(npos);
    for (int r = 0; r < P; ++r) block[final_position(r, rs, npos)] = static_cast<std::size_t>(r);
    for (std::size_t p = 0; p < npos; ++p) {
      pos.len.push_back(q.count);
      pos.send_at.push_back(q.coll == collective::reduce_scatter ? block[p] * stride : 0);
      pos.recv_at.push_back(q.coll == collective::allgather ? block[p] * stride : 0);
    }
  } else {
    const partition part(q.count, npos, q.granule);
    for (std::size_t p = 0; p < npos; ++p) {
      pos.len.push_back(part.size(p));
      pos.send_at.push_back(part.begin(p));
      pos.recv_at.push_back(part.begin(p));
    }
  }
  pos.finish();
  recursive_exchange_lowering<builder> low(b, pos, rs, re);

  // Who reads whose data in the first step (decides the copy-in).
  std::vector<std::vector<int>> readers(static_cast<std::size_t>(P));
  std::vector<std::size_t> skip_lo(static_cast<std::size_t>(P), 0), skip_hi(static_cast<std::size_t>(P), 0);
  auto group_readers = [&](int a, int s) {
    for (int r = 0; r < P; ++r) {
      const int d = (r / s) % a;
      for (int t = 0; t < a; ++t) readers[static_cast<std::size_t>(r)].push_back(r + (t - d) * s);
    }
  };

  switch (q.coll) {
    case collective::allreduce:
    case collective::reduce:
    case collective::reduce_scatter: {
      low.start_all(detail::holding::kind::user_send);
      if (!rs.empty()) {
        group_readers(rs[0], 1);
        for (int r = 0; r < P; ++r) {  // r alone reads its own part of step 1
          const std::size_t part = npos / static_cast<std::size_t>(rs[0]);
          skip_lo[static_cast<std::size_t>(r)] = static_cast<std::size_t>(r % rs[0]) * part;
          skip_hi[static_cast<std::size_t>(r)] = skip_lo[static_cast<std::size_t>(r)] + part;
        }
      } else {
        group_readers(re[0], 1);
      }
      low.copy_in(readers, skip_lo, skip_hi);
      const bool rooted = q.coll == collective::reduce;
      const bool rs_only = q.coll == collective::reduce_scatter;
      for (std::size_t i = 0; i < rs.size(); ++i) low.reduce_scatter_step(i, rs_only && i + 1 == rs.size());
      for (std::size_t j = 0; j < re.size(); ++j) {
        const bool last = j + 1 == re.size() && rs.empty();
        low.reduce_exchange_step(j, last, [&](int r) { return !(last && rooted) || r == q.root; });
      }
      if (q.coll == collective::allreduce)
        for (std::size_t i = rs.size(); i-- > 0;) low.allgather_step(i, i == 0, [](int) { return true; });
      if (rooted && !rs.empty()) low.gather_to(q.root);
      break;
    }
    case collective::allgather: {
      for (int r = 0; r < P; ++r) {
        const auto p = final_position(r, rs, npos);
        low.start_one(r, detail::holding::kind::user_send, p, p + 1);
      }
      group_readers(rs.back(), low.stride(rs.size() - 1));
      low.copy_in(readers, skip_lo, skip_hi);
      for (std::size_t i = rs.size(); i-- > 0;) low.allgather_step(i, i == 0, [](int) { return true; });
      break;
    }
    case collective::bcast: {
      for (int r = 0; r < P; ++r) low.start_one(r, detail::holding::kind::user_recv, 0, r == q.root ? npos : 0);
      for (int r = 0; r < P; ++r) readers[static_cast<std::size_t>(q.root)].push_back(r);
      low.copy_in(readers, skip_lo, skip_hi);
      low.scatter_from(q.root);
      for (std::size_t i = rs.size(); i-- > 0;) low.allgather_step(i, i == 0, [&](int r) { return r != q.root; });
      break;
    }
  }
  return std::move(b).finish(false, name);
}

/// The steps a cyclic-shift schedule with a factor set runs for a
/// collective, checked against P: the factor-set rules of factors.hpp (the
/// cyclic phase r1*..*r(n-1) < P <= r1*..*rn, rn minimal), then what the
/// cyclic-shift lowering implements (no rooted collectives, no allreduce
/// with reduce-exchange steps). Shared by lowering and the cost model.
constexpr phases cyclic_steps(const schedule& s, collective c, int P) {
  const auto unsupported = [&](std::string_view why) {
    return error(errc::unsupported,
                 constexpr_cat("cyclic shift ", s.factors.to_string(), " for ", to_string(c), ": ", why));
  };
  if (!cyclic_serves(c)) throw unsupported(rooted_not_cyclic);
  collc::validate_or_throw(s.factors, P, c, schedule_kind::cyclic);
  phases ph = split(s.factors);
  if (c == collective::allreduce && !ph.rs.empty() && ph.ag.size() != ph.rs.size())
    throw unsupported("an allreduce set is either all positive or a reduce-scatter mirrored by its allgather");
  return ph;
}

constexpr ir::program lower_ring(const lower_request& q);

constexpr ir::program lower_cyclic(const schedule& s, const lower_request& q) {
  if (s.factors.empty()) return lower_ring(q);
  const int P = q.ranks;
  const phases ph = cyclic_steps(s, q.coll, P);
  std::string name;  // for humans; not built during constant evaluation
  if (!std::is_constant_evaluated()) name = s.to_string();
  const std::size_t stride = q.block_stride == 0 ? q.count : q.block_stride;
  builder b = make_builder(q);
  positions blocks;
  auto add_block = [&](std::size_t len, std::size_t send_at, std::size_t recv_at) {
    blocks.len.push_back(len);
    blocks.send_at.push_back(send_at);
    blocks.recv_at.push_back(recv_at);
  };
  auto send_ref = [](int y) { return ir::ref{ir::buffer::send, y, 0}; };
  auto own = [](int y) { return static_cast<std::size_t>(y); };
  switch (q.coll) {
    case collective::allreduce: {
      if (!ph.rs.empty()) {  // {-a.., a reversed}: reduce-scatter, then the mirroring allgather
        const partition part(q.count, static_cast<std::size_t>(P), q.granule);
        for (std::size_t j = 0; j < static_cast<std::size_t>(P); ++j)
          add_block(part.size(j), part.begin(j), part.begin(j));
        blocks.finish();
        cyclic_shift_lowering low(b, blocks);
        low.start_with_all_blocks();
        low.reduce_scatter(ph.rs, false);
        low.mirrored_allgather(ph.rs, [](int) { return true; });
      } else {
        for (int j = 0; j < P; ++j) add_block(q.count, 0, 0);  // block j: rank j's whole contribution
        blocks.finish();
        cyclic_shift_lowering low(b, blocks);
        low.start_with_own_block(own, send_ref);
        low.dissemination_allgather(ph.ag, false);
        low.reduce_contributions(q.count);
      }
      break;
    }
    case collective::reduce_scatter: {
      for (int j = 0; j < P; ++j) add_block(q.count, static_cast<std::size_t>(j) * stride, 0);
      blocks.finish();
      cyclic_shift_lowering low(b, blocks);
      low.start_with_all_blocks();
      low.reduce_scatter(ph.rs, true);
      break;
    }
    case collective::allgather: {
      for (int j = 0; j < P; ++j) add_block(q.count, 0, static_cast<std::size_t>(j) * stride);
      blocks.finish();
      cyclic_shift_lowering low(b, blocks);
      low.start_with_own_block(own, send_ref);
      low.dissemination_allgather(ph.ag, true);
      return std::move(b).finish(false, name);
    }
    case collective::reduce:
    case collective::bcast: break;  // refused by cyclic_steps
  }
  return std::move(b).finish(true, name);
}

/// Ring (Thakur, Rabenseifner & Gropp 2005): a cyclic shift by one rank per step. Reduce-scatter:
/// at step k rank r adds its contribution to the partial of block r-k-2 it
/// pulls from r-1 (P-1 steps, rank r ends with block r); allgather: block
/// r-k-1 travels one rank per step. 2(P-1) steps of n/P elements: the
/// bandwidth-optimal, latency-linear textbook algorithm. Commutative only.
constexpr ir::program lower_ring(const lower_request& q) {
  const int P = q.ranks;
  builder b = make_builder(q);
  const std::size_t stride = q.block_stride == 0 ? q.count : q.block_stride;
  positions blk;
  const partition part(q.count, static_cast<std::size_t>(P), q.granule);
  for (int j = 0; j < P; ++j) {
    const auto u = static_cast<std::size_t>(j);
    switch (q.coll) {
      case collective::allreduce:
        blk.len.push_back(part.size(u)), blk.send_at.push_back(part.begin(u)), blk.recv_at.push_back(part.begin(u));
        break;
      case collective::reduce_scatter:
        blk.len.push_back(q.count), blk.send_at.push_back(u * stride), blk.recv_at.push_back(0);
        break;
      case collective::allgather:
        blk.len.push_back(q.count), blk.send_at.push_back(0), blk.recv_at.push_back(u * stride);
        break;
      default:
        throw error(errc::unsupported,
                    constexpr_cat("ring lowers allreduce, reduce_scatter and allgather; use the tree family for ",
                                  to_string(q.coll)));
    }
  }
  blk.finish();
  auto block = [&](int r, int k) { return static_cast<std::size_t>(((r - k) % P + P) % P); };
  std::size_t widest = 0;
  for (auto n : blk.len) widest = std::max(widest, n);
  // held[r]: where rank r's value travelling this step lives (shared, direct).
  std::vector<pull> pulls;
  std::vector<ir::ref> shared(static_cast<std::size_t>(P)), direct(static_cast<std::size_t>(P));
  std::vector<int> ready(static_cast<std::size_t>(P), 0);
  const bool reduces = q.coll != collective::allgather;
  if (reduces) {
    const std::size_t copy = b.alloc_shm(blk.span(0, static_cast<std::size_t>(P)));
    for (int r = 0; r < P; ++r) {
      for (int j = 0; j < P; ++j)
        if (j != r)
          b.copy(r, ir::ref{ir::buffer::shm, r, copy + blk.prefix[static_cast<std::size_t>(j)]},
                 ir::ref{ir::buffer::send, r, blk.send_at[static_cast<std::size_t>(j)]},
                 blk.len[static_cast<std::size_t>(j)]);
      ready[static_cast<std::size_t>(r)] = b.publish(r);
    }
    for (int k = 0; k < P - 1; ++k) {
      pulls.clear();
      for (int r = 0; r < P; ++r) {
        const int left = (r + P - 1) % P;
        const std::size_t j = block(r, k + 2);
        const ir::ref sh =
            k == 0 ? ir::ref{ir::buffer::shm, left, copy + blk.prefix[j]} : shared[static_cast<std::size_t>(left)];
        const ir::ref di =
            k == 0 ? ir::ref{ir::buffer::send, left, blk.send_at[j]} : direct[static_cast<std::size_t>(left)];
        pulls.push_back(pull{r, left, sh, di, blk.len[j], ready[static_cast<std::size_t>(left)], j});
      }
      const auto got = b.fetch(pulls);
      const bool last = k == P - 2;
      const bool to_recv = last && q.coll == collective::reduce_scatter;
      const std::size_t region = to_recv ? 0 : b.alloc_shm(widest);
      for (int r = 0; r < P; ++r) {
        const std::size_t j = pulls[static_cast<std::size_t>(r)].first;
        const ir::ref dst = to_recv ? ir::ref{ir::buffer::recv, r, 0} : ir::ref{ir::buffer::shm, r, region};
        b.reduce(r, dst, got[static_cast<std::size_t>(r)], ir::ref{ir::buffer::send, r, blk.send_at[j]}, blk.len[j]);
        shared[static_cast<std::size_t>(r)] = direct[static_cast<std::size_t>(r)] = dst;
      }
      for (int r = 0; r < P; ++r) ready[static_cast<std::size_t>(r)] = to_recv ? 0 : b.publish(r);
    }
    if (q.coll == collective::reduce_scatter) return std::move(b).finish(true, "ring");
  } else {
    const std::size_t copy = b.alloc_shm(widest);
    for (int r = 0; r < P; ++r) {
      b.copy(r, ir::ref{ir::buffer::shm, r, copy}, ir::ref{ir::buffer::send, r, 0}, q.count);
      shared[static_cast<std::size_t>(r)] = ir::ref{ir::buffer::shm, r, copy};
      direct[static_cast<std::size_t>(r)] = ir::ref{ir::buffer::send, r, 0};
      ready[static_cast<std::size_t>(r)] = b.publish(r);
    }
  }
  // Allgather: rank r holds block r (own result), receives block r-k-1 at step k.
  for (int r = 0; r < P; ++r) {
    const auto j = static_cast<std::size_t>(r);
    b.copy(r, ir::ref{ir::buffer::recv, r, blk.recv_at[j]}, direct[j], blk.len[j]);
  }
  for (int k = 0; k < P - 1; ++k) {
    pulls.clear();
    for (int r = 0; r < P; ++r) {
      const int left = (r + P - 1) % P;
      const std::size_t j = block(r, k + 1);
      pulls.push_back(pull{r, left, shared[static_cast<std::size_t>(left)], direct[static_cast<std::size_t>(left)],
                           blk.len[j], ready[static_cast<std::size_t>(left)], j});
    }
    const auto got = b.fetch(pulls);
    const bool last = k == P - 2;
    const std::size_t region = last ? 0 : b.alloc_shm(widest);
    for (int r = 0; r < P; ++r) {
      const std::size_t j = pulls[static_cast<std::size_t>(r)].first;
      const ir::ref recv_at{ir::buffer::recv, r, blk.recv_at[j]};
      b.copy(r, recv_at, got[static_cast<std::size_t>(r)], blk.len[j]);
      if (!last) {
        const ir::ref mine{ir::buffer::shm, r, region};
        b.copy(r, mine, got[static_cast<std::size_t>(r)], blk.len[j]);
        shared[static_cast<std::size_t>(r)] = direct[static_cast<std::size_t>(r)] = mine;
      }
    }
    if (!last)
      for (int r = 0; r < P; ++r) ready[static_cast<std::size_t>(r)] = b.publish(r);
  }
  return std::move(b).finish(q.coll == collective::allreduce, "ring");
}

constexpr ir::program lower_tree(const schedule& s, const lower_request& q) {
  const int P = q.ranks;
  if (s.arity == 1 || s.arity < 0)
    throw error(errc::invalid_argument, constexpr_cat("tree arity ", s.arity, " must be 0 (binomial) or >= 2"));
  if (s.roots < 1 || s.roots > P)
    throw error(errc::invalid_argument, constexpr_cat("tree roots ", s.roots, " must be in [1, ", P, "]"));
  builder b = make_builder(q);
  const std::size_t stride = q.block_stride == 0 ? q.count : q.block_stride;
  positions pos;
  std::vector<tree_lowering::group> groups;
  const int roots = (q.coll == collective::reduce || q.coll == collective::bcast) ? 1 : s.roots;
  auto add = [&](std::size_t len, std::size_t send_at, std::size_t recv_at) {
    pos.len.push_back(len), pos.send_at.push_back(send_at), pos.recv_at.push_back(recv_at);
  };
  if (q.coll == collective::reduce_scatter || q.coll == collective::allgather) {
    for (int j = 0; j < P; ++j) {
      const auto u = static_cast<std::size_t>(j);
      add(q.count, q.coll == collective::reduce_scatter ? u * stride : 0,
          q.coll == collective::allgather ? u * stride : 0);
    }
    for (int g = 0; g < roots; ++g)
      groups.push_back(
          {g * P / roots, static_cast<std::size_t>(g * P / roots), static_cast<std::size_t>((g + 1) * P / roots)});
  } else {
    const partition part(q.count, static_cast<std::size_t>(roots), q.granule);
    for (int g = 0; g < roots; ++g) {
      add(part.size(static_cast<std::size_t>(g)), part.begin(static_cast<std::size_t>(g)),
          part.begin(static_cast<std::size_t>(g)));
      const int root = roots == 1 ? (q.coll == collective::allreduce ? 0 : q.root) : g * P / roots;
      groups.push_back({root, static_cast<std::size_t>(g), static_cast<std::size_t>(g + 1)});
    }
  }
  pos.finish();
  tree_lowering low(b, pos);
  switch (q.coll) {
    case collective::allreduce:
      low.reduce(groups, s.arity, false);
      low.broadcast([](int) { return true; });
      break;
    case collective::reduce: low.reduce(groups, s.arity, true); break;
    case collective::reduce_scatter:
      low.reduce(groups, s.arity, false);
      low.scatter([](int r) { return static_cast<std::size_t>(r); });
      break;
    case collective::bcast:
      low.start_at_root(q.root, s.arity);
      low.broadcast([&](int r) { return r != q.root; });
      break;
    case collective::allgather:
      low.gather_flat(0, s.arity);
      low.broadcast([](int) { return true; });
      break;
  }
  std::string name;
  if (!std::is_constant_evaluated()) name = s.to_string();
  return std::move(b).finish(false, name);
}

/// Copy-in: every rank reads every peer's slice directly, in one step
/// (recursive exchange with radix P: {-P,P}, {-P}, {P}); the own operand of
/// the reduction is read from the user's buffer, fusing copy and reduce.
constexpr ir::program lower_copy_in(const lower_request& q) {
  const int P = q.ranks;
  factor_set f;
  switch (q.coll) {
    case collective::allreduce:
    case collective::reduce: f = factor_set{-P, P}; break;
    case collective::reduce_scatter: f = factor_set{-P}; break;
    default: f = factor_set{P}; break;
  }
  auto prog = lower_recursive(schedule::recursive(f), q);
  if (!std::is_constant_evaluated()) prog.name = "copyin";
  return prog;
}

}  // namespace detail

/// Lowers schedule `s` for request `q` (throws collc::error naming the bad
/// value if the schedule does not fit the request).
constexpr ir::program lower(const schedule& s, const lower_request& q) {
  detail::check_request(q);
  if (q.ranks == 1) return detail::lower_single(q);
  switch (s.fam) {
    case family::recursive_exchange: return detail::lower_recursive(s, q);
    case family::cyclic_shift: return detail::lower_cyclic(s, q);
    case family::tree: return detail::lower_tree(s, q);
    case family::copy_in: return detail::lower_copy_in(q);
  }
  throw error(errc::invalid_argument, "unknown schedule family");
}

}  // namespace collc::algo
