#pragma once
/// \file
/// The text form of a program: what the tools print and what wisdom files
/// store. It is line based, versioned and strict, so a truncated or edited
/// file is rejected with the line number instead of running a wrong plan.
///
///     collc-program 1                      <- format version (text_version)
///     collective=allreduce                 <- header: every field exactly once,
///     ranks=2                                 any order, `key=value`
///     count=8
///     block_stride=0
///     root=0
///     commutative_only=false
///     shm_count=8
///     scratch_count=0
///     flags=1
///     node_of=[]                           <- [] or one node id per rank: [0,0,1,1]
///     name="shm allreduce"                 <- quoted; \\ \" \n \r \t \xHH escapes
///     rank 0:                              <- sections rank 0 .. ranks-1, in order
///       copy shm@0+0 <- send+0 x8
///       signal f0
///       wait r1.f0 >= 1
///       reduce recv+0 <- shm@0+0, shm@1+0 x8
///     rank 1:
///       ...
///     end                                  <- required: detects truncation
///
/// Instructions (one per line, tokens separated by blanks):
///     copy DST <- SRC xN            reduce DST <- A, B xN
///     signal fF                     wait rP.fF >= V          (V may be <= 0)
///     send ->rP tag T SRC xN        recv <-rP tag T DST xN
///     fence
/// A ref is `buf+offset` for the executing rank's own send/recv/scratch and
/// `buf@owner+offset` otherwise; shm refs always name their owner. The parser
/// accepts both spellings for every buffer. Blank lines and lines starting
/// with `#` are ignored.
///
/// parse_program checks syntax and structure only: numbers fit their fields,
/// counts are not negative, ranks/peers/owners lie in [0, ranks), flags in
/// [0, flags), node_of has one entry per rank. Buffer capacities, matching
/// and ordering are collc::ir::verify's job.
#include <collc/error.hpp>
#include <collc/ir/program.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir {

/// Format version written by to_text and the only one parse_program reads.
inline constexpr int text_version = 1;

namespace detail::text_form {

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

/// `rank` < 0 means "no executing rank known": every owner is printed.
inline void append_ref(std::string& out, const ref& r, int rank) {
  out += to_string(r.buf);
  if (rank < 0 || r.buf == buffer::shm || r.owner != rank) {
    out += '@';
    out += std::to_string(r.owner);
  }
  out += '+';
  out += std::to_string(r.offset);
}

inline void append_instruction(std::string& out, const instruction& ins, int rank) {
  auto count = [&](std::size_t n) {
    out += " x";
    out += std::to_string(n);
  };
  std::visit(overloaded{
                 [&](const copy& c) {
                   out += "copy ";
                   append_ref(out, c.dst, rank);
                   out += " <- ";
                   append_ref(out, c.src, rank);
                   count(c.count);
                 },
                 [&](const reduce& r) {
                   out += "reduce ";
                   append_ref(out, r.dst, rank);
                   out += " <- ";
                   append_ref(out, r.a, rank);
                   out += ", ";
                   append_ref(out, r.b, rank);
                   count(r.count);
                 },
                 [&](const signal& s) { out += "signal f" + std::to_string(s.flag); },
                 [&](const wait& w) {
                   out += "wait r" + std::to_string(w.peer) + ".f" + std::to_string(w.flag) +
                          " >= " + std::to_string(w.value);
                 },
                 [&](const send& s) {
                   out += "send ->r" + std::to_string(s.peer) + " tag " + std::to_string(s.tag) + ' ';
                   append_ref(out, s.src, rank);
                   count(s.count);
                 },
                 [&](const recv& r) {
                   out += "recv <-r" + std::to_string(r.peer) + " tag " + std::to_string(r.tag) + ' ';
                   append_ref(out, r.dst, rank);
                   count(r.count);
                 },
                 [&](const fence&) { out += "fence"; },
             },
             ins);
}

/// C-like escapes; bytes >= 0x80 pass through so UTF-8 names stay readable.
inline std::string quote(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += "\\x";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + '"';
}

/// Writes the text form without consistency checks (used by operator<<, which
/// must print whatever it is given, e.g. in a failing test).
inline void write_text(std::string& out, const program& p) {
  out += "collc-program " + std::to_string(text_version) + '\n';
  out += "collective=";
  out += to_string(p.coll);
  out += "\nranks=" + std::to_string(p.ranks);
  out += "\ncount=" + std::to_string(p.count);
  out += "\nblock_stride=" + std::to_string(p.block_stride);
  out += "\nroot=" + std::to_string(p.root);
  out += p.commutative_only ? "\ncommutative_only=true" : "\ncommutative_only=false";
  out += "\nshm_count=" + std::to_string(p.shm_count);
  out += "\nscratch_count=" + std::to_string(p.scratch_count);
  out += "\nflags=" + std::to_string(p.flags);
  out += "\nnode_of=[";
  for (std::size_t i = 0; i < p.node_of.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(p.node_of[i]);
  }
  out += "]\nname=" + quote(p.name) + '\n';
  for (std::size_t r = 0; r < p.code.size(); ++r) {
    out += "rank " + std::to_string(r) + ":\n";
    for (const auto& ins : p.code[r]) {
      out += "  ";
      append_instruction(out, ins, static_cast<int>(r));
      out += '\n';
    }
  }
  out += "end\n";
}

/// Parses the fields of one line and reports errors with its line number.
class line_parser {
 public:
  line_parser(std::string_view where, int line_no, std::string_view line)
      : where_(where), line_no_(line_no), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const {
    std::string msg(where_);
    if (line_no_ > 0) msg += ": line " + std::to_string(line_no_);
    msg += ": " + what;
    throw error(errc::parse_error, msg);
  }

