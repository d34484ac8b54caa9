// Tests for include/collc/ir/verify.hpp. Every program here is written by hand
// (or by a small generator below) from the semantics in program.hpp; each
// property has a correct program that verifies and a broken one whose
// violation must be reported with the right property, place and reason.
#include <catch2/catch.hpp>
#include <collc/ir/text.hpp>
#include <collc/ir/verify.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <typeinfo>

using namespace collc;
using namespace collc::ir;

namespace {

ref snd(int r, std::size_t off = 0) { return {buffer::send, r, off}; }
ref rcv(int r, std::size_t off = 0) { return {buffer::recv, r, off}; }
ref shm(int owner, std::size_t off = 0) { return {buffer::shm, owner, off}; }
ref tmp(int r, std::size_t off = 0) { return {buffer::scratch, r, off}; }

program make(collective c, int ranks, std::size_t count, int flags) {
  program p;
  p.coll = c;
  p.ranks = ranks;
  p.count = count;
  p.flags = flags;
  p.code.resize(static_cast<std::size_t>(ranks));
  return p;
}

// Flags of the shared-memory programs below.
constexpr int ready = 0;    // input is in my shm slot
constexpr int reduced = 1;  // my slice of the result is in my shm slot
constexpr int done = 2;     // I have read everything I need from other slots

/// The generated shared-memory allreduce of the brief: copy in, reduce my slice
/// of every slot in rank order, publish it in my own slot, gather all slices.
/// `protect`: first wait until every reader finished the previous execution,
/// since publishing overwrites my input slot that peers gather from.
program shm_allreduce(int P, std::size_t n, bool protect = true) {
  program p = make(collective::allreduce, P, n, 3);
  p.shm_count = n;
  p.name = "shm_allreduce";
  const auto lo = [&](int q) { return n * static_cast<std::size_t>(q) / static_cast<std::size_t>(P); };
  for (int r = 0; r < P; ++r) p.scratch_count = std::max(p.scratch_count, lo(r + 1) - lo(r));
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    if (protect)
      for (int q = 0; q < P; ++q)
        if (q != r) c.push_back(wait{q, done, 0});  // value 0: the previous execution's signal
    c.push_back(copy{shm(r), snd(r), n});
    c.push_back(signal{ready});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(wait{q, ready, 1});
    const std::size_t a = lo(r), len = lo(r + 1) - lo(r);
    if (P == 1) {
      c.push_back(copy{tmp(r), shm(0, a), len});
    } else {
      c.push_back(reduce{tmp(r), shm(0, a), shm(1, a), len});
      for (int q = 2; q < P; ++q) c.push_back(reduce{tmp(r), tmp(r), shm(q, a), len});
    }
    c.push_back(copy{shm(r, a), tmp(r), len});
    c.push_back(signal{reduced});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(wait{q, reduced, 1});
    for (int q = 0; q < P; ++q) c.push_back(copy{rcv(r, lo(q)), shm(q, lo(q)), lo(q + 1) - lo(q)});
    c.push_back(signal{done});
  }
  return p;
}

/// Two ranks, one node: both copy in, then each reduces both slots itself.
program shm_allreduce_2(std::size_t n) {
  program p = make(collective::allreduce, 2, n, 2);
  p.shm_count = n;
  for (int r = 0; r < 2; ++r)
    p.code[static_cast<std::size_t>(r)] = {wait{1 - r, 1, 0}, copy{shm(r), snd(r), n},           signal{0},
                                           wait{1 - r, 0, 1}, reduce{rcv(r), shm(0), shm(1), n}, signal{1}};
  return p;
}

/// Four ranks, one node: each rank reduces all four slots with `order` (a
/// function of the rank returning the instructions after the copy-in phase).
template <class Reduction>
program shm_allreduce_4(std::size_t n, Reduction reduction) {
  program p = make(collective::allreduce, 4, n, 2);
  p.shm_count = n;
  p.scratch_count = 2 * n;
  for (int r = 0; r < 4; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < 4; ++q)
      if (q != r) c.push_back(wait{q, 1, 0});
    c.push_back(copy{shm(r), snd(r), n});
    c.push_back(signal{0});
    for (int q = 0; q < 4; ++q)
      if (q != r) c.push_back(wait{q, 0, 1});
    for (const auto& ins : reduction(r)) c.push_back(ins);
    c.push_back(signal{1});
  }
  return p;
}
rank_program chain(int r, std::size_t n, std::initializer_list<int> order) {
  auto it = order.begin();
  const int a = *it++, b = *it++;
  rank_program c{reduce{rcv(r), shm(a), shm(b), n}};
  for (; it != order.end(); ++it) c.push_back(reduce{rcv(r), rcv(r), shm(*it), n});
  return c;
}
rank_program pairs(int r, std::size_t n, int a, int b, int c2, int d) {  // (a+b)+(c+d)
  return {reduce{tmp(r), shm(a), shm(b), n}, reduce{tmp(r, n), shm(c2), shm(d), n},
          reduce{rcv(r), tmp(r), tmp(r, n), n}};
}

