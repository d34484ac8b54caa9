// Tests for include/collc/ir/passes.hpp. Each pass runs alone on small
// hand-made programs whose expected output is derived by hand (the comment
// says why), on programs where it must do nothing, and on generated
// shared-memory allreduce programs (and lowered schedules) where the result
// must still pass collc::ir::verify.
#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/ir/passes.hpp>
#include <collc/ir/sequence.hpp>
#include <collc/ir/text.hpp>
#include <collc/ir/verify.hpp>

#include <initializer_list>
#include <string>
#include <vector>

using namespace collc;
using namespace collc::ir;

namespace {

/// A program from one instruction list per rank, in the text syntax (refs
/// without an owner belong to the rank). Buffers are sized generously; these
/// programs are about instruction sequences, not capacities.
program prog(std::initializer_list<std::initializer_list<const char*>> ranks, int flags = 1) {
  program p;
  p.ranks = static_cast<int>(ranks.size());
  p.count = 64;
  p.shm_count = 256;
  p.scratch_count = 256;
  p.flags = flags;
  for (const auto& lines : ranks) {
    auto& code = p.code.emplace_back();
    for (const char* l : lines) code.push_back(parse_instruction(l, static_cast<int>(p.code.size() - 1)));
  }
  return p;
}

/// Options of the generated shared-memory allreduce.
struct gen {
  int ranks = 4;
  std::size_t count = 10;
  int pieces = 1;            ///< copies split into this many contiguous pieces
  bool via_scratch = false;  ///< results reach recv through a scratch temporary
  bool extra_waits = false;  ///< add waits that earlier waits already imply
};

/// Per rank r (P ranks, one flag, S = 3 signals per execution):
///   wait every peer's last signal of the previous execution (value 0): it has
///     finished reading our shm;                          [extra: also value -1]
///   copy send -> shm@r (in pieces); signal 1
///   wait every peer's signal 1; reduce slice r over shm@0..P-1 in rank order
///     into scratch, copy it to shm@r's slice r; signal 2
///                                                        [extra: wait peers >= 1 again]
///   wait every peer's signal 2; copy every slice q from shm@q to recv (in
///     pieces) [via_scratch: through a scratch temporary]; signal 3
program shm_allreduce(const gen& g) {
  const int P = g.ranks;
  const std::size_t n = g.count;
  auto begin = [&](int q) { return n * static_cast<std::size_t>(q) / static_cast<std::size_t>(P); };
  std::size_t max_slice = 0;
  for (int q = 0; q < P; ++q) max_slice = std::max(max_slice, begin(q + 1) - begin(q));
  program p;
  p.coll = collective::allreduce;
  p.ranks = P;
  p.count = n;
  p.flags = 1;
  p.shm_count = n;
  p.scratch_count = max_slice + n;
  p.name = "test shm allreduce";
  auto in_pieces = [&](std::size_t b, std::size_t e, auto&& f) {
    const auto k = static_cast<std::size_t>(g.pieces);
    for (std::size_t i = 0; i < k; ++i)
      if (auto pb = b + (e - b) * i / k, pe = b + (e - b) * (i + 1) / k; pe > pb) f(pb, pe - pb);
  };
  for (int r = 0; r < P; ++r) {
    auto& c = p.code.emplace_back();
    auto peers = [&](std::int64_t value) {
      for (int q = 0; q < P; ++q)
        if (q != r) c.push_back(wait{q, 0, value});
    };
    peers(0);
    if (g.extra_waits) peers(-1);
    in_pieces(0, n, [&](std::size_t b, std::size_t len) {
      c.push_back(copy{{buffer::shm, r, b}, {buffer::send, r, b}, len});
    });
    c.push_back(signal{0});
    peers(1);
    const std::size_t b = begin(r), len = begin(r + 1) - begin(r);
    if (P > 1 && len > 0) {
      const ref acc{buffer::scratch, r, 0};
      c.push_back(reduce{acc, {buffer::shm, 0, b}, {buffer::shm, 1, b}, len});
      for (int q = 2; q < P; ++q) c.push_back(reduce{acc, acc, {buffer::shm, q, b}, len});
      c.push_back(copy{{buffer::shm, r, b}, acc, len});
    }
    c.push_back(signal{0});
    if (g.extra_waits) peers(1);
    peers(2);
    for (int q = 0; q < P; ++q)
      in_pieces(begin(q), begin(q + 1), [&](std::size_t pb, std::size_t plen) {
        const ref dst{buffer::recv, r, pb}, src{buffer::shm, q, pb};
        if (g.via_scratch) {
          const ref tmp{buffer::scratch, r, max_slice + pb};
          c.push_back(copy{tmp, src, plen});
          c.push_back(copy{dst, tmp, plen});
        } else {
          c.push_back(copy{dst, src, plen});
        }
      });
    c.push_back(signal{0});
  }
  return p;
}

/// What receive_into_destination makes of shm_allreduce(g), derived by hand:
///  - `copy tmp <- shm@q; copy recv <- tmp` is `copy recv <- shm@q`, so the
///    scratch round trips give the program generated without them;
///  - with 2 ranks the accumulator holds a single reduce whose result is only
///    copied to the rank's shm slice: the reduce writes the slice directly;
///  - with 1 rank, shm@0 only carries send to recv (phase 1 and phase 3 use the
///    same pieces of [0, count)): the phase 1 copies write recv directly.
program forwarded(gen g) {
  g.via_scratch = false;
  program p = shm_allreduce(g);
  for (auto& c : p.code) {
    rank_program out;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const auto* red = std::get_if<reduce>(&c[i]);
      if (g.ranks == 2 && red && red->dst.buf == buffer::scratch) {
        const auto& to_shm = std::get<copy>(c[i + 1]);
        out.push_back(reduce{to_shm.dst, red->a, red->b, red->count});
        ++i;
        continue;
      }
      const auto* cp = std::get_if<copy>(&c[i]);
      if (g.ranks == 1 && cp && cp->src.buf == buffer::send) {
        out.push_back(copy{{buffer::recv, 0, cp->src.offset}, cp->src, cp->count});
        continue;
      }
      if (g.ranks == 1 && cp && cp->dst.buf == buffer::recv) continue;
      out.push_back(c[i]);
    }
    c = out;
  }
  return p;
}

