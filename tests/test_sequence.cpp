// include/collc/ir/sequence.hpp and verify_sequence (ir/verify.hpp): the
// programs a plan runs, in the order it runs them, are proven as a sequence
// (chunk x k, tail, the next call's chunks and tail; alternating shm copies;
// guarded programs after a switch), for every collective, P = 1..8, one node
// and pseudo-nodes, counts around chunk boundaries, every root, in place and
// not. The chunking and the run programs come from the same functions the MPI
// engine calls (engine.hpp), so this proves what the engine executes.
#include "plan_lowering.hpp"

#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/backend/mpi/layout.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/ir/sequence.hpp>
#include <collc/ir/verify.hpp>

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

using collc::collective;
using collc::factor_set;
using namespace collc::ir;
namespace algo = collc::algo;

namespace {

/// The engine's chunking and run programs for one plan (engine.hpp's
/// lower_chunks() and layout() call exactly these).
runs plan_runs(const algo::schedule& s, collective c, int P, std::size_t count, int root, std::size_t elem,
               std::size_t chunk_bytes, const std::vector<int>& node_of,
               std::optional<exchange_pieces> pieces = std::nullopt) {
  auto lowered = collc_test::lower_like_engine(s, c, P, count, elem, chunk_bytes, node_of, root, pieces);
  const int copies = shm_copies_for(lowered.programs, elem, chunk_bytes);  // the engine's rule (layout_of)
  return make_runs(std::move(lowered), count, copies);
}

/// Node layouts of P ranks: one node, then pseudo-nodes of each size in
/// `sizes` smaller than P (node_of[r] = r / L; L = 1: every rank its own node).
std::vector<std::vector<int>> node_layouts(int P, std::initializer_list<int> sizes) {
  std::vector<std::vector<int>> layouts = {{}};
  for (int L : sizes)
    if (P > L) {
      std::vector<int> n;
      for (int r = 0; r < P; ++r) n.push_back(r / L);
      layouts.push_back(n);
    }
  return layouts;
}

/// The executions a plan's proof covers, as the engine's verify_runs takes
/// them: runs::window() calls of up to that many chunks each.
std::vector<std::size_t> proof_order(const runs& r) {
  const int w = r.window();
  return r.sequence(w, static_cast<std::size_t>(w));
}

verify_result prove(const runs& r, bool commutative, bool in_place) {
  return verify_sequence(r.programs, proof_order(r),
                         {.commutative = commutative, .in_place = in_place, .shm_copies = r.shm_copies});
}

/// The schedules a plan on (c, P, nodes) may run: the defaults (oversubscribed
/// and not) and one of each family.
std::vector<algo::schedule> schedules_for(collective c, int P, std::size_t bytes, const std::vector<int>& node_of) {
  std::vector<algo::schedule> out = {algo::default_schedule(c, P, bytes, true, node_of, 0),
                                     algo::default_schedule(c, P, bytes, true, node_of, 2), algo::schedule::tree(0),
                                     algo::schedule::tree(std::max(2, P - 1)), algo::schedule::copy_in()};
  switch (c) {
    case collective::allreduce:
      out.push_back(algo::schedule::recursive(factor_set{-P, P}));
      out.push_back(algo::schedule::ring());
      if (P % 2 == 0 && P > 2) out.push_back(algo::schedule::recursive(factor_set{-2, -(P / 2), P / 2, 2}));
      break;
    case collective::reduce_scatter:
      out.push_back(algo::schedule::ring());
      if (P % 2 == 0 && P > 2) out.push_back(algo::schedule::recursive(factor_set{-2, -(P / 2)}));
      break;
    case collective::allgather:
      out.push_back(algo::schedule::ring());
      if (P % 2 == 0 && P > 2) out.push_back(algo::schedule::recursive(factor_set{P / 2, 2}));
      break;
    case collective::reduce:
    case collective::bcast: out.push_back(algo::schedule::tree(2)); break;
  }
  return out;
}

}  // namespace

TEST_CASE("the outside test's reduce: a tail after chunks races without the guard", "[ir][sequence]") {
  // make_reduce<double>(comm, 29136, 7) at P = 8 (copy-in, 256 KiB chunks):
  // the tail program's ranks rewrite shm that the root still reads in the
  // last chunk program; both programs signal alike, so the engine's old
  // chunk-to-tail guard (only when signal counts differ) did nothing.
  const runs r = plan_runs(algo::schedule::copy_in(), collective::reduce, 8, 29136, 7, 8, 262144, {});
  REQUIRE(r.programs.size() == 4);  // chunk, tail and their guarded copies
  REQUIRE(r.full_chunks >= 1);
  // What the engine ran before: chunk and tail, no guarded copies.
  std::vector<program> unguarded = {r.programs[0], r.programs[1]};
  std::vector<std::size_t> order;
  for (int call = 0; call < 2; ++call) {
    for (int k = 0; k < 3; ++k) order.push_back(0);
    order.push_back(1);
  }
  const auto before = verify_sequence(unguarded, order, {.commutative = true, .shm_copies = r.shm_copies});
  INFO(before.to_string());
  CHECK(before.failed == property::race);
  CHECK(before.execution == 3);  // the first tail
  // Each program alone verifies: the old per-program proof could not see it.
  CHECK(verify(r.programs[0], {.commutative = true}));
  CHECK(verify(r.programs[1], {.commutative = true}));
  const auto after = prove(r, true, false);
  INFO(after.to_string());
  CHECK(after);
}

