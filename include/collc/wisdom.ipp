#pragma once
/// \file
/// Definitions of wisdom.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/wisdom.hpp>

#include <collc/algo/select.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/ir/text.hpp>
#include <collc/topology.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <locale>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>

namespace collc {

namespace detail::wisdom_form {

COLLC_INLINE bool plain(unsigned char c) { return c > 0x20 && c < 0x7f && c != '%' && c != '='; }

COLLC_INLINE std::string escape(std::string_view s) {
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

COLLC_INLINE int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

COLLC_INLINE std::optional<std::string> unescape(std::string_view s) {
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

COLLC_INLINE std::string format_double(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(17);
  os << v;
  return os.str();
}

COLLC_INLINE std::optional<collective> collective_of(std::string_view s) {
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

COLLC_INLINE std::optional<double> parse_double(std::string_view s) {
  if (s.empty() || s.size() > 40) return std::nullopt;
  std::istringstream is{std::string(s)};
  is.imbue(std::locale::classic());
  double v = 0;
  is >> v;
  if (!is || is.peek() != std::char_traits<char>::eof() || !(v >= 0) || v > 1e30) return std::nullopt;
  return v;
}

}  // namespace detail::wisdom_form

/// An exclusive lock on `path`: the directory `path`.lock, created
/// atomically. A lock older than `stale` is taken over (its owner died);
/// after `patience` the writer goes ahead unlocked (rename keeps the file
/// whole; only a concurrent entry may be lost), with a warning.
class wisdom::file_lock {
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
        if (warnings != nullptr)
          warnings->push_back(collc::detail::cat("cannot lock ", dir_.string(), ": ", ec.message()));
        return;
      }
      // The lock is a directory; anything else by that name is the user's
      // (never removed) and no lock of a collc writer.
      const auto type = std::filesystem::symlink_status(dir_, ec).type();
      if (type == std::filesystem::file_type::not_found) continue;  // let go just now
      if (!ec && type != std::filesystem::file_type::directory) {
        if (warnings != nullptr)
          warnings->push_back(collc::detail::cat("cannot lock ", dir_.string(),
                                                 ": it exists and is not a directory, as collc's locks are (left as "
                                                 "it is); writing without the lock"));
        return;
      }
      // A stale lock is taken over; one that cannot be removed (not empty,
      // not ours to remove) is waited out like a live one.
      const auto age = std::filesystem::file_time_type::clock::now() - std::filesystem::last_write_time(dir_, ec);
      if (!ec && age > stale && std::filesystem::remove(dir_, ec)) continue;
      if (clock::now() - start > patience) {
        if (warnings != nullptr)
          warnings->push_back(collc::detail::cat("lock ", dir_.string(), " held too long; writing without it"));
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

COLLC_INLINE std::optional<wisdom_entry> wisdom::find(const wisdom_key& key, std::size_t count) const {
  const wisdom_entry* best = nullptr;
  for (const auto& e : entries_)
    if (e.key == key && e.min_count <= count && count <= e.max_count &&
        (best == nullptr || e.max_count - e.min_count < best->max_count - best->min_count))
      best = &e;
  if (best == nullptr) return std::nullopt;
  return *best;
}

COLLC_INLINE void wisdom::insert(wisdom_entry e) {
  check_entry(e);
  std::erase_if(entries_, [&](const wisdom_entry& o) {
    return o.key == e.key && o.min_count <= e.max_count && e.min_count <= o.max_count;
  });
  entries_.push_back(std::move(e));
}

COLLC_INLINE void wisdom::check_entry(const wisdom_entry& e) {
  auto bad = [&](const std::string& why) {
    return error(errc::parse_error, collc::detail::cat("wisdom entry '", e.schedule, "' for ", to_string(e.key.coll),
                                                       " on ", e.key.ranks, " ranks: ", why));
  };
  if (e.key.ranks < 1) throw bad("ranks must be >= 1");
  if (e.key.elem_size < 1) throw bad("element size must be >= 1");
  if (e.min_count > e.max_count)
    throw bad(collc::detail::cat("count range [", e.min_count, ", ", e.max_count, "] is empty"));
  if (e.key.nodes < 1 || e.key.ranks_per_node < 0 ||
      (e.key.ranks_per_node > 0 && static_cast<long long>(e.key.nodes) * e.key.ranks_per_node != e.key.ranks))
    throw bad(collc::detail::cat("node shape ", e.key.nodes, "x", e.key.ranks_per_node, " does not make ", e.key.ranks,
                                 " ranks"));
  try {
    const algo::schedule s = algo::parse_schedule(e.schedule);
    algo::check_schedule(s, e.key.coll, e.key.ranks, e.key.commutative || !reduces(e.key.coll));
    if (!e.program.empty()) {
      const ir::program p = ir::parse_program(e.program);
      if (p.coll != e.key.coll || p.ranks != e.key.ranks)
        throw error(errc::parse_error,
                    collc::detail::cat("its program is for ", to_string(p.coll), " on ", p.ranks, " ranks"));
      if (p.commutative_only && !e.key.commutative && reduces(e.key.coll))
        throw error(errc::parse_error, "its program needs a commutative operator");
      if (p.count < 1 || p.count > e.max_count)
        throw error(errc::parse_error,
                    collc::detail::cat("its program's count ", p.count, " is outside [1, ", e.max_count, "]"));
    }
  } catch (const error& x) {
    throw bad(x.what());
  }
}

COLLC_INLINE std::string wisdom::to_text() const {
  using namespace detail::wisdom_form;
  std::string out = collc::detail::cat("collc-wisdom ", wisdom_format_version, "\n");
  for (const auto& e : entries_) {
    const auto& k = e.key;
    out += collc::detail::cat(
        "entry coll=", to_string(k.coll), " elem=", k.elem_size, " op=", escape(k.op),
        " commutative=", (k.commutative ? "1" : "0"), " ranks=", k.ranks, " nodes=", k.nodes, " rpn=", k.ranks_per_node,
        " fp=", escape(k.fingerprint), " min=", e.min_count, " max=", e.max_count, " schedule=", escape(e.schedule),
        " seconds=", format_double(e.seconds), " source=", escape(e.source), " program=", e.program.size(), "\n");
    if (!e.program.empty()) out += collc::detail::cat(e.program, "\n");
  }
  out += collc::detail::cat("checksum ", collc::detail::hex64(collc::detail::stable_hash64(out)), "\n");
  return out;
}

COLLC_INLINE wisdom wisdom::parse(std::string_view text) {
  using namespace detail::wisdom_form;
  auto bad = [](std::size_t line, const std::string& why) {
    return error(errc::parse_error, collc::detail::cat("wisdom line ", line, ": ", why));
  };
  const std::size_t first_nl = text.find('\n');
  const std::string_view header = text.substr(0, first_nl);
  if (!header.starts_with("collc-wisdom "))
    throw error(errc::parse_error, "not a collc wisdom file (it must start with 'collc-wisdom ')");
  const auto version = parse_uint<int>(header.substr(13));
  if (!version) throw bad(1, collc::detail::cat("bad format version '", header.substr(13), "'"));
  if (*version != wisdom_format_version)
    throw error(errc::unsupported,
                collc::detail::cat("wisdom format version ", *version, ", this collc reads ", wisdom_format_version));
  // The checksum line is the last one and covers every byte before it.
  if (text.empty() || text.back() != '\n')
    throw error(errc::parse_error, "wisdom file is truncated (no final newline)");
  const std::size_t last_start = text.rfind('\n', text.size() - 2) + 1;
  const std::string_view last = text.substr(last_start, text.size() - 1 - last_start);
  if (!last.starts_with("checksum ") || last_start == 0)
    throw error(errc::parse_error, "wisdom file is truncated (no checksum line at the end)");
  const std::string want = collc::detail::hex64(collc::detail::stable_hash64(text.substr(0, last_start)));
  if (last.substr(9) != want)
    throw error(errc::parse_error, collc::detail::cat("wisdom checksum mismatch (file says ", last.substr(9),
                                                      ", contents give ", want, "): the file is corrupt"));
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
    if (!l.starts_with("entry ")) throw bad(line, collc::detail::cat("expected 'entry', got '", l.substr(0, 40), "'"));
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
      if (eq == std::string_view::npos) throw bad(line, collc::detail::cat("field '", field, "' has no '='"));
      const std::string_view name = field.substr(0, eq);
      const auto value = unescape(field.substr(eq + 1));
      if (!value) throw bad(line, collc::detail::cat("bad %-escape in field '", name, "'"));
      std::size_t idx = std::size(names);
      for (std::size_t j = 0; j < std::size(names); ++j)
        if (name == names[j]) idx = j;
      if (idx == std::size(names)) throw bad(line, collc::detail::cat("unknown field '", name, "'"));
      if (seen[idx]) throw bad(line, collc::detail::cat("field '", name, "' given twice"));
      seen[idx] = true;
      const std::string& v = *value;
      auto need = [&](auto opt) {
        if (!opt) throw bad(line, collc::detail::cat("bad value '", v, "' for field '", name, "'"));
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
      if (!seen[j]) throw bad(line, collc::detail::cat("missing field '", names[j], "'"));
    ++line;
    if (program_bytes > 0) {
      if (program_bytes > last_start - pos || text[pos + program_bytes] != '\n')
        throw bad(line, collc::detail::cat("program of ", program_bytes, " bytes runs past its entry"));
      e.program = std::string(text.substr(pos, program_bytes));
      line += static_cast<std::size_t>(std::count(e.program.begin(), e.program.end(), '\n')) + 1;
      pos += program_bytes + 1;
    }
    try {
      check_entry(e);
    } catch (const error& x) {
      throw bad(line - 1, x.what());  // what() is the bare message (no "collc: " prefix to cut)
    }
    w.entries_.push_back(std::move(e));
  }
  return w;
}

COLLC_INLINE wisdom wisdom::load(const std::filesystem::path& path, std::string_view fingerprint,
                                 std::vector<std::string>* warnings) {
  auto warn = [&](const std::string& s) {
    if (warnings != nullptr) warnings->push_back(collc::detail::cat("wisdom file ", path.string(), " ignored: ", s));
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
    warn(e.what());
    return {};
  }
  if (!fingerprint.empty() && !w.entries_.empty()) {
    const bool ours = std::any_of(w.entries_.begin(), w.entries_.end(),
                                  [&](const wisdom_entry& e) { return e.key.fingerprint == fingerprint; });
    if (!ours) {
      // The fingerprint covers the ranks' bindings too (node_topology::fingerprint):
      // a communicator of other ranks on the same machine has another one.
      warn(collc::detail::cat("its ", w.entries_.size(),
                              " entries were written on another machine, or for ranks bound otherwise on this one "
                              "(fingerprint ",
                              w.entries_.front().key.fingerprint, ", this one is ", fingerprint,
                              "; it covers the node's topology and the ranks' bindings)"));
      // Kept for merging (a shared file), never returned by find().
    }
  }
  return w;
}

COLLC_INLINE void wisdom::update(const std::filesystem::path& path, const std::vector<wisdom_entry>& add,
                                 std::vector<std::string>* warnings) {
  for (const auto& e : add) check_entry(e);
  const std::filesystem::path file = resolve_links(path);
  // Before the lock, so that nothing is created next to a refused path.
  refuse_foreign(path, file, "replace", true);
  const file_lock lock(file, warnings);
  const std::size_t said = warnings != nullptr ? warnings->size() : 0;
  wisdom w = load(file, {}, warnings);
  // load() ignored a wisdom file it could not read whole: its content goes.
  if (warnings != nullptr && warnings->size() > said && w.entries_.empty())
    warnings->push_back(
        collc::detail::cat("wisdom file ", named(path, file), " is replaced: the content ignored above is lost"));
  for (const auto& e : add) w.insert(e);
  w.write_atomically(file);
}

COLLC_INLINE void wisdom::clear(const std::filesystem::path& path, std::vector<std::string>* warnings,
                                const std::function<bool(const wisdom_entry&)>& drop) {
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
    if (ec)
      throw error(errc::io_error,
                  collc::detail::cat("cannot remove wisdom file ", named(path, file), ": ", ec.message()));
  } else {
    w.write_atomically(file);
  }
}

COLLC_INLINE void wisdom::write_atomically(const std::filesystem::path& path) const {
  const std::filesystem::path file = resolve_links(path);
  refuse_foreign(path, file, "replace", true);
  const std::string text = to_text();
  std::filesystem::path tmp = file;
  tmp += collc::detail::cat(".tmp.", unique_suffix());
  auto fail = [&](const std::string& what, int err) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return error(errc::io_error,
                 collc::detail::cat(what, ": ", (err != 0 ? std::generic_category().message(err) : "unknown error")));
  };
  {
    // iostreams keep no error code; errno from the failing open / write is
    // the reason on every platform collc targets.
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out.is_open()) throw fail(collc::detail::cat("cannot create temporary wisdom file ", tmp.string()), errno);
    errno = 0;
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) throw fail(collc::detail::cat("cannot write temporary wisdom file ", tmp.string()), errno);
  }
  // A shared target keeps its permissions (e.g. group-writable).
  std::error_code ec;
  const auto old = std::filesystem::status(file, ec);
  if (!ec && std::filesystem::is_regular_file(old))
    std::filesystem::permissions(tmp, old.permissions(), std::filesystem::perm_options::replace, ec);
  std::error_code rename_ec;
  std::filesystem::rename(tmp, file, rename_ec);
  if (rename_ec)
    throw fail(collc::detail::cat("cannot rename ", tmp.string(), " to ", named(path, file)), rename_ec.value());
}

COLLC_INLINE bool wisdom::read_file(const std::filesystem::path& path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return false;
  text = ss.str();
  return true;
}

COLLC_INLINE std::filesystem::path wisdom::resolve_links(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {  // 40: Linux's MAXSYMLINKS
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec)
      throw error(errc::io_error, collc::detail::cat("cannot read symbolic link ", p.string(), ": ", ec.message()));
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw error(errc::io_error, collc::detail::cat("wisdom file ", path.string(), ": too many levels of symbolic links"));
}

COLLC_INLINE std::string wisdom::named(const std::filesystem::path& path, const std::filesystem::path& file) {
  return file == path ? path.string() : collc::detail::cat(path.string(), " (symlink to ", file.string(), ")");
}

COLLC_INLINE void wisdom::refuse_foreign(const std::filesystem::path& path, const std::filesystem::path& file,
                                         const char* verb, bool empty_ok) {
  namespace fs = std::filesystem;
  auto refuse = [&](const std::string& why) {
    return error(errc::io_error,
                 collc::detail::cat("refusing to ", verb, " ", named(path, file), ": ", why, "; it is left untouched"));
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
    throw refuse(collc::detail::cat("it cannot be read (", std::generic_category().message(errno),
                                    "), so it cannot be checked to be a collc wisdom file"));
  // The first line, as a wisdom file's: "collc-wisdom <version>".
  char head[40] = {};
  in.read(head, static_cast<std::streamsize>(sizeof head));
  const std::string_view got(head, static_cast<std::size_t>(in.gcount()));
  if (got.empty() && empty_ok) return;
  if (got.empty()) throw refuse("it is empty, not a collc wisdom file");
  const std::size_t nl = got.find('\n');
  const auto version = got.starts_with(header) && nl != std::string_view::npos
                           ? detail::wisdom_form::parse_uint<int>(got.substr(header.size(), nl - header.size()))
                           : std::nullopt;
  if (!version) throw refuse("it is not a collc wisdom file (its first line is not 'collc-wisdom <format version>')");
  // A newer collc's file holds what this one cannot read; replacing it
  // would lose those entries (a file shared by jobs of two versions).
  if (*version > wisdom_format_version)
    throw refuse(collc::detail::cat("it is a wisdom file of format version ", *version, ", newer than this collc's (",
                                    wisdom_format_version, "), whose entries would be lost"));
}

COLLC_INLINE std::string wisdom::unique_suffix() {
  static thread_local std::mt19937_64 gen{
      std::random_device{}() ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      std::hash<std::thread::id>{}(std::this_thread::get_id())};
  return collc::detail::hex64(gen());
}

COLLC_INLINE std::optional<std::filesystem::path> wisdom_path_from_env() {
  const char* v = std::getenv("COLLC_WISDOM");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::filesystem::path(v);
}

COLLC_INLINE std::pair<std::size_t, std::size_t> wisdom_count_range(std::size_t count, std::size_t elem_size) {
  if (count == 0 || elem_size == 0) return {0, 0};
  const std::size_t bytes = count * elem_size;
  std::size_t lo = 1;
  while (lo <= bytes / 2) lo *= 2;
  const std::size_t hi = lo > (SIZE_MAX - 1) / 2 ? SIZE_MAX : 2 * lo - 1;
  return {(lo + elem_size - 1) / elem_size, hi / elem_size};
}

}  // namespace collc
