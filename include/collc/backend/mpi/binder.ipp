#pragma once
/// \file
/// Definitions of binder.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/binder.hpp>

#include <collc/backend/mpi/handles.hpp>
#include <collc/ir/sequence.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace collc::mpi {

namespace binder_detail {

/// The pieces appended into one string (no `a + b + c` chain: g++ 12 -O3
/// warns -Wrestrict, falsely, on those once inlined).
template <class... Pieces>
std::string cat(const Pieces&... pieces) {
  std::string s;
  ((s += pieces), ...);
  return s;
}

COLLC_INLINE std::string where(int rank, std::size_t i) {
  return cat("program rank ", std::to_string(rank), ", instruction ", std::to_string(i));
}

}  // namespace binder_detail

COLLC_INLINE bound_program bind(const ir::program& prog, const bind_context& ctx) {
  using binder_detail::cat;
  const int me = ctx.prog_rank;
  const int P = prog.ranks;
  if (P != static_cast<int>(ctx.comm_of_prog.size()))
    throw error(errc::invalid_argument, cat("program for ", std::to_string(P), " ranks bound on a communicator of ",
                                            std::to_string(ctx.comm_of_prog.size())));
  if (prog.flags > ctx.flags)
    throw error(errc::invalid_argument,
                cat("program uses ", std::to_string(prog.flags), " flags, segment has ", std::to_string(ctx.flags)));
  bound_program out;
  out.count = prog.count;
  const std::size_t stride = prog.stride();
  bool identity = true;
  for (int q = 0; q < P; ++q) identity = identity && ctx.comm_of_prog[static_cast<std::size_t>(q)] == q;
  const bool remap_send = !identity && prog.coll == collective::reduce_scatter;
  const bool remap_recv = !identity && prog.coll == collective::allgather;
  const auto on_node = [&](int q) { return q >= ctx.node_first && q < ctx.node_first + ctx.node_size; };

  // A reference resolved to (slot, element offset), plus whether its offset
  // is in program block coordinates that need remapping.
  struct operand {
    std::uint16_t slot = 0;
    std::size_t offset = 0;
    bool remapped = false;
  };
  std::size_t i = 0;  // current instruction, for messages
  auto fail = [&](const std::string& why) {
    return error(errc::invalid_argument, cat(binder_detail::where(me, i), ": ", why));
  };
  auto resolve = [&](const ir::ref& r, std::size_t n) {
    operand o;
    std::size_t cap = 0;
    switch (r.buf) {
      case ir::buffer::send:
        if (r.owner != me) throw fail("reads the send buffer of rank " + std::to_string(r.owner));
        o.slot = slot_send;
        cap = prog.send_count();
        o.remapped = remap_send;
        break;
      case ir::buffer::recv:
        if (r.owner != me) throw fail("uses the recv buffer of rank " + std::to_string(r.owner));
        o.slot = slot_recv;
        cap = prog.recv_count();
        o.remapped = remap_recv;
        break;
      case ir::buffer::scratch:
        if (r.owner != me) throw fail("uses the scratch of rank " + std::to_string(r.owner));
        o.slot = slot_scratch;
        cap = std::min(prog.scratch_count, ctx.scratch_capacity);
        break;
      case ir::buffer::shm:
        if (!on_node(r.owner)) throw fail(cat("uses the shm of rank ", std::to_string(r.owner), ", not on its node"));
        o.slot = static_cast<std::uint16_t>(slot_shm0 + (r.owner - ctx.node_first));
        cap = std::min(prog.shm_count, ctx.shm_capacity);
        break;
    }
    if (r.offset > cap || n > cap - r.offset)
      throw fail(cat(ir::to_string(r.buf), " elements [", std::to_string(r.offset), ", ", std::to_string(r.offset + n),
                     ") exceed its capacity ", std::to_string(cap)));
    o.offset = r.offset;
    return o;
  };
  // Program block coordinates -> user coordinates.
  auto user_offset = [&](const operand& o, std::size_t pos) {
    const std::size_t at = o.offset + pos;
    if (!o.remapped) return at;
    const std::size_t block = at / stride;
    return static_cast<std::size_t>(ctx.comm_of_prog[block]) * stride + at % stride;
  };
  // Elements from `pos` that stay inside one block of every remapped operand.
  auto run_length = [&](std::initializer_list<const operand*> ops, std::size_t pos, std::size_t left) {
    for (const operand* o : ops)
      if (o->remapped) left = std::min(left, stride - (o->offset + pos) % stride);
    return left;
  };
  auto check_peer = [&](int q) {
    if (q < 0 || q >= P) throw fail(cat("peer ", std::to_string(q), " is not a rank of ", std::to_string(P)));
  };
  auto check_flag = [&](int f) {
    if (f < 0 || f >= prog.flags)
      throw fail(cat("flag ", std::to_string(f), " out of [0, ", std::to_string(prog.flags), ")"));
  };
  auto add_transfer = [&](bool is_send, int peer, const ir::ref& r, std::size_t n, int tag) {
    check_peer(peer);
    if (peer == me) throw fail("sends a message to itself");
    if (tag < 0 || tag > ctx.tag_ub)
      throw fail(cat("tag ", std::to_string(tag), " out of [0, ", std::to_string(ctx.tag_ub), "]"));
    const operand o = resolve(r, n);
    transfer t;
    t.is_send = is_send;
    t.peer = ctx.comm_of_prog[static_cast<std::size_t>(peer)];
    t.tag = tag;
    t.slot = o.slot;
    // Pieces of at most INT_MAX bytes in user coordinates.
    std::vector<std::pair<std::size_t, std::size_t>> pieces;  // (offset, elements)
    t.first = t.last = 0;
    for (std::size_t pos = 0; pos < n;) {
      const std::size_t len = run_length({&o}, pos, n - pos);
      const std::size_t at = user_offset(o, pos);
      if (!pieces.empty() && pieces.back().first + pieces.back().second == at)
        pieces.back().second += len;
      else
        pieces.emplace_back(at, len);
      t.first = pos == 0 ? at : std::min(t.first, at);
      t.last = std::max(t.last, at + len);
      pos += len;
    }
    const std::size_t limit = static_cast<std::size_t>(INT_MAX) / ctx.elem_size;
    if (pieces.size() <= 1) {
      t.offset = pieces.empty() ? o.offset : pieces[0].first;
      if (n > limit) throw fail(cat("message of ", std::to_string(n), " elements exceeds INT_MAX bytes"));
      t.count = static_cast<int>(n * ctx.elem_size);
    } else {
      std::vector<int> lens;
      std::vector<MPI_Aint> disps;
      for (auto [at, len] : pieces) {
        if (len > limit) throw fail(cat("message piece of ", std::to_string(len), " elements exceeds INT_MAX bytes"));
        lens.push_back(static_cast<int>(len * ctx.elem_size));
        disps.push_back(static_cast<MPI_Aint>(at * ctx.elem_size));
      }
      t.owned_type = std::make_shared<type_owner>();
      COLLC_MPI_CHECK(MPI_Type_create_hindexed(static_cast<int>(pieces.size()), lens.data(), disps.data(), MPI_BYTE,
                                               t.owned_type->out()));
      COLLC_MPI_CHECK(MPI_Type_commit(t.owned_type->ptr()));
      t.type = t.owned_type->get();
      t.offset = 0;
      t.count = 1;
    }
    out.transfers.push_back(std::move(t));
    return static_cast<std::uint32_t>(out.transfers.size() - 1);
  };

  const auto& code = prog.code[static_cast<std::size_t>(me)];
  const std::vector<bool> early = ir::receives_at_start(prog, me);
  for (i = 0; i < code.size(); ++i) {
    const auto src_index = static_cast<std::uint32_t>(i);
    std::visit(
        [&](const auto& ins) {
          using I = std::decay_t<decltype(ins)>;
          if constexpr (std::is_same_v<I, ir::copy>) {
            const operand d = resolve(ins.dst, ins.count), s = resolve(ins.src, ins.count);
            for (std::size_t pos = 0; pos < ins.count;) {
              const std::size_t len = run_length({&d, &s}, pos, ins.count - pos);
              bound_op b;
              b.code = opcode::copy;
              b.dst_slot = d.slot;
              b.a_slot = s.slot;
              b.dst = user_offset(d, pos);
              b.a = user_offset(s, pos);
              b.n = len;
              b.source = src_index;
              out.ops.push_back(b);
              pos += len;
            }
          } else if constexpr (std::is_same_v<I, ir::reduce>) {
            const operand d = resolve(ins.dst, ins.count), a = resolve(ins.a, ins.count),
                          bb = resolve(ins.b, ins.count);
            for (std::size_t pos = 0; pos < ins.count;) {
              const std::size_t len = run_length({&d, &a, &bb}, pos, ins.count - pos);
              bound_op b;
              b.code = opcode::reduce;
              b.dst_slot = d.slot;
              b.a_slot = a.slot;
              b.b_slot = bb.slot;
              b.dst = user_offset(d, pos);
              b.a = user_offset(a, pos);
              b.b = user_offset(bb, pos);
              b.n = len;
              b.source = src_index;
              out.ops.push_back(b);
              pos += len;
            }
          } else if constexpr (std::is_same_v<I, ir::signal>) {
            check_flag(ins.flag);
            bound_op b;
            b.code = opcode::signal;
            b.index = static_cast<std::uint32_t>(ins.flag);
            b.flag = ctx.flag_lines[static_cast<std::size_t>((me - ctx.node_first) * ctx.flags + ins.flag)];
            b.peer = me;
            b.source = src_index;
            out.ops.push_back(b);
          } else if constexpr (std::is_same_v<I, ir::wait>) {
            check_peer(ins.peer);
            check_flag(ins.flag);
            if (!on_node(ins.peer)) throw fail(cat("waits on rank ", std::to_string(ins.peer), ", not on its node"));
            const int l = ins.peer - ctx.node_first;
            bound_op b;
            b.code = opcode::wait;
            b.index = static_cast<std::uint32_t>(l * ctx.flags + ins.flag);
            b.flag = ctx.flag_lines[b.index];
            b.value = ins.value;
            b.peer = ins.peer;
            b.source = src_index;
            out.ops.push_back(b);
          } else if constexpr (std::is_same_v<I, ir::send> || std::is_same_v<I, ir::recv>) {
            constexpr bool is_send = std::is_same_v<I, ir::send>;
            bound_op b;
            b.code = is_send ? opcode::send : opcode::recv;
            if constexpr (is_send)
              b.index = add_transfer(true, ins.peer, ins.src, ins.count, ins.tag);
            else
              b.index = add_transfer(false, ins.peer, ins.dst, ins.count, ins.tag);
            if (!is_send && early[i]) out.early_receives.push_back(b.index);
            b.peer = ins.peer;
            b.source = src_index;
            out.ops.push_back(b);
          } else {
            bound_op b;
            b.code = opcode::fence;
            b.source = src_index;
            out.ops.push_back(b);
          }
        },
        code[i]);
  }

  out.signals.assign(static_cast<std::size_t>(ctx.node_size * ctx.flags), 0);
  for (int l = 0; l < ctx.node_size; ++l)
    for (int f = 0; f < prog.flags; ++f)
      out.signals[static_cast<std::size_t>(l * ctx.flags + f)] = prog.signals_per_execution(ctx.node_first + l, f);
  return out;
}