TEST_CASE("sequence order: chunks, a guarded tail, guarded chunks after it", "[ir][sequence]") {
  const runs r = plan_runs(algo::schedule::copy_in(), collective::allreduce, 4, 3 * 48 + 5, 0, 8, 512, {});
  REQUIRE(r.chunk == 48);  // 64 elements shrunk until shm and scratch fit in 512 bytes
  REQUIRE(r.full_chunks == 3);
  REQUIRE(r.executions_per_call == 4);
  CHECK(r.sequence(2, 8) == std::vector<std::size_t>{0, 0, 0, 3, 2, 0, 0, 3});
  CHECK(r.sequence(2, 1) == std::vector<std::size_t>{0, 3, 2, 3});
  // Guarded copies start with a wait for every node peer's earlier signals.
  const auto& entry = r.programs[3].code[1];
  REQUIRE(entry.size() > 3);
  CHECK(std::get<wait>(entry[0]) == wait{0, 0, 0});
  // A count that fits one chunk runs one program.
  const runs one = plan_runs(algo::schedule::copy_in(), collective::allreduce, 4, 48, 0, 8, 512, {});
  CHECK(one.programs.size() == 1);
  CHECK(one.sequence(3, 3) == std::vector<std::size_t>{0, 0, 0});
}

TEST_CASE("verify_sequence counts waits from the signals of earlier executions of other programs",
          "[ir][sequence][verify]") {
  // Two programs of one flag: `a` signals once per execution, `b` twice; a
  // wait for b's second signal in b after a ran once needs threshold 1 + 2.
  auto two = [](int signals) {
    program p;
    p.coll = collective::bcast;
    p.ranks = 2;
    p.count = 1;
    p.flags = 1;
    p.shm_count = 1;
    p.code.resize(2);
    // rank 0 (root) publishes recv[0] in shm with its last signal, rank 1 copies it.
    p.code[0] = {wait{1, 0, 0}};  // the reader is done with shm of the previous execution
    for (int s = 1; s < signals; ++s) p.code[0].push_back(signal{0});
    p.code[0].push_back(copy{{buffer::shm, 0, 0}, {buffer::recv, 0, 0}, 1});
    p.code[0].push_back(signal{0});
    p.code[1] = {wait{0, 0, signals}, copy{{buffer::recv, 1, 0}, {buffer::shm, 0, 0}, 1}, signal{0}};
    return p;
  };
  CHECK(verify_sequence({two(1), two(2)}, {0, 1, 0, 1}));
  // A wrong threshold in the second program (one signal too early) is caught as a race.
  program early = two(2);
  std::get<wait>(early.code[1][0]).value = 1;
  const auto r = verify_sequence({two(1), early}, {0, 1});
  CHECK(r.failed == property::race);
  CHECK_THROWS_AS(verify_sequence({two(1)}, {0, 1}), collc::error);
  CHECK_THROWS_AS(verify_sequence({two(1)}, {}), collc::error);
}

TEST_CASE("a guarded program waits on every flag: a reader that signals only on its second flag", "[ir][sequence]") {
  // Hand-written programs (text form, engine::build_from) may use several
  // flags. Rank 1 reads rank 0's shm after rank 0's signal on flag 0 and
  // reports it is done on flag 1 only; rank 0 rewrites shm with no
  // cross-execution wait of its own. Only a guard that waits on flag 1 as
  // well orders that rewrite after the read.
  program p;
  p.coll = collective::bcast;
  p.ranks = 2;
  p.count = 1;
  p.flags = 2;
  p.shm_count = 1;
  p.code.resize(2);
  p.code[0] = {copy{{buffer::shm, 0, 0}, {buffer::recv, 0, 0}, 1}, signal{0}};
  p.code[1] = {wait{0, 0, 1}, copy{{buffer::recv, 1, 0}, {buffer::shm, 0, 0}, 1}, signal{1}};
  REQUIRE(verify_sequence({p}, {0}));
  // Run back to back without a guard it races (nothing orders the rewrite).
  CHECK(verify_sequence({p}, {0, 0}).failed == property::race);
  const program g = guarded(p, 2);
  for (int f = 0; f < 2; ++f)
    CHECK(std::find(g.code[0].begin(), g.code[0].end(), instruction{wait{1, f, 0}}) != g.code[0].end());
  const auto v = verify_sequence({p, g}, {0, 1, 1});
  INFO(v.to_string());
  CHECK(v);
  // The same through make_runs: one chunk and a tail per call, so every
  // execution after the first follows a switch and runs guarded.
  const runs r = make_runs(chunked{{p, p}, 2}, 3, 1);
  REQUIRE(r.programs.size() == 4);
  const auto w = verify_sequence(r.programs, r.sequence(r.window(), static_cast<std::size_t>(r.window())),
                                 {.shm_copies = r.shm_copies});
  INFO(w.to_string());
  CHECK(w);
}