std::vector<gen> generated_cases() {
  std::vector<gen> out;
  for (int P : {1, 2, 3, 4, 5, 7})
    for (std::size_t n : {1, 7, 16})
      for (int pieces : {1, 3})
        for (bool via : {false, true})
          for (bool extra : {false, true}) out.push_back({P, n, pieces, via, extra});
  return out;
}

std::string describe(const gen& g) {
  return "P=" + std::to_string(g.ranks) + " count=" + std::to_string(g.count) + " pieces=" + std::to_string(g.pieces) +
         (g.via_scratch ? " via_scratch" : "") + (g.extra_waits ? " extra_waits" : "");
}

std::size_t instructions(const program& p) {
  std::size_t n = 0;
  for (const auto& c : p.code) n += c.size();
  return n;
}

/// verify() with the settings a non-commutative allreduce needs, over three executions.
std::string check(const program& p) { return verify(p, {.commutative = false, .executions = 3}).to_string(); }

}  // namespace

TEST_CASE("the generated programs verify (and the checks can fail)", "[ir][passes]") {
  for (const auto& g : generated_cases()) {
    INFO(describe(g));
    CHECK(check(shm_allreduce(g)) == "ok");
  }
  // Without the leading wait, rank 0 overwrites its shm while rank 1 may still
  // read it from the previous execution: the harness must notice.
  program p = shm_allreduce({3, 7, 1, false, false});
  p.code[0].erase(p.code[0].begin());
  CHECK(check(p) != "ok");
}

// ---------------------------------------------------------------- merge_adjacent

TEST_CASE("merge_adjacent joins contiguous copies and drops zero-count ones", "[ir][passes][merge]") {
  // Three pieces continue each other in dst and src (0+4=4, 4+2=6), the
  // zero-count copy in between is a no-op: one copy of 4+2+3 = 9.
  CHECK(merge_adjacent(prog({{"copy shm@0+0 <- send+0 x4", "copy shm@0+4 <- send+4 x2", "copy recv+0 <- send+0 x0",
                              "copy shm@0+6 <- send+6 x3", "signal f0"}})) ==
        prog({{"copy shm@0+0 <- send+0 x9", "signal f0"}}));
  // Pieces in descending order merge too: the second ends where the first begins.
  CHECK(merge_adjacent(prog({{"copy recv+4 <- shm@1+12 x4", "copy recv+0 <- shm@1+8 x4"}, {}})) ==
        prog({{"copy recv+0 <- shm@1+8 x8"}, {}}));
  // Copies into another rank's shm continue each other as well.
  CHECK(merge_adjacent(prog({{}, {"copy shm@0+2 <- scratch+0 x1", "copy shm@0+3 <- scratch+1 x5"}})) ==
        prog({{}, {"copy shm@0+2 <- scratch+0 x6"}}));
}

TEST_CASE("merge_adjacent joins contiguous reduces", "[ir][passes][merge]") {
  // dst, a and b all continue (0+2=2): one reduce of 5.
  CHECK(merge_adjacent(prog({{"reduce recv+0 <- shm@0+0, shm@1+0 x2", "reduce recv+2 <- shm@0+2, shm@1+2 x3"}, {}})) ==
        prog({{"reduce recv+0 <- shm@0+0, shm@1+0 x5"}, {}}));
  // In place (dst is a, element for element) stays in place after merging.
  CHECK(merge_adjacent(prog({{"reduce shm@0+0 <- shm@0+0, shm@1+0 x2", "reduce shm@0+2 <- shm@0+2, shm@1+2 x2",
                              "reduce shm@0+4 <- shm@0+4, shm@1+4 x2"},
                             {}})) == prog({{"reduce shm@0+0 <- shm@0+0, shm@1+0 x6"}, {}}));
  // Zero-count reduces vanish; a zero-count send and recv stay (they still match).
  CHECK(merge_adjacent(prog(
            {{"reduce recv+0 <- send+0, shm@1+0 x0", "send ->r1 tag 0 send+0 x0"}, {"recv <-r0 tag 0 recv+0 x0"}})) ==
        prog({{"send ->r1 tag 0 send+0 x0"}, {"recv <-r0 tag 0 recv+0 x0"}}));
}

