// Tests for include/collc/backend/mpi/engine.hpp with hand-made programs (no
// lowering involved): a shared-memory allreduce, a message-only allreduce,
// chunk and tail programs whose signal structures differ, and non-blocking
// progress.
#include "support.hpp"

#include <collc/backend/mpi/engine.hpp>
#include <collc/ops.hpp>

#include <chrono>
#include <vector>

using namespace collc;
using collc_test::all_ranks;

namespace {

ir::ref at(ir::buffer b, int owner, std::size_t off) { return ir::ref{b, owner, off}; }

/// Shared-memory allreduce of n elements on one node: each rank waits until
/// every peer finished reading its shm in the previous execution (signal
/// 2 + extra of that execution: value `extra - 0` relative), publishes its
/// input in shm (signal 1), waits for all, reduces in rank order into recv,
/// and signals that it is done reading (signal 2). `extra` more signals per
/// execution change the signal structure.
ir::program shm_allreduce(int P, std::size_t n, int extra) {
  ir::program p;
  p.coll = collective::allreduce;
  p.ranks = P;
  p.count = n;
  p.shm_count = n;
  p.flags = 1;
  p.code.resize(static_cast<std::size_t>(P));
  const int S = 2 + extra;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 0, 0});  // q's last signal of the previous execution
    c.push_back(ir::copy{at(ir::buffer::shm, r, 0), at(ir::buffer::send, r, 0), n});
    c.push_back(ir::signal{0});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 0, 1});
    if (P == 1)
      c.push_back(ir::copy{at(ir::buffer::recv, r, 0), at(ir::buffer::shm, 0, 0), n});
    else
      c.push_back(ir::reduce{at(ir::buffer::recv, r, 0), at(ir::buffer::shm, 0, 0), at(ir::buffer::shm, 1, 0), n});
    for (int q = 2; q < P; ++q)
      c.push_back(ir::reduce{at(ir::buffer::recv, r, 0), at(ir::buffer::recv, r, 0), at(ir::buffer::shm, q, 0), n});
    for (int s = 2; s <= S; ++s) c.push_back(ir::signal{0});
  }
  return p;
}

/// Message-only allreduce: every rank sends its input to every other rank,
/// receives theirs into scratch, and reduces in rank order.
ir::program message_allreduce(int P, std::size_t n) {
  ir::program p;
  p.coll = collective::allreduce;
  p.ranks = P;
  p.count = n;
  p.scratch_count = n * static_cast<std::size_t>(P);
  p.node_of.resize(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) p.node_of[static_cast<std::size_t>(r)] = r;
  p.code.resize(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    const auto slot = [&](int q) { return at(ir::buffer::scratch, r, static_cast<std::size_t>(q) * n); };
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::send{q, at(ir::buffer::send, r, 0), n, 7});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::recv{q, slot(q), n, 7});
    c.push_back(ir::copy{slot(r), at(ir::buffer::send, r, 0), n});
    c.push_back(ir::copy{at(ir::buffer::recv, r, 0), slot(0), n});
    for (int q = 1; q < P; ++q)
      c.push_back(ir::reduce{at(ir::buffer::recv, r, 0), at(ir::buffer::recv, r, 0), slot(q), n});
    c.push_back(ir::fence{});
  }
  return p;
}

std::unique_ptr<collc::mpi::engine> make_engine(std::size_t count, int ranks_per_node) {
  collc::mpi::plan_shape s;
  s.count = count;
  s.elem_size = sizeof(std::int64_t);
  s.type_name = "int64";
  s.op_name = "plus";
  s.schedule = "hand-made";
  plan_options o;
  o.ranks_per_node = ranks_per_node;
  o.timeout_s = 30;
  return std::make_unique<collc::mpi::engine>(MPI_COMM_WORLD, s, collc::mpi::resolve(o));
}

/// Runs `calls` calls and checks each against the sum over ranks.
bool run(collc::mpi::engine& e, std::size_t count, int calls, bool nonblocking = false) {
  const int P = collc_test::world_size(), me = collc_test::world_rank();
  bool ok = true;
  for (int it = 0; it < calls; ++it) {
    std::vector<std::int64_t> x(count), y(count, -1);
    for (std::size_t i = 0; i < count; ++i) x[i] = collc_test::input<std::int64_t>(me, i, it);
    e.begin(x.data(), y.data(), false, false);
    if (nonblocking)
      while (!e.advance<std::int64_t>(plus{}, false)) {
      }
    else
      e.advance<std::int64_t>(plus{}, true);
    e.acknowledge();
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t want = 0;
      for (int r = 0; r < P; ++r) want += collc_test::input<std::int64_t>(r, i, it);
      ok = ok && y[i] == want;
    }
  }
  return ok;
}

