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
/// file that is not a wisdom file (one whose first line is not
/// 'collc-wisdom <format version>'), nor a wisdom file of a newer format
/// version (a newer collc's entries, which this one cannot read), and never
/// touch a directory; they throw collc::error(errc::io_error) naming the
/// path and leave it as it was. A corrupt wisdom file is replaced, with a
/// warning that says so; an empty file is taken over for writing (nothing is
/// lost). The lock `<path>.lock` is always a directory: a file of that name
/// is left alone (the writer goes ahead unlocked, with a warning), and a
/// stale lock that cannot be removed is waited out like a live one. A symlink is followed (to any depth): the lock, the
/// temporary file and the rename happen next to its target, so the link
/// stays a link and every job sharing the target sees the update. Failures
/// name the system's reason (errno).
#include <collc/config.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
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

/// A set of wisdom entries: parse / print the file form, look up, merge,
/// and the file operations (load, update, clear). A plain value.
class wisdom {
 public:
  [[nodiscard]] const std::vector<wisdom_entry>& entries() const noexcept { return entries_; }
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }

  /// The entry for `key` whose range holds `count` (the narrowest if several).
  [[nodiscard]] std::optional<wisdom_entry> find(const wisdom_key& key, std::size_t count) const;

  /// Adds `e` (after check_entry), replacing entries of the same key whose
  /// count range overlaps its range.
  void insert(wisdom_entry e);

  /// Throws collc::error(errc::parse_error) naming the problem when `e`
  /// could yield a wrong plan: an empty or inverted count range, a schedule
  /// that does not parse or does not fit the key, a program that does not
  /// parse or was lowered for another collective, P or schedule.
  static void check_entry(const wisdom_entry& e);

  /// The file form (see the file comment), checksum included.
  [[nodiscard]] std::string to_text() const;

  /// Reads the file form. Throws collc::error naming the line: parse_error
  /// for anything malformed, truncated or failing its checksum or
  /// check_entry; unsupported for another format version.
  static wisdom parse(std::string_view text);

  /// Reads `path` for the machine with `fingerprint`. Never throws for what
  /// the file holds: a missing file is empty wisdom; an unreadable, foreign,
  /// truncated or corrupt one is empty wisdom plus a line in `warnings`
  /// (when given). Empty `fingerprint`: no machine check.
  static wisdom load(const std::filesystem::path& path, std::string_view fingerprint = {},
                     std::vector<std::string>* warnings = nullptr);

  /// Adds `add` to the file at `path` (a symlink: its target), safely
  /// against concurrent writers: lock, re-read (a corrupt wisdom file is
  /// replaced, with a warning), merge, write a temporary file, rename it over
  /// the file, unlock. Throws collc::error(errc::io_error) naming the path
  /// and the reason if the file cannot be written or is not a wisdom file
  /// (it is left untouched), and check_entry's error for a bad entry (before
  /// touching the file).
  static void update(const std::filesystem::path& path, const std::vector<wisdom_entry>& add,
                     std::vector<std::string>* warnings = nullptr);

  /// Removes the entries for which `drop` is true (all by default), under
  /// the lock; removes the file (a symlink: its target; the link stays) when
  /// none is left. Nothing at `path`: nothing to do. Throws
  /// collc::error(errc::io_error) naming the path, and removes nothing, when
  /// it is not a wisdom file (an empty file included) or a directory.
  static void clear(const std::filesystem::path& path, std::vector<std::string>* warnings = nullptr,
                    const std::function<bool(const wisdom_entry&)>& drop = {});

  /// Writes to a fresh temporary file next to `path` (a symlink: next to
  /// its target), then renames it over that file (readers see the old or the
  /// new file, never a mix; the link stays a link). Throws
  /// collc::error(errc::io_error) naming the path and the system's reason
  /// when it cannot, and when `path` holds something that is not a wisdom
  /// file (a directory, a user's file), which is left untouched.
  void write_atomically(const std::filesystem::path& path) const;

  friend bool operator==(const wisdom&, const wisdom&) = default;

 private:
  static bool read_file(const std::filesystem::path& path, std::string& text);

  /// The file a wisdom path names: `path` with its symlinks followed (a
  /// dangling link names the file it would create). Throws
  /// collc::error(errc::io_error) for a loop of links.
  static std::filesystem::path resolve_links(const std::filesystem::path& path);

  /// "PATH" or "PATH (symlink to TARGET)", for messages.
  static std::string named(const std::filesystem::path& path, const std::filesystem::path& file);

  /// Throws collc::error(errc::io_error) when `file` (what `path` resolves
  /// to) exists and is not a wisdom file collc may `verb` ("replace" /
  /// "remove"): a directory or other non-regular file, an unreadable file, a
  /// file that does not start with the wisdom header, or (unless
  /// `empty_ok`) an empty one. A corrupt wisdom file passes: it is ours.
  static void refuse_foreign(const std::filesystem::path& path, const std::filesystem::path& file, const char* verb,
                             bool empty_ok);

  static std::string unique_suffix();

  /// An exclusive lock on `path`: the directory `path`.lock, created
  /// atomically. A lock older than `stale` is taken over (its owner died);
  /// after `patience` the writer goes ahead unlocked (rename keeps the file
  /// whole; only a concurrent entry may be lost), with a warning.
  class file_lock;

  std::vector<wisdom_entry> entries_;
};

/// The wisdom file named by COLLC_WISDOM, if set (wisdom is off otherwise).
std::optional<std::filesystem::path> wisdom_path_from_env();

/// The count range a choice tuned at `count` elements of `elem_size` bytes is
/// remembered for: the power-of-two byte range [2^k, 2^(k+1)) holding
/// count * elem_size, in elements (count 0: just 0).
std::pair<std::size_t, std::size_t> wisdom_count_range(std::size_t count, std::size_t elem_size);

}  // namespace collc

#if COLLC_HEADER_ONLY
#include <collc/wisdom.ipp>
#endif
