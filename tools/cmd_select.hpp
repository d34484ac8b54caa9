#pragma once
// collc select: what the default selection picks, and why.
//
//   collc select --topology "pack:2 numa:4 core:16 pu:1" --ranks 128 --bytes 1M
//   collc select --topology "pack:4 core:72 pu:1" --ranks 288 --bytes 1M [--top 10]
//   collc select --ranks 8 --sweep                   # 8 B .. 16 MiB, one line per size
//     [--collective allreduce|reduce_scatter|allgather|reduce|bcast] [--op sum|matmul]
//     [--ranks-per-node L] [--tolerance 0.1] [--chunk-bytes 256K]
//     [--model "alpha_net=4.6e-6 beta_net=1.06e-10"]  (machine model terms; the
//     rest keep their defaults; what COLLC_MACHINE_MODEL holds for plans)
//
// Without --topology the node is this machine (hwloc, when collc was built
// with it); without hwloc the node is flat. Ranks are assumed bound
// compactly (rank i on PU i; more ranks than PUs share them in blocks), all
// on one node unless --ranks-per-node splits them into nodes.
#include <fmt/core.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <collc/algo/select.hpp>
#include <collc/error.hpp>
#include <collc/topology.hpp>
#include "options.hpp"
#if COLLC_HAS_HWLOC
#include <collc/backend/hwloc/topology.hpp>
#endif

namespace collc::tool {

inline std::string bytes_text(std::size_t b) {
  if (b >= (std::size_t{1} << 20) && b % (std::size_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

inline int run_select(std::span<const std::string_view> args) {
  if (asks_for_help(args)) {
    fmt::print(
        "usage: collc select --ranks P [--topology \"pack:2 numa:4 core:16 pu:1\"] [--ranks-per-node L] [--bytes N]\n"
        "                    [--collective C] [--op sum|prod|min|max|matmul] [--chunk-bytes N] [--model TERMS]\n"
        "                    [--top K] [--tolerance X] [--sweep]\n");
    return 0;
  }
  std::string topology;
  bool topology_given = false, sweep = false, commutative = true, bytes_given = false, top_given = false;
  int ranks = 0, ranks_per_node = 0, top = 5;
  std::size_t bytes = 8;
  collective coll = collective::allreduce;
  algo::select_options opt;
  for (option_cursor cur(args); cur.more(); cur.advance()) {
    const std::string_view a = cur.name();
    auto next = [&]() -> std::string_view { return cur.value(); };
    if (a == "--topology") {
      topology = std::string(next());
      topology_given = true;
    } else if (a == "--ranks") {
      ranks = parse_int(a, next(), 1, 1 << 16);
    } else if (a == "--ranks-per-node") {
      ranks_per_node = parse_int(a, next(), 1, 1 << 16);
    } else if (a == "--bytes") {
      bytes = parse_size(a, next(), 0, std::uint64_t{1} << 40);
      bytes_given = true;
    } else if (a == "--chunk-bytes") {
      opt.chunk_bytes = parse_size(a, next(), 64, std::uint64_t{1} << 40);
    } else if (a == "--top") {
      top = parse_int(a, next(), 1, 1000);
      top_given = true;
    } else if (a == "--tolerance") {
      opt.tie_tolerance = parse_number(a, next(), 0, 10);
    } else if (a == "--model") {
      opt.model = ir::parse_machine_model(next());
    } else if (a == "--sweep") {
      sweep = cur.flag();
    } else if (a == "--collective") {
      coll = parse_collective(a, next());
    } else if (a == "--op") {
      commutative = parse_commutative_op(a, next());
    } else {
      throw unknown_option(cur.raw());
    }
  }
  if (ranks == 0) throw error(errc::invalid_argument, "--ranks P is required");
  if (sweep && (bytes_given || top_given))
    throw error(errc::invalid_argument, fmt::format("{} does not apply with --sweep, which prints the chosen schedule "
                                                    "of every size from 8 B to 16 MiB",
                                                    bytes_given ? "--bytes" : "--top"));

  node_topology node;
  std::string source;
#if COLLC_HAS_HWLOC
  if (topology_given) {
    node = hwloc::read_synthetic(topology);
    source = "hwloc synthetic";
  } else {
    node = hwloc::read_node();
    source = "this machine (hwloc)";
  }
#else
  if (topology_given) {
    node = node_topology::synthetic(topology);
    source = "synthetic (collc's parser; built without hwloc)";
  } else {
    node = node_topology::flat(ranks);
    source = "flat (built without hwloc)";
  }
#endif
  const int L = ranks_per_node == 0 ? ranks : ranks_per_node;
  if (ranks % L != 0)
    throw error(errc::invalid_argument,
                fmt::format("{} ranks do not fill nodes of {} ranks; give --ranks-per-node", ranks, L));
  const int N = ranks / L;
  std::vector<int> node_of;
  if (N > 1)
    for (int r = 0; r < ranks; ++r) node_of.push_back(r / L);

  fmt::print("node: {} ({} PUs; {})\n", node.describe(), node.pus(), source);
  std::string hierarchy;
  int prev = 1;
  for (const auto& [kind, size] : node.rank_blocks(L)) {
    hierarchy += fmt::format("{}{} x{}", hierarchy.empty() ? "" : " < ", kind, size / prev);
    prev = size;
  }
  std::string radices;
  for (int r : node.rank_radices(L)) {
    if (!radices.empty()) radices += ',';
    radices += std::to_string(r);
  }
  fmt::print("ranks: {} = {} node(s) x {} (bound compactly); rank-order hierarchy: {} -> radices {{{}}}\n", ranks, N, L,
             hierarchy.empty() ? "none" : hierarchy, radices);
  fmt::print("{}, {} operator\n", to_string(coll), commutative ? "commutative" : "non-commutative");

  if (sweep) {
    fmt::print("{:>10}  {:<36} {:>14}\n", "bytes", "chosen", "predicted us");
    for (std::size_t b = 8; b <= (std::size_t{16} << 20); b *= 2) {
      const auto k = algo::candidates(coll, ranks, b, commutative, node_of, node, opt);
      if (k.empty()) continue;
      fmt::print("{:>10}  {:<36} {:>14.2f}{}\n", bytes_text(b), k.front().sched.to_string(), k.front().seconds * 1e6,
                 k.front().aligned ? "  (aligned)" : "");
    }
    return 0;
  }
  const auto k = algo::candidates(coll, ranks, bytes, commutative, node_of, node, opt);
  if (k.empty()) throw error(errc::unsupported, "no candidate schedule");
  fmt::print("{} per rank{}: chosen {}\n", bytes_text(bytes),
             (coll == collective::reduce_scatter || coll == collective::allgather) ? " (per block)" : "",
             k.front().sched.to_string());
  fmt::print("{:>3}  {:<36} {:>14}  {:<7} {}\n", "#", "schedule", "predicted us", "aligned",
             "bytes crossing (outermost first)");
  for (int i = 0; i < top && i < static_cast<int>(k.size()); ++i) {
    const auto& c = k[static_cast<std::size_t>(i)];
    std::string cross;
    for (double x : c.crossing) cross += fmt::format("{}{:.3g}", cross.empty() ? "" : " ", x);
    fmt::print("{:>3}  {:<36} {:>14.2f}{} {:<7} {}\n", i + 1, c.sched.to_string(), c.seconds * 1e6,
               c.refined ? "*" : " ", c.aligned ? "yes" : "", cross);
  }
  fmt::print("(* costed on the lowered program; others by the closed form)\n");
  return 0;
}

}  // namespace collc::tool
