// collc: command-line front end. Each subcommand lives in tools/cmd_<name>.hpp
// and exposes `int run_<name>(std::span<const std::string_view> args)`.
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>
#include <string_view>
#include <vector>

#include <collc/error.hpp>

#include "cmd_cost.hpp"
#include "cmd_factors.hpp"

#include "cmd_program.hpp"
#include "cmd_select.hpp"
#include "cmd_wisdom.hpp"

namespace {

struct command {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string_view>);
};

// Subcommands register here (one line each).
constexpr command commands[] = {
    {"help", "list the commands", nullptr},
    {"factors", "count and list factor sets for P ranks", collc::tool::run_factors},
    {"show",
     "print each rank's program for a schedule (--dot FILE: Graphviz data flow; an MPI plan as bound: "
     "collc-bench --describe)",
     collc::tool::run_show},
    {"verify", "lower a schedule and verify it (operand order, identical results, races, deadlock)",
     collc::tool::run_verify},
    {"cost", "predicted time of every schedule family (alpha-beta-gamma model), fastest first", collc::tool::run_cost},
    {"select", "rank schedules for a node (--topology \"pack:2 numa:4 core:16 pu:1\" --ranks P --bytes N)",
     collc::tool::run_select},
    {"wisdom", "show or clear the wisdom file (show|clear [--file PATH], default $COLLC_WISDOM)",
     collc::tool::run_wisdom},
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
    int rc = 2;
    try {
      rc = c.run(std::span<const std::string_view>(args).subspan(1));
    } catch (const std::exception& e) {
      fmt::print(stderr, "collc {}: {}\n", c.name, e.what());
      return 2;
    }
    // Output that did not reach its file (a full disk, /dev/full, a closed
    // pipe) is a failure too, not a success with nothing written.
    if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
      fmt::print(stderr, "collc {}: cannot write to standard output: {}\n", c.name, std::strerror(errno));
      return 2;
    }
    return rc;
  }
  fmt::print(stderr, "collc: unknown command '{}' (try 'collc help')\n", args[0]);
  return 2;
}