  static std::string quoted(std::string_view tok) { return "'" + std::string(tok) + "'"; }

  /// Whitespace separated tokens of the line.
  [[nodiscard]] std::vector<std::string_view> tokens() const {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line_.size()) {
      while (i < line_.size() && is_blank(line_[i])) ++i;
      std::size_t j = i;
      while (j < line_.size() && !is_blank(line_[j])) ++j;
      if (j > i) out.push_back(line_.substr(i, j - i));
      i = j;
    }
    return out;
  }

  static constexpr bool is_blank(char c) { return c == ' ' || c == '\t'; }

  /// A decimal number that must fit T; unsigned fields reject a sign.
  template <class T>
  T number(std::string_view tok, std::string_view field) const {
    if (tok.empty()) fail("missing " + std::string(field));
    if (tok[0] == '+' || (std::is_unsigned_v<T> && tok[0] == '-'))
      fail(std::string(field) + " must be a non-negative decimal number, got " + quoted(tok));
    T v{};
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec == std::errc::result_out_of_range) fail(std::string(field) + " " + quoted(tok) + " is out of range");
    if (ec != std::errc{} || end != tok.data() + tok.size())
      fail("expected a number for " + std::string(field) + ", got " + quoted(tok));
    return v;
  }

  /// No upper bound beyond what an int holds.
  static constexpr std::int64_t any_int = std::int64_t{std::numeric_limits<int>::max()} + 1;

  /// An int in [lo, hi).
  int index(std::string_view tok, std::string_view field, std::int64_t lo, std::int64_t hi) const {
    int v = number<int>(tok, field);
    if (v < lo || v >= hi)
      fail(std::string(field) + " " + quoted(tok) + " is out of range [" + std::to_string(lo) + ", " +
           std::to_string(hi) + ")");
    return v;
  }

  /// `tok` must start with `prefix`; returns the rest.
  std::string_view after(std::string_view tok, std::string_view prefix, std::string_view field) const {
    if (!tok.starts_with(prefix))
      fail("expected " + std::string(field) + " of the form '" + std::string(prefix) + "...', got " + quoted(tok));
    return tok.substr(prefix.size());
  }

  ref parse_ref(std::string_view tok, int rank, std::int64_t ranks) const {
    auto plus = tok.find('+');
    if (plus == std::string_view::npos) fail("expected a buffer reference like 'shm@1+0', got " + quoted(tok));
    std::string_view head = tok.substr(0, plus);
    ref r;
    r.owner = rank;
    auto at = head.find('@');
    std::string_view name = head.substr(0, at);
    if (name == "send") {
      r.buf = buffer::send;
    } else if (name == "recv") {
      r.buf = buffer::recv;
    } else if (name == "shm") {
      r.buf = buffer::shm;
    } else if (name == "scratch") {
      r.buf = buffer::scratch;
    } else {
      fail("unknown buffer " + quoted(name) + " in " + quoted(tok));
    }
    if (at != std::string_view::npos) r.owner = index(head.substr(at + 1), "owner", 0, ranks);
    r.offset = number<std::size_t>(tok.substr(plus + 1), "offset");
    return r;
  }

  std::size_t parse_count(std::string_view tok) const { return number<std::size_t>(after(tok, "x", "count"), "count"); }

  /// One instruction line. `ranks`/`flags` bound peers, owners and flags.
  instruction parse_instruction(int rank, std::int64_t ranks, std::int64_t flags) const {
    auto t = tokens();
    if (t.empty()) fail("missing instruction");
    auto need = [&](std::size_t n) {
      if (t.size() < n) fail("missing operand after " + quoted(t.back()) + " in " + quoted(line_));
      if (t.size() > n) fail("trailing garbage " + quoted(t[n]) + " in " + quoted(line_));
    };
    auto arrow = [&](std::string_view tok) {
      if (tok != "<-") fail("expected '<-', got " + quoted(tok));
    };
    auto checked = [&](const ref& at, std::size_t n) {
      if (n > std::numeric_limits<std::size_t>::max() - at.offset)
        fail("range " + std::to_string(at.offset) + "+" + std::to_string(n) + " is out of range in " + quoted(line_));
    };
    std::string_view op = t[0];
    if (op == "copy") {
      need(5);
      copy c;
      c.dst = parse_ref(t[1], rank, ranks);
      arrow(t[2]);
      c.src = parse_ref(t[3], rank, ranks);
      c.count = parse_count(t[4]);
      checked(c.dst, c.count);
      checked(c.src, c.count);
      return c;
    }
    if (op == "reduce") {
      need(6);
      reduce r;
      r.dst = parse_ref(t[1], rank, ranks);
      arrow(t[2]);
      if (!t[3].ends_with(',')) fail("expected ',' after the first operand " + quoted(t[3]));
      r.a = parse_ref(t[3].substr(0, t[3].size() - 1), rank, ranks);
      r.b = parse_ref(t[4], rank, ranks);
      r.count = parse_count(t[5]);
      checked(r.dst, r.count);
      checked(r.a, r.count);
      checked(r.b, r.count);
      return r;
    }
    if (op == "signal") {
      need(2);
      return signal{index(after(t[1], "f", "flag"), "flag", 0, flags)};
    }
    if (op == "wait") {
      need(4);
      std::string_view target = after(t[1], "r", "wait target 'rP.fF'");
      auto dot = target.find(".f");
      if (dot == std::string_view::npos) fail("expected wait target 'rP.fF', got " + quoted(t[1]));
      wait w;
      w.peer = index(target.substr(0, dot), "peer", 0, ranks);
      w.flag = index(target.substr(dot + 2), "flag", 0, flags);
      if (t[2] != ">=") fail("expected '>=', got " + quoted(t[2]));
      w.value = number<std::int64_t>(t[3], "wait value");
      return w;
    }
    if (op == "send" || op == "recv") {
      need(6);
      int peer = index(after(t[1], op == "send" ? "->r" : "<-r", "peer"), "peer", 0, ranks);
      if (t[2] != "tag") fail("expected 'tag', got " + quoted(t[2]));
      int tag = index(t[3], "tag", 0, any_int);
      ref at = parse_ref(t[4], rank, ranks);
      std::size_t n = parse_count(t[5]);
      checked(at, n);
      if (op == "send") return send{peer, at, n, tag};
      return recv{peer, at, n, tag};
    }
    if (op == "fence") {
      need(1);
      return fence{};
    }
    fail("unknown opcode " + quoted(op));
  }

  std::string unquote(std::string_view v) const {
    if (v.size() < 2 || v.front() != '"') fail("expected a quoted string, got " + quoted(v));
    std::string out;
    std::size_t i = 1;
    for (; i < v.size() && v[i] != '"'; ++i) {
      if (v[i] != '\\') {
        out += v[i];
        continue;
      }
      if (++i == v.size()) break;
      switch (v[i]) {
        case '\\': out += '\\'; break;
        case '"': out += '"'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'x': {
          auto digit = [&](std::size_t k) -> int {
            if (k >= v.size()) fail("incomplete escape in " + quoted(v));
            char c = v[k];
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            fail("bad hex escape in " + quoted(v));
          };
          out += static_cast<char>(digit(i + 1) * 16 + digit(i + 2));
          i += 2;
          break;
        }
        default: fail("unknown escape '\\" + std::string(1, v[i]) + "' in " + quoted(v));
      }
    }
    if (i >= v.size()) fail("unterminated string " + quoted(v));
    if (i + 1 != v.size()) fail("trailing garbage " + quoted(v.substr(i + 1)) + " after the string");
    return out;
  }

 private:
  std::string_view where_;
  int line_no_;
  std::string_view line_;
};

}  // namespace detail::text_form