/// Two ranks on two nodes: exchange by send/recv, then reduce in rank order.
program net_allreduce_2(std::size_t n) {
  program p = make(collective::allreduce, 2, n, 0);
  p.node_of = {0, 1};
  p.scratch_count = n;
  p.code[0] = {send{1, snd(0), n, 7}, recv{1, tmp(0), n, 7}, reduce{rcv(0), snd(0), tmp(0), n}};
  p.code[1] = {send{0, snd(1), n, 7}, recv{0, tmp(1), n, 7}, reduce{rcv(1), tmp(1), snd(1), n}};
  return p;
}

/// Block reduce_scatter on one node: copy all blocks in, reduce my block of
/// every slot in rank order straight into recv.
program shm_reduce_scatter(int P, std::size_t n, std::size_t stride = 0) {
  program p = make(collective::reduce_scatter, P, n, 2);
  p.block_stride = stride;
  p.shm_count = p.send_count();
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    const std::size_t mine = p.stride() * static_cast<std::size_t>(r);
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(wait{q, 1, 0});
    c.push_back(copy{shm(r), snd(r), p.send_count()});
    c.push_back(signal{0});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(wait{q, 0, 1});
    c.push_back(reduce{rcv(r), shm(0, mine), shm(1, mine), n});
    for (int q = 2; q < P; ++q) c.push_back(reduce{rcv(r), rcv(r), shm(q, mine), n});
    c.push_back(signal{1});
  }
  return p;
}

/// Allgather on one node; `stride` is program::block_stride (0: dense).
program shm_allgather(int P, std::size_t n, std::size_t stride = 0) {
  program p = make(collective::allgather, P, n, 2);
  p.block_stride = stride;
  p.shm_count = n;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(wait{q, 1, 0});
    c.push_back(copy{shm(r), snd(r), n});
    c.push_back(signal{0});
    for (int q = 0; q < P; ++q)
      if (q != r) c.push_back(wait{q, 0, 1});
    for (int q = 0; q < P; ++q) c.push_back(copy{rcv(r, p.stride() * static_cast<std::size_t>(q)), shm(q), n});
    c.push_back(signal{1});
  }
  return p;
}

/// Broadcast from `root` through the root's shm slot.
program shm_bcast(int P, std::size_t n, int root) {
  program p = make(collective::bcast, P, n, 2);
  p.root = root;
  p.shm_count = n;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    if (r == root) {
      for (int q = 0; q < P; ++q)
        if (q != r) c.push_back(wait{q, 1, 0});
      c.push_back(copy{shm(r), rcv(r), n});
      c.push_back(signal{0});
    } else {
      c.push_back(wait{root, 0, 1});
      c.push_back(copy{rcv(r), shm(root), n});
      c.push_back(signal{1});
    }
  }
  return p;
}

/// Reduce to `root`: everyone copies in; the root reduces in rank order.
program shm_reduce(int P, std::size_t n, int root) {
  program p = make(collective::reduce, P, n, 2);
  p.root = root;
  p.shm_count = n;
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    if (r != root) c.push_back(wait{root, 1, 0});  // the root finished reading my slot
    c.push_back(copy{shm(r), snd(r), n});
    c.push_back(signal{0});
    if (r == root) {
      for (int q = 0; q < P; ++q)
        if (q != r) c.push_back(wait{q, 0, 1});
      c.push_back(reduce{rcv(r), shm(0), shm(1), n});
      for (int q = 2; q < P; ++q) c.push_back(reduce{rcv(r), rcv(r), shm(q), n});
      c.push_back(signal{1});
    }
  }
  return p;
}

/// Ring allreduce, one rank per node, chunk `k`: P-1 steps of reduce-scatter
/// (send my partial chunk right, receive and reduce the left neighbour's),
/// then P-1 steps of allgather. Chunk c is reduced in the cyclic order
/// c+1, c+2, ..., c, so this is correct only for commutative operators.
program ring_allreduce(int P, std::size_t k, bool fences = true) {
  program p = make(collective::allreduce, P, k * static_cast<std::size_t>(P), 0);
  p.scratch_count = k;
  p.commutative_only = true;
  for (int r = 0; r < P; ++r) p.node_of.push_back(r);
  const auto chunk = [&](int c) { return static_cast<std::size_t>((c % P + P) % P) * k; };
  for (int r = 0; r < P; ++r) {
    auto& c = p.code[static_cast<std::size_t>(r)];
    const int right = (r + 1) % P, left = (r + P - 1) % P;
    c.push_back(copy{rcv(r), snd(r), p.count});
    for (int s = 0; s < P - 1; ++s) {
      c.push_back(send{right, rcv(r, chunk(r - s)), k, 0});
      c.push_back(recv{left, tmp(r), k, 0});
      c.push_back(reduce{rcv(r, chunk(r - s - 1)), tmp(r), rcv(r, chunk(r - s - 1)), k});
      if (fences) c.push_back(fence{});
    }
    for (int s = 0; s < P - 1; ++s) {  // rank r now owns the full chunk r+1
      c.push_back(send{right, rcv(r, chunk(r + 1 - s)), k, 1});
      c.push_back(recv{left, rcv(r, chunk(r - s)), k, 1});
      if (fences) c.push_back(fence{});
    }
  }
  return p;
}

bool mentions(const verify_result& r, const std::string& s) { return r.reason.find(s) != std::string::npos; }

}  // namespace

