// Tests for include/collc/ir/text.hpp: the documented text form, round trips
// (hand-made and random programs), strict rejection of malformed input with
// the line number, the one-line instruction printer and the Graphviz output.
#include <catch2/catch.hpp>
#include <collc/ir/text.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace collc;
using namespace collc::ir;

namespace {

ref at(buffer b, int owner, std::size_t offset) { return ref{b, owner, offset}; }

/// Every header field away from its default and every instruction kind,
/// including refs to another rank's private buffer and waits on earlier
/// executions.
program every_field() {
  program p;
  p.coll = collective::reduce_scatter;
  p.ranks = 3;
  p.count = 5;
  p.block_stride = 7;
  p.root = 2;
  p.commutative_only = true;
  p.shm_count = 40;
  p.scratch_count = 9;
  p.flags = 3;
  p.node_of = {0, 0, 1};
  p.name = "recexch {-2,2} \"quoted\"\\ tab\t nl\n bell\x07 utf8 \xc3\xa9";
  p.code = {
      {copy{at(buffer::shm, 0, 0), at(buffer::send, 0, 3), 5}, signal{2}, wait{1, 2, 1}, wait{1, 0, 0}, wait{1, 1, -3},
       reduce{at(buffer::recv, 0, 0), at(buffer::shm, 0, 0), at(buffer::shm, 1, 5), 5},
       send{2, at(buffer::recv, 0, 0), 5, 11}, recv{2, at(buffer::scratch, 0, 4), 5, 12}, fence{}},
      {copy{at(buffer::shm, 1, 5), at(buffer::send, 0, 1), 5}, signal{0}, signal{1}, signal{2}},
      {},
  };
  return p;
}

std::string text_of(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

/// The error parse_program throws for `text` (fails the test if none).
std::string parse_error_of(const std::string& text) {
  try {
    (void)parse_program(text);
  } catch (const collc::error& e) {
    CHECK(e.code() == errc::parse_error);
    return e.what();
  }
  FAIL("no error for:\n" << text);
  return {};
}

// A small valid program written by hand from the grammar in text.hpp; the
// malformed cases below each change one line of it.
const std::vector<std::string> valid_lines = {
    "collc-program 1",                         // 1
    "collective=allreduce",                    // 2
    "ranks=2",                                 // 3
    "count=4",                                 // 4
    "block_stride=0",                          // 5
    "root=0",                                  // 6
    "commutative_only=false",                  // 7
    "shm_count=4",                             // 8
    "scratch_count=4",                         // 9
    "flags=1",                                 // 10
    "node_of=[]",                              // 11
    "name=\"two ranks\"",                      // 12
    "rank 0:",                                 // 13
    "  copy shm@0+0 <- send+0 x4",             // 14
    "  signal f0",                             // 15
    "  wait r1.f0 >= 1",                       // 16
    "  reduce recv+0 <- shm@0+0, shm@1+0 x4",  // 17
    "rank 1:",                                 // 18
    "  copy shm@1+0 <- send+0 x4",             // 19
    "  signal f0",                             // 20
    "  wait r0.f0 >= 1",                       // 21
    "  reduce recv+0 <- shm@0+0, shm@1+0 x4",  // 22
    "end",                                     // 23
};

program valid_program() {
  program p;
  p.ranks = 2;
  p.count = 4;
  p.shm_count = 4;
  p.scratch_count = 4;
  p.flags = 1;
  p.name = "two ranks";
  for (int r = 0; r < 2; ++r)
    p.code.push_back({copy{at(buffer::shm, r, 0), at(buffer::send, r, 0), 4}, signal{0}, wait{1 - r, 0, 1},
                      reduce{at(buffer::recv, r, 0), at(buffer::shm, 0, 0), at(buffer::shm, 1, 0), 4}});
  return p;
}

/// valid_lines with line `n` (1-based) replaced by `line`.
std::string with_line(std::size_t n, const std::string& line) {
  auto l = valid_lines;
  l[n - 1] = line;
  return text_of(l);
}
std::string without_line(std::size_t n) {
  auto l = valid_lines;
  l.erase(l.begin() + static_cast<std::ptrdiff_t>(n - 1));
  return text_of(l);
}

}  // namespace

// Fails to compile when program gains or loses a field: the text form (and
// the round trip tests) must then learn about it.
[[maybe_unused]] void program_fields_guard(program& p) {
  auto& [coll, ranks, count, block_stride, root, commutative_only, shm_count, scratch_count, flags, node_of, code,
         name] = p;
  (void)coll, (void)ranks, (void)count, (void)block_stride, (void)root, (void)commutative_only, (void)shm_count,
      (void)scratch_count, (void)flags, (void)node_of, (void)code, (void)name;
}

TEST_CASE("to_text writes the documented format", "[ir][text]") {
  CHECK(to_text(valid_program()) == text_of(valid_lines));
  CHECK(parse_program(text_of(valid_lines)) == valid_program());
}

TEST_CASE("round trip keeps every header field and instruction kind", "[ir][text]") {
  const program p = every_field();
  const std::string t = to_text(p);
  const program q = parse_program(t);
  CHECK(q.coll == p.coll);
  CHECK(q.ranks == p.ranks);
  CHECK(q.count == p.count);
  CHECK(q.block_stride == p.block_stride);
  CHECK(q.root == p.root);
  CHECK(q.commutative_only == p.commutative_only);
  CHECK(q.shm_count == p.shm_count);
  CHECK(q.scratch_count == p.scratch_count);
  CHECK(q.flags == p.flags);
  CHECK(q.node_of == p.node_of);
  CHECK(q.name == p.name);
  CHECK(q.code == p.code);
  CHECK(q == p);
  CHECK(to_text(q) == t);
  // rank 1 copies from rank 0's send buffer: the owner must be written out.
  CHECK(t.find("copy shm@1+5 <- send@0+1 x5") != std::string::npos);
  // the name stays on one line
  CHECK(t.find("name=\"recexch {-2,2} \\\"quoted\\\"\\\\ tab\\t nl\\n bell\\x07 utf8 \xc3\xa9\"\n") !=
        std::string::npos);
}

TEST_CASE("every collective name round trips", "[ir][text]") {
  for (auto c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                 collective::bcast}) {
    program p = valid_program();
    p.coll = c;
    CHECK(parse_program(to_text(p)) == p);
  }
}