/// One readable line, every owner spelled out.
/// Example: to_string(instruction{copy{{buffer::recv, 0, 0}, {buffer::shm, 2, 8}, 8}}) == "copy recv@0+0 <- shm@2+8 x8"
inline std::string to_string(const instruction& ins) {
  std::string out;
  detail::text_form::append_instruction(out, ins, -1);
  return out;
}

/// As executed by `rank`: its own send/recv/scratch are written without owner.
/// Example: to_string(instruction{copy{{buffer::recv, 0, 0}, {buffer::shm, 2, 8}, 8}}, 0) == "copy recv+0 <- shm@2+8
/// x8"
inline std::string to_string(const instruction& ins, int rank) {
  std::string out;
  detail::text_form::append_instruction(out, ins, rank);
  return out;
}

/// Example: to_string(ref{buffer::shm, 3, 16}) == "shm@3+16"
inline std::string to_string(const ref& r) {
  std::string out;
  detail::text_form::append_ref(out, r, -1);
  return out;
}

/// Example: to_string(ref{buffer::send, 2, 4}, 2) == "send+4"
inline std::string to_string(const ref& r, int rank) {
  std::string out;
  detail::text_form::append_ref(out, r, rank);
  return out;
}

inline std::ostream& operator<<(std::ostream& os, const ref& r) { return os << to_string(r); }
inline std::ostream& operator<<(std::ostream& os, const instruction& ins) { return os << to_string(ins); }