TEST_CASE("correct hand-made programs verify", "[ir][verify]") {
  for (int executions : {1, 2, 3}) {
    verify_options o;
    o.executions = executions;
    INFO("executions " << executions);
    CHECK(verify(shm_allreduce_2(3), o).to_string() == "ok");
    CHECK(verify(shm_allreduce(4, 10), o).to_string() == "ok");
    CHECK(verify(shm_allreduce(1, 5), o).to_string() == "ok");
    CHECK(verify(shm_allreduce(7, 3), o).to_string() == "ok");  // some slices are empty
    CHECK(verify(net_allreduce_2(4), o).to_string() == "ok");
    CHECK(verify(shm_reduce_scatter(4, 3), o).to_string() == "ok");
    CHECK(verify(shm_reduce_scatter(3, 2, 5), o).to_string() == "ok");
    CHECK(verify(shm_allgather(3, 2), o).to_string() == "ok");
    CHECK(verify(shm_allgather(3, 2, 5), o).to_string() == "ok");
    CHECK(verify(shm_bcast(4, 3, 2), o).to_string() == "ok");
    CHECK(verify(shm_reduce(4, 3, 1), o).to_string() == "ok");
    o.commutative = true;
    CHECK(verify(shm_allreduce(4, 10), o).to_string() == "ok");
    CHECK(verify(shm_reduce(4, 3, 1), o).to_string() == "ok");
  }
  CHECK(verify(shm_allreduce_2(3)));
  CHECK_NOTHROW(verify_or_throw(shm_reduce(3, 2, 0)));
}

TEST_CASE("verify_result formats the violation", "[ir][verify]") {
  verify_result r;
  CHECK(r.to_string() == "ok");
  CHECK(static_cast<bool>(r));
  r = {property::race, 3, 7, 1, "why"};
  CHECK_FALSE(static_cast<bool>(r));
  CHECK(r.to_string() == "rank 3, instruction 7 (execution 1): why");
  r = {property::identical, 2, -1, 0, "why"};
  CHECK(r.to_string() == "rank 2 (execution 0): why");
  r = {property::well_formed, -1, -1, -1, "why"};
  CHECK(r.to_string() == "why");
  CHECK(to_string(property::operand_order) == "operand_order");
}

TEST_CASE("well_formed: illegal refs, flags and peers are refused", "[ir][verify][well_formed]") {
  const auto refused = [](const program& p, int rank, std::ptrdiff_t index, const std::string& what,
                          verify_options o = {}) {
    const auto r = verify(p, o);
    INFO(r.to_string());
    CHECK(r.failed == property::well_formed);
    CHECK(r.rank == rank);
    CHECK(r.index == index);
    CHECK(mentions(r, what));
  };
  {
    auto p = shm_allreduce_2(3);
    p.code[1][4] = reduce{rcv(1, 1), shm(0), shm(1), 3};  // recv has 3 elements
    refused(p, 1, 4, "recv[1..4) is outside recv (capacity 3)");
  }
  {
    auto p = shm_allreduce_2(3);
    p.code[0][1] = copy{shm(0), snd(1), 3};
    refused(p, 0, 1, "send of rank 1");
  }
  {
    auto p = shm_allreduce_2(3);
    p.code[0][1] = copy{shm(0), snd(0), 3};
    p.code[0].push_back(copy{snd(0), rcv(0), 3});
    refused(p, 0, 6, "send is the caller's read-only input");
  }
  {
    auto p = shm_allreduce_2(3);
    p.code[1][1] = copy{shm(7), snd(1), 3};
    refused(p, 1, 1, "rank 7, which does not exist");
  }
  {
    auto p = net_allreduce_2(2);
    p.shm_count = 2;
    p.code[0].push_back(copy{shm(1), snd(0), 2});
    refused(p, 0, 3, "shm of rank 1 on node 1");
  }
  {
    auto p = net_allreduce_2(2);
    p.flags = 1;
    p.code[1].push_back(wait{0, 0, 1});
    refused(p, 1, 3, "wait on rank 0 on node 0");
  }
  {
    auto p = shm_allreduce_2(3);
    p.code[0][2] = signal{5};
    refused(p, 0, 2, "flag 5 is out of range (program has 2 flags)");
  }
  {
    auto p = shm_allreduce_2(3);
    p.code[0][3] = wait{1, -1, 1};
    refused(p, 0, 3, "flag -1");
  }
  {
    auto p = net_allreduce_2(2);
    p.code[0][0] = send{2, snd(0), 2, 7};
    refused(p, 0, 0, "peer rank 2 does not exist");
  }
  {
    auto p = net_allreduce_2(2);
    p.code[1][1] = recv{1, tmp(1), 2, 7};
    refused(p, 1, 1, "to itself");
  }
  {
    auto p = shm_allreduce_2(4);
    p.scratch_count = 4;
    p.code[0].push_back(copy{tmp(0, 1), tmp(0, 0), 3});
    refused(p, 0, 6, "partially overlaps");
  }
  {
    auto p = shm_allgather(3, 2, 5);  // blocks at 0, 5, 10; 2..5 and 7..10 are the caller's
    p.code[2].push_back(copy{rcv(2, 1), shm(2), 2});
    refused(p, 2, 10, "between blocks");
  }
  {
    auto p = net_allreduce_2(4);
    p.code[1][1] = recv{0, tmp(1), 3, 7};
    refused(p, 1, 1, "recv of 3 element(s) from rank 0 tag 7 matches a send of 4 element(s)");
  }
  {
    auto p = shm_allreduce_2(3);
    p.code.pop_back();
    refused(p, -1, -1, "1 rank programs for 2 ranks");
  }
  {
    auto p = shm_reduce(3, 2, 0);
    p.root = 3;
    refused(p, -1, -1, "root 3");
  }
  SECTION("commutative_only programs need a commutative operator") {
    auto p = shm_allreduce_2(3);
    for (int r = 0; r < 2; ++r) p.code[static_cast<std::size_t>(r)][4] = reduce{rcv(r), shm(1), shm(0), 3};
    p.commutative_only = true;
    p.name = "reversed";
    refused(p, -1, -1, "'reversed' is correct only for commutative operators");
    verify_options o;
    o.commutative = true;
    CHECK(verify(p, o));
  }
  CHECK_THROWS_AS(verify(shm_allreduce_2(1), verify_options{false, 0, false}), collc::error);
}

