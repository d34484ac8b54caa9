// Tests for include/collc/plan.hpp on real communicators: every collective and
// schedule family against a sequential rank-order reference (int64 exact,
// double within rounding and bitwise identical on all ranks, a non-commutative
// 2x2 matrix product), counts 0, 1, < P, not divisible by P and several MiB,
// in place, pseudo-nodes, interleaved plans, duplicated and split
// communicators, start/test/wait.
#include "support.hpp"

#include <collc/algo/presets.hpp>
#include <collc/backend/mpi/registry.hpp>
#include <collc/blocking.hpp>
#include <collc/ir/sequence.hpp>
#include <collc/plan.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using collc::collective;
using namespace collc_test;

namespace {

constexpr collective all_collectives[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                          collective::reduce, collective::bcast};

int comm_rank(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int comm_size(MPI_Comm c) {
  int p = 1;
  MPI_Comm_size(c, &p);
  return p;
}

/// Runs `p` once on fresh inputs (call number `it`) and compares with the
/// reference; returns "" or a description of the first difference.
template <class T, class Op>
std::string run_once(collc::plan<T, Op>& p, MPI_Comm comm, bool in_place, int it, Op op = {}) {
  const collective c = p.kind();
  const int me = comm_rank(comm), P = comm_size(comm);
  const std::size_t n = p.count();
  const int root = p.root();
  std::vector<T> send = send_data<T>(c, me, P, n, it);
  const std::size_t rn = c == collective::allgather ? n * static_cast<std::size_t>(P) : n;
  const T sentinel = input<T>(P + 17, 3, it);
  std::vector<T> got;
  if (c == collective::bcast) {
    got = me == root ? send : std::vector<T>(n, sentinel);
    p(got);
  } else if (in_place) {
    std::vector<T> buf;
    if (c == collective::allgather) {
      buf.assign(rn, sentinel);
      std::copy(send.begin(), send.end(), buf.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * n));
    } else {
      buf = send;
    }
    p(collc::in_place, buf);
    got.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(rn));
  } else {
    got.assign(rn, sentinel);
    p(send, got);
  }
  if (c == collective::reduce && me != root) {
    // Not significant at non-roots: must be left alone unless in place.
    if (!in_place && mismatches(got, std::vector<T>(rn, sentinel)) != 0) return "reduce wrote a non-root recv buffer";
    return "";
  }
  const std::vector<T> want = expected<T, Op>(c, me, P, n, root, it, op);
  std::size_t first = 0;
  if (const std::size_t bad = mismatches(got, want, &first); bad != 0)
    return std::string(to_string(c)) + " " + p.schedule_name() + " count " + std::to_string(n) +
           (in_place ? " in place" : "") + ": " + std::to_string(bad) + " wrong elements on rank " +
           std::to_string(me) + ", first at " + std::to_string(first);
  if constexpr (std::is_floating_point_v<T>)
    if ((c == collective::allreduce || c == collective::allgather || c == collective::bcast) &&
        !identical_everywhere(got, comm))
      return std::string(to_string(c)) + " " + p.schedule_name() + ": results differ bitwise between ranks";
  return "";
}

/// Builds a plan for `c` (any collective, so the generic helper is used) and
/// checks `calls` calls, alternately out of place and in place when `both`.
template <class T, class Op = collc::plus, class... A>
void check(collective c, MPI_Comm comm, std::size_t n, int root, int calls, A&&... args) {
  auto p = collc::mpi::make_plan<T, Op>(c, comm, n, root, std::forward<A>(args)...);
  for (int it = 0; it < calls; ++it) {
    const std::string why = run_once<T, Op>(p, comm, it % 2 == 1, it);
    INFO("rank " << comm_rank(comm) << ": " << why);
    CHECK(all_ranks(why.empty(), comm));
  }
}