COLLC_INLINE bool in_place_safe(const bound_program& b, std::size_t shift) {
  using range = std::pair<std::size_t, std::size_t>;  // [first, last) in recv coordinates
  std::vector<range> written, in_flight;
  auto overlaps = [](const std::vector<range>& set, range r) {
    for (auto [lo, hi] : set)
      if (lo < r.second && r.first < hi) return true;
    return false;
  };
  for (const bound_op& o : b.ops) {
    if (o.code == opcode::fence) in_flight.clear();
    if (o.code == opcode::copy || o.code == opcode::reduce) {
      const range w{o.dst, o.dst + o.n};
      const bool writes_recv = o.dst_slot == slot_recv;
      for (int k = 0; k < (o.code == opcode::copy ? 1 : 2); ++k) {
        if ((k == 0 ? o.a_slot : o.b_slot) != slot_send) continue;
        const std::size_t off = k == 0 ? o.a : o.b;
        const range r{shift + off, shift + off + o.n};
        if (overlaps(written, r)) return false;
        // Element-for-element aliasing is fine; a shifted overlap is not.
        if (writes_recv && r.first != w.first && overlaps({w}, r)) return false;
      }
      if (writes_recv) {
        if (overlaps(in_flight, w)) return false;
        written.push_back(w);
      }
    } else if (o.code == opcode::send || o.code == opcode::recv) {
      const transfer& t = b.transfers[o.index];
      const range r{t.first, t.last};
      if (o.code == opcode::send && t.slot == slot_send) {
        const range s{shift + r.first, shift + r.second};
        if (overlaps(written, s)) return false;
        in_flight.push_back(s);
      } else if (o.code == opcode::recv && t.slot == slot_recv) {
        if (overlaps(in_flight, r) || overlaps(written, r)) return false;
        written.push_back(r);
      }
    }
  }
  return true;
}

}  // namespace collc::mpi