/// Message allgather through program rank 0: it collects every block, then
/// sends the whole P-block recv buffer to each rank in one message (which
/// spans blocks, so under a renumbering it needs an indexed datatype).
ir::program gather_bcast_allgather(int P, std::size_t n) {
  ir::program p;
  p.coll = collective::allgather;
  p.ranks = P;
  p.count = n;
  p.code.resize(static_cast<std::size_t>(P));
  const std::size_t all = n * static_cast<std::size_t>(P);
  auto& root = p.code[0];
  root.push_back(ir::copy{at(ir::buffer::recv, 0, 0), at(ir::buffer::send, 0, 0), n});
  for (int q = 1; q < P; ++q) {
    p.code[static_cast<std::size_t>(q)].push_back(ir::send{0, at(ir::buffer::send, q, 0), n, 1});
    p.code[static_cast<std::size_t>(q)].push_back(ir::recv{0, at(ir::buffer::recv, q, 0), all, 2});
    p.code[static_cast<std::size_t>(q)].push_back(ir::fence{});
    root.push_back(ir::recv{q, at(ir::buffer::recv, 0, static_cast<std::size_t>(q) * n), n, 1});
  }
  for (int q = 1; q < P; ++q) root.push_back(ir::send{q, at(ir::buffer::recv, 0, 0), all, 2});
  root.push_back(ir::fence{});
  return p;
}

}  // namespace

TEST_CASE("a message spanning renumbered blocks", "[backend][mpi][engine]") {
  const int P = collc_test::world_size(), me = collc_test::world_rank();
  const std::size_t n = 6;
  collc::mpi::plan_shape s;
  s.coll = collective::allgather;
  s.count = n;
  s.elem_size = sizeof(std::int64_t);
  s.schedule = "hand-made";
  plan_options o;
  o.ranks_per_node = 2;
  o.pseudo_placement = placement::round_robin;  // allgather may renumber: ranks 0, 2, .. then 1, 3, ..
  collc::mpi::engine e(MPI_COMM_WORLD, s, collc::mpi::resolve(o));
  CHECK(e.placement().identity() == (P < 3));
  e.build_from({gather_bcast_allgather(P, n)});
  for (int it = 0; it < 3; ++it) {
    std::vector<std::int64_t> x(n), y(n * static_cast<std::size_t>(P), -1);
    for (std::size_t i = 0; i < n; ++i) x[i] = collc_test::input<std::int64_t>(me, i, it);
    e.begin(x.data(), y.data(), false, false);
    e.advance<std::int64_t>(plus{}, true);
    e.acknowledge();
    bool ok = true;
    for (int r = 0; r < P; ++r)
      for (std::size_t i = 0; i < n; ++i)
        ok = ok && y[static_cast<std::size_t>(r) * n + i] == collc_test::input<std::int64_t>(r, i, it);
    CHECK(all_ranks(ok));
  }
}

TEST_CASE("a hand-made shared-memory program runs many times", "[backend][mpi][engine]") {
  const int P = collc_test::world_size();
  auto e = make_engine(50, 0);
  e->build_from({shm_allreduce(P, 50, 0)});
  CHECK_FALSE(e->has_transfers());
  CHECK(e->executions_per_call() == 1);
  CHECK(all_ranks(run(*e, 50, 5)));
  CHECK(e->epoch() == 5);
  CHECK(all_ranks(run(*e, 50, 3, true)));
}

TEST_CASE("chunk and tail programs with different signal structures", "[backend][mpi][engine]") {
  const int P = collc_test::world_size();
  // 3 chunks of 16 and a tail of 5; the tail signals twice more per execution.
  auto e = make_engine(53, 0);
  e->build_from({shm_allreduce(P, 16, 0), shm_allreduce(P, 5, 2)});
  CHECK(e->executions_per_call() == 4);
  CHECK(all_ranks(run(*e, 53, 6)));
  CHECK(all_ranks(run(*e, 53, 2, true)));
}

TEST_CASE("a hand-made message program, one rank per node", "[backend][mpi][engine]") {
  const int P = collc_test::world_size();
  auto e = make_engine(40, 1);
  e->build_from({message_allreduce(P, 16), message_allreduce(P, 8)});  // 2 chunks of 16 + tail of 8
  CHECK(e->has_transfers() == (P > 1));
  CHECK(all_ranks(run(*e, 40, 4)));
  CHECK(all_ranks(run(*e, 40, 3, true)));
}