TEST_CASE("merge_adjacent keeps apart what must stay apart", "[ir][passes][merge]") {
  const std::vector<program> unchanged = {
      // a gap in dst (4 != 5)
      prog({{"copy shm@0+0 <- send+0 x4", "copy shm@0+5 <- send+4 x4"}}),
      // dst continues but src does not
      prog({{"copy shm@0+0 <- send+0 x4", "copy shm@0+4 <- send+8 x4"}}),
      // src continues but in another owner's shm
      prog({{"copy recv+0 <- shm@0+0 x4", "copy recv+4 <- shm@1+4 x4"}, {}}),
      // not adjacent: a signal in between orders them against other ranks
      prog({{"copy shm@0+0 <- send+0 x4", "signal f0", "copy shm@0+4 <- send+4 x4"}}),
      // a copy and a reduce
      prog({{"copy recv+0 <- send+0 x4", "reduce recv+4 <- send+4, shm@0+4 x4"}}),
      // shifting copy: the second reads what the first wrote (scratch 1), a
      // merged copy would overlap its own source
      prog({{"copy scratch+1 <- scratch+0 x1", "copy scratch+2 <- scratch+1 x1"}}),
      // the second reduce reads scratch+1, which the first wrote: merged, dst
      // and a would overlap without being the same range
      prog({{"reduce scratch+1 <- scratch+0, shm@0+0 x1", "reduce scratch+2 <- scratch+1, shm@0+1 x1"}}),
      // b continues in another buffer
      prog({{"reduce recv+0 <- shm@0+0, shm@1+0 x2", "reduce recv+2 <- shm@0+2, scratch+2 x2"}, {}}),
  };
  for (const auto& p : unchanged) CHECK(merge_adjacent(p) == p);
  const program base = shm_allreduce({4, 10, 1, false, false});
  CHECK(merge_adjacent(base) == base);
}

TEST_CASE("merge_adjacent preserves verify and undoes splitting into pieces", "[ir][passes][merge]") {
  for (const auto& g : generated_cases()) {
    INFO(describe(g));
    const program p = shm_allreduce(g);
    const program q = merge_adjacent(p);
    CHECK(check(q) == "ok");
    // Pieces are contiguous in dst and src, so they merge back into the
    // one-piece program (the scratch round trips keep the pieces apart).
    if (!g.via_scratch) {
      gen whole = g;
      whole.pieces = 1;
      CHECK(q == shm_allreduce(whole));
    }
  }
}

// ------------------------------------------------------ receive_into_destination

TEST_CASE("receive_into_destination receives and copies straight into the destination", "[ir][passes][forward]") {
  // The scratch temporary only carries the message to recv+8; nothing else
  // touches scratch+0..8 or recv+8..16, so the recv can target recv+8. The
  // signal in between does not matter: recv is private memory.
  CHECK(receive_into_destination(prog({{"recv <-r1 tag 3 scratch+0 x8", "signal f0", "copy recv+8 <- scratch+0 x8"},
                                       {"send ->r0 tag 3 send+0 x8"}})) ==
        prog({{"recv <-r1 tag 3 recv+8 x8", "signal f0"}, {"send ->r0 tag 3 send+0 x8"}}));
  // Shared-memory analogue: read the peer's shm straight into recv.
  CHECK(
      receive_into_destination(prog({{"wait r1.f0 >= 1", "copy scratch+4 <- shm@1+0 x4", "copy recv+0 <- scratch+4 x4"},
                                     {"copy shm@1+0 <- send+0 x4", "signal f0"}})) ==
      prog({{"wait r1.f0 >= 1", "copy recv+0 <- shm@1+0 x4"}, {"copy shm@1+0 <- send+0 x4", "signal f0"}}));
  // A chain of temporaries collapses completely: scratch+0 -> scratch+8 -> recv+0.
  CHECK(receive_into_destination(prog(
            {{"recv <-r1 tag 0 scratch+0 x8", "copy scratch+8 <- scratch+0 x8", "copy recv+0 <- scratch+8 x8"},
             {"send ->r0 tag 0 send+0 x8"}})) == prog({{"recv <-r1 tag 0 recv+0 x8"}, {"send ->r0 tag 0 send+0 x8"}}));
  // A reduce into a temporary writes the destination directly (dst = a in place is allowed).
  CHECK(receive_into_destination(prog({{"reduce scratch+0 <- recv+0, shm@1+0 x4", "copy recv+0 <- scratch+0 x4"},
                                       {}})) == prog({{"reduce recv+0 <- recv+0, shm@1+0 x4"}, {}}));
  // An own-shm temporary that no other rank touches counts as a temporary too;
  // D in shm is fine when no synchronisation lies between the two.
  CHECK(receive_into_destination(prog({{"recv <-r1 tag 0 shm@0+8 x4", "copy shm@0+0 <- shm@0+8 x4", "signal f0"},
                                       {"send ->r0 tag 0 send+0 x4"}})) ==
        prog({{"recv <-r1 tag 0 shm@0+0 x4", "signal f0"}, {"send ->r0 tag 0 send+0 x4"}}));
}

TEST_CASE("receive_into_destination splits a copy-out of several temporaries", "[ir][passes][forward]") {
  // What lowering between nodes makes of copy-in's allgather: one receive per
  // peer into consecutive scratch, one merged copy out. Each temporary is the
  // first part of what is left of the copy, so each receive lands in its
  // block of recv and the copy disappears.
  CHECK(receive_into_destination(prog(
            {{"recv <-r1 tag 1 scratch+0 x4", "recv <-r2 tag 1 scratch+4 x4", "fence", "copy recv+4 <- scratch+0 x8"},
             {"send ->r0 tag 1 send+0 x4"},
             {"send ->r0 tag 1 send+0 x4"}})) ==
        prog({{"recv <-r1 tag 1 recv+4 x4", "recv <-r2 tag 1 recv+8 x4", "fence"},
              {"send ->r0 tag 1 send+0 x4"},
              {"send ->r0 tag 1 send+0 x4"}}));
  // The last part: the copy shrinks to the part still in scratch.
  CHECK(receive_into_destination(
            prog({{"copy scratch+0 <- shm@0+0 x4", "recv <-r1 tag 1 scratch+4 x4", "copy recv+0 <- scratch+0 x8"},
                  {"send ->r0 tag 1 send+0 x4"}})) ==
        prog({{"copy recv+0 <- shm@0+0 x4", "recv <-r1 tag 1 recv+4 x4"}, {"send ->r0 tag 1 send+0 x4"}}));
  // A temporary in the middle of the copy's source waits until its neighbours
  // are gone: receive_into_destination leaves it, shorten_data_paths (which
  // repeats) finishes it.
  const program middle = prog({{"recv <-r1 tag 1 scratch+4 x4", "recv <-r2 tag 1 scratch+0 x4",
                                "recv <-r3 tag 1 scratch+8 x4", "copy recv+0 <- scratch+0 x12"},
                               {"send ->r0 tag 1 send+0 x4"},
                               {"send ->r0 tag 1 send+0 x4"},
                               {"send ->r0 tag 1 send+0 x4"}});
  CHECK(receive_into_destination(middle) == prog({{"recv <-r1 tag 1 scratch+4 x4", "recv <-r2 tag 1 recv+0 x4",
                                                   "recv <-r3 tag 1 recv+8 x4", "copy recv+4 <- scratch+4 x4"},
                                                  {"send ->r0 tag 1 send+0 x4"},
                                                  {"send ->r0 tag 1 send+0 x4"},
                                                  {"send ->r0 tag 1 send+0 x4"}}));
  CHECK(shorten_data_paths(middle) ==
        prog({{"recv <-r1 tag 1 recv+4 x4", "recv <-r2 tag 1 recv+0 x4", "recv <-r3 tag 1 recv+8 x4"},
              {"send ->r0 tag 1 send+0 x4"},
              {"send ->r0 tag 1 send+0 x4"},
              {"send ->r0 tag 1 send+0 x4"}}));
}

