// Tests for include/collc/backend/local/executor.hpp: hand-written programs
// (shared-memory and send/recv versions of several collectives, built by the
// small generators below) run on int64, double and a non-commutative matrix
// type at several rank counts, with back-to-back executions on fresh data and
// in place; plus the error paths: validation, timeouts, operator exceptions,
// unmatched messages, buffer sizes.
//
// Every generated program folds contributions in rank order with one rank per
// result element, so its result must equal the sequential reference exactly,
// for double too.
#include <catch2/catch.hpp>
#include <collc/backend/local/executor.hpp>
#include <collc/backend/local/reference.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace collc;
using ir::buffer;

namespace {

// 2x2 matrices modulo a prime under multiplication: associative, not commutative.
struct mat2 {
  std::int64_t a, b, c, d;
  friend bool operator==(const mat2&, const mat2&) = default;
};
constexpr std::int64_t prime = 1'000'003;
struct mat_mul {
  mat2 operator()(const mat2& x, const mat2& y) const {
    return {(x.a * y.a + x.b * y.c) % prime, (x.a * y.b + x.b * y.d) % prime, (x.c * y.a + x.d * y.c) % prime,
            (x.c * y.b + x.d * y.d) % prime};
  }
};

ir::ref at(buffer b, int owner, std::size_t offset = 0) { return ir::ref{b, owner, offset}; }

std::size_t slice_lo(int q, int P, std::size_t n) {
  return static_cast<std::size_t>(q) * n / static_cast<std::size_t>(P);
}

ir::program make(collective c, int P, std::size_t n, std::string name) {
  ir::program p;
  p.coll = c;
  p.ranks = P;
  p.count = n;
  p.code.resize(static_cast<std::size_t>(P));
  p.name = std::move(name);
  return p;
}

// Shared-memory allreduce. shm[r] = [input copy (n) | reduced slices (n)].
// Flag 0: my input is in shm. Flag 1: I have reduced my slice (done reading
// inputs). Flag 2: I have gathered (done reading results). Before overwriting
// its shm in the next execution a rank waits for flag 2 of the previous one.
ir::program shm_allreduce(int P, std::size_t n) {
  auto p = make(collective::allreduce, P, n, "test shm allreduce");
  p.shm_count = 2 * n;
  p.flags = 3;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 2, 0});
    c.push_back(ir::copy{at(buffer::shm, r), at(buffer::send, r), n});
    c.push_back(ir::signal{0});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 0, 1});
    const std::size_t lo = slice_lo(r, P, n), len = slice_lo(r + 1, P, n) - lo;
    const auto dst = at(buffer::shm, r, n + lo);
    if (P == 1) {
      c.push_back(ir::copy{dst, at(buffer::shm, 0, lo), len});
    } else {
      c.push_back(ir::reduce{dst, at(buffer::shm, 0, lo), at(buffer::shm, 1, lo), len});
      for (int q = 2; q < P; ++q) c.push_back(ir::reduce{dst, dst, at(buffer::shm, q, lo), len});
    }
    c.push_back(ir::signal{1});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 1, 1});
    for (int q = 0; q < P; ++q) {
      const std::size_t qlo = slice_lo(q, P, n), qlen = slice_lo(q + 1, P, n) - qlo;
      c.push_back(ir::copy{at(buffer::recv, r, qlo), at(buffer::shm, q, n + qlo), qlen});
    }
    c.push_back(ir::signal{2});
  }
  return p;
}

// Send/recv allreduce: everyone sends everything to everyone, then folds in
// rank order from scratch (own contribution copied there first, so in place
// works).
ir::program p2p_allreduce(int P, std::size_t n) {
  auto p = make(collective::allreduce, P, n, "test p2p allreduce");
  p.scratch_count = static_cast<std::size_t>(P) * n;
  auto slot = [n](int q) { return static_cast<std::size_t>(q) * n; };
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::send{q, at(buffer::send, r), n, 0});
    c.push_back(ir::copy{at(buffer::scratch, r, slot(r)), at(buffer::send, r), n});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::recv{q, at(buffer::scratch, r, slot(q)), n, 0});
    c.push_back(ir::fence{});  // in place, the send source is the recv buffer written below
    const auto dst = at(buffer::recv, r);
    if (P == 1) {
      c.push_back(ir::copy{dst, at(buffer::scratch, r, 0), n});
    } else {
      c.push_back(ir::reduce{dst, at(buffer::scratch, r, slot(0)), at(buffer::scratch, r, slot(1)), n});
      for (int q = 2; q < P; ++q) c.push_back(ir::reduce{dst, dst, at(buffer::scratch, r, slot(q)), n});
    }
  }
  return p;
}