TEST_CASE("another plan's turns advance a started call; their errors reach its owner", "[backend][mpi][engine]") {
  const int P = collc_test::world_size(), me = collc_test::world_rank();
  auto a = make_engine(53, 0), b = make_engine(40, 1);
  a->build_from({shm_allreduce(P, 16, 0), shm_allreduce(P, 5, 2)});
  b->build_from({message_allreduce(P, 16), message_allreduce(P, 8)});
  a->set_stepper([](collc::mpi::engine& e) { return e.advance<std::int64_t>(collc::plus{}, false); });
  std::vector<std::int64_t> ax(53), ay(53, -1), bx(40), by(40, -1);
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = collc_test::input<std::int64_t>(me, i, 0);
  for (std::size_t i = 0; i < bx.size(); ++i) bx[i] = collc_test::input<std::int64_t>(me, i, 1);
  a->begin(ax.data(), ay.data(), false, false);
  b->begin(bx.data(), by.data(), false, false);
  // Only b's turns run a: every rank waits for b first, then finds a complete.
  const auto t0 = std::chrono::steady_clock::now();
  while (a->active() && collc_test::seconds_since(t0) < 20) b->progress();
  CHECK_FALSE(a->active());
  CHECK(a->advance<std::int64_t>(collc::plus{}, true));
  a->acknowledge();
  CHECK(b->advance<std::int64_t>(collc::plus{}, true));
  b->acknowledge();
  bool ok = true;
  for (std::size_t i = 0; i < ay.size(); ++i) {
    std::int64_t sum = 0;
    for (int r = 0; r < P; ++r) sum += collc_test::input<std::int64_t>(r, i, 0);
    ok = ok && ay[i] == sum;
  }
  CHECK(all_ranks(ok));
  // An error in a turn (here the stepper's own) is thrown by the owner's next
  // advance, the one in its wait or test, never lost nor thrown at the waiter.
  a->set_stepper([](collc::mpi::engine&) -> bool {
    throw collc::error(collc::errc::mismatch, "raised in another plan's wait");
  });
  a->begin(ax.data(), ay.data(), false, false);
  b->begin(bx.data(), by.data(), false, false);
  CHECK_NOTHROW(b->progress());
  const auto err = collc_test::error_of([&] { a->advance<std::int64_t>(collc::plus{}, true); });
  REQUIRE(err);
  CHECK(err->first == collc::errc::mismatch);
  CHECK(err->second == "raised in another plan's wait");
  // The call itself is intact: both complete.
  CHECK(a->advance<std::int64_t>(collc::plus{}, true));
  a->acknowledge();
  CHECK(b->advance<std::int64_t>(collc::plus{}, true));
  b->acknowledge();
}

TEST_CASE("a program from the wrong number of ranks is refused", "[backend][mpi][engine]") {
  const int P = collc_test::world_size();
  auto e = make_engine(8, 0);
  try {
    e->build_from({shm_allreduce(P + 1, 8, 0)});
    FAIL("no error");
  } catch (const collc::error& err) {
    CHECK(err.code() == errc::invalid_argument);
    CHECK_THAT(err.what(), Catch::Contains("program for " + std::to_string(P + 1) + " ranks"));
  }
}

TEST_CASE("checks prove rank order at setup for a non-commutative operator", "[backend][mpi][engine]") {
  // COLLC_ENABLE_CHECKS proves what a plan binds with the plan's own operator
  // properties: a lowering that combines ranks out of order is a sum for
  // plus but wrong for a non-commutative operator, so the same programs must
  // be refused once the shape says the operator does not commute.
  const int P = collc_test::world_size();
  if (P < 2) return;
  const auto engine_for = [](bool commutative) {
    collc::mpi::plan_shape s;
    s.count = 8;
    s.elem_size = sizeof(std::int64_t);
    s.type_name = "int64";
    s.op_name = commutative ? "plus" : "non-commutative";
    s.commutative = commutative;
    s.schedule = "hand-made";
    plan_options o;
    o.ranks_per_node = 0;
    o.timeout_s = 30;
    o.checks = true;
    return std::make_unique<collc::mpi::engine>(MPI_COMM_WORLD, s, collc::mpi::resolve(o));
  };
  // shm_allreduce with the first reduction's operands swapped: rank 1 before rank 0.
  const auto swapped = [](const collc::mpi::chunk_request& q) {
    ir::program p = shm_allreduce(q.ranks, q.count, 0);
    for (auto& code : p.code)
      for (auto& ins : code)
        if (auto* d = std::get_if<ir::reduce>(&ins); d && d->a.buf == ir::buffer::shm) {
          std::swap(d->a, d->b);
          break;
        }
    return p;
  };
  const auto name = [] { return std::string("hand-made"); };
  // The correct order proves either way; the swapped one only commutatively.
  CHECK_NOTHROW(engine_for(false)->build(
      name, [](const collc::mpi::chunk_request& q) { return shm_allreduce(q.ranks, q.count, 0); }));
  CHECK_NOTHROW(engine_for(true)->build(name, swapped));
  const auto err = collc_test::error_of([&] { engine_for(false)->build(name, swapped); });
  REQUIRE(err);
  CHECK_THAT(err->second, Catch::Contains("rank order"));
}