std::vector<std::size_t> counts_for(int P) {
  const auto p = static_cast<std::size_t>(P);
  std::vector<std::size_t> v{0, 1, p > 1 ? p - 1 : 2, p + 3, 1000};
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

/// Schedules worth trying for P ranks and collective c (invalid ones are
/// filtered by setup errors that every rank sees alike).
std::vector<collc::algo::schedule> schedules_for(collective c, int P, bool commutative) {
  using collc::factor_set;
  using collc::algo::schedule;
  std::vector<schedule> s;
  const bool pos_only = c == collective::allgather || c == collective::bcast || c == collective::reduce;
  const int sign = c == collective::reduce_scatter ? -1 : 1;
  s.push_back(schedule::recursive(factor_set{sign * P}));
  if (P % 2 == 0 && P > 2) {
    if (c == collective::allreduce)
      s.push_back(schedule::recursive(factor_set{-2, P / 2, 2}));
    else if (pos_only)
      s.push_back(schedule::recursive(factor_set{2, P / 2}));
    else
      s.push_back(schedule::recursive(factor_set{-2, -P / 2}));
  }
  if (commutative && P >= 3) {
    s.push_back(schedule::cyclic(factor_set{sign * (P - 1), sign * 2}));
    s.push_back(schedule::ring());
  }
  s.push_back(schedule::tree(2));
  s.push_back(schedule::tree(0));
  s.push_back(schedule::copy_in());
  return s;
}

template <class T, class Op = collc::plus>
void check_families(MPI_Comm comm, std::size_t n) {
  const int P = comm_size(comm);
  for (collective c : all_collectives) {
    if (!collc::reduces(c) && !std::is_same_v<Op, collc::plus>) continue;
    for (const auto& s : schedules_for(c, P, collc::commutative_v<Op>)) {
      std::string setup_error;
      try {
        check<T, Op>(c, comm, n, P - 1, 2, s);
      } catch (const collc::error& e) {
        // The lowering may not serve every (family, collective, P); any other
        // error than "does not fit / not lowered" is a failure.
        setup_error = e.what();
        const bool fits = e.code() == collc::errc::unsupported || e.code() == collc::errc::invalid_factor_set;
        INFO(to_string(c) << " " << s.to_string() << ": " << setup_error);
        CHECK(fits);
      }
    }
  }
}

}  // namespace

TEST_CASE("every collective matches the rank-order reference", "[backend][mpi][plan]") {
  const int P = world_size();
  for (collective c : all_collectives) {
    const int root = P / 2;
    for (std::size_t n : counts_for(P)) {
      INFO(to_string(c) << " count " << n);
      check<std::int64_t>(c, MPI_COMM_WORLD, n, root, 3);
      check<double>(c, MPI_COMM_WORLD, n, root, 3);
      if (collc::reduces(c))
        check<mat2, mat_mul>(c, MPI_COMM_WORLD, n, root, 3);
      else
        check<mat2>(c, MPI_COMM_WORLD, n, root, 2);
    }
  }
}

TEST_CASE("the public factories build each collective", "[backend][mpi][plan]") {
  const int P = world_size(), me = world_rank();
  const std::size_t n = 5;
  auto ar = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, n);
  auto rs = collc::make_reduce_scatter<std::int64_t, collc::max>(MPI_COMM_WORLD, n);
  auto ag = collc::make_allgather<int>(MPI_COMM_WORLD, n);
  auto rd = collc::make_reduce<double, collc::min>(MPI_COMM_WORLD, n, P - 1);
  auto bc = collc::make_bcast<char>(MPI_COMM_WORLD, n, 0);
  CHECK(ar.kind() == collective::allreduce);
  CHECK(rs.kind() == collective::reduce_scatter);
  CHECK(rs.send_count() == n * static_cast<std::size_t>(P));
  CHECK(ag.recv_count() == n * static_cast<std::size_t>(P));
  CHECK(rd.root() == P - 1);

  std::vector<std::int64_t> x(n, me + 1), y(n, -1);
  ar(x, y);
  CHECK(y == std::vector<std::int64_t>(n, static_cast<std::int64_t>(P) * (P + 1) / 2));
  ar(x.data(), y.data());  // pointer overload
  CHECK(y[n - 1] == static_cast<std::int64_t>(P) * (P + 1) / 2);

  std::vector<std::int64_t> blocks(n * static_cast<std::size_t>(P));
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<std::int64_t>(i) * (me == 0 ? 2 : 1);
  rs(blocks, y);
  for (std::size_t i = 0; i < n; ++i)
    CHECK(y[i] == static_cast<std::int64_t>(static_cast<std::size_t>(me) * n + i) * 2);

  std::vector<int> mine(n, me), all(n * static_cast<std::size_t>(P), -1);
  ag(mine, all);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == static_cast<int>(i / n));

  std::vector<double> d(n, static_cast<double>(me)), r(n, 42.0);
  rd(d, r);
  CHECK(r == std::vector<double>(n, me == P - 1 ? 0.0 : 42.0));
  std::vector<double> empty;
  if (me == P - 1)
    rd(d, r);
  else
    rd(d, empty);  // recv is not significant off the root: may be empty

  std::vector<char> text(n, me == 0 ? 'x' : '?');
  bc(text);
  CHECK(text == std::vector<char>(n, 'x'));
}

TEST_CASE("every schedule family on every collective", "[backend][mpi][plan][families]") {
  const int P = world_size();
  for (std::size_t n : {static_cast<std::size_t>(P) + 3, std::size_t{700}}) {
    INFO("count " << n);
    check_families<std::int64_t>(MPI_COMM_WORLD, n);
    check_families<double>(MPI_COMM_WORLD, n);
    check_families<mat2, mat_mul>(MPI_COMM_WORLD, n);
  }
}

