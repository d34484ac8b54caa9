#pragma once
// collc cost: predicted time of every schedule family for a collective, by
// the closed-form alpha-beta-gamma model (include/collc/algo/cost.hpp),
// sorted fastest first.
//
//   collc cost --ranks P --bytes N [--collective C] [--ranks-per-node L] [--op sum|matmul]
//              [--csv] [--alpha S] [--beta S/B] [--gamma S/B] [--alpha-sync S]
//              [--beta-copy S/B] [--shm-bandwidth B/S] [--o-net S] [--model "name=value ..."]
// (the closed form charges no o_net; --model sets every term as
// COLLC_MACHINE_MODEL does, the options after it change single terms)
//
// Families: recursive doubling, Rabenseifner, ring, binomial tree, copy-in,
// the library's default choice, and the best recursive-exchange and
// cyclic-shift factor sets of a pruned search (see cost_search below).
// --csv prints one row per family (tools/plot_cost.py reads it).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <collc/algo/cost.hpp>
#include <collc/algo/presets.hpp>
#include <collc/enumerate.hpp>
#include <collc/error.hpp>
#include "options.hpp"

namespace collc::tool {

struct cost_options {
  int ranks = 0;
  std::size_t bytes = 0;
  bool bytes_given = false;
  collective coll = collective::allreduce;
  int ranks_per_node = 0;
  bool commutative = true;
  bool csv = false;
  ir::machine_model model;
};

/// One line of the table.
struct cost_row {
  std::string family;  // "ring", "best recursive exchange", ...
  algo::schedule sched;
  double seconds = 0;
};

namespace detail {

// Enumerations larger than this are searched in a restricted form (see
// cost_search) so one call stays well under a second at P = 65536.
inline constexpr std::uint64_t search_limit = 200000;

}  // namespace detail

inline cost_options parse_cost_options(std::span<const std::string_view> args) {
  cost_options o;
  std::string_view single_term;  // the first of --alpha ... --o-net given
  for (option_cursor opt(args); opt.more(); opt.advance()) {
    const std::string_view a = opt.name();
    if (single_term.empty() && (a == "--alpha" || a == "--beta" || a == "--gamma" || a == "--alpha-sync" ||
                                a == "--beta-copy" || a == "--shm-bandwidth" || a == "--o-net"))
      single_term = a;
    auto next = [&]() -> std::string_view { return opt.value(); };
    if (a == "--ranks") {
      o.ranks = parse_int(a, next(), 1, 65536);
    } else if (a == "--bytes") {
      o.bytes = parse_size(a, next(), 0, std::uint64_t{1} << 40);
      o.bytes_given = true;
    } else if (a == "--ranks-per-node") {
      o.ranks_per_node = parse_int(a, next(), 1, 65536);
    } else if (a == "--collective") {
      o.coll = parse_collective(a, next());
    } else if (a == "--op") {
      o.commutative = parse_commutative_op(a, next());
    } else if (a == "--csv") {
      o.csv = opt.flag();
    } else if (a == "--alpha") {
      o.model.alpha_net = parse_nonnegative(a, next(), true);
    } else if (a == "--beta") {
      o.model.beta_net = parse_nonnegative(a, next(), true);
    } else if (a == "--gamma") {
      o.model.gamma = parse_nonnegative(a, next(), true);
    } else if (a == "--alpha-sync") {
      o.model.alpha_sync = parse_nonnegative(a, next(), true);
    } else if (a == "--beta-copy") {
      o.model.beta_copy = parse_nonnegative(a, next(), true);
    } else if (a == "--shm-bandwidth") {
      o.model.shm_bandwidth = parse_nonnegative(a, next(), false);
    } else if (a == "--o-net") {
      o.model.o_net = parse_nonnegative(a, next(), true);
    } else if (a == "--model") {  // every term at once, as COLLC_MACHINE_MODEL / collc-bench --calibrate print it
      // A single-term option before --model would be overwritten by it, unseen.
      if (!single_term.empty())
        throw error(errc::invalid_argument, fmt::format("{} is given before --model, which sets every term; give "
                                                        "single terms after --model to change them",
                                                        single_term));
      o.model = ir::parse_machine_model(next());
    } else {
      throw unknown_option(opt.raw());
    }
  }
  if (o.ranks == 0) throw error(errc::invalid_argument, "--ranks P is required");
  if (!o.bytes_given) throw error(errc::invalid_argument, "--bytes N is required");
  return o;
}

/// The best factor set of one family by the closed-form model. Recursive
/// exchange: every ordered factorization of P (for allreduce / reduce every
/// split into reduce-scatter and reduce-exchange steps) whose parts stay at
/// least one cache line (64 B); cyclic shift: every phase, both allreduce
/// forms (mirrored, and all-positive dissemination). When a family has more
/// than detail::search_limit sets, recursive exchange searches its first
/// search_limit factorizations and cyclic shift the phases with a uniform
/// prefix (r, r, ..., r, last) for every r; `complete` says which happened.
struct best_schedule {
  std::optional<algo::schedule> sched;
  double seconds = std::numeric_limits<double>::infinity();
  std::uint64_t searched = 0;
  bool complete = true;
};

inline best_schedule best_recursive(const cost_options& o) {
  best_schedule best;
  const int P = o.ranks;
  const double n = static_cast<double>(o.bytes);
  auto slices_ok = [&](std::int64_t parts) { return n / static_cast<double>(parts) >= algo::detail::cost_granule; };
  auto consider = [&](const std::vector<int>& f) {
    const auto s = algo::schedule::recursive(factor_set(std::span<const int>(f)));
    const double t = algo::predict(s, o.coll, P, o.bytes, o.model, o.ranks_per_node);
    ++best.searched;
    if (t < best.seconds) best.seconds = t, best.sched = s;
  };
  best.complete = count_recursive(static_cast<std::uint64_t>(P)) <= detail::search_limit;
  std::uint64_t seen = 0;
  for (const auto& seq : recursive_sequences(P)) {
    if (++seen > detail::search_limit) break;
    const std::vector<int> s(seq.begin(), seq.end());
    switch (o.coll) {
      case collective::allreduce:
      case collective::reduce: {
        std::int64_t parts = 1;
        for (std::size_t k = 0; k <= s.size(); ++k) {
          if (k > 0) parts *= s[k - 1];
          if (k > 0 && !slices_ok(parts)) break;
          std::vector<int> f;
          for (std::size_t i = 0; i < k; ++i) f.push_back(-s[i]);
          for (std::size_t i = k; i < s.size(); ++i) f.push_back(s[i]);
          for (std::size_t i = k; i-- > 0;) f.push_back(s[i]);
          consider(f);
        }
        break;
      }
      case collective::reduce_scatter: {
        std::vector<int> f;
        for (int a : s) f.push_back(-a);
        consider(f);
        break;
      }
      case collective::allgather: consider(s); break;
      case collective::bcast:  // the root's data is split into P parts
        if (slices_ok(P)) consider(s);
        break;
    }
  }
  return best;
}

inline best_schedule best_cyclic(const cost_options& o) {
  best_schedule best;
  const int P = o.ranks;
  const bool reducing = reduces(o.coll);
  if (P < 2 || o.coll == collective::reduce || o.coll == collective::bcast || (reducing && !o.commutative)) return best;
  const bool mirrored_ok = o.coll != collective::allreduce ||
                           static_cast<double>(o.bytes) / P >= static_cast<double>(algo::detail::cost_granule);
  auto consider = [&](const std::vector<int>& phase) {
    std::vector<std::vector<int>> sets;
    std::vector<int> neg;
    for (int a : phase) neg.push_back(-a);
    switch (o.coll) {
      case collective::allreduce: {
        sets.push_back(phase);
        if (mirrored_ok) {
          std::vector<int> m = neg;
          m.insert(m.end(), phase.rbegin(), phase.rend());
          sets.push_back(m);
        }
        break;
      }
      case collective::reduce_scatter: sets.push_back(neg); break;
      default: sets.push_back(phase); break;
    }
    for (const auto& f : sets) {
      const auto s = algo::schedule::cyclic(factor_set(std::span<const int>(f)));
      const double t = algo::predict(s, o.coll, P, o.bytes, o.model, o.ranks_per_node);
      ++best.searched;
      if (t < best.seconds) best.seconds = t, best.sched = s;
    }
  };
  best.complete = count_cyclic(static_cast<std::uint64_t>(P)) <= detail::search_limit;
  if (best.complete) {
    for (const auto& seq : cyclic_sequences(P)) consider(std::vector<int>(seq.begin(), seq.end()));
    return best;
  }
  consider({P});
  for (int r = 2; r < P; ++r) {
    std::vector<int> prefix;
    for (std::int64_t prod = r; prod < P; prod *= r) {
      prefix.push_back(r);
      std::vector<int> phase = prefix;
      phase.push_back(static_cast<int>((P + prod - 1) / prod));
      consider(phase);
    }
  }
  return best;
}

/// Every family's prediction for `o`, fastest first. Families that do not
/// apply (ring for a non-commutative reduction, recursive halving for a
/// P that is not a power of two, ...) are left out.
inline std::vector<cost_row> cost_table(const cost_options& o, best_schedule* rec_out = nullptr,
                                        best_schedule* cyc_out = nullptr) {
  o.model.validate();
  const int P = o.ranks;
  const bool pow2 = (P & (P - 1)) == 0;
  std::vector<cost_row> rows;
  auto add = [&](std::string family, const algo::schedule& s) {
    const double t = algo::predict(s, o.coll, P, o.bytes, o.model, o.ranks_per_node);
    rows.push_back({std::move(family), s, t});
  };
  auto repeated = [](int radix, int times) { return std::vector<int>(static_cast<std::size_t>(times), radix); };
  const int lg = algo::detail::log2_exact(algo::detail::floor_pow2(P));
  if (P >= 2) {
    switch (o.coll) {
      case collective::allreduce:
        add("recursive doubling", algo::recursive_doubling(P));
        add("Rabenseifner", algo::rabenseifner(P));
        break;
      case collective::reduce_scatter:
        if (pow2) add("recursive halving", algo::schedule::recursive(factor_set(repeated(-2, lg))));
        break;
      case collective::allgather:
      case collective::bcast:
        if (pow2) add("recursive doubling", algo::schedule::recursive(factor_set(repeated(2, lg))));
        break;
      case collective::reduce:
        if (pow2) {
          auto f = repeated(-2, lg);
          f.insert(f.end(), static_cast<std::size_t>(lg), 2);
          add("Rabenseifner", algo::schedule::recursive(factor_set(f)));
        }
        break;
    }
    const bool ring_ok =
        (o.commutative || !reduces(o.coll)) && o.coll != collective::reduce && o.coll != collective::bcast;
    if (ring_ok) add("ring", algo::schedule::ring());
    add("binomial tree", algo::schedule::tree(0));
  }
  add("copy-in", algo::schedule::copy_in());
  std::vector<int> node_of;
  if (o.ranks_per_node > 0)
    for (int r = 0; r < P; ++r) node_of.push_back(r / o.ranks_per_node);
  add("default", algo::default_schedule(o.coll, P, o.bytes, o.commutative, node_of));
  if (P >= 2) {
    const auto rec = best_recursive(o);
    if (rec.sched) rows.push_back({"best recursive exchange", *rec.sched, rec.seconds});
    const auto cyc = best_cyclic(o);
    if (cyc.sched) rows.push_back({"best cyclic shift", *cyc.sched, cyc.seconds});
    if (rec_out) *rec_out = rec;
    if (cyc_out) *cyc_out = cyc;
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const cost_row& a, const cost_row& b) { return a.seconds < b.seconds; });
  return rows;
}