TEST_CASE("every plan's sequence verifies around chunk boundaries", "[ir][sequence][sweep]") {
  int proven = 0, pipelined = 0;
  for (collective c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                       collective::bcast}) {
    for (int P = 1; P <= 8; ++P) {
      for (const auto& node_of : node_layouts(P, {1, 2, 3})) {
        const bool rooted = c == collective::reduce || c == collective::bcast;
        const std::size_t elem = 8, chunk_bytes = 1024;
        const std::size_t blocks = c == collective::reduce_scatter || c == collective::allgather ? P : 1;
        const std::size_t chunk = std::max<std::size_t>(8, chunk_bytes / elem / blocks / 8 * 8);
        for (const auto& s : schedules_for(c, P, 4096, node_of)) {
          for (int root = 0; root < (rooted ? P : 1); ++root) {
            const auto p = static_cast<std::size_t>(P);
            for (std::size_t k : {1, 2})
              for (std::size_t extra : {std::size_t{0}, std::size_t{1}, p - 1, p, p + 3, std::size_t{16},
                                        std::size_t{20}, std::size_t{24}}) {
                const std::size_t count = k * chunk + extra;
                std::vector<runs> variants(1);
                try {
                  variants[0] = plan_runs(s, c, P, count, root, elem, chunk_bytes, node_of);
                  // Between nodes also with pieces small enough that these
                  // counts' exchanges become pipelines (pipeline_exchanges).
                  if (!node_of.empty()) {
                    // As the engine runs them (all pieces at once), and with
                    // one piece ahead (pipeline_exchanges' window).
                    for (std::size_t ahead : {exchange_pieces_ahead, std::size_t{1}}) {
                      runs piecewise =
                          plan_runs(s, c, P, count, root, elem, chunk_bytes, node_of, exchange_pieces{16, 0, ahead});
                      if (piecewise.programs != variants[0].programs) {
                        ++pipelined;
                        variants.push_back(std::move(piecewise));
                      }
                    }
                  }
                } catch (const collc::error&) {
                  continue;  // the schedule does not lower here (e.g. an arity that does not fit)
                }
                for (const runs& r : variants)
                  for (bool in_place : {false, true}) {
                    if (in_place && !r.in_place) continue;  // the engine stages instead
                    const auto v = prove(r, true, in_place);
                    if (!v) {
                      INFO(std::string(collc::to_string(c))
                           << " P=" << P << " nodes=" << node_of.size() << " " << s.to_string() << " root=" << root
                           << " count=" << count << " chunk=" << r.chunk << " in_place=" << in_place << " alternate="
                           << r.alternate << " pieces=" << (&r != &variants[0]) << ": " << v.to_string());
                      CHECK(v);
                    }
                    ++proven;
                  }
              }
          }
        }
      }
    }
  }
  INFO("sequences proven: " << proven << ", pipelined: " << pipelined);
  CHECK(proven > 10000);
  CHECK(pipelined > 100);  // the pieces appear: the sweep proves pipelined exchanges too
}

TEST_CASE("the engine pipelines exchanges between nodes from 4 MiB, in 512 KiB pieces", "[ir][sequence][pipeline]") {
  // What the engine binds for an allreduce of doubles at P = 2, one rank per
  // node: 4 MiB chunks (default_net_chunk_bytes), each exchanged in 8 pieces.
  const std::size_t chunk_bytes = std::size_t{4} << 20, elem = 8;
  const auto lowered = collc_test::lower_like_engine(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2,
                                                     3 * (chunk_bytes / elem) + 5, elem, chunk_bytes, {0, 1}, 0);
  REQUIRE(lowered.programs.size() == 2);  // chunk and tail
  const auto messages = [](const program& p, int r) {
    int sends = 0, recvs = 0;
    for (const auto& ins : p.code[static_cast<std::size_t>(r)]) {
      sends += std::holds_alternative<send>(ins);
      recvs += std::holds_alternative<recv>(ins);
    }
    return std::pair{sends, recvs};
  };
  for (int r = 0; r < 2; ++r) {
    CHECK(messages(lowered.programs[0], r) == std::pair{8, 8});  // 4 MiB: pieces
    CHECK(messages(lowered.programs[1], r) == std::pair{1, 1});  // the 40-byte tail: whole
    // All pieces leave at once (exchange_pieces_ahead = 0): every send before the first receive.
    const auto& code = lowered.programs[0].code[static_cast<std::size_t>(r)];
    const auto first_recv =
        std::find_if(code.begin(), code.end(), [](const instruction& i) { return std::holds_alternative<recv>(i); });
    CHECK(std::count_if(code.begin(), first_recv,
                        [](const instruction& i) { return std::holds_alternative<send>(i); }) == 8);
  }
  // 2 MiB stays whole (pieces measured slower there against MPI).
  const auto smaller = collc_test::lower_like_engine(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2,
                                                     (std::size_t{2} << 20) / elem, elem, chunk_bytes, {0, 1}, 0);
  CHECK(messages(smaller.programs[0], 0) == std::pair{1, 1});
  // The chunk program as bound, proven over consecutive executions.
  const runs r =
      make_runs(collc_test::lower_like_engine(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2,
                                              2 * (chunk_bytes / elem), elem, chunk_bytes, {0, 1}, 0),
                2 * (chunk_bytes / elem), 1);
  const auto v = prove(r, true, false);
  INFO(v.to_string());
  CHECK(v);
}