TEST_CASE("explicit factor sets pick recursive exchange or cyclic shift", "[backend][mpi][plan][families]") {
  const int P = world_size();
  if (P < 3) return;
  // {P} is a recursive exchange for P ranks; {P-1, 2} is a cyclic shift (P-1 < P <= 2(P-1)).
  auto rec = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 10, collc::factor_set{P});
  CHECK(rec.schedule().fam == collc::algo::family::recursive_exchange);
  auto cyc = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 10, collc::factor_set{P - 1, 2});
  CHECK(cyc.schedule().fam == collc::algo::family::cyclic_shift);
  for (int it = 0; it < 2; ++it) {
    CHECK(all_ranks(run_once(rec, MPI_COMM_WORLD, false, it).empty()));
    CHECK(all_ranks(run_once(cyc, MPI_COMM_WORLD, true, it).empty()));
  }
  if (P == 4) {
    auto st = collc::make_allreduce<double, collc::plus>(MPI_COMM_WORLD, 100, collc::factors<-2, -2, 2, 2>{});
    CHECK(st.schedule_name() == "recexch{-2,-2,2,2}");
    CHECK(all_ranks(run_once(st, MPI_COMM_WORLD, false, 0).empty()));
  }
}

TEST_CASE("large messages run in bounded chunks", "[backend][mpi][plan][chunks]") {
  const int P = world_size();
  const std::size_t mib = std::size_t{1} << 20;
  collc::plan_options o;
  o.timeout_s = 120;
  // Between (pseudo-)nodes the default chunk is the network's.
  const bool across_nodes = plans_span_nodes(o);
  const std::size_t bound = across_nodes ? collc::mpi::default_net_chunk_bytes : collc::mpi::resolve(o).chunk_bytes;
  const std::size_t flags_slack = 64 * 64;  // flag lines come on top of the data bound
  std::size_t shm_small = 0, shm_large = 0, scratch_small = 0, scratch_large = 0;
  std::string schedule_small, schedule_large;
  const std::size_t small = std::max(4 * mib, 2 * bound), large = 2 * small;
  for (std::size_t bytes : {small, large}) {
    const std::size_t n = bytes / sizeof(double) + 13;  // not a multiple of the chunk
    auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, n, o);
    INFO("allreduce of " << bytes << " B: chunk " << p.chunk_elements() << " x " << p.executions_per_call());
    CHECK(p.executions_per_call() > 1);
    CHECK(p.shm_bytes_per_rank() <= bound + flags_slack);
    CHECK(p.scratch_bytes_per_rank() <= bound);
    CHECK(p.stage_bytes_per_rank() <= bound);
    (bytes == small ? shm_small : shm_large) = p.shm_bytes_per_rank();
    (bytes == small ? scratch_small : scratch_large) = p.scratch_bytes_per_rank();
    (bytes == small ? schedule_small : schedule_large) = p.schedule_name();
    for (int it = 0; it < 2; ++it) CHECK(all_ranks(run_once(p, MPI_COMM_WORLD, it == 1, it).empty()));
  }
  // Memory does not grow with the message: the bounds above, and for one
  // schedule the same bytes (between nodes the default may change schedule
  // between the two sizes, e.g. at P = 4 with every rank its own node).
  if (schedule_small == schedule_large) {
    CHECK(shm_small == shm_large);
    CHECK(scratch_small == scratch_large);
  }

  // Every other collective at a few MiB, per block where blocked.
  const std::size_t per_block = 3 * mib / sizeof(std::int64_t) / static_cast<std::size_t>(P) + 5;
  check<std::int64_t>(collective::reduce_scatter, MPI_COMM_WORLD, per_block, 0, 2, o);
  check<std::int64_t>(collective::allgather, MPI_COMM_WORLD, per_block, 0, 2, o);
  check<std::int64_t>(collective::reduce, MPI_COMM_WORLD, 3 * mib / 8 + 7, P - 1, 2, o);
  check<std::int64_t>(collective::bcast, MPI_COMM_WORLD, 3 * mib / 8 + 7, P / 2, 2, o);
}

