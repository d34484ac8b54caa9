// include/collc/backend/mpi/layout.hpp without MPI: the layout of a plan
// (flag lines, shm copies, slot size, the runs and their order) is a pure
// function of its lowered programs, so its rules are checked here on real
// lowerings (recursive exchange, tree, copy-in; one chunk and chunked with a
// tail; one node and pseudo-nodes) with no ranks at all. The lowering and
// chunking are the engine's own calls (engine.ipp's lower_chunks(), then
// layout_of() in layout()); the expected values are derived in the comments
// from layout.hpp's rules, not read back from the code.
#include "plan_lowering.hpp"

#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/backend/mpi/layout.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/error.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

using collc::collective;
using collc::factor_set;
using collc::mpi::layout_of;
using collc::mpi::plan_layout;
namespace algo = collc::algo;
namespace ir = collc::ir;

namespace {

constexpr std::size_t kib = 1024;

struct lowered_plan {
  std::vector<ir::program> programs;  ///< chunk, then tail if any
  std::size_t chunk = 0;
  plan_layout layout;
};

/// What the engine computes at setup for a plan of `count` elements of
/// `elem` bytes on `P` ranks (engine::lower_chunks, then engine::layout), on
/// a node with a core per rank unless `oversubscribed`.
lowered_plan plan(const algo::schedule& s, collective c, int P, std::size_t count, std::size_t elem,
                  std::size_t chunk_bytes = collc::mpi::default_chunk_bytes, const std::vector<int>& node_of = {},
                  int root = 0, bool oversubscribed = false) {
  const bool one_node = std::all_of(node_of.begin(), node_of.end(), [&](int n) { return n == node_of.front(); });
  const std::size_t lowering =
      collc::mpi::lowering_chunk_bytes(c, count * elem, P, one_node, oversubscribed, chunk_bytes);
  const ir::chunked lowered = collc_test::lower_like_engine(s, c, P, count, elem, lowering, node_of, root);
  lowered_plan out{lowered.programs, lowered.chunk, {}};
  out.layout = layout_of(lowered.programs, lowered.chunk, count, elem, chunk_bytes, P);
  return out;
}

/// 64-byte lines of `bytes`, in bytes.
std::size_t lines(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

/// The maxima layout_of() takes over the programs (chunk and tail).
void check_maxima(const lowered_plan& p) {
  int flags = 0;
  std::size_t shm = 0, scratch = 0, count = 0;
  for (const auto& prog : p.programs) {
    flags = std::max(flags, prog.flags);
    shm = std::max(shm, prog.shm_count);
    scratch = std::max(scratch, prog.scratch_count);
    count = std::max(count, prog.count);
  }
  CHECK(p.layout.flags == flags);
  CHECK(p.layout.shm_elems == shm);
  CHECK(p.layout.scratch_elems == scratch);
  CHECK(p.layout.max_count == count);
}

}  // namespace

TEST_CASE("recursive {2}, P = 2: a tiny allreduce alternates both copies inside the flag line", "[mpi][layout]") {
  // Each rank publishes its vector in shm for the peer: 3 doubles = 24 B; both
  // copies and the 8-byte flag fit the line (8 + 2 x 24 = 56 <= 64).
  const auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 3, 8);
  const plan_layout& l = p.layout;
  REQUIRE(p.programs.size() == 1);
  check_maxima(p);
  CHECK(l.flags == 1);
  CHECK(l.shm_elems == 3);
  CHECK(l.scratch_elems == 0);
  CHECK(l.max_count == 3);
  CHECK_FALSE(l.any_rank_messages);
  CHECK(l.alternate);
  CHECK(l.runs.alternate);
  CHECK(l.data_in_flag_line);
  CHECK(l.copy_bytes == 24);  // in the line: the copies sit back to back, unpadded
  CHECK(l.slot_bytes == 64);  // the flag line is the whole slot
  CHECK(l.runs.programs.size() == 1);
  CHECK(l.runs.chunk == 3);
  CHECK(l.runs.full_chunks == 1);
  CHECK(l.runs.executions_per_call == 1);
  CHECK(l.runs.in_place);
  CHECK(l.runs.sequence(3, 3) == std::vector<std::size_t>{0, 0, 0});
  CHECK(l.to_string(8) ==
        "flags 1, shm 24 B x 2 (alternating) in the flag line, scratch 0 B, slot 64 B, 1 program, 1 execution per "
        "call");
}