TEST_CASE("non-commutative operators: sequences keep rank order", "[ir][sequence][sweep]") {
  int proven = 0;
  for (collective c : {collective::allreduce, collective::reduce_scatter, collective::reduce})
    for (int P = 2; P <= 6; ++P)
      for (const auto& s :
           {algo::default_schedule(c, P, 4096, false), algo::schedule::tree(0), algo::schedule::copy_in()})
        for (std::size_t count : {std::size_t{64 + 1}, std::size_t{128 + 20}}) {
          runs r;
          try {
            r = plan_runs(s, c, P, count, P - 1, 8, 512, {});
          } catch (const collc::error&) {
            continue;
          }
          const auto v = verify_sequence(r.programs, proof_order(r), {.shm_copies = r.shm_copies});
          INFO(s.to_string() << " P=" << P << " count=" << count << ": " << v.to_string());
          CHECK(v);
          ++proven;
        }
  CHECK(proven > 20);
}

TEST_CASE("pipelined rooted calls: alternating 64 KiB chunks, proven as the engine runs them", "[ir][sequence][ring]") {
  // The engine lowers a large bcast / reduce on a node with a core per rank
  // under lowering_chunk_bytes (64 KiB of shm), and lays it out under the
  // plan's chunk_bytes (256 KiB), so two copies alternate (layout_of).
  const std::size_t chunk_bytes = collc::mpi::default_chunk_bytes;
  for (collective c : {collective::bcast, collective::reduce})
    for (int P : {2, 3, 4})
      for (const auto& s : {algo::schedule::tree(0), algo::schedule::copy_in()})
        for (std::size_t count : {std::size_t{2 * 8192 + 1}, std::size_t{3 * 8192 + 777}}) {
          if (c == collective::reduce && P > 2) continue;  // a reduce pipelines on 2 ranks only
          const std::size_t bound = collc::mpi::lowering_chunk_bytes(c, count * 8, P, true, false, chunk_bytes);
          REQUIRE(bound == collc::mpi::pipeline_chunk_bytes);
          auto lowered = collc_test::lower_like_engine(s, c, P, count, 8, bound, {}, P - 1);
          const int copies = shm_copies_for(lowered.programs, 8, chunk_bytes);
          const runs r = make_runs(std::move(lowered), count, copies);
          INFO(std::string(collc::to_string(c)) << " P=" << P << " " << s.to_string() << " count=" << count
                                                << " chunk=" << r.chunk << " copies=" << r.shm_copies);
          CHECK(r.shm_copies == 2);
          CHECK(r.executions_per_call >= 2);
          for (bool commutative : {true, false})
            for (bool in_place : {false, true}) {
              if (in_place && !r.in_place) continue;
              const auto v = prove(r, commutative, in_place);
              INFO(v.to_string() << " commutative=" << commutative << " in_place=" << in_place);
              CHECK(v);
            }
        }
  // Not pipelined: oversubscribed, between nodes, a reduce above 2 MiB, one
  // chunk's worth, other collectives; the chunk bound is then chunk_bytes.
  using collc::mpi::lowering_chunk_bytes;
  CHECK(lowering_chunk_bytes(collective::bcast, 1 << 20, 2, true, true, chunk_bytes) == chunk_bytes);
  CHECK(lowering_chunk_bytes(collective::bcast, 1 << 20, 2, false, false, chunk_bytes) == chunk_bytes);
  CHECK(lowering_chunk_bytes(collective::bcast, 1 << 20, 1, true, false, chunk_bytes) == chunk_bytes);
  CHECK(lowering_chunk_bytes(collective::bcast, 1 << 20, 8, true, false, chunk_bytes) == 64 * 1024);
  CHECK(lowering_chunk_bytes(collective::reduce, (std::size_t{2} << 20) + 8, 2, true, false, chunk_bytes) ==
        chunk_bytes);
  CHECK(lowering_chunk_bytes(collective::reduce, std::size_t{2} << 20, 2, true, false, chunk_bytes) == 64 * 1024);
  CHECK(lowering_chunk_bytes(collective::reduce, 1 << 20, 3, true, false, chunk_bytes) == chunk_bytes);
  CHECK(lowering_chunk_bytes(collective::bcast, 128 * 1024, 2, true, false, chunk_bytes) == chunk_bytes);
  CHECK(lowering_chunk_bytes(collective::bcast, 128 * 1024 + 8, 2, true, false, chunk_bytes) == 64 * 1024);
  CHECK(lowering_chunk_bytes(collective::allreduce, 1 << 20, 2, true, false, chunk_bytes) == chunk_bytes);
  // A chunk limit below two pipeline chunks: half of it, so two copies fit.
  CHECK(lowering_chunk_bytes(collective::bcast, 1 << 20, 2, true, false, 64 * 1024) == 32 * 1024);
}