// Registered alone as mpi_test_plan_progress (8 ranks in pseudo-nodes of 3):
// a rank waiting for its node's signal must keep testing the large sends it
// started, or a peer waits for the rest of the message forever. The engine
// once drove MPI with MPI_Iprobe there, which progresses nothing when an
// early message of the next execution is queued: this allgather (two
// executions of ~210 KB messages) then hung in about one run in six.
namespace progress_case {
/// 4 MiB chunks: two executions of ~210 KB messages at P = 8; a hang fails as
/// a collc timeout naming the waiting ranks.
collc::plan_options options() {
  collc::plan_options o;
  o.chunk_bytes = std::size_t{4} << 20;
  o.timeout_s = 20;
  return o;
}
/// Elements per block: 3 MiB of int64 in all.
std::size_t block() {
  return 3 * (std::size_t{1} << 20) / sizeof(std::int64_t) / static_cast<std::size_t>(world_size()) + 5;
}
}  // namespace progress_case

TEST_CASE("a rank waiting for a signal completes its started sends", "[.progress]") {
  check<std::int64_t>(collective::allgather, MPI_COMM_WORLD, progress_case::block(), 0, 60, progress_case::options());
}

// The same for a caller that polls test() instead of blocking: each test()
// that finds the call waiting for a signal tests the rank's started sends
// (before, it returned without any MPI call, so a large send never finished).
TEST_CASE("a caller polling test() completes its started sends", "[.progress]") {
  const int P = world_size(), me = comm_rank(MPI_COMM_WORLD);
  const std::size_t n = progress_case::block();
  auto p = collc::make_allgather<std::int64_t>(MPI_COMM_WORLD, n, progress_case::options());
  std::vector<std::int64_t> mine(n), all(n * static_cast<std::size_t>(P));
  for (int it = 0; it < 20; ++it) {
    const auto value = [&](int r, std::size_t i) { return std::int64_t{r} * 1000003 + it * 7919 + std::int64_t(i); };
    for (std::size_t i = 0; i < n; ++i) mine[i] = value(me, i);
    std::fill(all.begin(), all.end(), -1);
    p.start(mine, all);
    const auto t0 = std::chrono::steady_clock::now();
    bool done = false;
    while (!(done = p.test()) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    }
    INFO("call " << it << " on rank " << me);
    const bool everyone = all_ranks(done);
    CHECK(everyone);
    if (!done) p.wait();  // the blocking wait's timeout ends the test if this hangs too
    std::size_t wrong = 0;
    for (int r = 0; r < P; ++r)
      for (std::size_t i = 0; i < n; ++i) wrong += all[static_cast<std::size_t>(r) * n + i] != value(r, i);
    CHECK(all_ranks(wrong == 0));
    if (!everyone) break;  // one stuck call is the finding
  }
}

TEST_CASE("between nodes the default chunk is the network chunk; a chosen one is kept",
          "[backend][mpi][plan][chunks]") {
  const int P = world_size();
  collc::plan_options o;
  const bool across_nodes = plans_span_nodes(o);
  const std::size_t n = (std::size_t{1} << 20) / sizeof(double) + 3;  // 1 MiB and a bit
  auto by_default = collc::make_allreduce<double>(MPI_COMM_WORLD, n, o);
  INFO("P = " << P << (across_nodes ? ", across nodes" : ", one node") << ": chunk " << by_default.chunk_elements()
              << " x " << by_default.executions_per_call());
  // 256 KiB chunks on one node; one chunk of 4 MiB between nodes (each
  // chunk costs a network round per step there).
  if (across_nodes)
    CHECK(by_default.executions_per_call() == 1u);
  else if (P > 1)
    CHECK(by_default.executions_per_call() > 1u);
  CHECK(by_default.name().find(across_nodes ? "chunk_bytes=4194304" : "chunk_bytes=262144") != std::string::npos);
  o.chunk_bytes = std::size_t{256} << 10;  // chosen: kept between nodes too
  auto chosen = collc::make_allreduce<double>(MPI_COMM_WORLD, n, o);
  if (P > 1) CHECK(chosen.executions_per_call() > 1u);
  CHECK(chosen.name().find("chunk_bytes=262144") != std::string::npos);
  for (int it = 0; it < 2; ++it) {
    CHECK(all_ranks(run_once(by_default, MPI_COMM_WORLD, it == 1, it).empty()));
    CHECK(all_ranks(run_once(chosen, MPI_COMM_WORLD, it == 1, it).empty()));
  }
}

TEST_CASE("small chunks: many executions per call and a tail, non-commutative", "[backend][mpi][plan][chunks]") {
  const int P = world_size();
  collc::plan_options o;
  o.chunk_bytes = 2048;
  for (collective c : all_collectives) {
    INFO(to_string(c));
    if (collc::reduces(c))
      check<mat2, mat_mul>(c, MPI_COMM_WORLD, 1000 + static_cast<std::size_t>(P), P - 1, 3, o);
    else
      check<mat2>(c, MPI_COMM_WORLD, 1000 + static_cast<std::size_t>(P), 0, 3, o);
    check<double>(c, MPI_COMM_WORLD, 777, 0, 2, o);
  }
  auto p = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 1001, o);
  CHECK(p.executions_per_call() > 2);
  CHECK(p.chunk_elements() * (p.executions_per_call() - 1) < 1001);
}