inline std::string format_seconds(double s) {
  if (s < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

inline int run_cost(std::span<const std::string_view> args) {
  if (asks_for_help(args)) {
    fmt::print(
        "usage: collc cost --ranks P --bytes N [--ranks-per-node L] [--collective C] [--op sum|prod|min|max|matmul]\n"
        "                  [--csv] [--model TERMS | --alpha S --beta S/B --gamma S/B --o-net S --alpha-sync S\n"
        "                  --beta-copy S/B --shm-bandwidth B/S]\n");
    return 0;
  }
  const auto o = parse_cost_options(args);
  best_schedule rec, cyc;
  const auto rows = cost_table(o, &rec, &cyc);
  if (o.csv) {
    fmt::print("collective,ranks,ranks_per_node,bytes,family,schedule,seconds\n");
    for (const auto& r : rows)
      fmt::print("{},{},{},{},{},\"{}\",{:.6e}\n", to_string(o.coll), o.ranks, o.ranks_per_node, o.bytes, r.family,
                 r.sched.to_string(), r.seconds);
    return 0;
  }
  const int L = o.ranks_per_node == 0 || o.ranks_per_node >= o.ranks ? o.ranks : o.ranks_per_node;
  const auto& m = o.model;
  fmt::print("{} of {} bytes on {} ranks ({} per node, {} nodes)\n", to_string(o.coll), o.bytes, o.ranks, L,
             (o.ranks + L - 1) / L);
  fmt::print(
      "model: alpha_net {}, beta_net {:.3g} GB/s, alpha_sync {}, beta_copy {:.3g} GB/s, gamma {:.3g} GB/s, "
      "shm {:.3g} GB/s per node\n",
      format_seconds(m.alpha_net), 1e-9 / m.beta_net, format_seconds(m.alpha_sync), 1e-9 / m.beta_copy, 1e-9 / m.gamma,
      m.shm_bandwidth * 1e-9);
  std::size_t w = 8;
  for (const auto& r : rows) w = std::max(w, r.sched.to_string().size());
  fmt::print("  {:<24} {:<{}} {:>12}\n", "family", "schedule", w, "predicted");
  for (const auto& r : rows)
    fmt::print("  {:<24} {:<{}} {:>12}\n", r.family, r.sched.to_string(), w, format_seconds(r.seconds));
  if (rec.searched > 0 || cyc.searched > 0)
    fmt::print("searched {} recursive-exchange sets{} and {} cyclic-shift sets{}\n", rec.searched,
               rec.complete ? "" : fmt::format(" (the first {} factorizations)", detail::search_limit), cyc.searched,
               cyc.complete ? "" : " (uniform prefixes only)");
  return 0;
}

}  // namespace collc::tool