TEST_CASE("rooted collectives rotate over a ring of shm copies, proven over more executions than copies",
          "[ir][sequence][ring]") {
  for (collective c : {collective::bcast, collective::reduce})
    for (int P : {2, 3, 4, 8})
      for (const auto& s : {algo::schedule::tree(0), algo::schedule::tree(std::max(2, P - 1))})
        for (std::size_t count : {std::size_t{1}, std::size_t{100}, std::size_t{1024}, std::size_t{2048},
                                  std::size_t{8192}, std::size_t{16384}}) {
          const runs r = plan_runs(s, c, P, count, P - 1, 8, std::size_t{256} << 10, {});
          INFO(std::string(collc::to_string(c))
               << " P=" << P << " " << s.to_string() << " count=" << count << " copies=" << r.shm_copies);
          // A tree's shm is two blocks of `count` elements: 16 B (one 64-byte
          // line a copy) and 1600 B: 32 copies; 16 KiB: 4 (the ring doubles
          // while twice it fits 64 KiB); 32 and 128 KiB: 2 (rooted programs
          // alternate up to rooted_alternate_max_bytes); 256 KiB: above it, one.
          const int expected = count <= 100 ? max_shm_copies : count == 1024 ? 4 : count <= 8192 ? 2 : 1;
          CHECK(r.shm_copies == expected);
          const auto v = prove(r, true, false);
          INFO(v.to_string());
          CHECK(v);
          // The same waits on fewer copies than they assume: execution e
          // rewrites the copy a slow reader of execution e - copies/2 still
          // reads. The proof must see it (an engine whose copy index and
          // waits disagree is wrong).
          if (r.shm_copies > 2 && P > 1) {
            const auto fewer =
                verify_sequence(r.programs, proof_order(r), {.commutative = true, .shm_copies = r.shm_copies / 2});
            CHECK(fewer.failed == property::race);
          }
        }
  // A ring's proof needs more executions than copies: three (what the engine
  // proved with two copies) never reuse a copy of 32.
  const runs r = plan_runs(algo::schedule::tree(0), collective::bcast, 4, 1, 0, 8, std::size_t{256} << 10, {});
  REQUIRE(r.shm_copies == max_shm_copies);
  CHECK(r.window() == max_shm_copies + 1);
  const auto short_one = verify_sequence(r.programs, r.sequence(3, 3), {.shm_copies = 1});
  CHECK(short_one.failed == property::race);  // one copy: the third execution already races
}

TEST_CASE("ir::alternate writes a ring of k executions as one program that verifies", "[ir][sequence][ring]") {
  algo::lower_request q;
  q.coll = collective::bcast;
  q.ranks = 4;
  q.count = 3;
  q.root = 1;
  const program p = algo::lower(algo::schedule::tree(0), q);
  for (int k : {2, 4, 8}) {
    const program ring = alternate(p, k);
    CHECK(ring.shm_count == static_cast<std::size_t>(k) * p.shm_count);
    const auto v = verify(ring, {.executions = 3});
    INFO("k=" << k << ": " << v.to_string());
    CHECK(v);
  }
  CHECK_THROWS_AS(alternate(p, 1), collc::error);
}

namespace {
/// A two-rank program of `c` over 10 elements (generous shm and scratch)
/// whose rank 1 runs `code` and rank 0 nothing.
program rank1_program(std::vector<instruction> code, collective c) {
  program p;
  p.coll = c;
  p.ranks = 2;
  p.count = 10;
  p.shm_count = 100;
  p.scratch_count = 100;
  p.flags = 2;
  p.code.resize(2);
  p.code[1] = std::move(code);
  return p;
}
}  // namespace

TEST_CASE("in-place safety: every send element is read before it is overwritten", "[ir][sequence]") {
  // Rank 1's code of a two-rank program; rank 0 does nothing.
  auto safe = [&](std::vector<instruction> code, collective c = collective::allreduce) {
    return in_place_safe(rank1_program(std::move(code), c));
  };
  const auto in = [](std::size_t o) { return ref{buffer::send, 1, o}; };
  const auto out = [](std::size_t o) { return ref{buffer::recv, 1, o}; };
  const auto shm = [](std::size_t o) { return ref{buffer::shm, 1, o}; };
  const auto peer = [](std::size_t o) { return ref{buffer::shm, 0, o}; };
  // Read everything first, write later: safe.
  CHECK(safe({copy{shm(0), in(0), 10}, signal{0}, wait{0, 0, 1}, reduce{out(0), shm(0), peer(0), 10}}));
  // Element-for-element: recv[i] = send[i] op peer[i] reads before it writes.
  CHECK(safe({reduce{out(0), in(0), peer(0), 10}}));
  // Write recv[0..5), then read send[3..8): overwritten input.
  CHECK_FALSE(safe({copy{out(0), peer(0), 5}, copy{shm(0), in(3), 5}}));
  // Shifted overlap inside one instruction.
  CHECK_FALSE(safe({copy{out(1), in(0), 5}}));
  // A message reads its source until the next fence.
  CHECK_FALSE(safe({send{0, in(0), 10, 1}, recv{0, out(0), 10, 2}}));
  CHECK(safe({send{0, in(0), 10, 1}, fence{}, recv{0, out(0), 10, 2}}));
  // Allgather: rank 1's send is its own block of recv (elements 10..20); other blocks are free.
  CHECK(safe({copy{out(0), peer(0), 10}, copy{out(10), in(0), 10}}, collective::allgather));
  CHECK_FALSE(safe({copy{out(10), peer(0), 10}, copy{shm(0), in(0), 10}}, collective::allgather));
}