TEST_CASE("extreme numbers round trip", "[ir][text]") {
  program p = valid_program();
  p.count = std::numeric_limits<std::size_t>::max();
  p.shm_count = std::numeric_limits<std::size_t>::max();
  p.flags = std::numeric_limits<int>::max();
  p.code[0].push_back(wait{1, std::numeric_limits<int>::max() - 1, std::numeric_limits<std::int64_t>::min()});
  p.code[0].push_back(wait{1, 0, std::numeric_limits<std::int64_t>::max()});
  p.code[1].push_back(copy{at(buffer::scratch, 1, std::numeric_limits<std::size_t>::max()), at(buffer::recv, 1, 0), 0});
  p.code[1].push_back(send{0, at(buffer::recv, 1, 0), 1, std::numeric_limits<int>::max()});
  CHECK(parse_program(to_text(p)) == p);
}

TEST_CASE("random programs round trip", "[ir][text][property]") {
  std::mt19937_64 rng(20240611);
  auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
  auto size = [&]() -> std::size_t {
    switch (pick(3)) {
      case 0: return pick(10);
      case 1: return pick(1u << 20);
      default: return std::numeric_limits<std::size_t>::max() - pick(3);
    }
  };
  for (int trial = 0; trial < 300; ++trial) {
    program p;
    p.coll = static_cast<collective>(pick(5));
    p.ranks = static_cast<int>(1 + pick(6));
    p.count = size();
    p.block_stride = size();
    p.root = static_cast<int>(pick(static_cast<std::uint64_t>(p.ranks)));
    p.commutative_only = pick(2) == 1;
    p.shm_count = size();
    p.scratch_count = size();
    p.flags = static_cast<int>(1 + pick(4));
    if (pick(2) == 1)
      for (int r = 0; r < p.ranks; ++r) p.node_of.push_back(static_cast<int>(pick(3)));
    for (std::uint64_t n = pick(12); n-- > 0;) p.name += static_cast<char>(pick(256));
    auto rank = [&] { return static_cast<int>(pick(static_cast<std::uint64_t>(p.ranks))); };
    auto flag = [&] { return static_cast<int>(pick(static_cast<std::uint64_t>(p.flags))); };
    auto offset = [&]() -> std::size_t { return pick(4) == 0 ? pick(1u << 30) : pick(64); };
    auto any_ref = [&] { return ref{static_cast<buffer>(pick(4)), rank(), offset()}; };
    auto cnt = [&]() -> std::size_t { return pick(100); };
    p.code.resize(static_cast<std::size_t>(p.ranks));
    for (auto& code : p.code)
      for (std::uint64_t n = pick(15); n-- > 0;) {
        switch (pick(7)) {
          case 0: code.push_back(copy{any_ref(), any_ref(), cnt()}); break;
          case 1: code.push_back(reduce{any_ref(), any_ref(), any_ref(), cnt()}); break;
          case 2: code.push_back(signal{flag()}); break;
          case 3: code.push_back(wait{rank(), flag(), static_cast<std::int64_t>(pick(21)) - 10}); break;
          case 4: code.push_back(send{rank(), any_ref(), cnt(), static_cast<int>(pick(1000))}); break;
          case 5: code.push_back(recv{rank(), any_ref(), cnt(), static_cast<int>(pick(1000))}); break;
          default: code.push_back(fence{});
        }
      }
    const std::string t = to_text(p);
    const program q = parse_program(t);
    INFO(t);
    REQUIRE(q == p);
    REQUIRE(to_text(q) == t);
  }
}

