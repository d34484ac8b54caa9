#pragma once
/// \file
/// Wisdom: tuned schedule choices (and, optionally, their lowered programs)
/// kept in a file so the next job skips the search. Standard library only.
///
///   // COLLC_WISDOM=$HOME/.collc-wisdom mpiexec -n 8 ./app
///   std::vector<std::string> warnings;
///   auto w = collc::wisdom::load("/path/wisdom", fingerprint, &warnings);  // never throws on content
///   if (auto e = w.find(key, count)) use(collc::algo::parse_schedule(e->schedule));
///   collc::wisdom::update("/path/wisdom", {entry}, &warnings);              // locked merge + atomic rename
///
/// An entry is keyed by collective, element size, operator, P, node shape
/// (nodes x ranks per node), a count range and a hardware/topology
/// fingerprint (node_topology::fingerprint). The file:
///
///     collc-wisdom 1                                 <- format version (wisdom_format_version)
///     # comment lines are allowed
///     entry coll=allreduce elem=8 op=collc::plus commutative=1 ranks=8 nodes=1 rpn=8
///           fp=41d72e4737a3e6c2 min=512 max=1023 schedule=recexch{-8,8} seconds=2.1e-05
///           source=tuned program=0                  <- one line; values %-escaped
///     entry ... program=1234                         <- followed by 1234 bytes of
///     collc-program 1                                   ir::to_text and a newline
///     ...
///     checksum 89ab01cd23ef4567                      <- FNV-1a 64 of every byte before this line
///
/// Safety: load() rejects the whole file, with a warning, when it is not a
/// wisdom file, has another format version, is truncated or fails its
/// checksum, or holds an entry that does not parse, whose schedule does not
/// fit its own key (wrong P, cyclic shift with a non-commutative operator, ...)
/// or whose program disagrees with it. Entries of other machines are kept (a
/// file may be shared) but never returned; a file with none for this machine
/// gives a warning. Writers take a lock (an exclusive directory next to the
/// file), re-read and merge, write a temporary file and rename it over the
/// old one, so readers see the old or the new file, never a mix, and
/// concurrent jobs do not lose each other's entries.
///
/// The path is the user's: writers and clear() never replace or remove a
/// file that is not a wisdom file (one that does not start with
/// 'collc-wisdom '; a corrupt wisdom file is replaced, with a warning; an
/// empty file is taken over for writing, nothing is lost) and never touch a
/// directory; they throw collc::error(errc::io_error) naming the path and
/// leave it as it was. A symlink is followed (to any depth): the lock, the
/// temporary file and the rename happen next to its target, so the link
/// stays a link and every job sharing the target sees the update. Failures
/// name the system's reason (errno).
#include <collc/algo/select.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ir/text.hpp>
#include <collc/topology.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <locale>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace collc {

/// Format version written by wisdom::to_text and the only one parse reads.
inline constexpr int wisdom_format_version = 1;

/// What a tuned choice depends on, besides the count.
struct wisdom_key {
  collective coll = collective::allreduce;
  std::size_t elem_size = 1;  ///< bytes per element
  std::string op = "none";    ///< operator name; "none" for allgather / bcast
  bool commutative = true;
  int ranks = 1;  ///< P
  int nodes = 1;
  int ranks_per_node = 1;   ///< 0: nodes of different sizes
  std::string fingerprint;  ///< node_topology::fingerprint() of the nodes
  friend bool operator==(const wisdom_key&, const wisdom_key&) = default;
};

/// One remembered choice: for counts in [min_count, max_count] (elements,
/// MPI meaning) use `schedule`.
struct wisdom_entry {
  wisdom_key key;
  std::size_t min_count = 0, max_count = 0;
  std::string schedule;  ///< algo::schedule::to_string()
  double seconds = 0;    ///< its time per call where it was measured (or predicted)
  std::string source;    ///< "tuned" (measured), "model", or the writer's word
  std::string program;   ///< optional ir::to_text of its lowered program (empty: lower again)
  friend bool operator==(const wisdom_entry&, const wisdom_entry&) = default;
};