/// The full text form (see the file comment); parse_program(to_text(p)) == p.
/// Throws collc::error(errc::invalid_argument) if p.code does not hold
/// p.ranks programs or node_of is neither empty nor one entry per rank.
/// Example: std::ofstream("plan.wisdom") << collc::ir::to_text(p);
inline std::string to_text(const program& p) {
  if (p.ranks < 1 || p.code.size() != static_cast<std::size_t>(p.ranks))
    throw error(errc::invalid_argument, "to_text: program has ranks=" + std::to_string(p.ranks) + " but " +
                                            std::to_string(p.code.size()) + " rank programs");
  if (!p.node_of.empty() && p.node_of.size() != p.code.size())
    throw error(errc::invalid_argument, "to_text: node_of has " + std::to_string(p.node_of.size()) +
                                            " entries for ranks=" + std::to_string(p.ranks));
  std::string out;
  detail::text_form::write_text(out, p);
  return out;
}

/// Prints the text form as is (no checks), e.g. for test failure messages.
inline std::ostream& operator<<(std::ostream& os, const program& p) {
  std::string out;
  detail::text_form::write_text(out, p);
  return os << out;
}

/// One instruction in the syntax of the file comment, as executed by `rank`
/// (refs without `@owner` belong to `rank`). Peers, owners and flags need only
/// be non-negative here. Throws collc::error(errc::parse_error).
/// Example: parse_instruction("wait r1.f0 >= 2", 0) == instruction{wait{1, 0, 2}}
inline instruction parse_instruction(std::string_view line, int rank) {
  using detail::text_form::line_parser;
  return line_parser("parse_instruction", 0, line).parse_instruction(rank, line_parser::any_int, line_parser::any_int);
}

