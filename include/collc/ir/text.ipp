#pragma once
// Definitions of ir/text.hpp: the writer and the line parser of the text form.
#include <collc/ir/text.hpp>

#include <collc/error.hpp>

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

namespace detail::text_form {

using collc::detail::cat;

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

/// `rank` < 0 means "no executing rank known": every owner is printed.
COLLC_INLINE void append_ref(std::string& out, const ref& r, int rank) {
  out += to_string(r.buf);
  if (rank < 0 || r.buf == buffer::shm || r.owner != rank) {
    out += '@';
    out += std::to_string(r.owner);
  }
  out += '+';
  out += std::to_string(r.offset);
}

COLLC_INLINE void append_instruction(std::string& out, const instruction& ins, int rank) {
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
                 [&](const signal& s) { out += cat("signal f", s.flag); },
                 [&](const wait& w) { out += cat("wait r", w.peer, ".f", w.flag, " >= ", w.value); },
                 [&](const send& s) {
                   out += cat("send ->r", s.peer, " tag ", s.tag, ' ');
                   append_ref(out, s.src, rank);
                   count(s.count);
                 },
                 [&](const recv& r) {
                   out += cat("recv <-r", r.peer, " tag ", r.tag, ' ');
                   append_ref(out, r.dst, rank);
                   count(r.count);
                 },
                 [&](const fence&) { out += "fence"; },
             },
             ins);
}

/// C-like escapes; bytes >= 0x80 pass through so UTF-8 names stay readable.
COLLC_INLINE std::string quote(std::string_view s) {
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
  return cat(out, '"');
}