namespace detail::wisdom_form {

inline bool plain(unsigned char c) { return c > 0x20 && c < 0x7f && c != '%' && c != '='; }

inline std::string escape(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (plain(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

inline std::string format_double(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(17);
  os << v;
  return os.str();
}

inline std::optional<collective> collective_of(std::string_view s) {
  for (auto c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                 collective::bcast})
    if (to_string(c) == s) return c;
  return std::nullopt;
}

template <class Int>
std::optional<Int> parse_uint(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > static_cast<std::uint64_t>(std::numeric_limits<Int>::max())) return std::nullopt;
  return static_cast<Int>(v);
}

inline std::optional<double> parse_double(std::string_view s) {
  if (s.empty() || s.size() > 40) return std::nullopt;
  std::istringstream is{std::string(s)};
  is.imbue(std::locale::classic());
  double v = 0;
  is >> v;
  if (!is || is.peek() != std::char_traits<char>::eof() || !(v >= 0) || v > 1e30) return std::nullopt;
  return v;
}

}  // namespace detail::wisdom_form

/// A set of wisdom entries: parse / print the file form, look up, merge,
/// and the file operations (load, update, clear). A plain value.
class wisdom {
 public:
  [[nodiscard]] const std::vector<wisdom_entry>& entries() const noexcept { return entries_; }
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }

  /// The entry for `key` whose range holds `count` (the narrowest if several).
  [[nodiscard]] std::optional<wisdom_entry> find(const wisdom_key& key, std::size_t count) const {
    const wisdom_entry* best = nullptr;
    for (const auto& e : entries_)
      if (e.key == key && e.min_count <= count && count <= e.max_count &&
          (best == nullptr || e.max_count - e.min_count < best->max_count - best->min_count))
        best = &e;
    if (best == nullptr) return std::nullopt;
    return *best;
  }

  /// Adds `e` (after check_entry), replacing entries of the same key whose
  /// count range overlaps its range.
  void insert(wisdom_entry e) {
    check_entry(e);
    std::erase_if(entries_, [&](const wisdom_entry& o) {
      return o.key == e.key && o.min_count <= e.max_count && e.min_count <= o.max_count;
    });
    entries_.push_back(std::move(e));
  }

  /// Throws collc::error(errc::parse_error) naming the problem when `e`
  /// could yield a wrong plan: an empty or inverted count range, a schedule
  /// that does not parse or does not fit the key, a program that does not
  /// parse or was lowered for another collective, P or schedule.
  static void check_entry(const wisdom_entry& e) {
    auto bad = [&](const std::string& why) {
      return error(errc::parse_error, "wisdom entry '" + e.schedule + "' for " + std::string(to_string(e.key.coll)) +
                                          " on " + std::to_string(e.key.ranks) + " ranks: " + why);
    };
    if (e.key.ranks < 1) throw bad("ranks must be >= 1");
    if (e.key.elem_size < 1) throw bad("element size must be >= 1");
    if (e.min_count > e.max_count)
      throw bad("count range [" + std::to_string(e.min_count) + ", " + std::to_string(e.max_count) + "] is empty");
    if (e.key.nodes < 1 || e.key.ranks_per_node < 0 ||
        (e.key.ranks_per_node > 0 && static_cast<long long>(e.key.nodes) * e.key.ranks_per_node != e.key.ranks))
      throw bad("node shape " + std::to_string(e.key.nodes) + "x" + std::to_string(e.key.ranks_per_node) +
                " does not make " + std::to_string(e.key.ranks) + " ranks");
    try {
      const algo::schedule s = algo::parse_schedule(e.schedule);
      algo::check_schedule(s, e.key.coll, e.key.ranks, e.key.commutative || !reduces(e.key.coll));
      if (!e.program.empty()) {
        const ir::program p = ir::parse_program(e.program);
        if (p.coll != e.key.coll || p.ranks != e.key.ranks)
          throw error(errc::parse_error, "its program is for " + std::string(to_string(p.coll)) + " on " +
                                             std::to_string(p.ranks) + " ranks");
        if (p.commutative_only && !e.key.commutative && reduces(e.key.coll))
          throw error(errc::parse_error, "its program needs a commutative operator");
        if (p.count < 1 || p.count > e.max_count)
          throw error(errc::parse_error, "its program's count " + std::to_string(p.count) + " is outside [1, " +
                                             std::to_string(e.max_count) + "]");
      }
    } catch (const error& x) {
      std::string what = x.what();
      if (what.starts_with("collc: ")) what.erase(0, 7);
      throw bad(what);
    }
  }