TEST_CASE("contribution: each rank's input exactly once, nothing undefined", "[ir][verify][contribution]") {
  const auto wrong = [](const program& p, int rank, const std::string& what, verify_options o = {}) {
    const auto r = verify(p, o);
    INFO(r.to_string());
    CHECK(r.failed == property::contribution);
    CHECK(r.rank == rank);
    CHECK(r.execution == 0);
    CHECK(mentions(r, what));
    return r;
  };
  SECTION("a missing contribution") {
    auto p = shm_reduce(4, 2, 1);
    auto& c = p.code[1];
    c.erase(c.end() - 2);  // drop `recv op= shm(3)`
    const auto r = wrong(p, 1, "recv[0] lacks rank 3's contribution");
    CHECK(r.index == static_cast<std::ptrdiff_t>(c.size()) - 2);  // the last write of recv
  }
  SECTION("a contribution twice") {
    auto p = shm_reduce(4, 2, 1);
    p.code[1].insert(p.code[1].end() - 1, reduce{rcv(1), rcv(1), shm(2), 2});
    wrong(p, 1, "holds rank 2's contribution 2 times");
  }
  SECTION("an uninitialised element") {
    auto p = shm_reduce(3, 2, 0);
    p.scratch_count = 2;
    p.code[0].insert(p.code[0].end() - 1, reduce{rcv(0, 1), rcv(0, 1), tmp(0, 1), 1});
    wrong(p, 0, "recv[1] holds an uninitialised value");
  }
  SECTION("the wrong element") {
    auto p = shm_allgather(3, 2);
    p.code[1][p.code[1].size() - 2] = copy{rcv(1, 4), shm(2, 1), 1};  // block of rank 2, element 0
    wrong(p, 1, "recv[4] (block of rank 2, element 0) holds element 1 of rank 2's input, expected element 0");
  }
  SECTION("reduce_scatter blocks are block_stride apart") {
    auto p = shm_reduce_scatter(3, 2, 5);
    auto& c = p.code[2];
    c[c.size() - 3] = reduce{rcv(2), shm(0, 4), shm(1, 4), 2};  // blocks at 0, 5, 10, not 0, 2, 4
    const auto r = wrong(p, 2, "recv[0] holds element 4 of rank 0's input, expected element 10");
    CHECK(r.index == static_cast<std::ptrdiff_t>(c.size()) - 2);
  }
  SECTION("another rank's block") {
    auto p = shm_allgather(3, 2);
    p.code[0][p.code[0].size() - 2] = copy{rcv(0, 4), shm(1), 2};
    wrong(p, 0, "holds rank 1's input, expected rank 2's");
  }
  SECTION("a broadcast root must not clobber its data") {
    auto p = shm_bcast(3, 2, 2);
    p.code[2].push_back(copy{rcv(2, 0), rcv(2, 1), 1});
    wrong(p, 2, "recv[0] holds element 1 of rank 2's input, expected element 0");
  }
  SECTION("in place: the input is in recv") {
    // Each rank copies its input from recv (MPI_IN_PLACE) instead of send.
    auto p = shm_allreduce_2(3);
    for (int r = 0; r < 2; ++r) p.code[static_cast<std::size_t>(r)][1] = copy{shm(r), rcv(r), 3};
    verify_options in_place;
    in_place.in_place = true;
    CHECK(verify(p, in_place));
    wrong(p, 1, "recv[0] holds an uninitialised value");  // rank 1 finishes first
  }
  SECTION("in place allgather: my block is already in recv") {
    auto p = shm_allgather(3, 2, 4);
    for (int r = 0; r < 3; ++r) {
      auto& c = p.code[static_cast<std::size_t>(r)];
      c.erase(c.end() - 4 + r);  // the copy of my own block
    }
    verify_options in_place;
    in_place.in_place = true;
    CHECK(verify(p, in_place).to_string() == "ok");
    wrong(p, 2, "recv[8] (block of rank 2, element 0) holds an uninitialised value");  // rank 2 finishes first
  }
}