TEST_CASE("recursive {2}, P = 2: where the copies leave the flag line, each takes whole lines", "[mpi][layout]") {
  SECTION("4 doubles: 8 + 2 x 32 B > 64; each copy takes a line behind its own signal word") {
    const plan_layout l = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 4, 8).layout;
    CHECK(l.alternate);
    CHECK_FALSE(l.data_in_flag_line);
    CHECK(l.signal_beside_data);
    CHECK(l.copy_bytes == 64);
    CHECK(l.slot_bytes == 2 * 64);
  }
  SECTION("8 doubles: 64 B leave no room for a word; the flag line stays apart") {
    const plan_layout l = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 8, 8).layout;
    CHECK(l.alternate);
    CHECK_FALSE(l.signal_beside_data);
    CHECK(l.copy_bytes == 64);
    CHECK(l.slot_bytes == 64 + 2 * 64);
  }
  SECTION("one 16-byte element: it would fit, but the line keeps only elements of up to 8 bytes") {
    const plan_layout l = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 1, 16).layout;
    CHECK(l.shm_elems == 1);
    CHECK(l.alternate);
    CHECK_FALSE(l.data_in_flag_line);
    CHECK(l.copy_bytes == 64);
    CHECK(l.slot_bytes == 64 + 2 * 64);
    CHECK(l.to_string(16).starts_with("flags 1, shm 16 B x 2 (alternating), scratch 0 B, slot 192 B"));
  }
  SECTION("one copy in the line: 5 doubles with chunk_bytes 64 (two copies of 40 B exceed it)") {
    const auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 5, 8, 64);
    const plan_layout& l = p.layout;
    REQUIRE(p.programs.size() == 1);  // 40 B of shm fit the 64-byte chunk limit
    CHECK(l.shm_elems == 5);
    CHECK_FALSE(l.alternate);
    CHECK(l.data_in_flag_line);  // 8 + 40 <= 64
    CHECK(l.copy_bytes == 40);
    CHECK(l.slot_bytes == 64);
  }
  SECTION("alternation up to 16 KiB of shm per rank") {
    const plan_layout at = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 2048, 8).layout;
    CHECK(at.shm_elems * 8 == collc::ir::alternate_max_bytes);
    CHECK(at.alternate);
    CHECK(at.copy_bytes == 16 * kib);
    CHECK(at.slot_bytes == 64 + 2 * 16 * kib);
    const plan_layout over = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 2049, 8).layout;
    CHECK_FALSE(over.alternate);
    CHECK_FALSE(over.runs.alternate);
    CHECK(over.copy_bytes == lines(2049 * 8));
    CHECK(over.slot_bytes == 64 + lines(2049 * 8));
  }
  SECTION("alternation needs both copies within chunk_bytes") {
    // 1024 doubles = 8 KiB: one chunk under an 8 KiB limit, but two copies are 16 KiB.
    const auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 1024, 8, 8 * kib);
    REQUIRE(p.programs.size() == 1);
    CHECK_FALSE(p.layout.alternate);
    CHECK(p.layout.slot_bytes == 64 + 8 * kib);
    const auto q = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 1024, 8, 16 * kib);
    CHECK(q.layout.alternate);
    CHECK(q.layout.slot_bytes == 64 + 2 * 8 * kib);
  }
}

TEST_CASE("recursive {-4,4}, P = 4: shm of the program, two copies of whole lines after the flag", "[mpi][layout]") {
  const auto p = plan(algo::schedule::recursive(factor_set{-4, 4}), collective::allreduce, 4, 64, 8);
  const plan_layout& l = p.layout;
  REQUIRE(p.programs.size() == 1);
  check_maxima(p);
  // The vector and the reduced quarter: more shm than the vector itself.
  CHECK(l.shm_elems == p.programs[0].shm_count);
  CHECK(l.shm_elems > 64);
  CHECK(l.flags == 1);
  CHECK_FALSE(l.any_rank_messages);
  CHECK(l.alternate);
  CHECK_FALSE(l.data_in_flag_line);
  CHECK(l.copy_bytes == lines(l.shm_elems * 8));
  CHECK(l.shm_copies == 2);
  CHECK(l.slot_bytes == 64 + 2 * l.copy_bytes);
  CHECK(l.runs.executions_per_call == 1);
  CHECK(l.runs.in_place);
  CHECK(l.runs.programs.size() == 1);
  CHECK(l.runs.programs[0].count == 64);
}