  /// The file form (see the file comment), checksum included.
  [[nodiscard]] std::string to_text() const {
    using namespace detail::wisdom_form;
    std::string out = "collc-wisdom " + std::to_string(wisdom_format_version) + "\n";
    for (const auto& e : entries_) {
      const auto& k = e.key;
      out += "entry coll=" + std::string(to_string(k.coll)) + " elem=" + std::to_string(k.elem_size) +
             " op=" + escape(k.op) + " commutative=" + (k.commutative ? "1" : "0") +
             " ranks=" + std::to_string(k.ranks) + " nodes=" + std::to_string(k.nodes) +
             " rpn=" + std::to_string(k.ranks_per_node) + " fp=" + escape(k.fingerprint) +
             " min=" + std::to_string(e.min_count) + " max=" + std::to_string(e.max_count) +
             " schedule=" + escape(e.schedule) + " seconds=" + format_double(e.seconds) +
             " source=" + escape(e.source) + " program=" + std::to_string(e.program.size()) + "\n";
      if (!e.program.empty()) out += e.program + "\n";
    }
    out += "checksum " + collc::detail::hex64(collc::detail::stable_hash64(out)) + "\n";
    return out;
  }

  /// Reads the file form. Throws collc::error naming the line: parse_error
  /// for anything malformed, truncated or failing its checksum or
  /// check_entry; unsupported for another format version.
  static wisdom parse(std::string_view text) {
    using namespace detail::wisdom_form;
    auto bad = [](std::size_t line, const std::string& why) {
      return error(errc::parse_error, "wisdom line " + std::to_string(line) + ": " + why);
    };
    const std::size_t first_nl = text.find('\n');
    const std::string_view header = text.substr(0, first_nl);
    if (!header.starts_with("collc-wisdom "))
      throw error(errc::parse_error, "not a collc wisdom file (it must start with 'collc-wisdom ')");
    const auto version = parse_uint<int>(header.substr(13));
    if (!version) throw bad(1, "bad format version '" + std::string(header.substr(13)) + "'");
    if (*version != wisdom_format_version)
      throw error(errc::unsupported, "wisdom format version " + std::to_string(*version) + ", this collc reads " +
                                         std::to_string(wisdom_format_version));
    // The checksum line is the last one and covers every byte before it.
    if (text.empty() || text.back() != '\n')
      throw error(errc::parse_error, "wisdom file is truncated (no final newline)");
    const std::size_t last_start = text.rfind('\n', text.size() - 2) + 1;
    const std::string_view last = text.substr(last_start, text.size() - 1 - last_start);
    if (!last.starts_with("checksum ") || last_start == 0)
      throw error(errc::parse_error, "wisdom file is truncated (no checksum line at the end)");
    const std::string want = collc::detail::hex64(collc::detail::stable_hash64(text.substr(0, last_start)));
    if (last.substr(9) != want)
      throw error(errc::parse_error, "wisdom checksum mismatch (file says " + std::string(last.substr(9)) +
                                         ", contents give " + want + "): the file is corrupt");
    wisdom w;
    std::size_t pos = first_nl + 1, line = 2;
    while (pos < last_start) {
      const std::size_t nl = text.find('\n', pos);
      const std::string_view l = text.substr(pos, nl - pos);
      pos = nl + 1;
      if (l.empty() || l.front() == '#') {
        ++line;
        continue;
      }
      if (!l.starts_with("entry ")) throw bad(line, "expected 'entry', got '" + std::string(l.substr(0, 40)) + "'");
      wisdom_entry e;
      std::size_t program_bytes = 0;
      const char* names[] = {"coll", "elem", "op",  "commutative", "ranks",   "nodes",  "rpn",
                             "fp",   "min",  "max", "schedule",    "seconds", "source", "program"};
      bool seen[std::size(names)] = {};
      std::size_t i = 6;
      while (i < l.size()) {
        std::size_t sp = l.find(' ', i);
        if (sp == std::string_view::npos) sp = l.size();
        const std::string_view field = l.substr(i, sp - i);
        i = sp + 1;
        if (field.empty()) continue;
        const std::size_t eq = field.find('=');
        if (eq == std::string_view::npos) throw bad(line, "field '" + std::string(field) + "' has no '='");
        const std::string_view name = field.substr(0, eq);
        const auto value = unescape(field.substr(eq + 1));
        if (!value) throw bad(line, "bad %-escape in field '" + std::string(name) + "'");
        std::size_t idx = std::size(names);
        for (std::size_t j = 0; j < std::size(names); ++j)
          if (name == names[j]) idx = j;
        if (idx == std::size(names)) throw bad(line, "unknown field '" + std::string(name) + "'");
        if (seen[idx]) throw bad(line, "field '" + std::string(name) + "' given twice");
        seen[idx] = true;
        const std::string& v = *value;
        auto need = [&](auto opt) {
          if (!opt) throw bad(line, "bad value '" + v + "' for field '" + std::string(name) + "'");
          return *opt;
        };
        switch (idx) {
          case 0: e.key.coll = need(collective_of(v)); break;
          case 1: e.key.elem_size = need(parse_uint<std::size_t>(v)); break;
          case 2: e.key.op = v; break;
          case 3:
            if (v != "0" && v != "1") need(std::optional<int>{});
            e.key.commutative = v == "1";
            break;
          case 4: e.key.ranks = need(parse_uint<int>(v)); break;
          case 5: e.key.nodes = need(parse_uint<int>(v)); break;
          case 6: e.key.ranks_per_node = need(parse_uint<int>(v)); break;
          case 7: e.key.fingerprint = v; break;
          case 8: e.min_count = need(parse_uint<std::size_t>(v)); break;
          case 9: e.max_count = need(parse_uint<std::size_t>(v)); break;
          case 10: e.schedule = v; break;
          case 11: e.seconds = need(parse_double(v)); break;
          case 12: e.source = v; break;
          case 13: program_bytes = need(parse_uint<std::size_t>(v)); break;
        }
      }
      for (std::size_t j = 0; j < std::size(names); ++j)
        if (!seen[j]) throw bad(line, "missing field '" + std::string(names[j]) + "'");
      ++line;
      if (program_bytes > 0) {
        if (program_bytes > last_start - pos || text[pos + program_bytes] != '\n')
          throw bad(line, "program of " + std::to_string(program_bytes) + " bytes runs past its entry");
        e.program = std::string(text.substr(pos, program_bytes));
        line += static_cast<std::size_t>(std::count(e.program.begin(), e.program.end(), '\n')) + 1;
        pos += program_bytes + 1;
      }
      try {
        check_entry(e);
      } catch (const error& x) {
        throw bad(line - 1, std::string(x.what()).substr(7));
      }
      w.entries_.push_back(std::move(e));
    }
    return w;
  }