// Shared-memory reduce_scatter: each rank publishes its whole send buffer and
// folds its own block from everyone's shm straight into recv.
ir::program shm_reduce_scatter(int P, std::size_t n) {
  auto p = make(collective::reduce_scatter, P, n, "test shm reduce_scatter");
  p.shm_count = static_cast<std::size_t>(P) * n;
  p.flags = 2;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 1, 0});
    c.push_back(ir::copy{at(buffer::shm, r), at(buffer::send, r), p.shm_count});
    c.push_back(ir::signal{0});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::wait{q, 0, 1});
    const std::size_t off = static_cast<std::size_t>(r) * n;
    const auto dst = at(buffer::recv, r);
    if (P == 1) {
      c.push_back(ir::copy{dst, at(buffer::shm, 0, off), n});
    } else {
      c.push_back(ir::reduce{dst, at(buffer::shm, 0, off), at(buffer::shm, 1, off), n});
      for (int q = 2; q < P; ++q) c.push_back(ir::reduce{dst, dst, at(buffer::shm, q, off), n});
    }
    c.push_back(ir::signal{1});
  }
  return p;
}

// Send/recv allgather straight into the recv blocks.
ir::program p2p_allgather(int P, std::size_t n) {
  auto p = make(collective::allgather, P, n, "test p2p allgather");
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::send{q, at(buffer::send, r), n, 5});
    c.push_back(ir::copy{at(buffer::recv, r, static_cast<std::size_t>(r) * n), at(buffer::send, r), n});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::recv{q, at(buffer::recv, r, static_cast<std::size_t>(q) * n), n, 5});
    c.push_back(ir::fence{});
  }
  return p;
}

// Send/recv reduce to `root`, folded in rank order in the root's scratch.
ir::program p2p_reduce(int P, std::size_t n, int root) {
  auto p = make(collective::reduce, P, n, "test p2p reduce");
  p.root = root;
  p.scratch_count = static_cast<std::size_t>(P) * n;
  auto slot = [n](int q) { return static_cast<std::size_t>(q) * n; };
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    if (r != root) {
      c.push_back(ir::send{root, at(buffer::send, r), n, 1});
      c.push_back(ir::fence{});
      continue;
    }
    c.push_back(ir::copy{at(buffer::scratch, r, slot(r)), at(buffer::send, r), n});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(ir::recv{q, at(buffer::scratch, r, slot(q)), n, 1});
    const auto dst = at(buffer::recv, r);
    if (P == 1) {
      c.push_back(ir::copy{dst, at(buffer::scratch, r, 0), n});
    } else {
      c.push_back(ir::reduce{dst, at(buffer::scratch, r, slot(0)), at(buffer::scratch, r, slot(1)), n});
      for (int q = 2; q < P; ++q) c.push_back(ir::reduce{dst, dst, at(buffer::scratch, r, slot(q)), n});
    }
  }
  return p;
}

// Shared-memory bcast from `root` (whose data is in its recv buffer).
ir::program shm_bcast(int P, std::size_t n, int root) {
  auto p = make(collective::bcast, P, n, "test shm bcast");
  p.root = root;
  p.shm_count = n;
  p.flags = 2;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    if (r == root) {
      for (int q = 0; q < P; ++q)
        if (q != r) c.push_back(ir::wait{q, 1, 0});  // readers of the previous execution are done
      c.push_back(ir::copy{at(buffer::shm, r), at(buffer::recv, r), n});
      c.push_back(ir::signal{0});
    } else {
      c.push_back(ir::wait{root, 0, 1});
      c.push_back(ir::copy{at(buffer::recv, r), at(buffer::shm, root), n});
      c.push_back(ir::signal{1});
    }
  }
  return p;
}

std::mt19937_64& rng() {
  static std::mt19937_64 g(20240611);
  return g;
}
std::int64_t random_value(std::int64_t*) { return static_cast<std::int64_t>(rng()() % 2001) - 1000; }
double random_value(double*) { return std::uniform_real_distribution<double>(-1.0, 1.0)(rng()); }
mat2 random_value(mat2*) {
  auto v = [] { return static_cast<std::int64_t>(rng()() % prime); };
  return {v(), v(), v(), v()};
}
template <class T>
std::vector<T> random_vector(std::size_t n) {
  std::vector<T> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(random_value(static_cast<T*>(nullptr)));
  return v;
}