TEST_CASE("operand_order: non-commutative results combine ranks 0..P-1 in order", "[ir][verify][operand_order]") {
  verify_options commutative;
  commutative.commutative = true;
  SECTION("a chain out of order") {
    const auto p = shm_allreduce_4(2, [](int r) { return chain(r, 2, {0, 1, 3, 2}); });
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::operand_order);
    CHECK(r.index == 10);  // the last reduce
    CHECK(mentions(r, "rank 3 is operand 2"));
    CHECK(mentions(r, "in-order ranks 0 1 3 2"));
    CHECK(verify(p, commutative));
  }
  SECTION("operands swapped on one rank: fine only if a op b == b op a") {
    auto p = shm_allreduce_2(3);
    p.code[1][4] = reduce{rcv(1), shm(1), shm(0), 3};
    const auto r = verify(p);
    CHECK(r.failed == property::operand_order);
    CHECK(r.rank == 1);
    CHECK(r.index == 4);
    CHECK(verify(p, commutative));  // canonical operand order makes the trees identical
  }
  SECTION("a set that is no cyclic interval still counts once per rank") {
    const auto p = shm_allreduce_4(1, [](int r) { return pairs(r, 1, 0, 2, 1, 3); });
    CHECK(verify(p).failed == property::operand_order);
    CHECK(verify(p, commutative));
  }
}

TEST_CASE("identical: every rank computes the same tree", "[ir][verify][identical]") {
  // Rank 0 reduces left to right, the others pairwise: both in rank order,
  // but floating-point results would differ in the last bits.
  const auto p = shm_allreduce_4(2, [](int r) { return r == 0 ? chain(r, 2, {0, 1, 2, 3}) : pairs(r, 2, 0, 1, 2, 3); });
  for (bool comm : {false, true}) {
    verify_options o;
    o.commutative = comm;
    const auto r = verify(p, o);
    INFO(r.to_string());
    CHECK(r.failed == property::identical);
    CHECK(r.rank == 1);
    CHECK(r.execution == 0);
    CHECK(mentions(r, "recv[0] is computed as ((0+1)+(2+3)), but rank 0 computes (((0+1)+2)+3)"));
  }
  const auto same = shm_allreduce_4(2, [](int r) { return pairs(r, 2, 0, 1, 2, 3); });
  CHECK(verify(same));
}

TEST_CASE("race: unordered accesses are reported", "[ir][verify][race]") {
  SECTION("reading a peer's slot without waiting") {
    auto p = shm_allreduce_2(3);
    p.code[0].erase(p.code[0].begin() + 3);  // rank 0 no longer waits for rank 1's input
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::race);
    CHECK(r.execution == 0);
    CHECK(mentions(r, "shm(rank 1)[0]"));
  }
  SECTION("overwriting a slot a peer may still read (next execution)") {
    auto p = shm_allreduce_2(3);
    p.code[1].erase(p.code[1].begin());  // rank 1 no longer waits for rank 0's previous reduce
    verify_options once;
    once.executions = 1;
    CHECK(verify(p, once));
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::race);
    CHECK(mentions(r, "shm(rank 1)[0]"));
    CHECK(mentions(r, "(execution 1)"));
  }
  SECTION("two ranks writing one element") {
    auto p = shm_allreduce_2(3);
    p.code[0].push_back(copy{shm(1, 2), snd(0, 2), 1});
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::race);
    CHECK(mentions(r, "shm(rank 1)[2]"));
  }
  SECTION("overwriting an element two peers read, ordered after one of them only") {
    // Ranks 1 and 2 both read rank 0's shm[0] (a set of readers); rank 0
    // rewrites it after waiting for rank 1 alone. Only the check against every
    // reader of the set sees rank 2 (with it disabled, every other test passed).
    program p;
    p.coll = collective::bcast;
    p.ranks = 3;
    p.count = 1;
    p.flags = 1;
    p.shm_count = 1;
    const ref shm0{buffer::shm, 0, 0};
    auto reader = [&](int r) -> std::vector<instruction> {
      return {wait{0, 0, 1}, copy{{buffer::recv, r, 0}, shm0, 1}, signal{0}};
    };
    p.code = {{copy{shm0, {buffer::recv, 0, 0}, 1}, signal{0}, wait{1, 0, 1}, wait{2, 0, 1},
               copy{shm0, {buffer::recv, 0, 0}, 1}},
              reader(1),
              reader(2)};
    REQUIRE(verify(p).to_string() == "ok");
    p.code[0].erase(p.code[0].begin() + 3);  // no longer waits for rank 2
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::race);
    CHECK(r.execution == 0);
    CHECK(mentions(r, "rank 2"));
  }
  SECTION("modifying a send source before a fence") {
    auto p = net_allreduce_2(2);
    p.scratch_count = 4;
    p.code[0] = {copy{tmp(0, 2), snd(0), 2}, send{1, tmp(0, 2), 2, 7}, copy{tmp(0, 2), tmp(0, 2), 2},
                 recv{1, tmp(0), 2, 7}, reduce{rcv(0), snd(0), tmp(0), 2}};
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::race);
    CHECK(r.rank == 0);
    CHECK(r.index == 2);
    CHECK(mentions(r, "the send at rank 0 instruction 1"));
    p.code[0].insert(p.code[0].begin() + 2, fence{});
    CHECK(verify(p).to_string() == "ok");
  }
}