  /// Reads `path` for the machine with `fingerprint`. Never throws for what
  /// the file holds: a missing file is empty wisdom; an unreadable, foreign,
  /// truncated or corrupt one is empty wisdom plus a line in `warnings`
  /// (when given). Empty `fingerprint`: no machine check.
  static wisdom load(const std::filesystem::path& path, std::string_view fingerprint = {},
                     std::vector<std::string>* warnings = nullptr) {
    auto warn = [&](const std::string& s) {
      if (warnings != nullptr) warnings->push_back("wisdom file " + path.string() + " ignored: " + s);
    };
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return {};
    std::string text;
    if (!std::filesystem::is_regular_file(path, ec)) {
      warn("it is not a regular file");
      return {};
    }
    if (!read_file(path, text)) {
      warn("it cannot be read");
      return {};
    }
    wisdom w;
    try {
      w = parse(text);
    } catch (const error& e) {
      warn(std::string(e.what()).substr(7));
      return {};
    }
    if (!fingerprint.empty() && !w.entries_.empty()) {
      const bool ours = std::any_of(w.entries_.begin(), w.entries_.end(),
                                    [&](const wisdom_entry& e) { return e.key.fingerprint == fingerprint; });
      if (!ours) {
        warn("its " + std::to_string(w.entries_.size()) + " entries were written on another machine (fingerprint " +
             w.entries_.front().key.fingerprint + ", this one is " + std::string(fingerprint) + ")");
        // Kept for merging (a shared file), never returned by find().
      }
    }
    return w;
  }

  /// Adds `add` to the file at `path` (a symlink: its target), safely
  /// against concurrent writers: lock, re-read (a corrupt wisdom file is
  /// replaced, with a warning), merge, write a temporary file, rename it over
  /// the file, unlock. Throws collc::error(errc::io_error) naming the path
  /// and the reason if the file cannot be written or is not a wisdom file
  /// (it is left untouched), and check_entry's error for a bad entry (before
  /// touching the file).
  static void update(const std::filesystem::path& path, const std::vector<wisdom_entry>& add,
                     std::vector<std::string>* warnings = nullptr) {
    for (const auto& e : add) check_entry(e);
    const std::filesystem::path file = resolve_links(path);
    // Before the lock, so that nothing is created next to a refused path.
    refuse_foreign(path, file, "replace", true);
    const file_lock lock(file, warnings);
    wisdom w = load(file, {}, warnings);
    for (const auto& e : add) w.insert(e);
    w.write_atomically(file);
  }