// Runs `executions` back-to-back executions of `prog` with fresh random data
// and checks each against the reference. In place (allreduce only): send and
// recv are the same vectors.
template <class T, class Op>
void check_program(const ir::program& prog, const Op& op, int executions, bool in_place) {
  const auto P = static_cast<std::size_t>(prog.ranks);
  const bool bcast = prog.coll == collective::bcast;
  std::vector<std::vector<std::vector<T>>> sends(static_cast<std::size_t>(executions)), recvs(sends.size());
  for (std::size_t e = 0; e < sends.size(); ++e)
    for (std::size_t r = 0; r < P; ++r) {
      sends[e].push_back(random_vector<T>(bcast ? prog.count : prog.send_count()));
      recvs[e].push_back(random_vector<T>(prog.recv_count()));  // garbage the program must overwrite
      if (in_place) recvs[e][r] = sends[e][r];
      if (bcast && r == static_cast<std::size_t>(prog.root)) recvs[e][r] = sends[e][r];
    }
  // What the reference needs: the root's data for bcast, copies made before the run for in place.
  const auto inputs = sends;
  local::runner<T, Op> run(prog, op);
  if (in_place)
    run.run(std::span<const std::vector<std::vector<T>>>(recvs), recvs);
  else if (bcast)
    run.run(std::vector<std::vector<std::vector<T>>>(sends.size()), recvs);
  else
    run.run(sends, recvs);
  CHECK(run.executions() == executions);
  for (std::size_t e = 0; e < sends.size(); ++e) {
    const auto want = local::reference(prog, std::span<const std::vector<T>>(inputs[e]), op);
    for (std::size_t r = 0; r < P; ++r) {
      if (want[r].empty() && prog.coll == collective::reduce) continue;  // non-root: unspecified
      INFO("execution " << e << ", rank " << r);
      CHECK(recvs[e][r] == want[r]);
    }
  }
}

struct generated {
  const char* name;
  std::function<ir::program(int P, std::size_t n)> make;
  bool in_place_too;
};

const std::vector<generated>& generators() {
  static const std::vector<generated> g = {
      {"shm allreduce", shm_allreduce, true},
      {"p2p allreduce", p2p_allreduce, true},
      {"shm reduce_scatter", shm_reduce_scatter, false},
      {"p2p allgather", p2p_allgather, false},
      {"p2p reduce, root P-1", [](int P, std::size_t n) { return p2p_reduce(P, n, P - 1); }, false},
      {"p2p reduce, root 0", [](int P, std::size_t n) { return p2p_reduce(P, n, 0); }, false},
      {"shm bcast, root P/2", [](int P, std::size_t n) { return shm_bcast(P, n, P / 2); }, false},
  };
  return g;
}

template <class T, class Op>
void check_all_generated(const Op& op) {
  for (int P : {1, 2, 3, 4, 5, 7, 8, 13})
    for (std::size_t n :
         {std::size_t{0}, std::size_t{1}, std::size_t{5}, static_cast<std::size_t>(P + 3), std::size_t{37}})
      for (const auto& g : generators()) {
        INFO(g.name << ", P = " << P << ", count = " << n);
        const auto prog = g.make(P, n);
        check_program<T>(prog, op, 3, false);
        if (g.in_place_too) {
          INFO("in place");
          check_program<T>(prog, op, 3, true);
        }
      }
}

template <class F>
double seconds(F f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

local::options short_timeout(int ms) { return local::options{std::chrono::milliseconds(ms)}; }

}  // namespace

TEST_CASE("hand-written programs match the reference: int64 plus", "[backend][local]") {
  check_all_generated<std::int64_t>(plus{});
}

TEST_CASE("hand-written programs match the reference exactly: double plus", "[backend][local]") {
  check_all_generated<double>(plus{});
}

TEST_CASE("hand-written programs keep rank order: 2x2 matrix product", "[backend][local]") {
  STATIC_REQUIRE_FALSE(commutative_v<mat_mul>);
  check_all_generated<mat2>(mat_mul{});
}

