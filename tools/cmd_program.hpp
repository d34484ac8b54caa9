#pragma once
// collc show / collc verify: lower a schedule and print its per-rank program,
// its data-flow graph, or the verifier's verdict.
//
//   collc show   --ranks 4 --factors=-2,-2,2,2 [--collective allreduce] [--algo recexch]
//                [--count N] [--root R] [--ranks-per-node L] [--arity K] [--roots S]
//                [--fold] [--op sum|matmul] [--dot FILE]
//   collc verify (same options) [--in-place] [--executions E] [--memory-limit GIB]
//                [--element-by-element]
//
// Both refuse at once a program too large for --memory-limit (default 2 GiB,
// ir::verify_options::memory_limit; 0: none), estimated before lowering and
// again by verify, instead of running out of memory after minutes.
//
// The program is what a plan lowers, the same everywhere; what an MPI plan
// binds on a communicator (placement, shm layout, chunking, messages) is
// printed by `collc-bench --describe` under mpiexec (docs/benchmarks.md), as
// `collc show --help` says.
#include <fmt/core.h>

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#include <collc/algo/presets.hpp>
#include <collc/ir/text.hpp>
#include <collc/ir/verify.hpp>
#include "options.hpp"

namespace collc::tool {

struct program_options {
  int ranks = 0;
  std::string factors;
  bool factors_given = false;
  algo::family fam = algo::family::recursive_exchange;
  bool fam_given = false;
  collective coll = collective::allreduce;
  std::size_t count = 0;
  bool count_given = false;
  int root = 0;
  bool root_given = false;
  int ranks_per_node = 0;
  int arity = 2;
  int roots = 1;
  bool fold = false;
  bool tree_shape_given = false;  // --arity or --roots
  bool commutative = true;        // --op sum (default) or a non-commutative op
  bool in_place = false;
  std::uint64_t memory_limit = ir::verify_options{}.memory_limit;  // bytes; 0: none
  int executions = 2;
  bool element_groups = ir::verify_options{}.element_groups;  // --element-by-element: false
  std::string dot;
  std::string_view verify_only;  // the first verify-only option given ("--in-place", ...), for show's error
  bool help = false;             // -h / --help: the command prints its usage and does nothing else
};

/// The options both commands take, for their --help.
inline constexpr std::string_view program_options_help =
    "  --ranks P             number of ranks (required)\n"
    "  --factors F           factor set, e.g. --factors=-2,-2,2,2 (default: the default schedule)\n"
    "  --algo A              recexch | cyclic | tree | copyin (default recexch; cyclic without\n"
    "                        --factors: ring)\n"
    "  --collective C        allreduce | reduce_scatter | allgather | reduce | bcast (default allreduce)\n"
    "  --count N             elements (MPI meaning; default 2 P)\n"
    "  --root R              root of reduce and bcast (default 0)\n"
    "  --ranks-per-node L    L ranks per node, messages between nodes (default: one node)\n"
    "  --arity K             tree arity, 0: binomial (default 2)\n"
    "  --roots S             tree roots (default 1)\n"
    "  --fold                recexch: the ranks beyond the factor product fold into partners\n"
    "  --op OP               sum | prod | min | max | matmul (non-commutative) (default sum)\n"
    "  --dot FILE            also write the data-flow graph (Graphviz; replaces an existing FILE\n"
    "                        only if collc wrote it)\n";

/// An option that the chosen schedule or collective would ignore is an error
/// that says so: `--algo tree --factors=-2,2` verifying a tree while the user
/// believes the factor set was proved is a silent wrong answer of the tool.
inline void refuse_options_that_do_not_apply(const program_options& o) {
  const auto refuse = [](std::string what) { throw error(errc::invalid_argument, std::move(what)); };
  const std::string algo = o.fam_given ? fmt::format("--algo {}", to_string(o.fam)) : "--algo recexch (the default)";
  if (o.factors_given && (o.fam == algo::family::tree || o.fam == algo::family::copy_in))
    refuse(fmt::format("--factors does not apply to {}: a factor set describes recexch and cyclic schedules", algo));
  if (o.tree_shape_given && o.fam != algo::family::tree)
    refuse(fmt::format("--arity and --roots apply to --algo tree only, not to {}", algo));
  if (o.fold && o.fam != algo::family::recursive_exchange)
    refuse(fmt::format("--fold applies to --algo recexch only, not to {}", algo));
  if (o.root_given && o.coll != collective::reduce && o.coll != collective::bcast)
    refuse(fmt::format("--root applies to --collective reduce and bcast only; {} has no root", to_string(o.coll)));
}

/// Refuses `path` for --dot if a file is there that collc did not write (as
/// wisdom files are kept): `--dot README.md` is a typo, not a request. Checked
/// while parsing, before anything is lowered or printed.
inline void check_dot_target(const std::string& path) {
  if (std::ifstream old(path); old) {
    std::string first;
    std::getline(old, first);
    if (first != "digraph collc {")
      throw error(errc::invalid_argument, fmt::format("--dot {}: the file exists and is not a graph collc wrote "
                                                      "(its first line is not 'digraph collc {{'); give another "
                                                      "name, or remove it first",
                                                      path));
  }
}

inline program_options parse_program_options(std::span<const std::string_view> args) {
  program_options o;
  for (option_cursor opt(args); opt.more(); opt.advance()) {
    const std::string_view a = opt.name();
    auto next = [&]() -> std::string_view { return opt.value(); };
    if (a == "--ranks") {
      o.ranks = parse_int(a, next(), 1, 1 << 16);
    } else if (a == "--factors") {
      o.factors = std::string(next());
      o.factors_given = true;
    } else if (a == "--algo") {
      const auto v = next();
      if (v == "recexch")
        o.fam = algo::family::recursive_exchange;
      else if (v == "cyclic")
        o.fam = algo::family::cyclic_shift;
      else if (v == "tree")
        o.fam = algo::family::tree;
      else if (v == "copyin")
        o.fam = algo::family::copy_in;
      else
        throw error(errc::invalid_argument, fmt::format("--algo must be recexch, cyclic, tree or copyin, got '{}'", v));
      o.fam_given = true;
    } else if (a == "--collective") {
      o.coll = parse_collective(a, next());
    } else if (a == "--count") {
      o.count = parse_integer<std::size_t>(a, next(), 0, std::size_t{1} << 40);
      o.count_given = true;
    } else if (a == "--root") {
      o.root = parse_int(a, next(), 0, 1 << 16);
      o.root_given = true;
    } else if (a == "--ranks-per-node") {
      o.ranks_per_node = parse_int(a, next(), 1, 1 << 16);
    } else if (a == "--arity") {
      o.arity = parse_int(a, next(), 0, 1 << 16);
      o.tree_shape_given = true;
    } else if (a == "--roots") {
      o.roots = parse_int(a, next(), 1, 1 << 16);
      o.tree_shape_given = true;
    } else if (a == "--fold") {
      o.fold = opt.flag();
    } else if (a == "--op") {
      o.commutative = parse_commutative_op(a, next());
    } else if (a == "--in-place") {
      o.in_place = opt.flag();
      if (o.verify_only.empty()) o.verify_only = a;
    } else if (a == "--executions") {
      o.executions = parse_int(a, next(), 1, 16);
      if (o.verify_only.empty()) o.verify_only = a;
    } else if (a == "--element-by-element") {
      o.element_groups = !opt.flag();
      if (o.verify_only.empty()) o.verify_only = a;
    } else if (a == "--memory-limit") {
      o.memory_limit = parse_integer<std::uint64_t>(a, next(), 0, std::uint64_t{1} << 20) << 30;
    } else if (a == "--dot") {
      o.dot = std::string(next());
      if (o.dot.empty()) throw error(errc::invalid_argument, "--dot needs a file name, got ''");
      check_dot_target(o.dot);
    } else if (a == "-h" || a == "--help") {
      o.help = true;
      return o;  // nothing else is required or checked
    } else {
      throw unknown_option(opt.raw());
    }
  }
  if (o.ranks == 0) throw error(errc::invalid_argument, "--ranks P is required");
  if (o.root >= o.ranks)
    throw error(errc::invalid_argument, fmt::format("--root {} is not a rank of {}", o.root, o.ranks));
  refuse_options_that_do_not_apply(o);
  if (!o.count_given) o.count = static_cast<std::size_t>(o.ranks) * 2;
  return o;
}

inline algo::schedule schedule_of(const program_options& o) {
  switch (o.fam) {
    case algo::family::tree: return algo::schedule::tree(o.arity, o.roots);
    case algo::family::copy_in: return algo::schedule::copy_in();
    case algo::family::cyclic_shift:
      if (!o.factors_given) return algo::schedule::ring();
      return algo::schedule::cyclic(factor_set::parse(o.factors));
    case algo::family::recursive_exchange:
      if (!o.factors_given) return algo::default_schedule(o.coll, o.ranks, o.count * sizeof(double), o.commutative);
      return algo::schedule::recursive(factor_set::parse(o.factors), o.fold);
  }
  return {};
}

/// Memory the lowered program of `s` on P ranks would take, from the
/// schedule alone: each rank has about 3 instructions (64 B each, plus the
/// lowering's own) per peer of every step, and a step of radix r has r - 1
/// peers (a ring: 2 (P - 1) steps of one; copy-in: P - 1 peers; trees: the
/// arity, binomial log2 P, per level). A flat recexch{-P,P} is P^2
/// instructions: 4096 ranks would take about 6 GiB before verify starts.
inline std::uint64_t lowered_bytes_estimate(const algo::schedule& s, int P) {
  const auto p = static_cast<std::uint64_t>(P);
  std::uint64_t peers = 0;
  switch (s.fam) {
    case algo::family::recursive_exchange:
    case algo::family::cyclic_shift:
      if (s.factors.empty()) peers = 2 * p;  // ring
      for (int r : s.factors) peers += static_cast<std::uint64_t>(r < 0 ? -r : r);
      break;
    case algo::family::copy_in: peers = p; break;
    case algo::family::tree: {
      std::uint64_t levels = 1;
      while ((std::uint64_t{1} << levels) < p) ++levels;
      peers = 2 * levels * static_cast<std::uint64_t>(s.arity == 0 ? 1 : s.arity) * static_cast<std::uint64_t>(s.roots);
      break;
    }
  }
  return p * (peers + 4) * 3 * 96;
}

inline ir::program lower_from(const program_options& o) {
  algo::lower_request q{.coll = o.coll, .ranks = o.ranks, .count = o.count, .root = o.root};
  if (o.ranks_per_node > 0)
    for (int r = 0; r < o.ranks; ++r) q.node_of.push_back(r / o.ranks_per_node);
  const auto s = schedule_of(o);
  // Refuse at once what would exhaust the machine (verify's own limit, see
  // ir::verify_options::memory_limit, applies only once the program exists).
  if (const std::uint64_t need = lowered_bytes_estimate(s, o.ranks); o.memory_limit != 0 && need > o.memory_limit)
    throw error(errc::invalid_argument,
                fmt::format("{} on {} ranks would be a program of about {:.1f} GiB (limit {:.1f} GiB, "
                            "--memory-limit); choose a schedule with smaller radices, e.g. "
                            "--factors=-16,-16,16,16 for 256 ranks",
                            s.to_string(), o.ranks, static_cast<double>(need) / (1 << 30),
                            static_cast<double>(o.memory_limit) / (1 << 30)));
  auto prog = algo::lower(s, q);
  if (prog.commutative_only && !o.commutative)
    throw error(errc::not_commutative,
                fmt::format("{} combines operands out of rank order and needs a commutative operator; the "
                            "non-commutative op must use recursive exchange, tree or copy-in",
                            s.to_string()));
  return prog;
}

inline void write_dot(const program_options& o, const ir::program& p) {
  if (o.dot.empty()) return;
  std::ofstream out(o.dot);
  out << ir::to_dot(p);
  if (!out) throw error(errc::io_error, fmt::format("cannot write '{}'", o.dot));
  fmt::print(stderr, "wrote {}\n", o.dot);
}

inline int run_show(std::span<const std::string_view> args) {
  const auto o = parse_program_options(args);
  if (o.help) {
    fmt::print(
        "usage: collc show --ranks P [options]\n"
        "Prints each rank's program for a schedule (collc's text form), as lowered for any machine.\n{}"
        "The bound plan of an MPI plan (its placement on nodes, shm layout, chunking and messages, as\n"
        "set up on a communicator) is printed by collc-bench --describe under mpiexec, e.g.\n"
        "  mpiexec -n 4 collc-bench --describe=all --sizes 64 --schedule=-2,-2,2,2\n"
        "(docs/benchmarks.md).\n",
        program_options_help);
    return 0;
  }
  if (!o.verify_only.empty())
    throw error(errc::invalid_argument,
                fmt::format("{} applies to collc verify only; collc show prints the program, which it does not change",
                            o.verify_only));
  const auto p = lower_from(o);
  fmt::print("{}", ir::to_text(p));
  write_dot(o, p);
  return 0;
}

inline int run_verify(std::span<const std::string_view> args) {
  const auto o = parse_program_options(args);
  if (o.help) {
    fmt::print(
        "usage: collc verify --ranks P [options]\n"
        "Lowers a schedule and proves it: each contribution once (in rank order for a non-commutative\n"
        "--op), identical results on all ranks, no race, no deadlock.\n{}"
        "  --in-place            send and recv are the same memory\n"
        "  --executions E        back-to-back executions to prove (default 2)\n"
        "  --memory-limit GIB    refuse a program estimated larger (default 2; 0: none)\n"
        "  --element-by-element  prove every element, not runs of elements that move together\n"
        "                        (verify_options::element_groups = false; slower, same verdict)\n",
        program_options_help);
    return 0;
  }
  const auto p = lower_from(o);
  std::size_t instructions = 0;
  for (const auto& c : p.code) instructions += c.size();
  ir::verify_options vo{.commutative = o.commutative, .executions = o.executions, .in_place = o.in_place};
  vo.memory_limit = o.memory_limit;
  vo.element_groups = o.element_groups;
  const auto v = ir::verify(p, vo);
  const std::string proved = o.commutative
                                 ? "each contribution once, identical results on all ranks, no race, no deadlock"
                                 : "each contribution once in rank order, identical results on all ranks, "
                                   "no race, no deadlock";
  fmt::print("{} {} on {} ranks, {} elements, {} instructions, {} executions{}: {}\n", p.name, to_string(p.coll),
             p.ranks, p.count, instructions, o.executions, o.in_place ? ", in place" : "",
             v ? fmt::format("verified ({})", proved) : fmt::format("FAILED: {}", v.to_string()));
  write_dot(o, p);
  return v ? 0 : 1;
}

}  // namespace collc::tool