TEST_CASE("receive_into_destination leaves temporaries that are more than that", "[ir][passes][forward]") {
  const std::vector<program> unchanged = {
      // scratch+0 is read again later (it would no longer hold the message)
      prog({{"recv <-r1 tag 0 scratch+0 x4", "copy recv+0 <- scratch+0 x4", "copy recv+4 <- scratch+0 x4"},
            {"send ->r0 tag 0 send+0 x4"}}),
      // read before the recv: in the next execution it reads this one's message
      prog({{"copy recv+4 <- scratch+0 x4", "recv <-r1 tag 0 scratch+0 x4", "copy recv+0 <- scratch+0 x4"},
            {"send ->r0 tag 0 send+0 x4"}}),
      // the temporary is in shared memory and rank 1 reads it
      prog({{"recv <-r1 tag 0 shm@0+0 x4", "copy recv+0 <- shm@0+0 x4", "signal f0"},
            {"send ->r0 tag 0 send+0 x4", "wait r0.f0 >= 1", "copy recv+0 <- shm@0+0 x4"}}),
      // only part of the temporary is copied out
      prog({{"recv <-r1 tag 0 scratch+0 x4", "copy recv+0 <- scratch+0 x2"}, {"send ->r0 tag 0 send+0 x4"}}),
      // the first use of the temporary is not a copy
      prog({{"recv <-r1 tag 0 scratch+0 x4", "reduce recv+0 <- scratch+0, send+0 x4"}, {"send ->r0 tag 0 send+0 x4"}}),
      // the destination is read in between (it must still hold the old value)
      prog({{"recv <-r1 tag 0 scratch+0 x4", "copy shm@0+0 <- recv+2 x2", "copy recv+0 <- scratch+0 x4"},
            {"send ->r0 tag 0 send+0 x4"}}),
      // the destination is written in between (the copy must win)
      prog({{"recv <-r1 tag 0 scratch+0 x4", "copy recv+3 <- send+0 x1", "copy recv+0 <- scratch+0 x4"},
            {"send ->r0 tag 0 send+0 x4"}}),
      // the destination is shared and a signal lies in between: rank 1 may read
      // the old value after that signal
      prog({{"copy scratch+0 <- send+0 x4", "signal f0", "copy shm@0+0 <- scratch+0 x4"},
            {"wait r0.f0 >= 1", "copy recv+0 <- shm@0+0 x4"}}),
      // a send of the destination is still in flight (no fence yet) when the
      // recv would overwrite it
      prog({{"send ->r1 tag 1 recv+0 x4", "recv <-r1 tag 0 scratch+0 x4", "fence", "copy recv+0 <- scratch+0 x4"},
            {"recv <-r0 tag 1 recv+0 x4", "send ->r0 tag 0 send+0 x4"}}),
      // the copy would overlap its own source
      prog({{"copy scratch+0 <- recv+2 x4", "copy recv+0 <- scratch+0 x4"}}),
      // the temporary is only the middle of the copy's source, and the parts
      // around it are not temporaries
      prog({{"copy scratch+0 <- send+0 x12", "recv <-r1 tag 0 scratch+4 x4", "copy recv+0 <- scratch+0 x12",
             "copy recv+12 <- scratch+0 x4"},
            {"send ->r0 tag 0 send+0 x4"}}),
  };
  for (const auto& p : unchanged) CHECK(receive_into_destination(p) == p);
  const program base = shm_allreduce({4, 10, 3, false, false});
  CHECK(receive_into_destination(base) == base);
}

TEST_CASE("receive_into_destination preserves verify and removes the scratch round trips", "[ir][passes][forward]") {
  for (const auto& g : generated_cases()) {
    INFO(describe(g));
    const program p = shm_allreduce(g);
    const program q = receive_into_destination(p);
    CHECK(check(q) == "ok");
    CHECK(q == forwarded(g));
  }
}

// ---------------------------------------------------------- drop_redundant_waits