/// Writes the text form without consistency checks (used by operator<<, which
/// must print whatever it is given, e.g. in a failing test).
COLLC_INLINE void write_text(std::string& out, const program& p) {
  out += cat("collc-program ", text_version, '\n');
  out += "collective=";
  out += to_string(p.coll);
  out += cat("\nranks=", p.ranks);
  out += cat("\ncount=", p.count);
  out += cat("\nblock_stride=", p.block_stride);
  out += cat("\nroot=", p.root);
  out += p.commutative_only ? "\ncommutative_only=true" : "\ncommutative_only=false";
  out += cat("\nshm_count=", p.shm_count);
  out += cat("\nscratch_count=", p.scratch_count);
  out += cat("\nflags=", p.flags);
  out += "\nnode_of=[";
  for (std::size_t i = 0; i < p.node_of.size(); ++i) {
    if (i != 0) out += ',';
    out += std::to_string(p.node_of[i]);
  }
  out += cat("]\nname=", quote(p.name), '\n');
  for (std::size_t r = 0; r < p.code.size(); ++r) {
    out += cat("rank ", r, ":\n");
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
    if (line_no_ > 0) msg += cat(": line ", line_no_);
    msg += cat(": ", what);
    throw error(errc::parse_error, msg);
  }

  static std::string quoted(std::string_view tok) { return cat("'", tok, "'"); }

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
    if (tok.empty()) fail(cat("missing ", field));
    if (tok[0] == '+' || (std::is_unsigned_v<T> && tok[0] == '-'))
      fail(cat(field, " must be a non-negative decimal number, got ", quoted(tok)));
    T v{};
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec == std::errc::result_out_of_range) fail(cat(field, " ", quoted(tok), " is out of range"));
    if (ec != std::errc{} || end != tok.data() + tok.size())
      fail(cat("expected a number for ", field, ", got ", quoted(tok)));
    return v;
  }

  /// No upper bound beyond what an int holds.
  static constexpr std::int64_t any_int = std::int64_t{std::numeric_limits<int>::max()} + 1;

  /// An int in [lo, hi).
  int index(std::string_view tok, std::string_view field, std::int64_t lo, std::int64_t hi) const {
    int v = number<int>(tok, field);
    if (v < lo || v >= hi) fail(cat(field, " ", quoted(tok), " is out of range [", lo, ", ", hi, ")"));
    return v;
  }

  /// `tok` must start with `prefix`; returns the rest.
  std::string_view after(std::string_view tok, std::string_view prefix, std::string_view field) const {
    if (!tok.starts_with(prefix)) fail(cat("expected ", field, " of the form '", prefix, "...', got ", quoted(tok)));
    return tok.substr(prefix.size());
  }

  ref parse_ref(std::string_view tok, int rank, std::int64_t ranks) const {
    auto plus = tok.find('+');
    if (plus == std::string_view::npos) fail(cat("expected a buffer reference like 'shm@1+0', got ", quoted(tok)));
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
      fail(cat("unknown buffer ", quoted(name), " in ", quoted(tok)));
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
      if (t.size() < n) fail(cat("missing operand after ", quoted(t.back()), " in ", quoted(line_)));
      if (t.size() > n) fail(cat("trailing garbage ", quoted(t[n]), " in ", quoted(line_)));
    };
    auto arrow = [&](std::string_view tok) {
      if (tok != "<-") fail(cat("expected '<-', got ", quoted(tok)));
    };
    auto checked = [&](const ref& at, std::size_t n) {
      if (n > std::numeric_limits<std::size_t>::max() - at.offset)
        fail(cat("range ", at.offset, "+", n, " is out of range in ", quoted(line_)));
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
      if (!t[3].ends_with(',')) fail(cat("expected ',' after the first operand ", quoted(t[3])));
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
      if (dot == std::string_view::npos) fail(cat("expected wait target 'rP.fF', got ", quoted(t[1])));
      wait w;
      w.peer = index(target.substr(0, dot), "peer", 0, ranks);
      w.flag = index(target.substr(dot + 2), "flag", 0, flags);
      if (t[2] != ">=") fail(cat("expected '>=', got ", quoted(t[2])));
      w.value = number<std::int64_t>(t[3], "wait value");
      return w;
    }
    if (op == "send" || op == "recv") {
      need(6);
      int peer = index(after(t[1], op == "send" ? "->r" : "<-r", "peer"), "peer", 0, ranks);
      if (t[2] != "tag") fail(cat("expected 'tag', got ", quoted(t[2])));
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
    fail(cat("unknown opcode ", quoted(op)));
  }

  std::string unquote(std::string_view v) const {
    if (v.size() < 2 || v.front() != '"') fail(cat("expected a quoted string, got ", quoted(v)));
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
            if (k >= v.size()) fail(cat("incomplete escape in ", quoted(v)));
            char c = v[k];
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            fail(cat("bad hex escape in ", quoted(v)));
          };
          out += static_cast<char>(digit(i + 1) * 16 + digit(i + 2));
          i += 2;
          break;
        }
        default: fail(cat("unknown escape '\\", std::string(1, v[i]), "' in ", quoted(v)));
      }
    }
    if (i >= v.size()) fail(cat("unterminated string ", quoted(v)));
    if (i + 1 != v.size()) fail(cat("trailing garbage ", quoted(v.substr(i + 1)), " after the string"));
    return out;
  }

 private:
  std::string_view where_;
  int line_no_;
  std::string_view line_;
};

}  // namespace detail::text_form

COLLC_INLINE std::string to_string(const instruction& ins) {
  std::string out;
  detail::text_form::append_instruction(out, ins, -1);
  return out;
}

COLLC_INLINE std::string to_string(const instruction& ins, int rank) {
  std::string out;
  detail::text_form::append_instruction(out, ins, rank);
  return out;
}

COLLC_INLINE std::string to_string(const ref& r) {
  std::string out;
  detail::text_form::append_ref(out, r, -1);
  return out;
}

COLLC_INLINE std::string to_string(const ref& r, int rank) {
  std::string out;
  detail::text_form::append_ref(out, r, rank);
  return out;
}

COLLC_INLINE std::ostream& operator<<(std::ostream& os, const ref& r) { return os << to_string(r); }

COLLC_INLINE std::ostream& operator<<(std::ostream& os, const instruction& ins) { return os << to_string(ins); }

COLLC_INLINE std::string to_text(const program& p) {
  using collc::detail::cat;
  if (p.ranks < 1 || p.code.size() != static_cast<std::size_t>(p.ranks))
    throw error(errc::invalid_argument,
                cat("to_text: program has ranks=", p.ranks, " but ", p.code.size(), " rank programs"));
  if (!p.node_of.empty() && p.node_of.size() != p.code.size())
    throw error(errc::invalid_argument, cat("to_text: node_of has ", p.node_of.size(), " entries for ranks=", p.ranks));
  std::string out;
  detail::text_form::write_text(out, p);
  return out;
}