TEST_CASE("deadlock: waits and recvs that can never complete", "[ir][verify][deadlock]") {
  SECTION("waiting for a signal that is never given") {
    auto p = shm_allreduce_2(3);
    p.code[0][3] = wait{1, 0, 2};
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::deadlock);
    CHECK(r.rank == 0);
    CHECK(r.index == 3);
    CHECK(mentions(r, "waits for rank 1 flag 0 >= 2, but rank 1 signals flag 0 only 1 time(s) per execution"));
  }
  SECTION("a cycle of waits") {
    auto p = shm_allreduce_2(3);
    for (auto& c : p.code) std::swap(c[2], c[3]);  // wait for the peer before signalling
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::deadlock);
    CHECK(r.execution == 0);
    CHECK(mentions(r, "is itself blocked"));
    CHECK(mentions(r, "2 rank(s) blocked, waiting in a chain rank 0 -> rank 1 -> rank 0"));
  }
  SECTION("a recv without a send, a send without a recv") {
    auto p = net_allreduce_2(2);
    p.code[1][0] = send{0, snd(1), 2, 8};
    auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::deadlock);
    CHECK(r.rank == 0);
    CHECK(r.index == 1);
    CHECK(mentions(r, "recv from rank 1 tag 7 has no matching send"));
    p.code[0].push_back(recv{1, tmp(0), 2, 8});
    p.code[1].push_back(send{0, snd(1), 2, 7});
    p.code[1].push_back(send{0, snd(1), 2, 7});
    r = verify(p);
    CHECK(r.failed == property::deadlock);
    CHECK(r.rank == 1);
    CHECK(mentions(r, "send to rank 0 tag 7 has no matching recv"));
  }
  SECTION("a fence waits for its sends to be received") {
    // Live with buffered sends only: under rendezvous each fence waits for
    // the peer's recv, which comes after the peer's own fence.
    auto p = net_allreduce_2(2);
    for (auto& c : p.code) c.insert(c.begin() + 1, fence{});
    auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::deadlock);
    CHECK(r.rank == 0);
    CHECK(r.index == 1);
    CHECK(mentions(r,
                   "a fence completes its send to rank 1 tag 7 (instruction 0, execution 0) only once that rank "
                   "receives it"));
    CHECK(mentions(r, "rank 1 is itself blocked at instruction 1"));
  }
  SECTION("a recv ordered before the matching send on the peer") {
    auto p = net_allreduce_2(2);
    std::swap(p.code[0][0], p.code[0][1]);
    std::swap(p.code[1][0], p.code[1][1]);
    const auto r = verify(p);
    INFO(r.to_string());
    CHECK(r.failed == property::deadlock);
    CHECK(mentions(r, "recv from rank 1 tag 7 waits for a message not yet sent"));
  }
}

TEST_CASE("a ring over nodes: commutative, messages and fences", "[ir][verify][race]") {
  verify_options commutative;
  commutative.commutative = true;
  for (int P : {2, 3, 8}) {
    INFO("P=" << P);
    CHECK(verify(ring_allreduce(P, 2), commutative).to_string() == "ok");
    const auto r = verify(ring_allreduce(P, 2));
    CHECK(r.failed == property::well_formed);
    CHECK(mentions(r, "commutative_only"));
  }
  // Marked as fine for any operator, the cyclic order is caught.
  auto p = ring_allreduce(4, 1);
  p.commutative_only = false;
  const auto r = verify(p);
  INFO(r.to_string());
  CHECK(r.failed == property::operand_order);
  // Without fences the allgather receives into a chunk whose send is in flight.
  const auto q = verify(ring_allreduce(4, 1, false), commutative);
  INFO(q.to_string());
  CHECK(q.failed == property::race);
  CHECK(mentions(q, "is in flight"));
}

TEST_CASE("verify_or_throw raises verification_failed", "[ir][verify]") {
  auto p = shm_allreduce_2(3);
  p.name = "broken";
  p.code[0][3] = wait{1, 0, 2};
  try {
    verify_or_throw(p);
    FAIL("no exception");
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::verification_failed);
    CHECK(std::string(e.what()).find("'broken'") != std::string::npos);
    CHECK(std::string(e.what()).find("deadlock") != std::string::npos);
  }
}

TEST_CASE("large generated shared-memory allreduce verifies quickly", "[ir][verify][large]") {
  for (int P : {64, 128}) {
    const auto p = shm_allreduce(P, 16 * static_cast<std::size_t>(P));
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = verify(p);
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO("P=" << P << ": " << r.to_string() << " in " << seconds << " s");
    CHECK(r.to_string() == "ok");
    CHECK(seconds < 5.0);  // generous: milliseconds in release builds, shared CI cores
  }
  // Without the wait on every reader's previous "done" signal, execution 1
  // overwrites a published slice that peers are still gathering.
  const auto p = shm_allreduce(128, 16 * 128, false);
  verify_options once;
  once.executions = 1;
  CHECK(verify(p, once));
  const auto r = verify(p);
  INFO(r.to_string());
  CHECK(r.failed == property::race);
  CHECK(mentions(r, "(execution 1)"));
}