TEST_CASE("drop_redundant_waits drops repeated and weaker waits", "[ir][passes][waits]") {
  // Rank 1 signals twice per execution. After waiting for >= 2, waits for
  // >= 2, >= 1, >= 0 (previous execution) on the same flag are implied; a
  // wait for a later signal is not (there is none here, so >= 3 would block
  // forever: it is kept for the verifier to report).
  CHECK(drop_redundant_waits(prog({{"wait r1.f0 >= 2", "copy recv+0 <- shm@1+0 x1", "wait r1.f0 >= 2",
                                    "wait r1.f0 >= 1", "wait r1.f0 >= 0", "wait r1.f0 >= -7", "wait r1.f0 >= 3"},
                                   {"signal f0", "signal f0"}})) ==
        prog({{"wait r1.f0 >= 2", "copy recv+0 <- shm@1+0 x1", "wait r1.f0 >= 3"}, {"signal f0", "signal f0"}}));
  // A larger value after a smaller one is new information.
  const program up = prog({{"wait r1.f0 >= 1", "wait r1.f0 >= 2"}, {"signal f0", "signal f0"}});
  CHECK(drop_redundant_waits(up) == up);
  // Another flag of the same peer is implied only if it was signalled first.
  const program other_flag = prog({{"wait r1.f0 >= 1", "wait r1.f1 >= 1"}, {"signal f0", "signal f1"}}, 2);
  CHECK(drop_redundant_waits(other_flag) == other_flag);
  CHECK(drop_redundant_waits(prog({{"wait r1.f0 >= 1", "wait r1.f1 >= 1"}, {"signal f1", "signal f0"}}, 2)) ==
        prog({{"wait r1.f0 >= 1"}, {"signal f1", "signal f0"}}, 2));
}

TEST_CASE("drop_redundant_waits follows signal -> wait chains", "[ir][passes][waits]") {
  // Rank 1 waits for rank 2's signal before giving its own; once rank 0 has
  // seen rank 1's signal, rank 2's is implied.
  CHECK(drop_redundant_waits(
            prog({{"wait r1.f0 >= 1", "wait r2.f0 >= 1"}, {"wait r2.f0 >= 1", "signal f0"}, {"signal f0"}})) ==
        prog({{"wait r1.f0 >= 1"}, {"wait r2.f0 >= 1", "signal f0"}, {"signal f0"}}));
  // Two hops: 0 <- 1 <- 2 <- 3.
  CHECK(drop_redundant_waits(prog({{"wait r1.f0 >= 1", "wait r3.f0 >= 1", "wait r2.f0 >= 1"},
                                   {"wait r2.f0 >= 1", "signal f0"},
                                   {"wait r3.f0 >= 1", "signal f0"},
                                   {"signal f0"}})) ==
        prog({{"wait r1.f0 >= 1"}, {"wait r2.f0 >= 1", "signal f0"}, {"wait r3.f0 >= 1", "signal f0"}, {"signal f0"}}));
  // Rank 1 signals before it waits: its signal says nothing about rank 2.
  const program early = prog({{"wait r1.f0 >= 1", "wait r2.f0 >= 1"}, {"signal f0", "wait r2.f0 >= 1"}, {"signal f0"}});
  CHECK(drop_redundant_waits(early) == early);
  // Waiting for rank 1's first signal implies nothing about what rank 1 only
  // waited for before its second.
  const program second =
      prog({{"wait r1.f0 >= 1", "wait r2.f0 >= 1"}, {"signal f0", "wait r2.f0 >= 1", "signal f0"}, {"signal f0"}});
  CHECK(drop_redundant_waits(second) == second);
  // Transitive knowledge is relative to executions: waiting for rank 1's
  // signal of the previous execution (value 0) implies the rank 2 signal rank
  // 1 waited for there, i.e. rank 2 >= 0 now ...
  CHECK(drop_redundant_waits(
            prog({{"wait r1.f0 >= 0", "wait r2.f0 >= 0"}, {"wait r2.f0 >= 1", "signal f0"}, {"signal f0"}})) ==
        prog({{"wait r1.f0 >= 0"}, {"wait r2.f0 >= 1", "signal f0"}, {"signal f0"}}));
  // ... but not rank 2 >= 1.
  const program older = prog({{"wait r1.f0 >= 0", "wait r2.f0 >= 1"}, {"wait r2.f0 >= 1", "signal f0"}, {"signal f0"}});
  CHECK(drop_redundant_waits(older) == older);
}

TEST_CASE("drop_redundant_waits knows about earlier executions", "[ir][passes][waits]") {
  // Rank 0 ends by waiting for rank 1's only signal, so when it starts again
  // that signal of the previous execution (value 0) has happened.
  CHECK(drop_redundant_waits(
            prog({{"wait r1.f0 >= 0", "copy recv+0 <- shm@1+0 x1", "wait r1.f0 >= 1"}, {"signal f0"}})) ==
        prog({{"copy recv+0 <- shm@1+0 x1", "wait r1.f0 >= 1"}, {"signal f0"}}));
  // Without the final wait, the leading one protects the next execution: kept.
  const program needed = prog({{"wait r1.f0 >= 0", "copy recv+0 <- shm@1+0 x1"}, {"signal f0"}});
  CHECK(drop_redundant_waits(needed) == needed);
  // A wait on the current execution implies every wait on earlier ones.
  CHECK(drop_redundant_waits(
            prog({{"wait r1.f0 >= 1", "wait r1.f0 >= 0", "wait r1.f0 >= -1"}, {"signal f0", "signal f0"}})) ==
        prog({{"wait r1.f0 >= 1"}, {"signal f0", "signal f0"}}));
  // The rank's own earlier signals are known, including last execution's.
  CHECK(drop_redundant_waits(prog({{"wait r0.f0 >= 0", "signal f0", "wait r0.f0 >= 1"}})) == prog({{"signal f0"}}));
  // A flag nobody signals stays 0: waits for <= 0 on it always pass.
  CHECK(drop_redundant_waits(prog({{"wait r1.f1 >= 0", "wait r1.f1 >= -2", "wait r1.f0 >= 1"}, {"signal f0"}}, 2)) ==
        prog({{"wait r1.f0 >= 1"}, {"signal f0"}}, 2));
}

