// collc: command-line front end. Each subcommand lives in tools/cmd_<name>.hpp
// and exposes `int run_<name>(std::span<const std::string_view> args)`.
#include <fmt/core.h>

#include <exception>
#include <span>
#include <string_view>
#include <vector>

#include <collc/error.hpp>

namespace {

struct command {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string_view>);
};

// Subcommands register here (one line each).
constexpr command commands[] = {
    {"help", "list the commands", nullptr},
};

int usage(std::FILE* out) {
  fmt::print(out, "usage: collc <command> [options]\n");
  for (const auto& c : commands) fmt::print(out, "  {:<10} {}\n", c.name, c.summary);
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty()) return usage(stderr);
  if (args[0] == "help" || args[0] == "--help" || args[0] == "-h") return usage(stdout);
  for (const auto& c : commands) {
    if (c.name != args[0] || c.run == nullptr) continue;
    try {
      return c.run(std::span<const std::string_view>(args).subspan(1));
    } catch (const collc::error& e) {
      fmt::print(stderr, "collc {}: {}\n", c.name, e.what());
      return 2;
    } catch (const std::exception& e) {
      fmt::print(stderr, "collc {}: {}\n", c.name, e.what());
      return 2;
    }
  }
  fmt::print(stderr, "collc: unknown command '{}' (try 'collc help')\n", args[0]);
  return 2;
}