namespace {

/// The two-rank shared-memory allreduce as parsed text, with `count` elements.
/// Each rank copies its input into its shm slot, then both reduce both slots.
/// `groups` true: one copy, so every offset and count is 0 or `count` and
/// the program groups down to one element (verify.hpp, "Element groups");
/// false: each rank first copies its input into its recv shifted by `unit`
/// elements (overwritten by the result later), which splits every unit from
/// the next (a move by `unit` within one space of positions), so verify
/// works unit by unit.
std::string two_rank_text(std::uint64_t count, bool groups = false, std::uint64_t unit = 1) {
  const std::string n = std::to_string(count), u = std::to_string(unit);
  std::string t = "collc-program 1\ncollective=allreduce\nranks=2\ncount=" + n +
                  "\nblock_stride=0\nroot=0\ncommutative_only=false\nshm_count=" + n + "\nscratch_count=0" +
                  "\nflags=1\nnode_of=[]\nname=\"huge\"\n";
  for (int r = 0; r < 2; ++r) {
    const std::string own = std::to_string(r);
    t += "rank " + own + ":\n";
    if (!groups) t += "  copy recv+" + u + " <- send+0 x" + std::to_string(count - unit) + "\n";
    t += "  copy shm@" + own + "+0 <- send+0 x" + n + "\n";
    t += "  signal f0\n  wait r" + std::to_string(1 - r) + ".f0 >= 1\n  reduce recv+0 <- shm@0+0, shm@1+0 x" + n + "\n";
  }
  return t + "end\n";
}

/// The collc::error verify throws for `p` (fails the test if none).
collc::error verify_error(const program& p, const verify_options& o = {}) {
  try {
    (void)verify(p, o);
  } catch (const collc::error& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("verify threw " << typeid(e).name() << ": " << e.what() << ", not collc::error");
  }
  FAIL("verify did not throw");
  return collc::error(errc::invalid_argument, "unreachable");
}

}  // namespace

TEST_CASE("verify refuses programs too large for its memory limit, up front", "[ir][verify][limit]") {
  // The parsed text of the issue: count 1e8 used to end in std::bad_alloc
  // (14.4 GB of cells alone, and more for the expression trees).
  const program huge = parse_program(two_rank_text(100000000));
  const auto t0 = std::chrono::steady_clock::now();
  auto e = verify_error(huge);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(e.code() == errc::invalid_argument);
  CHECK_THAT(e.what(), Catch::Contains("'huge'") && Catch::Contains("2 ranks") && Catch::Contains("count 100000000") &&
                           Catch::Contains("needs an estimated 62.6 GiB") && Catch::Contains("memory_limit (2.0 GiB)"));
  CHECK(verify_memory_estimate({&huge}, {2}, {}) >= std::uint64_t{2} * 300000000 * 24);
  CHECK_THROWS_AS(verify_or_throw(huge), collc::error);
  // 65536 ranks (the most verify takes): 16 GiB of vector clocks alone.
  program wide = make(collective::allgather, 65536, 0, 0);
  e = verify_error(wide);
  CHECK(e.code() == errc::invalid_argument);
  CHECK_THAT(e.what(), Catch::Contains("65536 ranks") && Catch::Contains("needs an estimated 16.0 GiB"));
  // More ranks than verify handles is still a well-formedness report.
  wide.ranks = 65537;
  wide.code.resize(65537);
  const auto r = verify(wide);
  CHECK(r.failed == property::well_formed);
  CHECK_THAT(r.reason, Catch::Contains("at most 65536"));
}

TEST_CASE("the memory limit is an option, and the estimate follows the sizes", "[ir][verify][limit]") {
  const program small = parse_program(two_rank_text(1000));  // one flag: correct for one execution
  CHECK(verify(small, {.commutative = true, .executions = 1}));
  const std::uint64_t need = verify_memory_estimate({&small}, {1}, {});
  // cells alone: 2 ranks * (send + recv + shm) * 24 B
  CHECK(need >= 2 * 3000 * 24);
  CHECK(need < 1 << 20);
  CHECK(verify_memory_estimate({&small}, {4}, {}) > need);  // more executions, more inputs and snapshots
  verify_options tight{.commutative = true, .executions = 1};
  tight.memory_limit = need - 1;
  CHECK_THAT(verify_error(small, tight).what(), Catch::Contains("more than verify_options::memory_limit"));
  tight.memory_limit = need;
  CHECK(verify(small, tight));
  // Saturates instead of wrapping.
  const program absurd = parse_program(two_rank_text(std::uint64_t{1} << 62));
  CHECK(verify_memory_estimate({&absurd}, {2}, {}) == std::numeric_limits<std::uint64_t>::max());
  // Shapes verify refuses without simulating count nothing.
  program bad = make(collective::allreduce, 3, 5, 0);
  bad.code.resize(2);
  CHECK(verify_memory_estimate({&bad}, {2}, {}) == 0);
}