TEST_CASE("drop_redundant_waits keeps waits it cannot prove", "[ir][passes][waits]") {
  program other_node = prog({{"wait r1.f0 >= 1", "wait r1.f0 >= 1"}, {"signal f0"}, {"signal f0"}});
  other_node.node_of = {0, 1, 1};  // rank 1 is not on rank 0's node: not a wait this pass understands
  CHECK(drop_redundant_waits(other_node) == other_node);
  // Messages order ranks too, but the pass does not use them.
  const program via_message = prog({{"recv <-r1 tag 0 recv+0 x1", "wait r2.f0 >= 1"},
                                    {"wait r2.f0 >= 1", "send ->r0 tag 0 send+0 x1"},
                                    {"signal f0"}});
  CHECK(drop_redundant_waits(via_message) == via_message);
  // Too big to analyse within the memory budget (2 ranks x 2^25 flags): keep everything.
  const program huge = prog({{"wait r1.f0 >= 1", "wait r1.f0 >= 1"}, {"signal f0"}}, 1 << 25);
  CHECK(drop_redundant_waits(huge) == huge);
  // Each wait of the generated allreduce is needed (see shm_allreduce).
  for (int P : {2, 3, 5}) {
    const program base = shm_allreduce({P, 7, 2, true, false});
    CHECK(drop_redundant_waits(base) == base);
  }
}

TEST_CASE("drop_redundant_waits preserves verify and removes exactly the implied waits", "[ir][passes][waits]") {
  for (const auto& g : generated_cases()) {
    INFO(describe(g));
    const program q = drop_redundant_waits(shm_allreduce(g));
    CHECK(check(q) == "ok");
    // The extra waits repeat (value 1) or weaken (value -1 after 0) earlier
    // ones; every other wait is needed.
    gen plain = g;
    plain.extra_waits = false;
    CHECK(q == shm_allreduce(plain));
  }
}

// ---------------------------------------------------------------------- optimize

TEST_CASE("optimize applies every pass and preserves verify", "[ir][passes][optimize]") {
  for (const auto& g : generated_cases()) {
    INFO(describe(g));
    const program p = shm_allreduce(g);
    const program q = optimize(p);
    CHECK(check(q) == "ok");
    // Whatever the options, the pieces, round trips and extra waits go: what
    // is left is the forwarded one-piece program without extra waits.
    CHECK(q == forwarded({g.ranks, g.count, 1, false, false}));
    CHECK(optimize(q) == q);
  }
}

TEST_CASE("optimize merges what dropping a wait made adjacent", "[ir][passes][optimize]") {
  // The second wait repeats the first; without it the two copies are adjacent
  // and contiguous in recv and in rank 1's shm.
  CHECK(optimize(prog({{"wait r1.f0 >= 1", "copy recv+0 <- shm@1+0 x4", "wait r1.f0 >= 1", "copy recv+4 <- shm@1+4 x4"},
                       {"signal f0"}})) == prog({{"wait r1.f0 >= 1", "copy recv+0 <- shm@1+0 x8"}, {"signal f0"}}));
}

TEST_CASE("optimize keeps lowered schedules correct", "[ir][passes][optimize][lower]") {
  struct lowered {
    algo::schedule s;
    int ranks;
    std::vector<int> node_of;
    bool commutative;
  };
  const std::vector<lowered> cases = {
      {algo::schedule::recursive({-2, 2}), 2, {}, false},
      {algo::schedule::recursive({-2, -2, 2, 2}), 4, {}, false},
      {algo::schedule::recursive({2, 2}), 4, {}, false},
      {algo::schedule::recursive({-4, 4}), 4, {}, false},
      {algo::schedule::recursive({-2, 2, 2}), 4, {}, false},
      {algo::schedule::recursive({-2, -2, 2, 2}), 4, {0, 0, 1, 1}, false},
      {algo::schedule::recursive({-2, 2, 2, 2}), 8, {0, 0, 0, 0, 1, 1, 1, 1}, false},
      {algo::schedule::recursive({2, 2}, true), 6, {}, false},
      {algo::schedule::cyclic({2, 2}), 3, {}, true},
      {algo::schedule::cyclic({-2, -2, 2, 2}), 3, {}, true},
      {algo::schedule::ring(), 5, {}, true},
  };
  for (const auto& c : cases)
    for (std::size_t count : {1, 37}) {
      INFO(c.s.to_string() << " P=" << c.ranks << " count=" << count);
      const program p =
          algo::lower(c.s, {.coll = collective::allreduce, .ranks = c.ranks, .count = count, .node_of = c.node_of});
      const verify_options o{.commutative = c.commutative, .executions = 3};
      REQUIRE(verify(p, o).to_string() == "ok");
      for (const program& q : {merge_adjacent(p), receive_into_destination(p), drop_redundant_waits(p), optimize(p)}) {
        CHECK(verify(q, o).to_string() == "ok");
        CHECK(instructions(q) <= instructions(p));
      }
    }
}

// ---------------------------------------------------------------- pipeline_exchanges

namespace {

/// Two ranks on two nodes exchanging 64 elements and reducing what arrives
/// (recursive doubling between nodes), each line of rank 0 given; rank 1 mirrors.
program exchange(std::initializer_list<const char*> rank0, std::initializer_list<const char*> rank1) {
  program p = prog({rank0, rank1});
  p.node_of = {0, 1};
  return p;
}

/// The step the pass splits: 64 elements each way, then their reduction.
program large_exchange() {
  return exchange({"send ->r1 tag 1 send+0 x64", "recv <-r1 tag 1 scratch+0 x64", "fence",
                   "reduce recv+0 <- send+0, scratch+0 x64"},
                  {"send ->r0 tag 1 send+0 x64", "recv <-r0 tag 1 scratch+0 x64", "fence",
                   "reduce recv+0 <- scratch+0, send+0 x64"});
}

}  // namespace

