// collc factors P [--kind recursive|cyclic] [--list] [--limit N]
//
// Counts the factor-set phases for P ranks (both kinds unless --kind), and
// with --list prints them (the first N, default 100): `collc factors 288`
// prints 544 recursive and 5421 cyclic. Listed sequences are phases (all
// positive); an allreduce set mirrors them, e.g. {4,2} -> {-4,-2,2,4}.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <collc/enumerate.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>

namespace collc::tools {

inline std::uint64_t parse_count_arg(std::string_view what, std::string_view text) {
  std::uint64_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end)
    throw error(errc::invalid_argument,
                std::string(what) + " '" + std::string(text) + "' is not a non-negative integer");
  return v;
}

/// The command itself, writing through `out(std::string_view)` so tests can
/// capture it. Throws collc::error(errc::invalid_argument) for bad arguments.
template <class Out>
int factors_command(std::span<const std::string_view> args, Out&& out) {
  using collc::errc;
  using collc::error;
  std::optional<std::uint64_t> ranks;
  bool want_recursive = true, want_cyclic = true, list = false;
  std::uint64_t limit = 100;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&]() -> std::string_view {
      if (i + 1 >= args.size()) throw error(errc::invalid_argument, "option " + std::string(a) + " needs a value");
      return args[++i];
    };
    if (a == "--kind") {
      const std::string_view k = value();
      if (k == "recursive") {
        want_cyclic = false;
      } else if (k == "cyclic") {
        want_recursive = false;
      } else {
        throw error(errc::invalid_argument, "unknown --kind '" + std::string(k) + "' (recursive or cyclic)");
      }
    } else if (a == "--list") {
      list = true;
    } else if (a == "--limit") {
      limit = parse_count_arg("--limit", value());
    } else if (a == "-h" || a == "--help") {
      out("usage: collc factors P [--kind recursive|cyclic] [--list] [--limit N]\n");
      return 0;
    } else if (a.size() > 1 && a.front() == '-' && a[1] >= '0' && a[1] <= '9') {
      throw error(errc::invalid_argument, "P must be at least 1, got " + std::string(a));
    } else if (!a.empty() && a.front() == '-') {
      throw error(errc::invalid_argument, "unknown option '" + std::string(a) + "'");
    } else if (ranks) {
      throw error(errc::invalid_argument,
                  "unexpected argument '" + std::string(a) + "' (P is already " + std::to_string(*ranks) + ")");
    } else {
      ranks = parse_count_arg("P", a);
    }
  }
  if (!ranks)
    throw error(errc::invalid_argument, "missing P (usage: collc factors P [--kind ..] [--list] [--limit N])");
  const std::uint64_t p = *ranks;
  if (p < 1) throw error(errc::invalid_argument, "P must be at least 1, got 0");
  if (want_cyclic && p > collc::cyclic_count_limit)
    throw error(errc::invalid_argument, "P = " + std::to_string(p) + " is too big for cyclic counting (at most " +
                                            std::to_string(collc::cyclic_count_limit) + "); use --kind recursive");
  if (list && p > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw error(errc::invalid_argument, "--list needs P <= " + std::to_string(std::numeric_limits<int>::max()));

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

}  // namespace collc::tools

/// `collc factors ...`, printing to stdout.
inline int run_factors(std::span<const std::string_view> args) {
  return collc::tools::factors_command(args, [](std::string_view s) { fmt::print("{}", s); });
}