TEST_CASE("receives posted when an execution starts: only where nothing earlier touches their place",
          "[ir][sequence][early]") {
  // Rank 1's code of a two-rank program (rank 0 sends what rank 1 receives).
  auto early = [&](std::vector<instruction> code, collective c = collective::allreduce) {
    program p = rank1_program(std::move(code), c);
    p.node_of = {0, 1};
    return receives_at_start(p, 1);
  };
  using flags = std::vector<bool>;
  const auto in = [](std::size_t o) { return ref{buffer::send, 1, o}; };
  const auto out = [](std::size_t o) { return ref{buffer::recv, 1, o}; };
  const auto tmp = [](std::size_t o) { return ref{buffer::scratch, 1, o}; };
  const auto shm = [](std::size_t o) { return ref{buffer::shm, 1, o}; };
  // Fresh scratch and an untouched part of recv: both early; other instructions never are.
  CHECK(early({send{0, in(0), 10, 1}, recv{0, tmp(0), 10, 1}, recv{0, out(0), 5, 2}, fence{}}) ==
        flags{false, true, false, false});  // recv+0 is send+0 in place: the send reads it
  CHECK(early({recv{0, tmp(0), 10, 1}, recv{0, out(0), 10, 2}}) == flags{true, true});
  // Its place was read (a send from scratch) or written before: where it stands.
  CHECK(early({send{0, tmp(0), 10, 1}, recv{0, tmp(5), 10, 2}}) == flags{false, false});
  CHECK(early({copy{tmp(0), in(0), 10}, recv{0, tmp(9), 1, 2}}) == flags{false, false});
  CHECK(early({copy{tmp(0), in(0), 10}, recv{0, tmp(10), 1, 2}}) == flags{false, true});
  // In place the send is recv: a copy that reads send[3..8) covers recv[3..8).
  CHECK(early({copy{shm(0), in(3), 5}, recv{0, out(0), 3, 1}, recv{0, out(7), 3, 2}}) == flags{false, true, false});
  // Allgather in place: rank 1's send is recv block 1 (elements 10..20).
  CHECK(early({send{0, in(0), 10, 1}, recv{0, out(0), 10, 1}, recv{0, out(12), 2, 2}}, collective::allgather) ==
        flags{false, true, false});
  // Shared memory is never posted early: other ranks may see it.
  CHECK(early({recv{0, shm(0), 10, 1}}) == flags{false});
  // MPI matches in posting order: once a receive from (peer, tag) stays in
  // place, later ones from the same peer and tag do too.
  CHECK(early({copy{tmp(0), in(0), 10}, recv{0, tmp(0), 5, 3}, recv{0, tmp(20), 5, 3}, recv{0, tmp(30), 5, 4}}) ==
        flags{false, false, false, true});
}

TEST_CASE("the engine's programs move data straight into its destination", "[ir][sequence][early]") {
  // Copy-in allgather, every rank its own node: lowered, each peer's block
  // goes through scratch and one copy; in the engine's form it is received
  // into its block of recv, and every receive is posted at the start.
  collc::algo::lower_request q;
  q.coll = collective::allgather;
  q.ranks = 4;
  q.count = 16;
  q.node_of = {0, 1, 2, 3};
  const program lowered = collc::algo::lower(collc::algo::schedule::copy_in(), q);
  const program bound = engine_form(lowered);
  REQUIRE(verify(bound, {.executions = 3}).to_string() == "ok");
  CHECK(lowered.scratch_count == 48);  // three peers' blocks of 16
  CHECK(bound.scratch_count == 0);     // none left to allocate
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    std::size_t receives = 0, copies = 0, early = 0;
    const auto at_start = receives_at_start(bound, r);
    for (std::size_t i = 0; i < bound.code[static_cast<std::size_t>(r)].size(); ++i) {
      const auto& ins = bound.code[static_cast<std::size_t>(r)][i];
      if (const auto* v = std::get_if<recv>(&ins)) {
        ++receives;
        CHECK(v->dst.buf == buffer::recv);
        early += at_start[i] ? 1 : 0;
      }
      copies += std::holds_alternative<copy>(ins) ? 1 : 0;
    }
    CHECK(receives == 3);
    CHECK(early == 3);
    CHECK(copies == 1);  // its own block
  }
  // On one node, copy-in's reduce at P = 2: the root reduces its half
  // straight into recv instead of into shm and a copy.
  collc::algo::lower_request r;
  r.coll = collective::reduce;
  r.ranks = 2;
  r.count = 8;
  const program reduce = collc::algo::lower(collc::algo::schedule::copy_in(), r);
  const program reduce_bound = engine_form(reduce);
  REQUIRE(verify(reduce_bound, {.commutative = false, .executions = 3}).to_string() == "ok");
  const auto copied = [](const program& p) {
    std::size_t n = 0;
    for (const auto& ins : p.code[0])
      if (const auto* c = std::get_if<copy>(&ins)) n += c->count;
    return n;
  };
  CHECK(copied(reduce) == 12);       // the leaf's half into shm, both halves into recv
  CHECK(copied(reduce_bound) == 8);  // the root's own half is reduced in place
}