TEST_CASE("execute(): one call, deduced types, repeated in-place executions", "[backend][local]") {
  const int P = 4;
  const auto prog = shm_allreduce(P, 3);
  std::vector<std::vector<std::int64_t>> send{{1, 2, 3}, {10, 20, 30}, {100, 200, 300}, {1000, 2000, 3000}};
  std::vector<std::vector<std::int64_t>> recv(P, std::vector<std::int64_t>(3, -7));
  local::execute(prog, send, recv);
  for (const auto& r : recv) CHECK(r == std::vector<std::int64_t>{1111, 2222, 3333});

  // In place twice: the second execution sums the P equal results of the first.
  local::execute(prog, send, send, plus{}, 2);
  for (const auto& r : send) CHECK(r == std::vector<std::int64_t>{4444, 8888, 13332});

  local::execute(prog, recv, recv, max{}, 1);
  for (const auto& r : recv) CHECK(r == std::vector<std::int64_t>{1111, 2222, 3333});
}

TEST_CASE("shm and scratch persist between executions and start as a 0xA5 pattern", "[backend][local]") {
  // Rank 0 returns what the previous execution left in shm, then stores its input there.
  auto p = make(collective::allreduce, 1, 2, "persistence");
  p.shm_count = 2;
  p.code[0] = {ir::copy{at(buffer::recv, 0), at(buffer::shm, 0), 2},
               ir::copy{at(buffer::shm, 0), at(buffer::send, 0), 2}};
  local::runner<std::uint64_t> run(p);
  std::vector<std::vector<std::uint64_t>> send{{1, 2}}, recv{{0, 0}};
  run(send, recv);
  CHECK(recv[0] == std::vector<std::uint64_t>{0xA5A5A5A5A5A5A5A5u, 0xA5A5A5A5A5A5A5A5u});
  send[0] = {3, 4};
  run(send, recv);
  CHECK(recv[0] == std::vector<std::uint64_t>{1, 2});
  CHECK(run.executions() == 2);
}

TEST_CASE("waits count signals of the current execution (slow writer)", "[backend][local]") {
  // Rank 0 computes its data with a slow operator before publishing it. A
  // wait target that ignored earlier executions would let rank 1 read the
  // previous execution's data in executions 1 and 2.
  auto p = make(collective::bcast, 2, 1, "slow writer");
  p.shm_count = 1;
  p.scratch_count = 1;
  p.flags = 2;
  p.code[0] = {ir::wait{1, 1, 0}, ir::reduce{at(buffer::scratch, 0), at(buffer::recv, 0), at(buffer::recv, 0), 1},
               ir::copy{at(buffer::shm, 0), at(buffer::scratch, 0), 1}, ir::signal{0}};
  p.code[1] = {ir::wait{0, 0, 1}, ir::copy{at(buffer::recv, 1), at(buffer::shm, 0), 1}, ir::signal{1}};
  auto slow_plus = [](std::int64_t a, std::int64_t b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return a + b;
  };
  local::runner<std::int64_t, decltype(slow_plus)> run(p, slow_plus);
  std::vector<std::vector<std::vector<std::int64_t>>> recvs{{{1}, {0}}, {{2}, {0}}, {{3}, {0}}};
  run.run(std::vector<std::vector<std::vector<std::int64_t>>>(3), recvs);
  CHECK(recvs[0][1] == std::vector<std::int64_t>{2});
  CHECK(recvs[1][1] == std::vector<std::int64_t>{4});
  CHECK(recvs[2][1] == std::vector<std::int64_t>{6});
}

TEST_CASE("a wait that is never satisfied throws errc::timeout naming rank, instruction, peer and flag",
          "[backend][local][timeout]") {
  // Each rank waits for the other's only signal, which comes after the wait.
  auto p = make(collective::allreduce, 2, 0, "deadlock");
  p.flags = 1;
  p.code[0] = {ir::signal{0}, ir::signal{0}, ir::wait{1, 0, 1}, ir::signal{0}};
  p.code[1] = {ir::wait{0, 0, 3}, ir::signal{0}};
  local::runner<int> run(p, plus{}, short_timeout(200));
  std::vector<std::vector<int>> send(2), recv(2);
  std::string what;
  const double t = seconds([&] {
    try {
      run(send, recv);
    } catch (const collc::error& e) {
      CHECK(e.code() == errc::timeout);
      what = e.what();
    }
  });
  CHECK(t < 10.0);
  // Whichever rank timed out first, the message says where and what it waited for.
  const bool rank0 =
      what.find("rank 0, instruction 2 (wait): flag 0 of rank 1 is at 0, waited for 1") != std::string::npos;
  const bool rank1 =
      what.find("rank 1, instruction 0 (wait): flag 0 of rank 0 is at 2, waited for 3") != std::string::npos;
  INFO(what);
  CHECK((rank0 || rank1));
  // The runner was reset: a second attempt fails the same way instead of inheriting stale flags.
  CHECK_THROWS_AS(run(send, recv), collc::error);
  CHECK(run.executions() == 0);
}