TEST_CASE("pseudo-nodes exercise the inter-node path", "[backend][mpi][plan][nodes]") {
  const int P = world_size();
  for (int k : {1, 2, 3}) {
    for (auto place : {collc::placement::block, collc::placement::round_robin}) {
      collc::plan_options o;
      o.ranks_per_node = k;
      o.pseudo_placement = place;
      INFO("ranks_per_node " << k << (place == collc::placement::block ? " block" : " round robin"));
      {
        auto p = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 50, o);
        CHECK(!all_ranks(!p.uses_messages()) == (P > k));  // some rank sends iff there are several nodes
        // Nodes are contiguous blocks of program ranks.
        const auto& node = p.node_of_program();
        if (!node.empty()) CHECK(std::is_sorted(node.begin(), node.end()));
      }
      for (collective c : all_collectives) {
        INFO(to_string(c));
        check<std::int64_t>(c, MPI_COMM_WORLD, static_cast<std::size_t>(P) + 3, P - 1, 2, o);
        check<double>(c, MPI_COMM_WORLD, 300, 0, 2, o);
        if (collc::reduces(c)) check<mat2, mat_mul>(c, MPI_COMM_WORLD, 40, P / 2, 2, o);
      }
      o.chunk_bytes = 4096;  // pipelined messages too
      check<double>(collective::allreduce, MPI_COMM_WORLD, 5000, 0, 2, o);
      check<std::int64_t>(collective::allgather, MPI_COMM_WORLD, 1500, 0, 2, o);
      check<mat2, mat_mul>(collective::reduce_scatter, MPI_COMM_WORLD, 700, 0, 2, o);
    }
  }
}

TEST_CASE("between nodes messages land in place, posted when the execution starts", "[backend][mpi][plan][nodes]") {
  // Copy-in allgather with every rank its own node: lowered, each peer's
  // block arrives in scratch and is copied out; bound (ir::engine_form), it
  // arrives in its block of recv, so the plan holds no scratch at all, and
  // every receive is started with the execution.
  const int P = world_size();
  if (P < 2) return;
  collc::plan_options o;
  o.ranks_per_node = 1;
  auto p = collc::make_allgather<std::int64_t>(MPI_COMM_WORLD, 1000, o, collc::algo::schedule::copy_in());
  CHECK(p.schedule_name() == "copyin");
  CHECK(all_ranks(p.scratch_bytes_per_rank() == 0));
  const std::string d = p.describe();
  INFO(d);
  std::size_t receives = 0, early = 0;
  for (std::size_t at = d.find("recv from rank"); at != std::string::npos; at = d.find("recv from rank", at + 1)) {
    ++receives;
    const std::size_t eol = d.find('\n', at);
    early += d.substr(at, eol - at).find("posted when the execution starts") != std::string::npos ? 1 : 0;
  }
  CHECK(receives == static_cast<std::size_t>(P - 1));
  CHECK(early == receives);
  for (int it = 0; it < 3; ++it) CHECK(all_ranks(run_once(p, MPI_COMM_WORLD, it == 1, it).empty()));
}

