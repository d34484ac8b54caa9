#pragma once
// What every subcommand parses its arguments with: options as "--name value"
// or "--name=value", and their values as integers, byte sizes and numbers,
// each refused with one wording that names the option and the bad value:
//
//   --ranks expects an integer in [1, 65536], got '0'
//   --bytes expects a size like 4096, 64K or 1M in [0, 1099511627776], got '1X'
//   --alpha expects a non-negative number, got '-1'
//
//   for (collc::tool::option_cursor opt(args); opt.more(); opt.advance()) {
//     if (opt.name() == "--ranks") ranks = parse_integer(opt.name(), opt.value(), 1, 65536);
//     else throw unknown_option(opt.raw());
//   }
#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <system_error>
#include <vector>

#include <collc/core.hpp>
#include <collc/error.hpp>

namespace collc::tool {

class option_cursor {
 public:
  explicit option_cursor(std::span<const std::string_view> args) : args_(args) { split(); }

  [[nodiscard]] bool more() const { return i_ < args_.size(); }
  void advance() {
    ++i_;
    split();
  }
  /// The option's name ("--ranks" for both "--ranks 4" and "--ranks=4"); a
  /// positional argument as given.
  [[nodiscard]] std::string_view name() const { return name_; }
  /// The argument as given, for error messages.
  [[nodiscard]] std::string_view raw() const { return args_[i_]; }
  /// Marks a flag (an option without a value): true, or an error for
  /// "--list=no", which would otherwise read as --list.
  [[nodiscard]] bool flag() const {
    if (has_inline_) throw error(errc::invalid_argument, fmt::format("{} takes no value, got '{}'", name_, raw()));
    return true;
  }
  /// The option's value: after '=' or the next argument (consumed).
  std::string_view value() {
    if (has_inline_) return inline_;
    if (i_ + 1 >= args_.size()) throw error(errc::invalid_argument, fmt::format("{} needs a value", name_));
    return args_[++i_];
  }

 private:
  void split() {
    has_inline_ = false;
    if (!more()) return;
    name_ = args_[i_];
    if (const auto eq = name_.find('='); name_.starts_with("--") && eq != std::string_view::npos) {
      inline_ = name_.substr(eq + 1);
      name_ = name_.substr(0, eq);
      has_inline_ = true;
    }
    // An option given twice is an error, not "the last one wins" unseen.
    if (name_.starts_with("--")) {
      for (std::string_view seen : seen_)
        if (seen == name_) throw error(errc::invalid_argument, fmt::format("{} is given twice", name_));
      seen_.push_back(name_);
    }
  }

  std::span<const std::string_view> args_;
  std::vector<std::string_view> seen_;
  std::size_t i_ = 0;
  std::string_view name_, inline_;
  bool has_inline_ = false;
};

/// Whether `args` ask for help ("-h" or "--help" anywhere): the subcommand
/// prints its usage to stdout and exits 0 instead of parsing them.
inline bool asks_for_help(std::span<const std::string_view> args) {
  for (std::string_view a : args)
    if (a == "-h" || a == "--help") return true;
  return false;
}

/// "unknown option '--frobnicate'"
inline error unknown_option(std::string_view raw) {
  return error(errc::invalid_argument, fmt::format("unknown option '{}'", raw));
}

/// The decimal integer `text` (no sign for unsigned T, no '+') in [lo, hi],
/// the value of `option` (or a positional argument's name, e.g. "P").
template <std::integral T>
T parse_integer(std::string_view option, std::string_view text, T lo, T hi) {
  T v{};
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end || v < lo || v > hi)
    throw error(errc::invalid_argument,
                fmt::format("{} expects an integer in [{}, {}], got '{}'", option, lo, hi, text));
  return v;
}

/// An int option in [lo, hi] (the common case: ranks, roots, counts of things).
inline int parse_int(std::string_view option, std::string_view text, int lo, int hi) {
  return parse_integer<int>(option, text, lo, hi);
}

/// A byte size in [lo, hi]: "4096", "64K" (or "64k"), "1M", "2G", each
/// optionally followed by "B" or "iB"; the suffixes are powers of 1024.
inline std::uint64_t parse_size(std::string_view option, std::string_view text, std::uint64_t lo, std::uint64_t hi) {
  std::string_view t = text;
  const auto strip = [&](std::string_view suffix) {
    if (t.size() > suffix.size() && t.ends_with(suffix)) {
      t.remove_suffix(suffix.size());
      return true;
    }
    return false;
  };
  if (!strip("iB")) strip("B");
  std::uint64_t mul = 1;
  if (strip("K") || strip("k"))
    mul = std::uint64_t{1} << 10;
  else if (strip("M"))
    mul = std::uint64_t{1} << 20;
  else if (strip("G"))
    mul = std::uint64_t{1} << 30;
  std::uint64_t v = 0;
  const auto* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(t.data(), end, v);
  if (t.empty() || ec != std::errc{} || ptr != end || v > hi / mul || v * mul < lo)
    throw error(errc::invalid_argument,
                fmt::format("{} expects a size like 4096, 64K or 1M in [{}, {}], got '{}'", option, lo, hi, text));
  return v * mul;
}

/// A finite number >= 0 (`allow_zero` false: > 0).
inline double parse_nonnegative(std::string_view option, std::string_view text, bool allow_zero) {
  double v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end || !std::isfinite(v) || v < 0 || (!allow_zero && v == 0))
    throw error(errc::invalid_argument, fmt::format("{} expects a {} number, got '{}'", option,
                                                    allow_zero ? "non-negative" : "positive", text));
  return v;
}

/// A number in [lo, hi].
inline double parse_number(std::string_view option, std::string_view text, double lo, double hi) {
  double v = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end || !(v >= lo && v <= hi))
    throw error(errc::invalid_argument, fmt::format("{} expects a number in [{}, {}], got '{}'", option, lo, hi, text));
  return v;
}

/// The value of --collective: one of the five collectives by its name.
inline collective parse_collective(std::string_view option, std::string_view text) {
  for (auto c : {collective::allreduce, collective::reduce_scatter, collective::allgather, collective::reduce,
                 collective::bcast})
    if (text == to_string(c)) return c;
  throw error(errc::invalid_argument,
              fmt::format("{} must be allreduce, reduce_scatter, allgather, reduce or bcast, got '{}'", option, text));
}

/// The value of --op, as the one property the tools use: whether the
/// operator is commutative (sum, prod, min, max) or not (matmul).
inline bool parse_commutative_op(std::string_view option, std::string_view text) {
  if (text == "sum" || text == "prod" || text == "min" || text == "max") return true;
  if (text == "matmul" || text == "noncommutative") return false;
  throw error(errc::invalid_argument,
              fmt::format("{} must be sum, prod, min, max or matmul (non-commutative), got '{}'", option, text));
}

}  // namespace collc::tool