TEST_CASE("a recv without a matching send throws errc::timeout", "[backend][local][timeout]") {
  auto p = make(collective::allreduce, 2, 1, "lonely recv");
  p.code[0] = {ir::recv{1, at(buffer::recv, 0), 1, 7}};
  std::vector<std::vector<int>> send{{1}, {2}}, recv{{0}, {0}};
  try {
    local::execute(p, send, recv, plus{}, 1, short_timeout(100));
    FAIL("no exception");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::timeout);
    CHECK_THAT(e.what(), Catch::Contains("rank 0, instruction 0 (recv): no message from rank 1 with tag 7"));
  }
}

TEST_CASE("an exception thrown by the operator reaches the caller and stops the other ranks quickly",
          "[backend][local]") {
  const auto prog = shm_allreduce(4, 8);
  auto picky = [](std::int64_t a, std::int64_t b) {
    if (b == 13) throw std::domain_error("unlucky");
    return a + b;
  };
  std::vector<std::vector<std::int64_t>> send(4, std::vector<std::int64_t>(8, 1)),
      recv(4, std::vector<std::int64_t>(8));
  send[2][5] = 13;
  local::runner<std::int64_t, decltype(picky)> run(prog, picky, short_timeout(20'000));
  // The other ranks wait for the failing rank's signal; they must give up long before the timeout.
  const double t = seconds([&] { CHECK_THROWS_AS(run(send, recv), std::domain_error); });
  CHECK(t < 10.0);
  send[2][5] = 1;
  run(send, recv);
  for (const auto& r : recv) CHECK(r == std::vector<std::int64_t>(8, 4));
}

TEST_CASE("unmatched sends and mismatched message sizes are errc::mismatch", "[backend][local]") {
  std::vector<std::vector<int>> send{{1, 2}, {3, 4}}, recv{{0, 0}, {0, 0}};
  auto p = make(collective::allreduce, 2, 2, "extra send");
  p.code[0] = {ir::send{1, at(buffer::send, 0), 2, 0}};
  try {
    local::execute(p, send, recv);
    FAIL("no exception");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::mismatch);
    CHECK_THAT(e.what(), Catch::Contains("1 message(s) from rank 0 to rank 1 with tag 0 were never received"));
  }
  p.code[1] = {ir::recv{0, at(buffer::recv, 1), 1, 0}};
  try {
    local::execute(p, send, recv);
    FAIL("no exception");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::mismatch);
    CHECK_THAT(e.what(), Catch::Contains("expects 1 elements from rank 0 with tag 0, the matching send has 2"));
  }
}

TEST_CASE("programs that would touch memory out of bounds are rejected at construction", "[backend][local]") {
  auto expect_invalid = [](const ir::program& p, const std::string& text) {
    INFO(text);
    try {
      local::runner<int> run(p);
      FAIL("no exception");
    } catch (const collc::error& e) {
      CHECK(e.code() == errc::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(text));
    }
  };
  auto base = [] {
    auto p = make(collective::allreduce, 2, 4, "bad");
    p.shm_count = 4;
    p.flags = 1;
    return p;
  };
  auto p = base();
  p.code[1] = {ir::copy{at(buffer::recv, 1, 2), at(buffer::send, 1), 3}};
  expect_invalid(p, "rank 1, instruction 0 (copy): dst recv[1]+2 count 3 exceeds recv capacity 4");
  p = base();
  p.code[0] = {ir::copy{at(buffer::recv, 0), at(buffer::scratch, 1), 1}};
  expect_invalid(p, "src scratch[1]+0 belongs to a rank this rank cannot access");
  p = base();
  p.code[0] = {ir::copy{at(buffer::send, 0), at(buffer::shm, 1), 1}};
  expect_invalid(p, "dst send[0]+0 writes into the send buffer");
  p = base();
  p.code[0] = {ir::reduce{at(buffer::shm, 0, 1), at(buffer::shm, 0, 0), at(buffer::send, 0), 2}};
  expect_invalid(p, "dst shm[0]+1 partially overlaps a shm[0]+0");
  p = base();
  p.code[0] = {ir::signal{1}};
  expect_invalid(p, "rank 0, instruction 0 (signal): flag 1 out of range for 1 flags");
  p = base();
  p.code[0] = {ir::signal{0}};
  p.code[1] = {ir::wait{0, 0, 2}};
  expect_invalid(p, "waits for signal 2 of flag 0 of rank 0, which signals it only 1 times per execution");
  p = base();
  p.code[1] = {ir::send{2, at(buffer::send, 1), 1, 0}};
  expect_invalid(p, "peer 2 out of range for 2 ranks");
  p = base();
  p.node_of = {0, 1};
  p.code[1] = {ir::copy{at(buffer::recv, 1), at(buffer::shm, 0), 1}};
  expect_invalid(p, "src shm[0]+0 belongs to a rank this rank cannot access");
  p = base();
  p.code.pop_back();
  expect_invalid(p, "program has code for 1 ranks, expected 2");
}