TEST_CASE("between nodes exchanges from 4 MiB run as pipelines of pieces", "[backend][mpi][plan][nodes]") {
  // Every rank its own node, recursive doubling (P a power of two) and the
  // reduce-scatter step of {-2}, with chunks large enough that an exchange
  // holds 4 MiB (recursive doubling's scratch holds one exchange per step;
  // reduce-scatter's chunk is split over P blocks): it travels in 512 KiB
  // pieces reduced as they arrive
  // (ir::pipeline_exchanges; recursive doubling's later steps send the
  // partial result their reduction overwrites, so they stay whole). Two
  // chunks and a tail, in place (staged: a piece's reduction overwrites what
  // a later piece still sends) and not, one rank late to each call.
  // P = 2 and 4: at 4 the first step's exchange is pipelined and the second
  // stays whole, as at every larger power of two (P = 8 took 43 s of CI on
  // 2 cores; tests/test_sequence.cpp proves the pipelined programs at
  // P = 1..8). The case sets its own placement, so it runs once per rank
  // count, not again in each COLLC_RANKS_PER_NODE registration.
  const int P = world_size();
  if (P < 2 || P > 4 || !std::has_single_bit(static_cast<unsigned>(P))) return;
  if (std::getenv("COLLC_RANKS_PER_NODE") != nullptr) return;
  const int me = world_rank();
  collc::plan_options o;
  o.ranks_per_node = 1;
  const int steps = std::countr_zero(static_cast<unsigned>(P));
  o.chunk_bytes = collc::ir::exchange_pipeline_bytes * static_cast<std::size_t>(std::max(2, steps));
  o.timeout_s = 60;
  // Under COLLC_ENABLE_CHECKS the engine proves what it binds; at P = 4 the
  // 4 MiB programs' sequence needs more than the verifier's 2 GiB limit (it
  // refuses, naming the limit). tests/test_sequence.cpp proves the same
  // pipelined programs with small pieces at P = 1..8.
  if (P > 2) o.checks = false;
  const std::size_t piece = collc::ir::exchange_piece_bytes / sizeof(double),
                    chunk = collc::ir::exchange_pipeline_bytes / sizeof(double);
  auto reduce_all =
      collc::make_allreduce<double>(MPI_COMM_WORLD, 2 * chunk + 13, o, collc::algo::recursive_doubling(P));
  auto scatter = collc::make_reduce_scatter<std::int64_t>(
      MPI_COMM_WORLD, chunk + 7, o,
      P == 2 ? collc::algo::schedule::recursive(collc::factor_set{-2}) : collc::algo::schedule::copy_in());
  const std::string d = reduce_all.describe();
  INFO(d.substr(0, 1500));
  const auto pieces_in = [&](const std::string& text) {  // sends of exactly one piece's bytes
    std::size_t n = 0;
    const std::string one = ", " + std::to_string(piece * sizeof(double)) + " x bytes";
    for (std::size_t at = text.find("send to rank"); at != std::string::npos; at = text.find("send to rank", at + 1))
      n += text.substr(at, text.find('\n', at) - at).find(one) != std::string::npos ? 1 : 0;
    return n;
  };
  CHECK(pieces_in(d) >= 8u);
  CHECK(d.find("in place staged") != std::string::npos);
  if (P == 2) CHECK(pieces_in(scatter.describe()) >= 8u);
  for (int it = 0; it < 6; ++it) {
    if (me == it % P) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    const std::string why = run_once(reduce_all, MPI_COMM_WORLD, it % 2 == 1, it);
    INFO("rank " << me << ": " << why);
    CHECK(all_ranks(why.empty()));
    const std::string why_rs = run_once(scatter, MPI_COMM_WORLD, it % 2 == 1, it);
    INFO("rank " << me << ": " << why_rs);
    CHECK(all_ranks(why_rs.empty()));
  }
}

TEST_CASE("round-robin pseudo-nodes renumber ranks", "[backend][mpi][plan][nodes]") {
  const int P = world_size();
  if (P < 4) return;
  collc::plan_options o;
  o.ranks_per_node = 2;
  o.pseudo_placement = collc::placement::round_robin;
  auto p = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 10, o);
  std::vector<int> identity(static_cast<std::size_t>(P));
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(p.comm_of_program() != identity);  // commutative: nodes gathered into blocks
  auto q = collc::make_allreduce<mat2, mat_mul>(MPI_COMM_WORLD, 10, o);
  CHECK(q.comm_of_program() == identity);  // order matters: no renumbering
  CHECK(all_ranks(run_once(p, MPI_COMM_WORLD, false, 0).empty()));
  CHECK(all_ranks(run_once(q, MPI_COMM_WORLD, false, 0).empty()));
}

TEST_CASE("interleaved plans keep their own state", "[backend][mpi][plan][interleave]") {
  const int P = world_size();
  auto a = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 100);
  auto b = collc::make_bcast<double>(MPI_COMM_WORLD, 33, P - 1);
  auto c = collc::make_reduce_scatter<mat2, mat_mul>(MPI_COMM_WORLD, 7);
  auto d = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 100);  // same signature as a, distinct plan
  collc::plan_options o;
  o.ranks_per_node = 2;
  auto e = collc::make_allgather<double>(MPI_COMM_WORLD, 9, o);
  int it = 0;
  auto ok = [&](auto& p) { return all_ranks(run_once(p, MPI_COMM_WORLD, it % 3 == 2, it).empty()); };
  for (; it < 4; ++it) {
    CHECK(ok(a));
    CHECK(ok(b));
    CHECK(ok(a));
    CHECK(ok(c));
    CHECK(ok(d));
    CHECK(ok(e));
    CHECK(ok(b));
  }
  // Overlapping non-blocking calls of two plans, completed in reverse order.
  const int me = world_rank();
  std::vector<std::int64_t> x(100, me), y(100, 0);
  std::vector<double> z(33, me == P - 1 ? 2.5 : 0.0);
  a.start(x, y);
  b.start(z);
  b.wait();
  a.wait();
  CHECK(y == std::vector<std::int64_t>(100, static_cast<std::int64_t>(P) * (P - 1) / 2));
  CHECK(z == std::vector<double>(33, 2.5));
}

