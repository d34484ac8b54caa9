#pragma once
// Walks a subcommand's arguments as options: "--name value" or "--name=value".
//
//   for (collc::tool::option_cursor opt(args); opt.more(); opt.advance()) {
//     if (opt.name() == "--ranks") ranks = parse(opt.value());
//     else throw unknown(opt.raw());
//   }
#include <fmt/core.h>

#include <cstddef>
#include <span>
#include <string_view>

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
  /// The option's name ("--ranks" for both "--ranks 4" and "--ranks=4").
  [[nodiscard]] std::string_view name() const { return name_; }
  /// The argument as given, for error messages.
  [[nodiscard]] std::string_view raw() const { return args_[i_]; }
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
  }

  std::span<const std::string_view> args_;
  std::size_t i_ = 0;
  std::string_view name_, inline_;
  bool has_inline_ = false;
};

}  // namespace collc::tool