TEST_CASE("send and recv across nodes work; buffers are size-checked", "[backend][local]") {
  auto prog = p2p_allreduce(4, 2);
  prog.node_of = {0, 0, 1, 1};
  std::vector<std::vector<std::int64_t>> send{{1, 2}, {3, 4}, {5, 6}, {7, 8}}, recv(4, std::vector<std::int64_t>(2));
  local::execute(prog, send, recv);
  for (const auto& r : recv) CHECK(r == std::vector<std::int64_t>{16, 20});

  recv[3].resize(1);
  CHECK_THROWS_WITH(local::execute(prog, send, recv), Catch::Contains("recv buffer of rank 3 has 1 elements, need 2"));
  recv.pop_back();
  CHECK_THROWS_WITH(local::execute(prog, send, recv), Catch::Contains("4 send and 3 recv buffers for 4 ranks"));
}

TEST_CASE("in place, a copy whose real memory partially overlaps is an error, not undefined behaviour",
          "[backend][local]") {
  // Symbolically send and recv are different buffers; bound to the same memory they overlap by one element.
  auto p = make(collective::allreduce, 1, 3, "overlap in place");
  p.code[0] = {ir::copy{at(buffer::recv, 0, 1), at(buffer::send, 0, 0), 2}};
  std::vector<std::vector<int>> data{{1, 2, 3}};
  CHECK_THROWS_WITH(local::execute(p, data, data), Catch::Contains("partially overlaps a source in memory"));
  std::vector<std::vector<int>> send{{1, 2, 3}}, recv{{0, 0, 0}};
  local::execute(p, send, recv);
  CHECK(recv[0] == std::vector<int>{0, 1, 2});
}

TEST_CASE("COLLC_TIMEOUT sets the default timeout in seconds", "[backend][local][timeout]") {
  ::setenv("COLLC_TIMEOUT", "0.25", 1);
  CHECK(local::default_timeout() == std::chrono::milliseconds(250));
  CHECK(local::options{}.timeout == std::chrono::milliseconds(250));
  ::setenv("COLLC_TIMEOUT", "inf", 1);  // never: a century
  CHECK(local::default_timeout() == std::chrono::hours(24 * 365 * 100));
  ::setenv("COLLC_TIMEOUT", "1e300", 1);
  CHECK(local::default_timeout() == std::chrono::hours(24 * 365 * 100));
  // Not a positive number: an error naming it (it fell back to 30 s without a word).
  for (const char* bad : {"nonsense", "0", "-1", " 5", "5s", "nan"}) {
    ::setenv("COLLC_TIMEOUT", bad, 1);
    CHECK_THROWS_WITH(local::default_timeout(),
                      Catch::Contains(std::string("COLLC_TIMEOUT='") + bad + "' is not a positive number of seconds"));
  }
  ::unsetenv("COLLC_TIMEOUT");
  CHECK(local::default_timeout() == std::chrono::seconds(30));
}

TEST_CASE("a commutative-only program refuses an operator not declared commutative", "[backend][local]") {
  auto p = p2p_allreduce(2, 1);
  p.commutative_only = true;
  CHECK_NOTHROW(local::runner<std::int64_t, plus>(p));
  try {
    local::runner<mat2, mat_mul> run(p);
    FAIL("no exception");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::not_commutative);
    CHECK_THAT(e.what(), Catch::Contains("test p2p allreduce"));
  }
}