TEST_CASE("tree: reduce and bcast on one node", "[mpi][layout]") {
  for (collective c : {collective::reduce, collective::bcast}) {
    for (int root : {0, 3}) {
      CAPTURE(collc::to_string(c), root);
      const auto p = plan(algo::schedule::tree(2), c, 4, 100, 8, collc::mpi::default_chunk_bytes, {}, root);
      const plan_layout& l = p.layout;
      REQUIRE(p.programs.size() == 1);
      check_maxima(p);
      CHECK(l.shm_elems == p.programs[0].shm_count);
      CHECK(l.max_count == 100);
      CHECK_FALSE(l.any_rank_messages);
      CHECK(l.alternate);  // 1600 B of shm: well under 16 KiB
      // Rooted: a ring of 32 copies (1600 B -> 1664 B a copy, twice the ring
      // within 64 KiB), so the root or the leaves run ahead of slow readers.
      CHECK(l.shm_copies == 32);
      CHECK(l.runs.shm_copies == 32);
      CHECK(l.copy_bytes == lines(l.shm_elems * 8));
      CHECK(l.slot_bytes == 64 + 32 * lines(l.shm_elems * 8));
      CHECK(l.runs.executions_per_call == 1);
      CHECK(l.runs.in_place);
    }
  }
}

TEST_CASE("an alternating program's signals rotate over the words of its flag line", "[mpi][layout]") {
  // One word per execution mod flag_words (engine.hpp): a waiter reads the
  // word of its own execution even when the peer runs ahead.
  SECTION("a ring of 32 copies of more than 56 B: the 8 words of the flag line") {
    const plan_layout l = plan(algo::schedule::tree(2), collective::bcast, 4, 100, 8).layout;
    REQUIRE(l.shm_copies == 32);
    CHECK_FALSE(l.signal_beside_data);
    CHECK(l.flag_words == 8);
    CHECK(l.flag_word_stride() == 1);
    CHECK(l.slot_bytes == 64 + 32 * lines(l.shm_elems * 8));  // the words are in the flag line: no extra space
    CHECK(l.to_string(8).ends_with(", signals over 8 words per flag line"));
  }
  SECTION("a ring of 32 copies of one double: 32 lines, each a word and its copy") {
    const plan_layout l = plan(algo::schedule::tree(2), collective::bcast, 2, 1, 8).layout;
    REQUIRE(l.shm_copies == 32);
    CHECK(l.signal_beside_data);
    CHECK(l.flag_words == 32);
    CHECK(l.flag_word_stride() == 8);  // one 64-byte line apart
    CHECK(l.copy_bytes == 64);
    CHECK(l.slot_bytes == 32 * 64);
    CHECK(l.to_string(8).ends_with(", each copy in a line behind its signal"));
  }
  SECTION("two copies: two words") {
    const plan_layout l = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 4, 8).layout;
    REQUIRE(l.shm_copies == 2);
    CHECK(l.flag_words == 2);
  }
  SECTION("data in the flag line keeps the one word there") {
    const plan_layout l = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 3, 8).layout;
    REQUIRE(l.data_in_flag_line);
    CHECK(l.flag_words == 1);
  }
  SECTION("no alternation, or more than one program: one word") {
    CHECK(plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 2049, 8).layout.flag_words == 1);
    const auto chunked = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 1000, 8, 4 * kib);
    REQUIRE(chunked.programs.size() == 2);
    CHECK(chunked.layout.flag_words == 1);
    CHECK(plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 64, 8,
               collc::mpi::default_chunk_bytes, {0, 1})
              .layout.flag_words == 1);
  }
}