TEST_CASE("plans started together complete in any order on each rank", "[backend][mpi][plan][interleave]") {
  // MPI lets ranks complete outstanding collectives in different orders
  // (MPI 4.0, sections 6.12-6.13): a rank waiting for one plan advances the
  // others (engine::progress). Before, rank 0 waiting for A while rank 1
  // waited for B hung until the timeout, which is short here so a
  // regression fails in seconds.
  const int P = world_size(), me = world_rank();
  collc::plan_options o;
  o.timeout_s = 10;
  o.chunk_bytes = 512;  // several executions per call: a rank's start() cannot run a call to its end alone
  collc::plan_options between = o;
  between.ranks_per_node = 1;  // every rank its own node: the calls run on messages
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  {
    auto a = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 300, o);
    auto b = collc::make_bcast<double>(MPI_COMM_WORLD, 1000, P - 1, o);
    auto c = collc::make_reduce_scatter<mat2, mat_mul>(MPI_COMM_WORLD, 5, between);
    auto d = collc::make_allgather<std::int64_t>(dup, 70, between);  // another communicator
    std::vector<std::int64_t> ax(300), ay(300), dx(70), dy(70 * static_cast<std::size_t>(P));
    std::vector<double> bz(1000);
    std::vector<mat2> cy(5);
    for (int it = 0; it < 6; ++it) {
      std::fill(ax.begin(), ax.end(), me + it);
      std::fill(dx.begin(), dx.end(), 100 * me + it);
      std::fill(bz.begin(), bz.end(), me == P - 1 ? 0.5 + it : -1.0);
      const std::vector<mat2> cx = send_data<mat2>(collective::reduce_scatter, me, P, 5, it);
      a.start(ax, ay);
      b.start(bz);
      c.start(cx, cy);
      d.start(dx, dy);
      // Each rank completes the four in its own order: a rotation by rank
      // and iteration, reversed on odd ranks; rank 0 polls test() on one of
      // them instead of waiting.
      std::vector<int> order{0, 1, 2, 3};
      std::rotate(order.begin(), order.begin() + (me + it) % 4, order.end());
      if (me % 2 == 1) std::reverse(order.begin(), order.end());
      for (int k : order) {
        const bool poll = me == 0 && k == it % 4;
        auto finish = [&](auto& p) {
          if (poll)
            while (!p.test()) {
            }
          else
            p.wait();
        };
        switch (k) {
          case 0: finish(a); break;
          case 1: finish(b); break;
          case 2: finish(c); break;
          default: finish(d); break;
        }
      }
      CHECK(ay == std::vector<std::int64_t>(300, static_cast<std::int64_t>(P) * (P - 1) / 2 + P * it));
      CHECK(bz == std::vector<double>(1000, 0.5 + it));
      CHECK(cy == expected<mat2, mat_mul>(collective::reduce_scatter, me, P, 5, 0, it));
      for (int r = 0; r < P; ++r) CHECK(dy[static_cast<std::size_t>(r) * 70 + 69] == 100 * r + it);
    }
  }
  MPI_Comm_free(&dup);
}

TEST_CASE("a plan's setup advances the plans started before it", "[backend][mpi][plan][interleave]") {
  // Rank 0 builds a plan (collective) before it waits for a started call,
  // the others after: rank 0's setup must advance that call meanwhile.
  const int P = world_size(), me = world_rank();
  collc::plan_options o;
  o.timeout_s = 10;
  o.chunk_bytes = 512;
  auto a = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 300, o);
  std::vector<std::int64_t> x(300, me), y(300, -1);
  a.start(x, y);
  std::optional<collc::plan<double>> b;
  if (me == 0) b.emplace(collc::make_allreduce<double>(MPI_COMM_WORLD, 7, o));
  a.wait();
  if (me != 0) b.emplace(collc::make_allreduce<double>(MPI_COMM_WORLD, 7, o));
  CHECK(y == std::vector<std::int64_t>(300, static_cast<std::int64_t>(P) * (P - 1) / 2));
  std::vector<double> u(7, 1.0), v(7, 0.0);
  (*b)(u, v);
  CHECK(v == std::vector<double>(7, static_cast<double>(P)));
}

