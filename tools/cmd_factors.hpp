// collc factors P [--kind recursive|cyclic] [--list] [--limit N]
//
// Counts the factor-set phases for P ranks (both kinds unless --kind), and
// with --list prints them (the first N, default 100): `collc factors 288`
// prints 544 recursive and 5421 cyclic. Listed sequences are phases (all
// positive); an allreduce set mirrors them, e.g. {4,2} -> {-4,-2,2,4}.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <collc/enumerate.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include "options.hpp"

namespace collc::tool {

/// The command itself, writing through `out(std::string_view)` so tests can
/// capture it. Throws collc::error(errc::invalid_argument) for bad arguments.
template <class Out>
int factors_command(std::span<const std::string_view> args, Out&& out) {
  using collc::errc;
  using collc::error;
  std::optional<std::uint64_t> ranks;
  bool want_recursive = true, want_cyclic = true, list = false;
  std::uint64_t limit = 100;
  constexpr std::uint64_t any = std::numeric_limits<std::uint64_t>::max();
  for (option_cursor opt(args); opt.more(); opt.advance()) {
    const std::string_view a = opt.name();
    if (a == "--kind") {
      const std::string_view k = opt.value();
      if (k == "recursive") {
        want_cyclic = false;
      } else if (k == "cyclic") {
        want_recursive = false;
      } else {
        throw error(errc::invalid_argument, fmt::format("unknown --kind '{}' (recursive or cyclic)", k));
      }
    } else if (a == "--list") {
      list = opt.flag();
    } else if (a == "--limit") {
      limit = parse_integer<std::uint64_t>(a, opt.value(), 0, any);
    } else if (a == "-h" || a == "--help") {
      out("usage: collc factors P [--kind recursive|cyclic] [--list] [--limit N]\n");
      return 0;
    } else if (a.starts_with('-') && !(a.size() > 1 && a[1] >= '0' && a[1] <= '9')) {
      throw unknown_option(opt.raw());
    } else if (ranks) {
      throw error(errc::invalid_argument, fmt::format("unexpected argument '{}' (P is already {})", a, *ranks));
    } else {
      ranks = parse_integer<std::uint64_t>("P", a, 1, any);  // a negative P is refused here too
    }
  }
  if (!ranks)
    throw error(errc::invalid_argument, "missing P (usage: collc factors P [--kind ..] [--list] [--limit N])");
  const std::uint64_t p = *ranks;
  if (want_cyclic && p > collc::cyclic_count_limit)
    throw error(errc::invalid_argument,
                fmt::format("P = {} is too big for cyclic counting (at most {}); use --kind recursive", p,
                            collc::cyclic_count_limit));
  if (list && p > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw error(errc::invalid_argument, fmt::format("--list needs P <= {}", std::numeric_limits<int>::max()));

  // Count first, so an overflow error comes before any output.
  const std::uint64_t n_recursive = want_recursive ? collc::count_recursive(p) : 0;
  const std::uint64_t n_cyclic = want_cyclic ? collc::count_cyclic(p) : 0;
  const auto print_list = [&](const auto& range, std::uint64_t total) {
    std::uint64_t shown = 0;
    for (const collc::radix_list& r : range) {
      if (shown == limit) break;
      out(fmt::format("  {}\n", r.to_string()));
      ++shown;
    }
    if (shown < total) out(fmt::format("  ... {} more (raise --limit)\n", total - shown));
  };
  out(fmt::format("P = {}\n", p));
  if (want_recursive) {
    out(fmt::format("recursive: {}\n", n_recursive));
    if (list) print_list(collc::recursive_sequences(static_cast<int>(p)), n_recursive);
  }
  if (want_cyclic) {
    out(fmt::format("cyclic: {}\n", n_cyclic));
    if (list) print_list(collc::cyclic_sequences(static_cast<int>(p)), n_cyclic);
  }
  return 0;
}

/// `collc factors ...`, printing to stdout.
inline int run_factors(std::span<const std::string_view> args) {
  return factors_command(args, [](std::string_view s) { fmt::print("{}", s); });
}

}  // namespace collc::tool

namespace collc {
/// The former name of collc::tool, for tests/test_enumerate.cpp until it
/// says collc::tool (a namespace alias, not a second namespace).
namespace tools = tool;
}  // namespace collc