/// Reads the text form written by to_text. Throws collc::error(errc::parse_error)
/// naming the line number and the offending token on any deviation: unknown
/// version, field or opcode, missing or duplicate field, numbers that overflow
/// their field or are negative where a count is expected, rank sections out of
/// order or missing, a missing `end`, trailing garbage.
/// Example: auto p = collc::ir::parse_program(read_file("plan.wisdom"));
inline program parse_program(std::string_view text) {
  constexpr std::string_view where = "parse_program";
  enum class state { version, header, ranks, done } st = state::version;
  static constexpr std::string_view keys[] = {
      "collective", "ranks",         "count", "block_stride", "root", "commutative_only",
      "shm_count",  "scratch_count", "flags", "node_of",      "name"};
  constexpr std::size_t nkeys = std::size(keys);
  bool seen[nkeys] = {};
  program p;
  p.code.clear();
  int line_no = 0;
  int last_line = 0;

  auto finish_header = [&](const detail::text_form::line_parser& lp) {
    for (std::size_t k = 0; k < nkeys; ++k)
      if (!seen[k]) lp.fail("missing header field '" + std::string(keys[k]) + "'");
    if (!p.node_of.empty() && p.node_of.size() != static_cast<std::size_t>(p.ranks))
      lp.fail("node_of has " + std::to_string(p.node_of.size()) + " entries but ranks=" + std::to_string(p.ranks));
    if (p.root >= p.ranks)
      lp.fail("root " + std::to_string(p.root) + " is out of range [0, " + std::to_string(p.ranks) + ")");
  };

  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    last_line = ++line_no;
    while (!line.empty() && (line.back() == '\r' || detail::text_form::line_parser::is_blank(line.back())))
      line.remove_suffix(1);
    while (!line.empty() && detail::text_form::line_parser::is_blank(line.front())) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    detail::text_form::line_parser lp(where, line_no, line);
    auto t = lp.tokens();
    using lpt = detail::text_form::line_parser;

    switch (st) {
      case state::version: {
        if (t[0] != "collc-program" || t.size() < 2)
          lp.fail("expected 'collc-program " + std::to_string(text_version) + "', got " + lpt::quoted(line));
        if (t.size() > 2) lp.fail("trailing garbage " + lpt::quoted(t[2]));
        if (t[1] != std::to_string(text_version))
          lp.fail("unsupported format version " + lpt::quoted(t[1]) + " (this build reads version " +
                  std::to_string(text_version) + ")");
        st = state::header;
        continue;
      }
      case state::header: {
        if (t[0] == "rank" || t[0] == "end") {
          finish_header(lp);
          st = state::ranks;
          break;  // handled as a section line below
        }
        auto eq = line.find('=');
        if (eq == std::string_view::npos)
          lp.fail("expected a header field 'key=value' or 'rank 0:', got " + lpt::quoted(line));
        std::string_view key = line.substr(0, eq);
        std::string_view value = line.substr(eq + 1);
        std::size_t k = 0;
        while (k < nkeys && keys[k] != key) ++k;
        if (k == nkeys) lp.fail("unknown header field " + lpt::quoted(key));
        if (seen[k]) lp.fail("duplicate header field " + lpt::quoted(key));
        seen[k] = true;
        if (key != "name" && key != "node_of" && lpt(where, line_no, value).tokens().size() != 1)
          lp.fail("expected one value for " + lpt::quoted(key) + ", got " + lpt::quoted(value));
        if (key == "collective") {
          constexpr collective all[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                        collective::reduce, collective::bcast};
          bool found = false;
          for (auto c : all)
            if (to_string(c) == value) p.coll = c, found = true;
          if (!found) lp.fail("unknown collective " + lpt::quoted(value));
        } else if (key == "ranks") {
          p.ranks = lp.index(value, "ranks", 1, lpt::any_int);
        } else if (key == "count") {
          p.count = lp.number<std::size_t>(value, "count");
        } else if (key == "block_stride") {
          p.block_stride = lp.number<std::size_t>(value, "block_stride");
        } else if (key == "root") {
          p.root = lp.index(value, "root", 0, lpt::any_int);
        } else if (key == "commutative_only") {
          if (value != "true" && value != "false")
            lp.fail("commutative_only must be 'true' or 'false', got " + lpt::quoted(value));
          p.commutative_only = value == "true";
        } else if (key == "shm_count") {
          p.shm_count = lp.number<std::size_t>(value, "shm_count");
        } else if (key == "scratch_count") {
          p.scratch_count = lp.number<std::size_t>(value, "scratch_count");
        } else if (key == "flags") {
          p.flags = lp.index(value, "flags", 0, lpt::any_int);
        } else if (key == "node_of") {
          if (value.size() < 2 || value.front() != '[' || value.back() != ']')
            lp.fail("node_of must look like [0,0,1,1], got " + lpt::quoted(value));
          std::string_view list = value.substr(1, value.size() - 2);
          while (!list.empty()) {
            auto comma = list.find(',');
            p.node_of.push_back(lp.index(list.substr(0, comma), "node id", 0, lpt::any_int));
            if (comma == std::string_view::npos) break;
            list.remove_prefix(comma + 1);
            if (list.empty()) lp.fail("missing node id after the last ',' in " + lpt::quoted(value));
          }
        } else {
          p.name = lp.unquote(value);
        }
        continue;
      }
      case state::ranks: break;
      case state::done: lp.fail("trailing garbage after 'end': " + lpt::quoted(line));
    }

    // state::ranks: section headers, instructions, end
    if (t[0] == "rank") {
      std::string expected = std::to_string(p.code.size()) + ":";
      if (t.size() != 2 || t[1] != expected) {
        if (p.code.size() == static_cast<std::size_t>(p.ranks))
          lp.fail("unexpected section " + lpt::quoted(line) + ": the program has only " + std::to_string(p.ranks) +
                  " ranks");
        lp.fail("expected section 'rank " + expected + "', got " + lpt::quoted(line));
      }
      if (p.code.size() == static_cast<std::size_t>(p.ranks))
        lp.fail("unexpected section " + lpt::quoted(line) + ": the program has only " + std::to_string(p.ranks) +
                " ranks");
      p.code.emplace_back();
    } else if (t[0] == "end") {
      if (t.size() > 1) lp.fail("trailing garbage " + lpt::quoted(t[1]) + " after 'end'");
      if (p.code.size() != static_cast<std::size_t>(p.ranks))
        lp.fail("missing section 'rank " + std::to_string(p.code.size()) +
                ":' before 'end' (ranks=" + std::to_string(p.ranks) + ")");
      st = state::done;
    } else {
      if (p.code.empty()) lp.fail("instruction before the first 'rank 0:' section: " + lpt::quoted(line));
      p.code.back().push_back(lp.parse_instruction(static_cast<int>(p.code.size() - 1), p.ranks, p.flags));
    }
  }
  if (st != state::done) {
    detail::text_form::line_parser lp(where, last_line + 1, "");
    if (st == state::version) lp.fail("empty input, expected 'collc-program " + std::to_string(text_version) + "'");
    if (st == state::header) lp.fail("unexpected end of input in the header, expected 'rank 0:' and 'end'");
    lp.fail("unexpected end of input, expected 'end'");
  }
  return p;
}