namespace {

/// The offsets and counts of an instruction, for the test's own element group.
std::vector<std::size_t*> sizes_of(instruction& ins) {
  if (auto* c = std::get_if<copy>(&ins)) return {&c->dst.offset, &c->src.offset, &c->count};
  if (auto* d = std::get_if<reduce>(&ins)) return {&d->dst.offset, &d->a.offset, &d->b.offset, &d->count};
  if (auto* s = std::get_if<send>(&ins)) return {&s->src.offset, &s->count};
  if (auto* v = std::get_if<recv>(&ins)) return {&v->dst.offset, &v->count};
  return {};
}

/// The largest g dividing every offset and count of the programs: how far
/// break_program moves things so that the groups can stay as they were.
std::size_t group_of(std::vector<program> programs) {
  std::size_t g = 0;
  for (program& p : programs) {
    g = std::gcd(g, std::gcd(p.count, p.block_stride));
    for (auto& code : p.code)
      for (auto& ins : code)
        for (std::size_t* v : sizes_of(ins)) g = std::gcd(g, *v);
  }
  return g;
}

/// One way to break a program: move an offset or shrink a count by its
/// element group g (the group stays), by half of it, or by 1 or 3 elements
/// (verify must see that every offset and count enters the groups), drop a
/// synchronising instruction, swap a reduction's operands, shrink shm or
/// scratch, widen the block stride, move a wait's target. False if the chosen instruction (or
/// program) has nothing of that kind.
bool break_program(program& p, std::mt19937& rng, std::size_t g) {
  auto& code = p.code[std::uniform_int_distribution<std::size_t>(0, p.code.size() - 1)(rng)];
  if (code.empty()) return false;
  const std::size_t i = std::uniform_int_distribution<std::size_t>(0, code.size() - 1)(rng);
  instruction& ins = code[i];
  auto sizes = sizes_of(ins);
  const std::size_t choices[] = {g, std::max<std::size_t>(g / 2, 1), 1, 3};
  const std::size_t by = choices[rng() % 4];
  switch (std::uniform_int_distribution<int>(0, 5)(rng)) {
    case 0:  // an offset moves, either way
      if (sizes.size() < 2) return false;
      {
        std::size_t& off = *sizes[std::uniform_int_distribution<std::size_t>(0, sizes.size() - 2)(rng)];
        if (off >= by && rng() % 2 == 0)
          off -= by;
        else
          off += by;
      }
      return true;
    case 1:  // a count shrinks
      if (sizes.empty() || *sizes.back() <= by) return false;
      *sizes.back() -= by;
      return true;
    case 2:  // a wait, signal or fence disappears
      if (!std::holds_alternative<wait>(ins) && !std::holds_alternative<signal>(ins) &&
          !std::holds_alternative<fence>(ins))
        return false;
      code.erase(code.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    case 3:  // a reduction's operands change places
      if (auto* d = std::get_if<reduce>(&ins); d && !(d->a == d->b)) {
        std::swap(d->a, d->b);
        return true;
      }
      return false;
    case 4:  // shm or scratch shrinks (capacities need not be multiples of g), or blocks move apart
      if (p.block_stride != 0 && rng() % 3 == 0) {
        p.block_stride += by;
        return true;
      }
      for (std::size_t* cap : {&p.shm_count, &p.scratch_count})
        if (*cap > by && rng() % 2 == 0) {
          *cap -= by;
          return true;
        }
      return false;
    default:  // a wait looks one signal earlier
      if (auto* w = std::get_if<wait>(&ins)) {
        --w->value;
        return true;
      }
      return false;
  }
}

/// How much smaller verify's run of `programs` in `order` is in element
/// groups: the element-by-element memory estimate over the grouped one
/// (verify_memory_estimate estimates what verify runs).
double group_gain(const std::vector<program>& programs, const std::vector<std::size_t>& order, verify_options grouped) {
  std::vector<const program*> ps;
  for (const program& q : programs) ps.push_back(&q);
  std::vector<std::uint64_t> runs_of(programs.size(), 0);
  for (std::size_t k : order) ++runs_of[k];
  grouped.element_groups = true;
  verify_options by_element = grouped;
  by_element.element_groups = false;
  return static_cast<double>(verify_memory_estimate(ps, runs_of, by_element)) /
         static_cast<double>(verify_memory_estimate(ps, runs_of, grouped));
}

}  // namespace

TEST_CASE("element groups: proofs in groups agree with element-by-element proofs, broken programs included",
          "[ir][sequence][groups]") {
  // verify proves a sequence in element groups and re-runs element by element
  // only on a violation, so what could go wrong is a grouped proof that
  // passes where the element-by-element one fails. Every plan's sequence
  // (counts that divide by 16, by 8 and by nothing), and copies broken in
  // ways that keep the groups or change them, must get the same verdict.
  std::mt19937 rng(20261206);
  int compared = 0, broken = 0, grouped_even = 0, grouped_odd = 0;
  for (collective c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                       collective::bcast})
    for (int P : {2, 3, 4, 6}) {
      for (const auto& node_of : node_layouts(P, {1, 2}))
        for (const auto& s : schedules_for(c, P, 4096, node_of))
          for (std::size_t count : {std::size_t{256}, std::size_t{344}, std::size_t{337}}) {
            const bool rooted = c == collective::reduce || c == collective::bcast;
            runs r;
            try {
              r = plan_runs(s, c, P, count, rooted ? P - 1 : 0, 8, 1024, node_of);
            } catch (const collc::error&) {
              continue;
            }
            const auto order = proof_order(r);
            const std::size_t g = group_of(r.programs);
            const auto agree = [&](const std::vector<program>& programs, bool in_place, const char* what) {
              const verify_options grouped{.commutative = true, .in_place = in_place, .shm_copies = r.shm_copies};
              verify_options by_element = grouped;
              by_element.element_groups = false;
              if (what[0] == 'a')  // as lowered: do groups apply?
                (count % 8 == 0 ? grouped_even : grouped_odd) += group_gain(programs, order, grouped) > 1;
              const auto a = verify_sequence(programs, order, grouped);
              const auto b = verify_sequence(programs, order, by_element);
              if (a.to_string() != b.to_string()) {
                INFO(collc::to_string(c) << " P=" << P << " nodes=" << node_of.size() << " " << s.to_string()
                                         << " count=" << count << " group " << g << " " << what
                                         << "\n  in groups:       " << a.to_string()
                                         << "\n  element by element: " << b.to_string());
                CHECK(a.to_string() == b.to_string());
              }
              ++compared;
              broken += !b;
            };
            for (bool in_place : {false, true}) {
              if (in_place && !r.in_place) continue;
              agree(r.programs, in_place, "as lowered");
              for (int m = 0; m < 6; ++m) {
                std::vector<program> bad = r.programs;
                if (break_program(bad[rng() % bad.size()], rng, g)) agree(bad, in_place, "broken");
              }
            }
          }
    }
  INFO("compared " << compared << ", broken " << broken << "; sequences in groups: " << grouped_even
                   << " of counts 256 and 344, " << grouped_odd << " of count 337");
  CHECK(compared > 1000);
  CHECK(grouped_even > 100);     // both kinds of groups are exercised: a count that
  CHECK(grouped_odd > 50);       // divides by nothing still groups between its cuts
  CHECK(broken > compared / 4);  // the breaks do break: the comparison sees violations
}