TEST_CASE("pipeline_exchanges reduces each piece of a large exchange as it arrives", "[ir][passes][pipeline]") {
  const program p = large_exchange();
  REQUIRE(check(p) == "ok");
  // Pieces of 24: 24 + 24 + 16, all sent at once, each reduced once it is in,
  // the fence last (it still completes every send before the execution ends).
  const program q = pipeline_exchanges(p, 24);
  CHECK(q == exchange({"send ->r1 tag 1 send+0 x24", "send ->r1 tag 1 send+24 x24", "send ->r1 tag 1 send+48 x16",
                       "recv <-r1 tag 1 scratch+0 x24", "reduce recv+0 <- send+0, scratch+0 x24",
                       "recv <-r1 tag 1 scratch+24 x24", "reduce recv+24 <- send+24, scratch+24 x24",
                       "recv <-r1 tag 1 scratch+48 x16", "reduce recv+48 <- send+48, scratch+48 x16", "fence"},
                      {"send ->r0 tag 1 send+0 x24", "send ->r0 tag 1 send+24 x24", "send ->r0 tag 1 send+48 x16",
                       "recv <-r0 tag 1 scratch+0 x24", "reduce recv+0 <- scratch+0, send+0 x24",
                       "recv <-r0 tag 1 scratch+24 x24", "reduce recv+24 <- scratch+24, send+24 x24",
                       "recv <-r0 tag 1 scratch+48 x16", "reduce recv+48 <- scratch+48, send+48 x16", "fence"}));
  CHECK(check(q) == "ok");
  // In place a piece's reduction overwrites what a later piece's send may
  // still read: the engine must stage such a program, and is told so.
  CHECK(in_place_safe(p));
  CHECK_FALSE(in_place_safe(q));
  // Fewer than two pieces, an exchange below min_count, or no piece size:
  // nothing to pipeline.
  CHECK(pipeline_exchanges(p, 33) == p);
  CHECK(pipeline_exchanges(p, 24, 65) == p);
  CHECK(pipeline_exchanges(p, 24, 64) == q);
  CHECK(pipeline_exchanges(p, 0) == p);
  CHECK(pipeline_exchanges(q, 8) == q);  // already pieces: no step has the shape any more
  program one_node = p;                  // lowering sends messages between nodes only; one node is not scanned
  one_node.node_of.clear();
  CHECK(pipeline_exchanges(one_node, 24) == one_node);
}

TEST_CASE("pipeline_exchanges keeps `ahead` pieces in flight before the one it receives", "[ir][passes][pipeline]") {
  const program p = large_exchange();
  // One ahead: piece j + 1 leaves once piece j is in, before piece j's
  // reduction, so it travels while that reduction runs. (The engine sends
  // all at once: exchange_pieces_ahead, measured in docs/benchmarks.md.)
  const program one = pipeline_exchanges(p, 24, 0, 1);
  CHECK(one == exchange({"send ->r1 tag 1 send+0 x24", "recv <-r1 tag 1 scratch+0 x24", "send ->r1 tag 1 send+24 x24",
                         "reduce recv+0 <- send+0, scratch+0 x24", "recv <-r1 tag 1 scratch+24 x24",
                         "send ->r1 tag 1 send+48 x16", "reduce recv+24 <- send+24, scratch+24 x24",
                         "recv <-r1 tag 1 scratch+48 x16", "reduce recv+48 <- send+48, scratch+48 x16", "fence"},
                        {"send ->r0 tag 1 send+0 x24", "recv <-r0 tag 1 scratch+0 x24", "send ->r0 tag 1 send+24 x24",
                         "reduce recv+0 <- scratch+0, send+0 x24", "recv <-r0 tag 1 scratch+24 x24",
                         "send ->r0 tag 1 send+48 x16", "reduce recv+24 <- scratch+24, send+24 x24",
                         "recv <-r0 tag 1 scratch+48 x16", "reduce recv+48 <- scratch+48, send+48 x16", "fence"}));
  CHECK(check(one) == "ok");
  CHECK_FALSE(in_place_safe(one));
  // Two ahead: the first two pieces leave at once, the third after the first is in.
  const program two = pipeline_exchanges(p, 24, 0, 2);
  rank_program two_rank0;
  for (const char* line : {"send ->r1 tag 1 send+0 x24", "send ->r1 tag 1 send+24 x24", "recv <-r1 tag 1 scratch+0 x24",
                           "send ->r1 tag 1 send+48 x16", "reduce recv+0 <- send+0, scratch+0 x24",
                           "recv <-r1 tag 1 scratch+24 x24", "reduce recv+24 <- send+24, scratch+24 x24",
                           "recv <-r1 tag 1 scratch+48 x16", "reduce recv+48 <- send+48, scratch+48 x16", "fence"})
    two_rank0.push_back(parse_instruction(line, 0));
  CHECK(two.code[0] == two_rank0);
  CHECK(check(two) == "ok");
  // As many ahead as there are pieces, or more: all at once, as ahead = 0.
  CHECK(pipeline_exchanges(p, 24, 0, 3) == pipeline_exchanges(p, 24));
  CHECK(pipeline_exchanges(p, 24, 0, std::size_t(-1)) == pipeline_exchanges(p, 24));
}