TEST_CASE("copy-in: allgather blocks in shm, P = 3", "[mpi][layout]") {
  const auto p = plan(algo::schedule::copy_in(), collective::allgather, 3, 16, 8);
  const plan_layout& l = p.layout;
  REQUIRE(p.programs.size() == 1);
  check_maxima(p);
  CHECK(l.shm_elems == p.programs[0].shm_count);
  CHECK(l.max_count == 16);  // count in MPI's meaning: per block
  CHECK_FALSE(l.any_rank_messages);
  CHECK(l.alternate);
  CHECK(l.shm_copies == 2);  // every rank waits for every other: no run-ahead to gain
  CHECK(l.slot_bytes == 64 + 2 * lines(l.shm_elems * 8));
  CHECK(l.runs.executions_per_call == 1);
  CHECK(l.runs.sequence(2, 1) == std::vector<std::size_t>{0, 0});
}

TEST_CASE("chunked with a tail: four programs, guarded after each switch", "[mpi][layout]") {
  SECTION("recursive {2}, P = 2: 1000 doubles in 4 KiB chunks") {
    // 4 KiB / 8 B = 512 elements per chunk (a multiple of the 8-element
    // granule); 1000 = 512 + a tail of 488.
    const auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 1000, 8, 4 * kib);
    const plan_layout& l = p.layout;
    REQUIRE(p.programs.size() == 2);
    check_maxima(p);
    CHECK(p.chunk == 512);
    CHECK(p.programs[1].count == 488);
    CHECK(l.max_count == 512);
    CHECK(l.shm_elems == 512);
    CHECK_FALSE(l.alternate);  // two copies of 4 KiB exceed chunk_bytes
    CHECK_FALSE(l.data_in_flag_line);
    CHECK(l.slot_bytes == 64 + 4 * kib);
    CHECK(l.runs.chunk == 512);
    CHECK(l.runs.full_chunks == 1);
    CHECK(l.runs.executions_per_call == 2);
    REQUIRE(l.runs.programs.size() == 4);
    CHECK(l.runs.programs[0].count == 512);
    CHECK(l.runs.programs[1].count == 488);
    CHECK(l.runs.programs[2].name.ends_with(" (guarded)"));
    CHECK(l.runs.programs[3].name.ends_with(" (guarded)"));
    CHECK(l.runs.programs[2].count == 512);
    CHECK(l.runs.programs[3].count == 488);
    // call 1: chunk, tail after a chunk (guarded); call 2: chunk after a tail (guarded), tail after a chunk.
    CHECK(l.runs.sequence(2, 3) == std::vector<std::size_t>{0, 3, 2, 3});
    CHECK(l.to_string(8) ==
          "flags 1, shm 4096 B, scratch 0 B, slot 4160 B, 4 programs, 2 executions per call (chunk 512 elements)");
  }
  SECTION("recursive {-4,4}, P = 4: the chunk shrinks until its shm fits") {
    const auto p = plan(algo::schedule::recursive(factor_set{-4, 4}), collective::allreduce, 4, 1000, 8, 4 * kib);
    const plan_layout& l = p.layout;
    REQUIRE(p.programs.size() == 2);
    check_maxima(p);
    CHECK(p.chunk < 512);  // 512 elements would need more than 4 KiB of shm
    CHECK(p.chunk % 8 == 0);
    CHECK(l.shm_elems * 8 <= 4 * kib);
    CHECK(l.runs.full_chunks == 1000 / p.chunk);
    CHECK(l.runs.full_chunks >= 2);
    CHECK(l.runs.executions_per_call == l.runs.full_chunks + 1);
    CHECK(l.runs.programs.size() == 4);
    CHECK(l.runs.programs[1].count == 1000 % p.chunk);
    CHECK(l.slot_bytes == 64 + lines(l.shm_elems * 8));
    // Two calls of (with 2 full chunks) chunk chunk tail: the second call
    // starts with the guarded chunk, and its second chunk runs unguarded.
    std::vector<std::size_t> want;
    for (int call = 0; call < 2; ++call) {
      for (std::size_t i = 0; i < l.runs.full_chunks; ++i) want.push_back(call > 0 && i == 0 ? 2 : 0);
      want.push_back(3);
    }
    CHECK(l.runs.sequence(2, l.runs.full_chunks) == want);
  }
  SECTION("count 0: nothing runs, nothing is allocated") {
    const plan_layout l = layout_of({}, 0, 0, 8, 4 * kib, 2);
    CHECK(l.flags == 0);
    CHECK(l.slot_bytes == 0);
    CHECK_FALSE(l.alternate);
    CHECK(l.runs.programs.empty());
    CHECK(l.runs.executions_per_call == 0);
  }
}