TEST_CASE("element groups: the engine's chunked sequences are proven in groups", "[ir][sequence][groups]") {
  // COLLC_ENABLE_CHECKS proves the sequence a plan runs at every setup, so a
  // sequence that falls back to element-by-element costs every rank time and
  // memory in proportion to the message (an 8 MiB allreduce between
  // pseudo-nodes took tens of seconds per rank). The chunk programs of every
  // collective carry the call's count as block_stride; where that is not a
  // block stride (allreduce, reduce, bcast) it must not stop the groups.
  const std::size_t chunk_bytes = 4096, elem = 8, chunk = chunk_bytes / elem;
  int blocked = 0, blocked_in_groups = 0;
  for (collective c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                       collective::bcast})
    for (int P : {2, 3, 4}) {
      for (const auto& node_of : node_layouts(P, {1, 2})) {
        const std::size_t count = 4 * chunk + 13;  // chunks and a tail that divide by nothing
        const algo::schedule s = algo::default_schedule(c, P, count * elem, true, node_of, 0);
        const bool rooted = c == collective::reduce || c == collective::bcast;
        const runs r = plan_runs(s, c, P, count, rooted ? P - 1 : 0, elem, chunk_bytes, node_of);
        const auto order = proof_order(r);
        const verify_options grouped{.commutative = true, .shm_copies = r.shm_copies};
        INFO(collc::to_string(c) << " P=" << P << " nodes=" << (node_of.empty() ? 1 : node_of.back() + 1) << " "
                                 << s.to_string() << " count " << count << ", " << r.programs.size() << " programs, "
                                 << order.size() << " executions");
        REQUIRE(order.size() > 2);  // chunked: the case this is about
        const bool in_groups = group_gain(r.programs, order, grouped) > 2;
        if (c == collective::reduce_scatter || c == collective::allgather) {
          blocked_in_groups += in_groups;
          ++blocked;
        } else {
          CHECK(in_groups);
        }
        CHECK(verify_sequence(r.programs, order, grouped));
      }
    }
  // A blocked collective's chunk and tail programs split every block at
  // different places, and the cuts, carried between the blocks and the
  // shm, can come out too fine to pay (recexch{-2,-2} at P = 4 in nodes of 2
  // here): such a sequence is proven element by element.
  INFO(blocked_in_groups << " of " << blocked << " reduce_scatter and allgather sequences in groups");
  CHECK(blocked == 2 * (2 + 3 + 3));  // layouts: P = 2 one node and nodes of 1; P = 3, 4 also nodes of 2
  CHECK(blocked_in_groups + 2 >= blocked);
}