TEST_CASE("pipeline_exchanges leaves steps it cannot reorder safely", "[ir][passes][pipeline]") {
  // The reduction writes the message's own source (scratch+0): run piece by
  // piece before the fence it would overwrite data still being sent.
  const program own_source =
      exchange({"send ->r1 tag 1 scratch+0 x64", "recv <-r1 tag 1 scratch+64 x64", "fence",
                "reduce scratch+0 <- scratch+0, scratch+64 x64", "copy recv+0 <- scratch+0 x64"},
               {"send ->r0 tag 1 scratch+0 x64", "recv <-r0 tag 1 scratch+64 x64", "fence",
                "reduce scratch+0 <- scratch+64, scratch+0 x64", "copy recv+0 <- scratch+0 x64"});
  CHECK(pipeline_exchanges(own_source, 16) == own_source);
  // That is not caution for its own sake: the same reordering by hand races.
  program by_hand = own_source;
  for (int r = 0; r < 2; ++r) {
    const std::string peer = r == 0 ? "r1" : "r0";
    auto& code = by_hand.code[static_cast<std::size_t>(r)];
    code.clear();
    for (int j = 0; j < 4; ++j)
      code.push_back(parse_instruction("send ->" + peer + " tag 1 scratch+" + std::to_string(16 * j) + " x16", r));
    for (int j = 0; j < 4; ++j) {
      const std::string at = std::to_string(16 * j), in = std::to_string(64 + 16 * j);
      code.push_back(parse_instruction("recv <-" + peer + " tag 1 scratch+" + in + " x16", r));
      code.push_back(parse_instruction(r == 0
                                           ? "reduce scratch+" + at + " <- scratch+" + at + ", scratch+" + in + " x16"
                                           : "reduce scratch+" + at + " <- scratch+" + in + ", scratch+" + at + " x16",
                                       r));
    }
    code.push_back(fence{});
    code.push_back(parse_instruction("copy recv+0 <- scratch+0 x64", r));
  }
  CHECK(check(by_hand) != "ok");
  // A partner whose step is not the mirror (it consumes the message through
  // a synchronisation) keeps both sides whole: the pieces must match.
  const program one_sided = exchange({"send ->r1 tag 1 send+0 x64", "recv <-r1 tag 1 scratch+0 x64", "fence",
                                      "reduce recv+0 <- send+0, scratch+0 x64"},
                                     {"send ->r0 tag 1 send+0 x64", "recv <-r0 tag 1 scratch+0 x64", "fence",
                                      "signal f0", "reduce recv+0 <- scratch+0, send+0 x64"});
  CHECK(pipeline_exchanges(one_sided, 16) == one_sided);
  // Rank 1's step receives rank 0's second message, not the one rank 0's
  // step sends (MPI matches the k-th send with the k-th receive): the steps
  // look alike but are not each other's mirror, and are left whole.
  const program crossed = exchange({"send ->r1 tag 1 send+0 x64", "recv <-r1 tag 1 scratch+0 x64", "fence",
                                    "reduce recv+0 <- send+0, scratch+0 x64", "send ->r1 tag 1 recv+0 x64"},
                                   {"recv <-r0 tag 1 scratch+64 x64", "send ->r0 tag 1 send+0 x64",
                                    "recv <-r0 tag 1 scratch+0 x64", "fence", "copy recv+0 <- scratch+0 x64"});
  REQUIRE(check(crossed) == "ok");
  CHECK(pipeline_exchanges(crossed, 16) == crossed);
}

TEST_CASE("alternating shm halves is race-free for every shared-memory schedule", "[ir][passes][alternate]") {
  // What the MPI engine runs for shared-memory programs (two executions with
  // shm halves swapped and cross-execution waits looking one execution
  // further back), proven by the verifier over 3 x 2 executions.
  int checked = 0;
  for (int P = 2; P <= 8; ++P)
    for (auto c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                   collective::bcast})
      for (bool commutative : {false, true})
        for (const auto& s : algo::all_schedules(c, P, commutative))
          for (std::size_t count : {std::size_t{1}, std::size_t(P + 3)}) {
            const program p = algo::lower(s, {.coll = c, .ranks = P, .count = count, .root = P - 1});
            const program two = alternate(p);
            CHECK(two.shm_count == 2 * p.shm_count);
            const auto r = verify(two, {.commutative = commutative, .executions = 3});
            INFO(s.to_string() << " " << to_string(c) << " P=" << P << " count=" << count);
            CHECK(r.to_string() == "ok");
            ++checked;
          }
  CHECK(checked > 500);
}

TEST_CASE("alternating without the relaxed waits is caught", "[ir][passes][alternate]") {
  // The same two executions with shm halves swapped but the first half's
  // cross-execution waits left alone would be safe but slow; looking two
  // executions back without swapping halves is a race the verifier reports.
  const program p =
      algo::lower(algo::schedule::recursive(factor_set{2}), {.coll = collective::allreduce, .ranks = 2, .count = 1});
  program racy = p;
  for (auto& code : racy.code)
    for (auto& ins : code)
      if (auto* w = std::get_if<wait>(&ins))
        w->value = alternating_wait_value(w->value, p.signals_per_execution(w->peer, w->flag));
  CHECK(verify(racy, {.commutative = true, .executions = 3}).to_string() != "ok");
  CHECK(verify(alternate(p), {.commutative = true, .executions = 3}).to_string() == "ok");
  CHECK(alternating_wait_value(1, 2) == 1);
  CHECK(alternating_wait_value(0, 2) == -2);
  CHECK_THROWS_AS(alternate(algo::lower(algo::schedule::recursive(factor_set{2}),
                                        {.coll = collective::allreduce, .ranks = 2, .count = 1, .node_of = {0, 1}})),
                  collc::error);
}