TEST_CASE("more than one flag: a line each, and the data leaves the flag line", "[mpi][layout]") {
  // Lowering gives every program one flag; hand-written programs (the text
  // form, ir/text.hpp) may declare more, so the real programs get extra flags here.
  SECTION("one program with two flags") {
    auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 3, 8);
    p.programs[0].flags = 2;
    const plan_layout l = layout_of(p.programs, p.chunk, 3, 8, collc::mpi::default_chunk_bytes, 2);
    CHECK(l.flags == 2);
    CHECK(l.alternate);
    CHECK_FALSE(l.data_in_flag_line);  // 24 B would fit, but only behind the only flag
    CHECK(l.copy_bytes == 64);
    CHECK(l.slot_bytes == 2 * 64 + 2 * 64);
  }
  SECTION("the tail has more flags than the chunk: the most of either") {
    auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 1000, 8, 4 * kib);
    REQUIRE(p.programs.size() == 2);
    p.programs[1].flags = 3;
    const plan_layout l = layout_of(p.programs, p.chunk, 1000, 8, 4 * kib, 2);
    CHECK(l.flags == 3);
    CHECK(l.slot_bytes == 3 * 64 + 4 * kib);
    REQUIRE(l.runs.programs.size() == 4);
    CHECK(l.runs.programs[2].flags == 3);  // the guard waits on every flag of the sequence
  }
}

TEST_CASE("pseudo-nodes: messages turn alternation off", "[mpi][layout]") {
  SECTION("recursive {2} across two nodes: messages only, no shm") {
    const auto p = plan(algo::schedule::recursive(factor_set{2}), collective::allreduce, 2, 64, 8,
                        collc::mpi::default_chunk_bytes, {0, 1});
    const plan_layout& l = p.layout;
    check_maxima(p);
    CHECK(l.any_rank_messages);
    CHECK_FALSE(l.alternate);
    CHECK(l.shm_elems == 0);
    CHECK_FALSE(l.data_in_flag_line);  // no data to keep there
    CHECK(l.slot_bytes == static_cast<std::size_t>(l.flags) * 64);
    CHECK(l.to_string(8).ends_with(", messages between nodes"));
  }
  SECTION("the same schedule on one node sends nothing") {
    CHECK_FALSE(plan(algo::schedule::recursive(factor_set{-2, -2, 2, 2}), collective::allreduce, 4, 64, 8)
                    .layout.any_rank_messages);
    const auto p = plan(algo::schedule::recursive(factor_set{-2, -2, 2, 2}), collective::allreduce, 4, 64, 8,
                        collc::mpi::default_chunk_bytes, {0, 0, 1, 1});
    CHECK(p.layout.any_rank_messages);
    CHECK_FALSE(p.layout.alternate);
    CHECK(p.layout.slot_bytes == 64 + lines(p.layout.shm_elems * 8));
  }
  SECTION("ring allgather across nodes is not in place (the engine stages it)") {
    const auto p =
        plan(algo::schedule::ring(), collective::allgather, 4, 16, 8, collc::mpi::default_chunk_bytes, {0, 0, 1, 1});
    CHECK(p.layout.any_rank_messages);
    CHECK_FALSE(p.layout.runs.in_place);
    CHECK(p.layout.scratch_elems == p.programs[0].scratch_count);
    CHECK(p.layout.scratch_elems > 0);
  }
}

TEST_CASE("layout_of refuses programs for another number of ranks", "[mpi][layout]") {
  const auto p = plan(algo::schedule::recursive(factor_set{-4, 4}), collective::allreduce, 4, 64, 8);
  try {
    (void)layout_of(p.programs, p.chunk, 64, 8, collc::mpi::default_chunk_bytes, 2);
    FAIL("no error");
  } catch (const collc::error& e) {
    CHECK(e.code() == collc::errc::invalid_argument);
    CHECK(std::string(e.what()) == "program for 4 ranks on a communicator of 2");
  }
}
