// Tests for include/collc/backend/mpi/binder.hpp: hand-made programs bound
// against a fake node context: slots and offsets, block remapping after a
// renumbering, refused programs, and the in-place safety analysis.
#include "support.hpp"

#include <collc/backend/mpi/binder.hpp>

#include <vector>

using namespace collc;
using collc::mpi::bind;
using collc::mpi::bind_context;
using collc::mpi::opcode;

namespace {

ir::ref at(ir::buffer b, int owner, std::size_t off) { return ir::ref{b, owner, off}; }

/// A node of `node_size` ranks starting at `first`, with lines in `lines`.
bind_context context(int me, int first, int node_size, int flags, std::vector<std::uint64_t>& lines,
                     std::vector<int> comm_of_prog) {
  bind_context c;
  c.prog_rank = me;
  c.node_first = first;
  c.node_size = node_size;
  c.flags = flags;
  c.elem_size = 8;
  c.shm_capacity = 1000;
  c.scratch_capacity = 1000;
  c.comm_of_prog = std::move(comm_of_prog);
  lines.assign(static_cast<std::size_t>(node_size * flags) * 8, 0);
  for (int i = 0; i < node_size * flags; ++i) c.flag_lines.push_back(&lines[static_cast<std::size_t>(i) * 8]);
  return c;
}

ir::program program(collective c, int P, std::size_t count, std::vector<ir::instruction> code, int me) {
  ir::program p;
  p.coll = c;
  p.ranks = P;
  p.count = count;
  p.shm_count = 100;
  p.scratch_count = 100;
  p.flags = 2;
  p.code.resize(static_cast<std::size_t>(P));
  p.code[static_cast<std::size_t>(me)] = std::move(code);
  return p;
}

std::string bind_error(const ir::program& p, const bind_context& c) {
  try {
    (void)bind(p, c);
  } catch (const collc::error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("instructions bind to slots, flag lines and thresholds", "[backend][mpi][binder]") {
  std::vector<std::uint64_t> lines;
  // Program rank 5 of 6, on a node of ranks 4 and 5.
  auto ctx = context(5, 4, 2, 2, lines, {0, 1, 2, 3, 4, 5});
  auto p =
      program(collective::allreduce, 6, 10,
              {ir::copy{at(ir::buffer::shm, 5, 3), at(ir::buffer::send, 5, 0), 10}, ir::signal{1}, ir::wait{4, 1, -1},
               ir::reduce{at(ir::buffer::recv, 5, 0), at(ir::buffer::shm, 4, 3), at(ir::buffer::shm, 5, 3), 10},
               ir::signal{0}, ir::signal{1}},
              5);
  p.code[4] = {ir::signal{1}, ir::signal{1}, ir::signal{0}};
  auto b = bind(p, ctx);
  REQUIRE(b.ops.size() == 6);
  CHECK(b.ops[0].code == opcode::copy);
  CHECK(b.ops[0].dst_slot == collc::mpi::slot_shm0 + 1);  // own shm: node rank 1
  CHECK(b.ops[0].a_slot == collc::mpi::slot_send);
  CHECK(b.ops[0].dst == 3);
  CHECK(b.ops[1].flag == ctx.flag_lines[1 * 2 + 1]);
  CHECK(b.ops[2].code == opcode::wait);
  CHECK(b.ops[2].flag == ctx.flag_lines[0 * 2 + 1]);  // rank 4 is node rank 0
  CHECK(b.ops[2].value == -1);
  CHECK(b.ops[2].index == 1);
  CHECK(b.ops[3].a_slot == collc::mpi::slot_shm0);
  CHECK(b.ops[3].b_slot == collc::mpi::slot_shm0 + 1);
  CHECK(b.ops[3].dst_slot == collc::mpi::slot_recv);
  CHECK(b.ops[5].source == 5);
  // Signals per execution of each node rank and flag.
  CHECK(b.signals == std::vector<std::int64_t>{1, 2, 1, 2});
}

TEST_CASE("programs that break the rules are refused", "[backend][mpi][binder]") {
  std::vector<std::uint64_t> lines;
  auto ctx = context(1, 0, 2, 2, lines, {0, 1, 2, 3});
  auto bad = [&](std::vector<ir::instruction> code) {
    return bind_error(program(collective::allreduce, 4, 10, code, 1), ctx);
  };
  CHECK_THAT(bad({ir::copy{at(ir::buffer::recv, 1, 5), at(ir::buffer::send, 1, 0), 6}}),
             Catch::Contains("recv elements [5, 11) exceed its capacity 10"));
  CHECK_THAT(bad({ir::copy{at(ir::buffer::shm, 2, 0), at(ir::buffer::send, 1, 0), 1}}),
             Catch::Contains("shm of rank 2, not on its node"));
  CHECK_THAT(bad({ir::wait{3, 0, 1}}), Catch::Contains("waits on rank 3, not on its node"));
  CHECK_THAT(bad({ir::copy{at(ir::buffer::scratch, 0, 0), at(ir::buffer::send, 1, 0), 1}}),
             Catch::Contains("scratch of rank 0"));
  CHECK_THAT(bad({ir::signal{2}}), Catch::Contains("flag 2 out of [0, 2)"));
  CHECK_THAT(bad({ir::send{1, at(ir::buffer::send, 1, 0), 1, 0}}), Catch::Contains("to itself"));
  CHECK_THAT(bad({ir::send{3, at(ir::buffer::send, 1, 0), 1, 1 << 30}}), Catch::Contains("tag 1073741824"));
  CHECK_THAT(bad({ir::recv{7, at(ir::buffer::scratch, 1, 0), 1, 0}}), Catch::Contains("peer 7 is not a rank"));
  CHECK_THAT(bad({ir::copy{at(ir::buffer::recv, 1, 0), at(ir::buffer::send, 1, 0), 1}}), Catch::Equals("no error"));
}

TEST_CASE("blocks of reduce_scatter and allgather follow the renumbering", "[backend][mpi][binder]") {
  std::vector<std::uint64_t> lines;
  // Program rank q is communicator rank comm_of_prog[q]; blocks of 10 elements.
  const std::vector<int> comm_of_prog{0, 2, 1, 3};
  auto ctx = context(0, 0, 1, 2, lines, comm_of_prog);
  // Send elements [5, 25) in program blocks: block 0 [5,10), block 1 [10,20), block 2 [20,25).
  auto p = program(collective::reduce_scatter, 4, 10,
                   {ir::copy{at(ir::buffer::scratch, 0, 0), at(ir::buffer::send, 0, 5), 20}}, 0);
  auto b = bind(p, ctx);
  REQUIRE(b.ops.size() == 3);
  CHECK(b.ops[0].a == 5);  // program block 0 -> communicator block 0
  CHECK(b.ops[0].n == 5);
  CHECK(b.ops[1].a == 20);  // program block 1 -> communicator block 2
  CHECK(b.ops[1].n == 10);
  CHECK(b.ops[1].dst == 5);
  CHECK(b.ops[2].a == 10);  // program block 2 -> communicator block 1
  CHECK(b.ops[2].n == 5);
  // Identity placement: one piece.
  auto id = context(0, 0, 1, 2, lines, {0, 1, 2, 3});
  CHECK(bind(p, id).ops.size() == 1);
  // Allgather's recv is blocked; a message spanning blocks gets an indexed type.
  auto g = program(collective::allgather, 4, 10, {ir::send{3, at(ir::buffer::recv, 0, 0), 20, 1}}, 0);
  auto bg = bind(g, ctx);
  REQUIRE(bg.transfers.size() == 1);
  CHECK(bg.transfers[0].peer == 3);
  CHECK(bg.transfers[0].owned_type);
  CHECK(bg.transfers[0].count == 1);
  int bytes = 0;
  MPI_Type_size(bg.transfers[0].type, &bytes);
  CHECK(bytes == 20 * 8);
  // A message inside one block stays plain bytes.
  auto g1 = program(collective::allgather, 4, 10, {ir::recv{3, at(ir::buffer::recv, 0, 12), 5, 1}}, 0);
  auto b1 = bind(g1, ctx);
  CHECK_FALSE(b1.transfers[0].owned_type);
  CHECK(b1.transfers[0].offset == 22);  // block 1 -> communicator block 2
  CHECK(b1.transfers[0].count == 5 * 8);
  CHECK_FALSE(b1.transfers[0].is_send);
}

TEST_CASE("in-place safety: every send element is read before it is overwritten", "[backend][mpi][binder]") {
  std::vector<std::uint64_t> lines;
  auto ctx = context(0, 0, 2, 2, lines, {0, 1});
  auto safe = [&](std::vector<ir::instruction> code, collective c = collective::allreduce, std::size_t shift = 0) {
    return collc::mpi::in_place_safe(bind(program(c, 2, 10, code, 0), ctx), shift);
  };
  const auto send = [](std::size_t o) { return at(ir::buffer::send, 0, o); };
  const auto recv = [](std::size_t o) { return at(ir::buffer::recv, 0, o); };
  const auto shm = [](std::size_t o) { return at(ir::buffer::shm, 0, o); };
  const auto peer = [](std::size_t o) { return at(ir::buffer::shm, 1, o); };
  // Read everything first, write later: safe.
  CHECK(safe(
      {ir::copy{shm(0), send(0), 10}, ir::signal{0}, ir::wait{1, 0, 1}, ir::reduce{recv(0), shm(0), peer(0), 10}}));
  // Element-for-element: recv[i] = send[i] op peer[i] reads before it writes.
  CHECK(safe({ir::reduce{recv(0), send(0), peer(0), 10}}));
  // Write recv[0..5), then read send[3..8): overwritten input.
  CHECK_FALSE(safe({ir::copy{recv(0), peer(0), 5}, ir::copy{shm(0), send(3), 5}}));
  // Shifted overlap inside one instruction.
  CHECK_FALSE(safe({ir::copy{recv(1), send(0), 5}}));
  // A message reads its source until the next fence.
  CHECK_FALSE(safe({ir::send{1, send(0), 10, 1}, ir::recv{1, recv(0), 10, 2}}));
  CHECK(safe({ir::send{1, send(0), 10, 1}, ir::fence{}, ir::recv{1, recv(0), 10, 2}}));
  // Allgather: send is the own block of recv (shift); other blocks are free.
  CHECK(safe({ir::copy{recv(0), peer(0), 10}, ir::copy{recv(10), send(0), 10}}, collective::allgather, 10));
  CHECK_FALSE(safe({ir::copy{recv(10), peer(0), 10}, ir::copy{shm(0), send(0), 10}}, collective::allgather, 10));
}