  /// Removes the entries for which `drop` is true (all by default), under
  /// the lock; removes the file (a symlink: its target; the link stays) when
  /// none is left. Nothing at `path`: nothing to do. Throws
  /// collc::error(errc::io_error) naming the path, and removes nothing, when
  /// it is not a wisdom file (an empty file included) or a directory.
  static void clear(const std::filesystem::path& path, std::vector<std::string>* warnings = nullptr,
                    const std::function<bool(const wisdom_entry&)>& drop = {}) {
    const std::filesystem::path file = resolve_links(path);
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return;
    refuse_foreign(path, file, "remove", false);
    const file_lock lock(file, warnings);
    refuse_foreign(path, file, "remove", false);  // again under the lock: what we remove is what we checked
    wisdom w = load(file, {}, warnings);
    if (drop)
      std::erase_if(w.entries_, drop);
    else
      w.entries_.clear();
    if (w.entries_.empty()) {
      std::filesystem::remove(file, ec);
      if (ec) throw error(errc::io_error, "cannot remove wisdom file " + named(path, file) + ": " + ec.message());
    } else {
      w.write_atomically(file);
    }
  }

  /// Writes to a fresh temporary file next to `path` (a symlink: next to
  /// its target), then renames it over that file (readers see the old or the
  /// new file, never a mix; the link stays a link). Throws
  /// collc::error(errc::io_error) naming the path and the system's reason
  /// when it cannot, and when `path` holds something that is not a wisdom
  /// file (a directory, a user's file), which is left untouched.
  void write_atomically(const std::filesystem::path& path) const {
    const std::filesystem::path file = resolve_links(path);
    refuse_foreign(path, file, "replace", true);
    const std::string text = to_text();
    std::filesystem::path tmp = file;
    tmp += ".tmp." + unique_suffix();
    auto fail = [&](const std::string& what, int err) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return error(errc::io_error, what + ": " + (err != 0 ? std::generic_category().message(err) : "unknown error"));
    };
    {
      // iostreams keep no error code; errno from the failing open / write is
      // the reason on every platform collc targets.
      errno = 0;
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out.is_open()) throw fail("cannot create temporary wisdom file " + tmp.string(), errno);
      errno = 0;
      out.write(text.data(), static_cast<std::streamsize>(text.size()));
      out.flush();
      if (!out) throw fail("cannot write temporary wisdom file " + tmp.string(), errno);
    }
    // A shared target keeps its permissions (e.g. group-writable).
    std::error_code ec;
    const auto old = std::filesystem::status(file, ec);
    if (!ec && std::filesystem::is_regular_file(old))
      std::filesystem::permissions(tmp, old.permissions(), std::filesystem::perm_options::replace, ec);
    std::error_code rename_ec;
    std::filesystem::rename(tmp, file, rename_ec);
    if (rename_ec) throw fail("cannot rename " + tmp.string() + " to " + named(path, file), rename_ec.value());
  }

  friend bool operator==(const wisdom&, const wisdom&) = default;

 private:
  static bool read_file(const std::filesystem::path& path, std::string& text) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return false;
    text = ss.str();
    return true;
  }

  /// The file a wisdom path names: `path` with its symlinks followed (a
  /// dangling link names the file it would create). Throws
  /// collc::error(errc::io_error) for a loop of links.
  static std::filesystem::path resolve_links(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    fs::path p = path;
    for (int hops = 0; hops < 40; ++hops) {  // 40: Linux's MAXSYMLINKS
      std::error_code ec;
      if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
      const fs::path to = fs::read_symlink(p, ec);
      if (ec) throw error(errc::io_error, "cannot read symbolic link " + p.string() + ": " + ec.message());
      p = to.is_absolute() ? to : p.parent_path() / to;
    }
    throw error(errc::io_error, "wisdom file " + path.string() + ": too many levels of symbolic links");
  }

  /// "PATH" or "PATH (symlink to TARGET)", for messages.
  static std::string named(const std::filesystem::path& path, const std::filesystem::path& file) {
    return file == path ? path.string() : path.string() + " (symlink to " + file.string() + ")";
  }

  /// Throws collc::error(errc::io_error) when `file` (what `path` resolves
  /// to) exists and is not a wisdom file collc may `verb` ("replace" /
  /// "remove"): a directory or other non-regular file, an unreadable file, a
  /// file that does not start with the wisdom header, or (unless
  /// `empty_ok`) an empty one. A corrupt wisdom file passes: it is ours.
  static void refuse_foreign(const std::filesystem::path& path, const std::filesystem::path& file, const char* verb,
                             bool empty_ok) {
    namespace fs = std::filesystem;
    auto refuse = [&](const std::string& why) {
      return error(errc::io_error, "refusing to " + std::string(verb) + " " + named(path, file) + ": " + why +
                                       "; it is left untouched");
    };
    std::error_code ec;
    const fs::file_status st = fs::status(file, ec);
    if (!fs::exists(st)) return;
    if (fs::is_directory(st)) throw refuse("it is a directory, not a collc wisdom file");
    if (!fs::is_regular_file(st)) throw refuse("it is not a regular file, so not a collc wisdom file");
    static constexpr std::string_view header = "collc-wisdom ";
    errno = 0;
    std::ifstream in(file, std::ios::binary);
    if (!in.is_open())
      throw refuse("it cannot be read (" + std::generic_category().message(errno) +
                   "), so it cannot be checked to be a collc wisdom file");
    char head[header.size()] = {};
    in.read(head, static_cast<std::streamsize>(header.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0 && empty_ok) return;
    if (got == 0) throw refuse("it is empty, not a collc wisdom file");
    if (std::string_view(head, got) != header)
      throw refuse("it is not a collc wisdom file (it does not start with 'collc-wisdom ')");
  }

  static std::string unique_suffix() {
    static thread_local std::mt19937_64 gen{
        std::random_device{}() ^
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        std::hash<std::thread::id>{}(std::this_thread::get_id())};
    return collc::detail::hex64(gen());
  }

  /// An exclusive lock on `path`: the directory `path`.lock, created
  /// atomically. A lock older than `stale` is taken over (its owner died);
  /// after `patience` the writer goes ahead unlocked (rename keeps the file
  /// whole; only a concurrent entry may be lost), with a warning.
  class file_lock {
   public:
    file_lock(const std::filesystem::path& path, std::vector<std::string>* warnings) : dir_(path) {
      using clock = std::chrono::steady_clock;
      dir_ += ".lock";
      const auto patience = std::chrono::seconds(20);
      const auto stale = std::chrono::seconds(60);
      const auto start = clock::now();
      auto pause = std::chrono::microseconds(200);
      for (;;) {
        std::error_code ec;
        if (std::filesystem::create_directory(dir_, ec)) {
          held_ = true;
          return;
        }
        // EEXIST with no directory left: the holder let go just now; retry.
        if (ec && ec != std::errc::file_exists) {
          if (warnings != nullptr) warnings->push_back("cannot lock " + dir_.string() + ": " + ec.message());
          return;
        }
        const auto age = std::filesystem::file_time_type::clock::now() - std::filesystem::last_write_time(dir_, ec);
        if (!ec && age > stale) {
          std::filesystem::remove(dir_, ec);
          continue;
        }
        if (clock::now() - start > patience) {
          if (warnings != nullptr) warnings->push_back("lock " + dir_.string() + " held too long; writing without it");
          return;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(20000));
      }
    }
    file_lock(const file_lock&) = delete;
    file_lock& operator=(const file_lock&) = delete;
    ~file_lock() {
      if (!held_) return;
      std::error_code ec;
      std::filesystem::remove(dir_, ec);
    }

   private:
    std::filesystem::path dir_;
    bool held_ = false;
  };

  std::vector<wisdom_entry> entries_;
};

/// The wisdom file named by COLLC_WISDOM, if set (wisdom is off otherwise).
inline std::optional<std::filesystem::path> wisdom_path_from_env() {
  const char* v = std::getenv("COLLC_WISDOM");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::filesystem::path(v);
}

/// The count range a choice tuned at `count` elements of `elem_size` bytes is
/// remembered for: the power-of-two byte range [2^k, 2^(k+1)) holding
/// count * elem_size, in elements (count 0: just 0).
inline std::pair<std::size_t, std::size_t> wisdom_count_range(std::size_t count, std::size_t elem_size) {
  if (count == 0 || elem_size == 0) return {0, 0};
  const std::size_t bytes = count * elem_size;
  std::size_t lo = 1;
  while (lo <= bytes / 2) lo *= 2;
  const std::size_t hi = lo > (SIZE_MAX - 1) / 2 ? SIZE_MAX : 2 * lo - 1;
  return {(lo + elem_size - 1) / elem_size, hi / elem_size};
}

}  // namespace collc