/// Graphviz digraph of the data flow: one cluster per rank (nodes are its
/// instructions in program order), and edges for signal -> wait, send -> recv,
/// and shm data written by one rank and read by another (every overlapping
/// writer, a superset of the real flow). Waits on an earlier execution's
/// signal are dashed. Used by `collc show --dot`.
/// Example: std::ofstream("p.dot") << collc::ir::to_dot(p);  // dot -Tsvg p.dot
inline std::string to_dot(const program& p) {
  auto esc = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out;
  };
  auto node = [](std::size_t r, std::size_t i) { return "r" + std::to_string(r) + "_" + std::to_string(i); };
  const std::size_t nranks = p.code.size();
  std::string out = "digraph collc {\n";
  out += "  label=\"" + esc(p.name.empty() ? std::string(to_string(p.coll)) : p.name) +
         " (P=" + std::to_string(p.ranks) + ", count=" + std::to_string(p.count) + ")\";\n";
  out += "  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  // signal_at[r][f] = instruction indices of rank r's signals on flag f.
  std::vector<std::vector<std::vector<std::size_t>>> signal_at(nranks);
  for (std::size_t r = 0; r < nranks; ++r) {
    out += "  subgraph cluster_r" + std::to_string(r) + " {\n    label=\"rank " + std::to_string(r);
    if (!p.node_of.empty() && r < p.node_of.size()) out += " (node " + std::to_string(p.node_of[r]) + ")";
    out += "\";\n";
    const auto& code = p.code[r];
    if (code.empty()) out += "    " + node(r, 0) + " [label=\"(empty)\", shape=plaintext];\n";
    for (std::size_t i = 0; i < code.size(); ++i) {
      out += "    " + node(r, i) + " [label=\"" + esc(to_string(code[i], static_cast<int>(r))) + "\"];\n";
      if (i > 0) out += "    " + node(r, i - 1) + " -> " + node(r, i) + " [color=gray];\n";
      if (const auto* s = std::get_if<signal>(&code[i]); s && s->flag >= 0) {
        auto f = static_cast<std::size_t>(s->flag);
        if (signal_at[r].size() <= f) signal_at[r].resize(f + 1);
        signal_at[r][f].push_back(i);
      }
    }
    out += "  }\n";
  }
  struct access {
    std::size_t rank, index, begin, end;
  };
  // shm writes per owner, to draw cross-rank reads
  std::vector<std::vector<access>> shm_writes(nranks);
  auto is_shm = [&](const ref& x) {
    return x.buf == buffer::shm && x.owner >= 0 && static_cast<std::size_t>(x.owner) < nranks;
  };
  for (std::size_t r = 0; r < nranks; ++r)
    for (std::size_t i = 0; i < p.code[r].size(); ++i) {
      const ref* dst = nullptr;
      std::size_t n = 0;
      if (const auto* c = std::get_if<copy>(&p.code[r][i])) dst = &c->dst, n = c->count;
      if (const auto* c = std::get_if<reduce>(&p.code[r][i])) dst = &c->dst, n = c->count;
      if (const auto* c = std::get_if<recv>(&p.code[r][i])) dst = &c->dst, n = c->count;
      if (dst && is_shm(*dst) && n > 0)
        shm_writes[static_cast<std::size_t>(dst->owner)].push_back({r, i, dst->offset, dst->offset + n});
    }
  // k-th send from a to b with tag t matches the k-th such recv on b
  struct channel {
    std::size_t from, to;
    int tag;
    std::vector<std::size_t> sends, recvs;
  };
  std::vector<channel> channels;
  auto chan = [&](std::size_t from, std::size_t to, int tag) -> channel& {
    for (auto& c : channels)
      if (c.from == from && c.to == to && c.tag == tag) return c;
    return channels.emplace_back(channel{from, to, tag, {}, {}});
  };
  for (std::size_t r = 0; r < nranks; ++r)
    for (std::size_t i = 0; i < p.code[r].size(); ++i) {
      const auto& ins = p.code[r][i];
      if (const auto* s = std::get_if<send>(&ins); s && s->peer >= 0)
        chan(r, static_cast<std::size_t>(s->peer), s->tag).sends.push_back(i);
      if (const auto* v = std::get_if<recv>(&ins); v && v->peer >= 0)
        chan(static_cast<std::size_t>(v->peer), r, v->tag).recvs.push_back(i);
      if (const auto* w = std::get_if<wait>(&ins)) {
        if (w->peer < 0 || static_cast<std::size_t>(w->peer) >= nranks || w->flag < 0) continue;
        const auto q = static_cast<std::size_t>(w->peer);
        const auto f = static_cast<std::size_t>(w->flag);
        if (f >= signal_at[q].size() || signal_at[q][f].empty()) continue;
        const std::uint64_t s = signal_at[q][f].size();
        if (w->value > static_cast<std::int64_t>(s)) continue;  // can never be satisfied: no source
        // The signal of value v = w->value, counted `back` executions back so
        // that v + back*s lies in [1, s]. Parsed text may hold any int64, so
        // work with the magnitude m = -v in unsigned arithmetic (m <= 2^63):
        // v + back*s = s - m % s with back = m / s + 1, and nothing overflows.
        std::uint64_t v = 0, back = 0;
        if (w->value > 0) {
          v = static_cast<std::uint64_t>(w->value);
        } else {
          const std::uint64_t m = std::uint64_t{0} - static_cast<std::uint64_t>(w->value);
          v = s - m % s;
          back = m / s + 1;
        }
        out += "  " + node(q, signal_at[q][f][v - 1]) + " -> " + node(r, i) + " [color=blue";
        if (back > 0) out += ", style=dashed, label=\"exec-" + std::to_string(back) + "\"";
        out += "];\n";
      }
      auto read = [&](const ref& x, std::size_t n) {
        if (!is_shm(x) || n == 0) return;
        for (const auto& w : shm_writes[static_cast<std::size_t>(x.owner)])
          if (w.rank != r && w.begin < x.offset + n && x.offset < w.end)
            out += "  " + node(w.rank, w.index) + " -> " + node(r, i) + " [color=darkgreen, style=dotted];\n";
      };
      if (const auto* c = std::get_if<copy>(&ins)) read(c->src, c->count);
      if (const auto* c = std::get_if<reduce>(&ins)) read(c->a, c->count), read(c->b, c->count);
      if (const auto* c = std::get_if<send>(&ins)) read(c->src, c->count);
    }
  for (const auto& c : channels)
    for (std::size_t k = 0; k < c.sends.size() && k < c.recvs.size() && c.to < nranks; ++k)
      out += "  " + node(c.from, c.sends[k]) + " -> " + node(c.to, c.recvs[k]) + " [color=red, label=\"tag " +
             std::to_string(c.tag) + "\"];\n";
  out += "}\n";
  return out;
}

}  // namespace collc::ir