TEST_CASE("a failed allocation inside verify is a collc::error", "[ir][verify][limit]") {
  // No limit: the allocation itself fails (far beyond any address space).
  const program absurd = parse_program(two_rank_text(std::uint64_t{1} << 50));
  verify_options unlimited{.commutative = true};
  unlimited.memory_limit = 0;
  const auto e = verify_error(absurd, unlimited);
  CHECK(e.code() == errc::invalid_argument);
  CHECK_THAT(e.what(),
             Catch::Contains("out of memory verifying program 'huge'") && Catch::Contains("count 1125899906842624"));
}

TEST_CASE("element groups: a program whose offsets and counts share a factor g is proven divided by g",
          "[ir][verify][groups]") {
  // One copy and one reduce of 10^8 elements per rank: every offset is 0 and
  // every count 10^8, so verify proves the program of one element.
  const program whole = parse_program(two_rank_text(100000000, true));
  const verify_options once{.commutative = true, .executions = 1};
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(verify(whole, once));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(verify_memory_estimate({&whole}, {1}, once) < std::uint64_t{1} << 20);
  // Element by element the same program is 38 GiB, refused.
  verify_options by_element = once;
  by_element.element_groups = false;
  CHECK(verify_memory_estimate({&whole}, {1}, by_element) > std::uint64_t{30} << 30);
  CHECK_THAT(verify_error(whole, by_element).what(), Catch::Contains("needs an estimated 38.0 GiB"));
  // The limit applies to what is run: the divided program.
  verify_options tight = once;
  tight.memory_limit = verify_memory_estimate({&whole}, {1}, once) - 1;
  CHECK_THAT(verify_error(whole, tight).what(), Catch::Contains("more than verify_options::memory_limit"));
}

TEST_CASE("element groups: a violation is reported in the program's own elements", "[ir][verify][groups]") {
  // shm_allreduce_2 of 4096 elements is groups of 4096; rank 0 also writes
  // 512 elements from 2048 of its input into rank 1's slot, unordered with
  // rank 1's own copy: the groups are now 512 and the race is at element 2048.
  auto p = shm_allreduce_2(4096);
  p.code[0].push_back(copy{shm(1, 2048), snd(0, 2048), 512});
  verify_options by_element;
  by_element.element_groups = false;
  const auto grouped = verify(p), reference = verify(p, by_element);
  INFO(grouped.to_string() << "\n" << reference.to_string());
  CHECK(grouped.failed == property::race);
  CHECK(mentions(grouped, "shm(rank 1)[2048]"));
  CHECK(grouped.to_string() == reference.to_string());
  // When the element-by-element run does not fit the limit, the divided
  // program's report says how to read its element numbers.
  verify_options tight;
  tight.memory_limit = verify_memory_estimate({&p}, {2}, tight);
  REQUIRE(tight.memory_limit < verify_memory_estimate({&p}, {2}, by_element));
  const auto in_512s = verify(p, tight);
  INFO(in_512s.to_string());
  CHECK(in_512s.failed == property::race);
  CHECK(mentions(in_512s, "shm(rank 1)[4]"));  // 2048 / 512
  CHECK(mentions(in_512s, "[proved in groups of 512 elements: element k above is elements 512k to 512k+511"));
  // 4099 elements share no factor with 2048: the groups are the runs between
  // cuts, [0, 2048), [2048, 2560) (rank 0's extra copy) and [2560, 4099).
  auto odd = shm_allreduce_2(4099);
  odd.code[0].push_back(copy{shm(1, 2048), snd(0, 2048), 512});
  tight.memory_limit = verify_memory_estimate({&odd}, {2}, tight);
  const auto in_runs = verify(odd, tight);
  INFO(in_runs.to_string());
  CHECK(in_runs.failed == property::race);
  CHECK(mentions(in_runs, "shm(rank 1)[1]"));
  CHECK(mentions(in_runs,
                 "[proved in groups of elements moved together: element k above is group k; in send "
                 "and recv the 3 groups start at elements 0, 2048, 2560 (each rank's shm and scratch are grouped "
                 "likewise) of the program]"));
  by_element.memory_limit = 0;
  CHECK(verify(odd).to_string() == verify(odd, by_element).to_string());
  // Groups of one size only: the input copied into recv shifted by 8 of
  // 8000 elements splits every 8 elements from the next.
  program shifted = parse_program(two_rank_text(8000, false, 8));
  CHECK(verify(shifted, {.commutative = true, .executions = 1}));
  auto& rank0 = shifted.code[0];
  rank0.erase(rank0.begin() + 3);  // rank 0 reduces without waiting for rank 1's copy
  tight = {.commutative = true, .executions = 1};
  tight.memory_limit = verify_memory_estimate({&shifted}, {1}, tight);
  const auto in_eights = verify(shifted, tight);
  INFO(in_eights.to_string());
  CHECK(in_eights.failed == property::race);
  CHECK(mentions(in_eights, "[proved in groups of 8 elements: element k above is elements 8k to 8k+7 of the program]"));
  by_element = tight;
  by_element.element_groups = false;
  by_element.memory_limit = 0;
  const auto reference_race = verify(shifted, by_element);
  CHECK(reference_race.failed == property::race);
  CHECK(reference_race.index == in_eights.index);
  // And the correct program verifies in groups as element by element.
  const auto correct = shm_allreduce_2(4096);
  CHECK(verify(correct));
  CHECK(verify(correct, by_element));
}
