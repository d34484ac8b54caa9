#pragma once
// collc wisdom: look at or remove the wisdom file.
//
//   collc wisdom show  [--file PATH]      # default: $COLLC_WISDOM
//   collc wisdom clear [--file PATH]
//
// `show` prints every entry (and why a file is ignored, if it is); `clear`
// removes the file (under the writers' lock; a symlink's target, the link
// stays). `clear` refuses, with exit status 2 and the reason, to remove
// anything that is not a collc wisdom file: a user's file, a directory.
#include <fmt/core.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <collc/error.hpp>
#include <collc/wisdom.hpp>
#include "options.hpp"

namespace collc::tool {

inline int run_wisdom(std::span<const std::string_view> args) {
  if (asks_for_help(args)) {
    fmt::print("usage: collc wisdom show|clear [--file PATH] (default: $COLLC_WISDOM)\n");
    return 0;
  }
  if (args.empty() || (args[0] != "show" && args[0] != "clear"))
    throw error(errc::invalid_argument, "usage: collc wisdom show|clear [--file PATH] (default: $COLLC_WISDOM)");
  const std::string_view action = args[0];
  std::optional<std::filesystem::path> file = wisdom_path_from_env();
  for (option_cursor opt(args.subspan(1)); opt.more(); opt.advance()) {
    if (opt.name() == "--file")
      file = std::string(opt.value());
    else
      throw unknown_option(opt.raw());
  }
  if (!file) throw error(errc::invalid_argument, "no wisdom file: set COLLC_WISDOM or pass --file PATH");
  std::vector<std::string> warnings;
  if (action == "clear") {
    std::error_code ec;
    const bool existed = std::filesystem::exists(*file, ec);
    wisdom::clear(*file, &warnings);
    for (const auto& w : warnings) fmt::print(stderr, "collc wisdom: warning: {}\n", w);
    fmt::print("{} {}\n", existed ? "removed" : "no file at", file->string());
    return 0;
  }
  if (file->empty()) throw error(errc::invalid_argument, "--file needs a path, got ''");
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(*file, ec))) {
    // As clear says: not "0 entries", which reads as an empty wisdom file.
    fmt::print("no file at {}\n", file->string());
    return 0;
  }
  const wisdom w = wisdom::load(*file, {}, &warnings);
  for (const auto& m : warnings) fmt::print(stderr, "collc wisdom: warning: {}\n", m);
  fmt::print("{}: {} entr{}\n", file->string(), w.entries().size(), w.entries().size() == 1 ? "y" : "ies");
  if (w.empty()) return warnings.empty() ? 0 : 1;
  fmt::print("{:<15} {:>4} {:<18} {:>6} {:>9} {:<16} {:>21}  {:<30} {:>12} {:<6} {}\n", "collective", "elem", "op",
             "ranks", "nodes", "fingerprint", "counts", "schedule", "us/call", "source", "program");
  for (const auto& e : w.entries()) {
    const auto& k = e.key;
    fmt::print("{:<15} {:>4} {:<18} {:>6} {:>9} {:<16} {:>21}  {:<30} {:>12.2f} {:<6} {}\n", to_string(k.coll),
               k.elem_size, k.op + (k.commutative ? "" : " (nc)"), k.ranks,
               fmt::format("{}x{}", k.nodes, k.ranks_per_node), k.fingerprint,
               fmt::format("{}..{}", e.min_count, e.max_count), e.schedule, e.seconds * 1e6, e.source,
               e.program.empty() ? "-" : fmt::format("{} B", e.program.size()));
  }
  return 0;
}

}  // namespace collc::tool