COLLC_INLINE std::ostream& operator<<(std::ostream& os, const program& p) {
  std::string out;
  detail::text_form::write_text(out, p);
  return os << out;
}

COLLC_INLINE instruction parse_instruction(std::string_view line, int rank) {
  using detail::text_form::line_parser;
  return line_parser("parse_instruction", 0, line).parse_instruction(rank, line_parser::any_int, line_parser::any_int);
}

COLLC_INLINE program parse_program(std::string_view text) {
  using collc::detail::cat;
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
      if (!seen[k]) lp.fail(cat("missing header field '", keys[k], "'"));
    if (!p.node_of.empty() && p.node_of.size() != static_cast<std::size_t>(p.ranks))
      lp.fail(cat("node_of has ", p.node_of.size(), " entries but ranks=", p.ranks));
    if (p.root >= p.ranks) lp.fail(cat("root ", p.root, " is out of range [0, ", p.ranks, ")"));
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
          lp.fail(cat("expected 'collc-program ", text_version, "', got ", lpt::quoted(line)));
        if (t.size() > 2) lp.fail(cat("trailing garbage ", lpt::quoted(t[2])));
        if (t[1] != std::to_string(text_version))
          lp.fail(
              cat("unsupported format version ", lpt::quoted(t[1]), " (this build reads version ", text_version, ")"));
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
          lp.fail(cat("expected a header field 'key=value' or 'rank 0:', got ", lpt::quoted(line)));
        std::string_view key = line.substr(0, eq);
        std::string_view value = line.substr(eq + 1);
        std::size_t k = 0;
        while (k < nkeys && keys[k] != key) ++k;
        if (k == nkeys) lp.fail(cat("unknown header field ", lpt::quoted(key)));
        if (seen[k]) lp.fail(cat("duplicate header field ", lpt::quoted(key)));
        seen[k] = true;
        if (key != "name" && key != "node_of" && lpt(where, line_no, value).tokens().size() != 1)
          lp.fail(cat("expected one value for ", lpt::quoted(key), ", got ", lpt::quoted(value)));
        if (key == "collective") {
          constexpr collective all[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                        collective::reduce, collective::bcast};
          bool found = false;
          for (auto c : all)
            if (to_string(c) == value) p.coll = c, found = true;
          if (!found) lp.fail(cat("unknown collective ", lpt::quoted(value)));
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
            lp.fail(cat("commutative_only must be 'true' or 'false', got ", lpt::quoted(value)));
          p.commutative_only = value == "true";
        } else if (key == "shm_count") {
          p.shm_count = lp.number<std::size_t>(value, "shm_count");
        } else if (key == "scratch_count") {
          p.scratch_count = lp.number<std::size_t>(value, "scratch_count");
        } else if (key == "flags") {
          p.flags = lp.index(value, "flags", 0, lpt::any_int);
        } else if (key == "node_of") {
          if (value.size() < 2 || value.front() != '[' || value.back() != ']')
            lp.fail(cat("node_of must look like [0,0,1,1], got ", lpt::quoted(value)));
          std::string_view list = value.substr(1, value.size() - 2);
          while (!list.empty()) {
            auto comma = list.find(',');
            p.node_of.push_back(lp.index(list.substr(0, comma), "node id", 0, lpt::any_int));
            if (comma == std::string_view::npos) break;
            list.remove_prefix(comma + 1);
            if (list.empty()) lp.fail(cat("missing node id after the last ',' in ", lpt::quoted(value)));
          }
        } else {
          p.name = lp.unquote(value);
        }
        continue;
      }
      case state::ranks: break;
      case state::done: lp.fail(cat("trailing garbage after 'end': ", lpt::quoted(line)));
    }

    // state::ranks: section headers, instructions, end
    if (t[0] == "rank") {
      std::string expected = cat(p.code.size(), ":");
      if (t.size() != 2 || t[1] != expected) {
        if (p.code.size() == static_cast<std::size_t>(p.ranks))
          lp.fail(cat("unexpected section ", lpt::quoted(line), ": the program has only ", p.ranks, " ranks"));
        lp.fail(cat("expected section 'rank ", expected, "', got ", lpt::quoted(line)));
      }
      if (p.code.size() == static_cast<std::size_t>(p.ranks))
        lp.fail(cat("unexpected section ", lpt::quoted(line), ": the program has only ", p.ranks, " ranks"));
      p.code.emplace_back();
    } else if (t[0] == "end") {
      if (t.size() > 1) lp.fail(cat("trailing garbage ", lpt::quoted(t[1]), " after 'end'"));
      if (p.code.size() != static_cast<std::size_t>(p.ranks))
        lp.fail(cat("missing section 'rank ", p.code.size(), ":' before 'end' (ranks=", p.ranks, ")"));
      st = state::done;
    } else {
      if (p.code.empty()) lp.fail(cat("instruction before the first 'rank 0:' section: ", lpt::quoted(line)));
      p.code.back().push_back(lp.parse_instruction(static_cast<int>(p.code.size() - 1), p.ranks, p.flags));
    }
  }
  if (st != state::done) {
    detail::text_form::line_parser lp(where, last_line + 1, "");
    if (st == state::version) lp.fail(cat("empty input, expected 'collc-program ", text_version, "'"));
    if (st == state::header) lp.fail("unexpected end of input in the header, expected 'rank 0:' and 'end'");
    lp.fail("unexpected end of input, expected 'end'");
  }
  return p;
}