TEST_CASE("a communicator's first plan, and the blocking API, advance the plans started before them",
          "[backend][mpi][plan][interleave]") {
  // As above, for the collectives that come before a plan's agreement: the
  // first round of a communicator's first plan (registry) and the blocking
  // API's wisdom lookup (a broadcast from rank 0, for every new signature).
  // Both blocked in MPI without turns: the first timed out on every rank
  // after timeout_s, the second left rank P - 1 in MPI_Bcast for good.
  const int P = world_size(), me = world_rank();
  collc::plan_options o;
  o.timeout_s = 10;
  o.chunk_bytes = 512;
  auto a = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 300, o);
  {
    std::vector<double> u(7, 1.0), v(7);
    collc::allreduce(MPI_COMM_WORLD, u.data(), v.data(), 7);  // the communicator's layout is cached from here on
  }
  std::size_t n = 1000;
  for (const int early : {0, P - 1})
    for (const bool blocking_api : {false, true}) {
      ++n;  // a new signature each time
      MPI_Comm fresh = MPI_COMM_NULL;
      MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
      std::vector<std::int64_t> x(300, me), y(300, -1);
      std::vector<double> u(n, 1.0), v(n, 0.0);
      std::optional<collc::plan<double>> b;
      const auto build = [&] {
        if (blocking_api)
          collc::allreduce(MPI_COMM_WORLD, u.data(), v.data(), n);
        else
          b.emplace(collc::make_allreduce<double>(fresh, n, o));
      };
      a.start(x, y);
      if (me == early) build();
      a.wait();
      if (me != early) build();
      if (b) (*b)(u, v);
      INFO("rank " << early << " set up first; " << (blocking_api ? "blocking API" : "first plan on a communicator"));
      CHECK(y == std::vector<std::int64_t>(300, static_cast<std::int64_t>(P) * (P - 1) / 2));
      CHECK(v == std::vector<double>(n, static_cast<double>(P)));
      b.reset();
      MPI_Comm_free(&fresh);
    }
}

TEST_CASE("start, test and wait", "[backend][mpi][plan][nonblocking]") {
  const int P = world_size(), me = world_rank();
  for (int k : {0, 2}) {
    collc::plan_options o;
    o.ranks_per_node = k;
    auto p = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 4000, o);
    std::vector<std::int64_t> x(4000, me + 1), y(4000, 0);
    p.start(x, y);
    int polls = 0;
    while (!p.test()) ++polls;
    CHECK(y[3999] == static_cast<std::int64_t>(P) * (P + 1) / 2);
    p.start(collc::in_place, y);
    p.wait();
    CHECK(y[0] == static_cast<std::int64_t>(P) * P * (P + 1) / 2);
    CHECK(p.test());  // nothing in progress: complete
  }
}

TEST_CASE("plans on duplicated and split communicators", "[backend][mpi][plan][comms]") {
  const int me = world_rank();
  MPI_Comm dup = MPI_COMM_NULL, half = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half);  // reversed order inside each half
  {
    auto w = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 64);
    auto d = collc::make_allreduce<std::int64_t>(dup, 64);
    auto h = collc::make_allreduce<mat2, mat_mul>(half, 64);
    auto hg = collc::make_allgather<std::int64_t>(half, 3);
    for (int it = 0; it < 3; ++it) {
      CHECK(all_ranks(run_once(w, MPI_COMM_WORLD, false, it).empty()));
      CHECK(all_ranks(run_once(h, half, it == 1, it).empty(), half));
      CHECK(all_ranks(run_once(d, dup, false, it).empty(), dup));
      CHECK(all_ranks(run_once(hg, half, it == 2, it).empty(), half));
    }
    // A plan keeps working after the user frees the communicator it was built on.
    MPI_Comm_free(&dup);
    CHECK(all_ranks(run_once(d, MPI_COMM_WORLD, false, 9).empty()));
  }
  MPI_Comm_free(&half);
}

TEST_CASE("a freed plan releases its communicator state", "[backend][mpi][plan][comms]") {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::weak_ptr<collc::mpi::registry> reg;
  for (int i = 0; i < 50; ++i) {
    auto p = collc::make_allreduce<std::int64_t>(c, static_cast<std::size_t>(i));
    auto q = collc::make_bcast<std::int64_t>(c, 3, 0);
    reg = collc::mpi::registry_for(c);
    CHECK(all_ranks(run_once(p, c, false, i).empty(), c));
    CHECK(all_ranks(run_once(q, c, false, i).empty(), c));
  }
  CHECK(reg.expired());  // the last plan took the registry (window, node communicator) with it
  MPI_Comm_free(&c);
}

TEST_CASE("checks verify the lowered programs at setup", "[backend][mpi][plan]") {
  const int P = world_size();
  collc::plan_options o;
  o.checks = true;
  o.ranks_per_node = 2;
  for (collective c : all_collectives) {
    INFO(to_string(c));
    check<std::int64_t>(c, MPI_COMM_WORLD, static_cast<std::size_t>(P) + 3, 0, 2, o);
    if (collc::reduces(c)) check<mat2, mat_mul>(c, MPI_COMM_WORLD, 9, P - 1, 2, o);
  }
}