TEST_CASE("blank lines, comments, indentation and CRLF are accepted", "[ir][text]") {
  std::string t = "# wisdom for host x\r\n\r\n";
  for (const auto& l : valid_lines) t += "\t " + l + "   \r\n# comment\r\n\n";
  CHECK(parse_program(t) == valid_program());
  // extra blanks between tokens; explicit owners for the rank's own buffers
  CHECK(parse_program(with_line(14, "copy    shm@0+0\t<-  send@0+0   x4")) == valid_program());
}

TEST_CASE("malformed input is a parse_error naming the line and token", "[ir][text][parse]") {
  struct bad {
    std::string text;
    std::string line;   // "line N"
    std::string token;  // must appear in the message
  };
  const std::size_t last = valid_lines.size();
  const std::vector<bad> cases = {
      {"", "line 1", "empty input"},
      {"# only a comment\n", "line 2", "empty input"},
      {with_line(1, "collc-program 2"), "line 1", "'2'"},
      {with_line(1, "collc-program 1 extra"), "line 1", "'extra'"},
      {with_line(1, "collc-prog 1"), "line 1", "collc-prog 1"},
      {with_line(2, "collective=allgatherv"), "line 2", "'allgatherv'"},
      {with_line(3, "ranks=0"), "line 3", "'0'"},
      {with_line(3, "ranks=2147483648"), "line 3", "'2147483648'"},
      {with_line(4, "count=18446744073709551616"), "line 4", "'18446744073709551616'"},
      {with_line(4, "count=-1"), "line 4", "'-1'"},
      {with_line(4, "count=+1"), "line 4", "'+1'"},
      {with_line(4, "count=4x"), "line 4", "'4x'"},
      {with_line(4, "count=4 5"), "line 4", "'4 5'"},
      {with_line(4, "count="), "line 4", "count"},
      {with_line(6, "root=2"), "line 13", "root 2"},
      {with_line(7, "commutative_only=yes"), "line 7", "'yes'"},
      {with_line(10, "flags=-1"), "line 10", "'-1'"},
      {with_line(11, "node_of=[0,1,2]"), "line 13", "node_of has 3"},
      {with_line(11, "node_of=[0,]"), "line 11", "[0,]"},
      {with_line(11, "node_of=[0,-1]"), "line 11", "'-1'"},
      {with_line(11, "node_of=0,1"), "line 11", "'0,1'"},
      {with_line(12, "name=\"two ranks"), "line 12", "unterminated"},
      {with_line(12, "name=\"two\" ranks\""), "line 12", "' ranks\"'"},
      {with_line(12, "name=two ranks"), "line 12", "'two ranks'"},
      {with_line(12, "name=\"a\\qb\""), "line 12", "\\q"},
      {with_line(12, "name=\"a\\x4\""), "line 12", "escape"},
      {with_line(5, "colour=red"), "line 5", "'colour'"},
      {with_line(5, "count=4"), "line 5", "duplicate header field 'count'"},
      {with_line(5, "block_stride"), "line 5", "'block_stride'"},
      {without_line(4), "line 12", "missing header field 'count'"},
      {without_line(12), "line 12", "missing header field 'name'"},
      {with_line(13, "rank 1:"), "line 13", "'rank 1:'"},
      {with_line(13, "rank 0"), "line 13", "'rank 0'"},
      {with_line(18, "rank 2:"), "line 18", "'rank 2:'"},
      {with_line(18, "rank 0:"), "line 18", "'rank 0:'"},
      {with_line(18, "fence"), "line 23", "missing section 'rank 1:'"},
      {with_line(14, "cpy shm@0+0 <- send+0 x4"), "line 14", "'cpy'"},
      {with_line(14, "copy shm@0+0 <- send+0"), "line 14", "missing operand"},
      {with_line(14, "copy shm@0+0 <- send+0 x4 x4"), "line 14", "trailing garbage 'x4'"},
      {with_line(14, "copy shm@0+0 -> send+0 x4"), "line 14", "'->'"},
      {with_line(14, "copy shm@0+0 <- send+0 4"), "line 14", "'4'"},
      {with_line(14, "copy shm@0+0 <- send+0 x-4"), "line 14", "'-4'"},
      {with_line(14, "copy shm@0+0 <- send+0 x18446744073709551616"), "line 14", "'18446744073709551616'"},
      {with_line(14, "copy shm@0+18446744073709551615 <- send+0 x4"), "line 14", "out of range"},
      {with_line(14, "copy shmem@0+0 <- send+0 x4"), "line 14", "'shmem'"},
      {with_line(14, "copy shm@2+0 <- send+0 x4"), "line 14", "'2'"},
      {with_line(14, "copy shm@0 <- send+0 x4"), "line 14", "'shm@0'"},
      {with_line(14, "copy shm@0+-1 <- send+0 x4"), "line 14", "'-1'"},
      {with_line(15, "signal f1"), "line 15", "'1'"},
      {with_line(15, "signal 0"), "line 15", "'0'"},
      {with_line(15, "signal f0 f0"), "line 15", "trailing garbage 'f0'"},
      {with_line(16, "wait r2.f0 >= 1"), "line 16", "'2'"},
      {with_line(16, "wait r1.f0 > 1"), "line 16", "'>'"},
      {with_line(16, "wait r1 >= 1"), "line 16", "'r1'"},
      {with_line(16, "wait r1.f0 >= 9223372036854775808"), "line 16", "'9223372036854775808'"},
      {with_line(16, "wait r1.f0 >= one"), "line 16", "'one'"},
      {with_line(17, "reduce recv+0 <- shm@0+0 shm@1+0 x4"), "line 17", "','"},
      {with_line(17, "send ->r1 tag -2 recv+0 x4"), "line 17", "'-2'"},
      {with_line(17, "send r1 tag 2 recv+0 x4"), "line 17", "'r1'"},
      {with_line(17, "recv <-r1 tg 2 recv+0 x4"), "line 17", "'tg'"},
      {with_line(17, "recv <-r1 tag 2 recv+0 x4 fence"), "line 17", "'fence'"},
      {with_line(17, "fence now"), "line 17", "'now'"},
      {with_line(last, "end of it"), "line 23", "'of'"},
      {with_line(last, "rank 2:"), "line 23", "'rank 2:'"},
      {without_line(last), "line 23", "expected 'end'"},
      {text_of(valid_lines) + "\nend\n", "line 25", "'end'"},
      {text_of(valid_lines) + "copy shm@0+0 <- send+0 x4\n", "line 24", "trailing garbage"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    const std::string msg = parse_error_of(c.text);
    INFO(msg);
    CHECK(msg.find(c.line + ":") != std::string::npos);
    CHECK(msg.find(c.token) != std::string::npos);
  }
}

TEST_CASE("to_text refuses programs whose shape it cannot write", "[ir][text]") {
  program p = valid_program();
  p.ranks = 3;
  CHECK_THROWS_WITH(to_text(p), Catch::Matchers::Contains("ranks=3 but 2 rank programs"));
  p = valid_program();
  p.node_of = {0};
  CHECK_THROWS_WITH(to_text(p), Catch::Matchers::Contains("node_of has 1 entries"));
}

TEST_CASE("instructions print as one readable line", "[ir][text]") {
  const instruction red = reduce{at(buffer::shm, 3, 16), at(buffer::shm, 1, 16), at(buffer::send, 3, 16), 8};
  CHECK(to_string(red, 3) == "reduce shm@3+16 <- shm@1+16, send+16 x8");
  CHECK(to_string(red) == "reduce shm@3+16 <- shm@1+16, send@3+16 x8");
  CHECK(to_string(instruction{wait{5, 0, 3}}) == "wait r5.f0 >= 3");
  CHECK(to_string(instruction{wait{5, 0, -2}}) == "wait r5.f0 >= -2");
  CHECK(to_string(instruction{signal{0}}) == "signal f0");
  CHECK(to_string(instruction{send{4, at(buffer::shm, 0, 0), 16, 2}}, 0) == "send ->r4 tag 2 shm@0+0 x16");
  CHECK(to_string(instruction{recv{4, at(buffer::scratch, 1, 0), 16, 2}}, 1) == "recv <-r4 tag 2 scratch+0 x16");
  CHECK(to_string(instruction{copy{at(buffer::recv, 0, 0), at(buffer::shm, 2, 8), 8}}, 0) ==
        "copy recv+0 <- shm@2+8 x8");
  CHECK(to_string(instruction{fence{}}) == "fence");
  CHECK(to_string(at(buffer::shm, 3, 16)) == "shm@3+16");
  CHECK(to_string(at(buffer::recv, 2, 4), 2) == "recv+4");
  CHECK(to_string(at(buffer::recv, 2, 4), 1) == "recv@2+4");

  std::ostringstream os;
  os << red << " | " << at(buffer::scratch, 1, 2) << " | " << copy{at(buffer::recv, 0, 0), at(buffer::shm, 2, 8), 8};
  CHECK(os.str() == "reduce shm@3+16 <- shm@1+16, send@3+16 x8 | scratch@1+2 | copy recv@0+0 <- shm@2+8 x8");
}

TEST_CASE("parse_instruction reads one line relative to a rank", "[ir][text]") {
  CHECK(parse_instruction("wait r1.f0 >= 2", 0) == instruction{wait{1, 0, 2}});
  CHECK(parse_instruction("copy recv+0 <- shm@2+8 x8", 5) ==
        instruction{copy{at(buffer::recv, 5, 0), at(buffer::shm, 2, 8), 8}});
  CHECK(parse_instruction("copy scratch+1 <- shm+0 x1", 3) ==
        instruction{copy{at(buffer::scratch, 3, 1), at(buffer::shm, 3, 0), 1}});
  CHECK_THROWS_WITH(parse_instruction("wiat r1.f0 >= 2", 0), Catch::Matchers::Contains("'wiat'"));
  const program p = every_field();
  for (const auto& ins : p.code[0]) CHECK(parse_instruction(to_string(ins, 0), 0) == ins);
}

namespace {

/// Minimal reader of the dot subset to_dot writes: node statements
/// `name [...]`, edge statements `a -> b [...]`, clusters.
struct dot_graph {
  std::set<std::string> nodes;
  std::set<std::pair<std::string, std::string>> edges;
  std::set<std::string> clusters;
};

dot_graph read_dot(const std::string& dot) {
  dot_graph g;
  // braces balance outside quoted strings
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < dot.size(); ++i) {
    char c = dot[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{') ++depth;
    if (c == '}') {
      --depth;
      REQUIRE(depth >= 0);
    }
  }
  REQUIRE(!in_string);
  REQUIRE(depth == 0);
  std::istringstream in(dot);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, arrow, b;
    ls >> a >> arrow;
    if (a == "subgraph") g.clusters.insert(arrow);
    if (arrow == "->") {
      ls >> b;
      g.edges.insert({a, b});
    } else if (arrow.starts_with("[label") && a != "node") {
      g.nodes.insert(a);
    }
  }
  return g;
}

}  // namespace

TEST_CASE("to_dot is a digraph with a cluster per rank and the data flow edges", "[ir][text][dot]") {
  program p = every_field();
  // rank 2 sends what rank 0 receives (tag 12) and receives rank 0's tag 11 message
  p.code[2] = {recv{0, at(buffer::recv, 2, 0), 5, 11}, send{0, at(buffer::send, 2, 0), 5, 12}};
  const std::string dot = to_dot(p);
  REQUIRE(dot.starts_with("digraph "));
  const dot_graph g = read_dot(dot);
  CHECK(g.clusters == std::set<std::string>{"cluster_r0", "cluster_r1", "cluster_r2"});
  for (const auto& [a, b] : g.edges) {
    CHECK(g.nodes.count(a) == 1);
    CHECK(g.nodes.count(b) == 1);
  }
  // Hand-derived from every_field(): rank 1's signals f0, f1, f2 are its
  // instructions 1, 2, 3; rank 0 waits on them at 2 (f2 >= 1), 3 (f0 >= 0:
  // the previous execution's only f0 signal) and 4 (f1 >= -3: four
  // executions back, same signal).
  CHECK(g.edges.count({"r1_3", "r0_2"}) == 1);
  CHECK(g.edges.count({"r1_1", "r0_3"}) == 1);
  CHECK(g.edges.count({"r1_2", "r0_4"}) == 1);
  CHECK(dot.find("r1_2 -> r0_4 [color=blue, style=dashed, label=\"exec-4\"]") != std::string::npos);
  // send -> recv: rank 0's instruction 6 (tag 11) to rank 2's 0; rank 2's 1 (tag 12) to rank 0's 7
  CHECK(g.edges.count({"r0_6", "r2_0"}) == 1);
  CHECK(g.edges.count({"r2_1", "r0_7"}) == 1);
  // shm: rank 0's reduce (5) reads shm@1+5, which rank 1's copy (0) wrote
  CHECK(g.edges.count({"r1_0", "r0_5"}) == 1);
  // program order inside a rank
  CHECK(g.edges.count({"r0_0", "r0_1"}) == 1);
  // every instruction is a node
  CHECK(g.nodes.size() == p.code[0].size() + p.code[1].size() + p.code[2].size());
}

TEST_CASE("to_dot shows ranks with empty programs", "[ir][text][dot]") {
  program p;
  p.ranks = 2;
  p.code.resize(2);
  const dot_graph g = read_dot(to_dot(p));
  CHECK(g.clusters.size() == 2);
  CHECK(g.nodes.size() == 2);
}

TEST_CASE("to_dot of parsed text with extreme wait values", "[ir][text][dot]") {
  // Parsed text may hold any int64 wait value. Counting executions back from
  // one near INT64_MIN overflowed (s - value) and indexed past the signals.
  constexpr auto lo = std::numeric_limits<std::int64_t>::min();
  auto l = valid_lines;
  l[20] = "  signal f0";  // rank 1 signals f0 three times: instructions 1, 2, 3
  l.insert(l.begin() + 21, "  signal f0");
  l.insert(l.begin() + 16, {"  wait r1.f0 >= -9223372036854775808", "  wait r1.f0 >= -9223372036854775807",
                            "  wait r1.f0 >= -9223372036854775806", "  wait r1.f0 >= 9223372036854775807",
                            "  wait r1.f0 >= 0", "  wait r1.f0 >= -2"});
  const program p = parse_program(text_of(l));
  REQUIRE(std::get<wait>(p.code[0][3]).value == lo);
  const std::string dot = to_dot(p);
  const dot_graph g = read_dot(dot);
  // 2^63 = 3 * 3074457345618258602 + 2: INT64_MIN is 3074457345618258603
  // executions of three signals back from the first signal (instruction 1).
  CHECK(dot.find("r1_1 -> r0_3 [color=blue, style=dashed, label=\"exec-3074457345618258603\"]") != std::string::npos);
  CHECK(dot.find("r1_2 -> r0_4 [color=blue, style=dashed, label=\"exec-3074457345618258603\"]") != std::string::npos);
  CHECK(dot.find("r1_3 -> r0_5 [color=blue, style=dashed, label=\"exec-3074457345618258603\"]") != std::string::npos);
  CHECK(g.edges.count({"r1_1", "r0_6"}) == 0);  // INT64_MAX: never satisfied, no source
  CHECK(dot.find("r1_3 -> r0_7 [color=blue, style=dashed, label=\"exec-1\"]") != std::string::npos);
  CHECK(dot.find("r1_1 -> r0_8 [color=blue, style=dashed, label=\"exec-1\"]") != std::string::npos);
  for (const auto& [a, b] : g.edges) {
    CHECK(g.nodes.count(a) == 1);
    CHECK(g.nodes.count(b) == 1);
  }
}