COLLC_INLINE std::string to_dot(const program& p) {
  using collc::detail::cat;
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
  auto node = [](std::size_t r, std::size_t i) { return cat("r", r, "_", i); };
  const std::size_t nranks = p.code.size();
  std::string out = "digraph collc {\n";
  out += cat("  label=\"", esc(p.name.empty() ? std::string(to_string(p.coll)) : p.name), " (P=", p.ranks,
             ", count=", p.count, ")\";\n");
  out += "  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  // signal_at[r][f] = instruction indices of rank r's signals on flag f.
  std::vector<std::vector<std::vector<std::size_t>>> signal_at(nranks);
  for (std::size_t r = 0; r < nranks; ++r) {
    out += cat("  subgraph cluster_r", r, " {\n    label=\"rank ", r);
    if (!p.node_of.empty() && r < p.node_of.size()) out += cat(" (node ", p.node_of[r], ")");
    out += "\";\n";
    const auto& code = p.code[r];
    if (code.empty()) out += cat("    ", node(r, 0), " [label=\"(empty)\", shape=plaintext];\n");
    for (std::size_t i = 0; i < code.size(); ++i) {
      out += cat("    ", node(r, i), " [label=\"", esc(to_string(code[i], static_cast<int>(r))), "\"];\n");
      if (i > 0) out += cat("    ", node(r, i - 1), " -> ", node(r, i), " [color=gray];\n");
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
        out += cat("  ", node(q, signal_at[q][f][v - 1]), " -> ", node(r, i), " [color=blue");
        if (back > 0) out += cat(", style=dashed, label=\"exec-", back, "\"");
        out += "];\n";
      }
      auto read = [&](const ref& x, std::size_t n) {
        if (!is_shm(x) || n == 0) return;
        for (const auto& w : shm_writes[static_cast<std::size_t>(x.owner)])
          if (w.rank != r && w.begin < x.offset + n && x.offset < w.end)
            out += cat("  ", node(w.rank, w.index), " -> ", node(r, i), " [color=darkgreen, style=dotted];\n");
      };
      if (const auto* c = std::get_if<copy>(&ins)) read(c->src, c->count);
      if (const auto* c = std::get_if<reduce>(&ins)) read(c->a, c->count), read(c->b, c->count);
      if (const auto* c = std::get_if<send>(&ins)) read(c->src, c->count);
    }
  for (const auto& c : channels)
    for (std::size_t k = 0; k < c.sends.size() && k < c.recvs.size() && c.to < nranks; ++k)
      out += cat("  ", node(c.from, c.sends[k]), " -> ", node(c.to, c.recvs[k]), " [color=red, label=\"tag ", c.tag,
                 "\"];\n");
  out += "}\n";
  return out;
}

}  // namespace collc::ir
