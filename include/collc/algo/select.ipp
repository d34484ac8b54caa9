#pragma once
/// \file
/// Definitions of select.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/algo/select.hpp>

#include <collc/algo/cost.hpp>
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/enumerate.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace collc::algo {

namespace detail {

/// Ranks per node and nodes from a program-rank node map (contiguous blocks;
/// uneven nodes are approximated by their average).
COLLC_INLINE std::pair<int, int> node_shape(int P, const std::vector<int>& node_of) {
  if (node_of.empty()) return {P, 1};
  int L = 0, N = 0;
  if (uniform_blocks(node_of, L, N)) return {L, N};
  std::set<int> nodes(node_of.begin(), node_of.end());
  N = static_cast<int>(nodes.size());
  return {std::max(1, P / std::max(N, 1)), N};
}

/// Boundaries of the rank-order hierarchy: consecutive-rank block sizes, the
/// outermost first, each < P (nodes, then the node's levels).
COLLC_INLINE std::vector<int> boundaries(int P, int L, int N, const node_topology& topo) {
  std::vector<int> b;
  if (N > 1) b.push_back(L);
  if (L > 1 && topo.pus() > 0) {
    const auto blocks = topo.rank_blocks(L);
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
      if (it->second < L) b.push_back(it->second);
  }
  b.erase(std::remove_if(b.begin(), b.end(), [&](int x) { return x >= P || x < 1; }), b.end());
  return b;
}

/// Intra-node radices of the rank-order hierarchy, innermost first (flat: {L}).
COLLC_INLINE std::vector<int> node_radices(int L, const node_topology& topo) {
  if (L <= 1) return {};
  if (topo.pus() == 0) return {L};
  return topo.rank_radices(L);
}

/// Every way to merge adjacent entries of `r` (products), r itself first.
COLLC_INLINE std::vector<std::vector<int>> merges(const std::vector<int>& r) {
  std::vector<std::vector<int>> out;
  if (r.empty()) return {{}};
  const std::size_t gaps = r.size() - 1;
  if (gaps > 12) return {r};
  for (std::uint32_t mask = 0; mask < (1u << gaps); ++mask) {
    std::vector<int> m{r[0]};
    for (std::size_t i = 1; i < r.size(); ++i) {
      if (mask & (1u << (i - 1)))
        m.back() *= r[i];
      else
        m.push_back(r[i]);
    }
    out.push_back(std::move(m));
  }
  return out;
}

struct generator {
  collective c;
  int P;
  std::size_t bytes;
  const select_options& opt;
  std::vector<std::pair<schedule, bool>> out;  // (schedule, aligned)
  std::set<std::string> seen;
  bool aligning = false;  // adding the hierarchy's own phases

  void add(const schedule& s) {
    if (seen.insert(s.to_string()).second) out.emplace_back(s, aligning);
  }

  /// The factor sets of one recursive phase a1..an for the collective.
  void add_phase(const std::vector<int>& a) {
    switch (c) {
      case collective::allreduce:
      case collective::reduce: {
        std::int64_t A = 1;
        for (std::size_t k = 0; k <= a.size(); ++k) {
          if (k > 0) {
            A *= a[k - 1];
            // no slice below a cache line (Jocksch et al. 2026)
            if (static_cast<double>(bytes) / static_cast<double>(A) < static_cast<double>(opt.min_slice_bytes)) break;
          }
          std::vector<int> f;
          for (std::size_t i = 0; i < k; ++i) f.push_back(-a[i]);
          for (std::size_t i = k; i < a.size(); ++i) f.push_back(a[i]);
          for (std::size_t i = k; i-- > 0;) f.push_back(a[i]);
          add(schedule::recursive(factor_set(std::span<const int>(f))));
        }
        break;
      }
      case collective::reduce_scatter: {
        std::vector<int> f;
        for (int x : a) f.push_back(-x);
        add(schedule::recursive(factor_set(std::span<const int>(f))));
        break;
      }
      case collective::allgather:
      case collective::bcast: {
        // An allgather set runs its first radix last, at stride 1 (the mirror
        // of an allreduce tail): the innermost level goes last.
        const std::vector<int> f(a.rbegin(), a.rend());
        add(schedule::recursive(factor_set(std::span<const int>(f))));
        break;
      }
    }
  }

  void add_cyclic_phase(const std::vector<int>& a) {
    const factor_set fs{std::span<const int>(a)};
    if (!validate(fs, P, collective::allgather, schedule_kind::cyclic).ok) return;  // the phase rule
    std::vector<int> neg;
    for (int x : a) neg.push_back(-x);
    if (c == collective::allreduce) {
      add(schedule::cyclic(fs));
      std::vector<int> mirrored = neg;
      mirrored.insert(mirrored.end(), a.rbegin(), a.rend());
      add(schedule::cyclic(factor_set(std::span<const int>(mirrored))));
    } else {
      add(schedule::cyclic(factor_set(std::span<const int>(c == collective::reduce_scatter ? neg : a))));
    }
  }
};

COLLC_INLINE std::uint64_t count_or_max(std::uint64_t (*count)(std::uint64_t), int P) {
  try {
    return count(static_cast<std::uint64_t>(P));
  } catch (const error&) {
    return UINT64_MAX;
  }
}

/// The candidate schedules for (c, P) before ranking (see the file comment),
/// each with whether it was built from the hierarchy.
COLLC_INLINE std::vector<std::pair<schedule, bool>> generate(collective c, int P, std::size_t bytes, bool commutative,
                                                             int L, int N, const node_topology& topo,
                                                             const select_options& opt) {
  generator g{c, P, bytes, opt, {}, {}};
  if (P <= 1) return {{schedule::copy_in(), false}};
  // Recursive exchange: the hierarchy first (also when everything is enumerated).
  const std::vector<int> intra = node_radices(L, topo);
  std::vector<std::vector<int>> inter{{}};
  if (N > 1) {
    inter.clear();
    if (count_or_max(count_recursive, N) <= 64)
      for (const auto& s : recursive_sequences(N)) inter.emplace_back(s.begin(), s.end());
    else
      inter.push_back({N});
  }
  if (L * N == P) {
    g.aligning = true;
    for (const auto& m : merges(intra))
      for (const auto& x : inter) {
        std::vector<int> phase = m;
        phase.insert(phase.end(), x.begin(), x.end());
        g.add_phase(phase);
      }
    g.aligning = false;
  }
  if (count_or_max(count_recursive, P) <= opt.max_phases)
    for (const auto& s : recursive_sequences(P)) g.add_phase(std::vector<int>(s.begin(), s.end()));
  else
    g.add_phase({P});
  if (c == collective::allreduce && (P & (P - 1)) != 0) {
    g.add(recursive_doubling(P));
    g.add(rabenseifner(P));
  }
  const bool reducing = reduces(c);
  const bool cyclic_ok = (commutative || !reducing) &&
                         (c == collective::allreduce || c == collective::reduce_scatter || c == collective::allgather);
  if (cyclic_ok) {
    if (P <= static_cast<int>(cyclic_count_limit) && count_or_max(count_cyclic, P) <= opt.max_cyclic) {
      for (const auto& s : cyclic_sequences(P)) g.add_cyclic_phase(std::vector<int>(s.begin(), s.end()));
    } else {
      for (int r : {2, 3, 4, 8, 16}) {
        std::vector<int> a;
        std::int64_t prod = 1;
        while (prod * r < P) a.push_back(r), prod *= r;
        a.push_back(static_cast<int>((P + prod - 1) / prod));
        if (a.back() >= 2) g.add_cyclic_phase(a);
      }
      g.add_cyclic_phase({P});
      // The whole node's hierarchy (e.g. a prime P just below the core count).
      if (topo.pus() >= P) {
        auto full = topo.rank_radices(topo.pus());
        std::int64_t prod = 1;
        std::vector<int> a;
        for (int r : full) {
          if (prod * r >= P) {
            a.push_back(static_cast<int>((P + prod - 1) / prod));
            break;
          }
          a.push_back(r);
          prod *= r;
        }
        if (!a.empty() && a.back() >= 2) g.add_cyclic_phase(a);
      }
    }
    g.add(schedule::ring());
  }
  int packages = 1;
  if (const int k = topo.level_index("pack"); k >= 0) packages = topo.levels[static_cast<std::size_t>(k)].objects();
  for (int arity : {0, 2, 3}) {
    g.add(schedule::tree(arity));
    if (c != collective::reduce && c != collective::bcast) {
      for (int roots : {2, packages * N})
        if (roots >= 2 && roots <= P) g.add(schedule::tree(arity, roots));
    }
  }
  g.add(schedule::copy_in());
  return std::move(g.out);
}

/// The pipeline the plan runs for a message of `bytes`: `full` chunks of
/// `chunk` bytes and a tail (the engine's rule: per rank, or per block with
/// P blocks of reduce_scatter / allgather in one chunk).
struct pipeline {
  std::size_t chunk = 0, full = 0, tail = 0;
};

COLLC_INLINE pipeline pipeline_of(collective c, int P, std::size_t bytes, const select_options& opt) {
  const bool blocked = c == collective::reduce_scatter || c == collective::allgather;
  const std::size_t per = blocked ? static_cast<std::size_t>(P) : 1;
  const std::size_t chunk = std::max<std::size_t>(64, opt.chunk_bytes / per);
  if (bytes <= chunk) return {bytes, 1, 0};
  return {chunk, bytes / chunk, bytes % chunk};
}

/// Closed-form seconds of one call of `s` (all chunks).
COLLC_INLINE double call_seconds(const schedule& s, collective c, int P, std::size_t bytes, int L,
                                 const select_options& opt) {
  const pipeline pl = pipeline_of(c, P, bytes, opt);
  const int rpn = L == P ? 0 : L;
  double t = static_cast<double>(pl.full) * predict(s, c, P, pl.chunk, opt.model, rpn);
  if (pl.tail > 0) t += predict(s, c, P, pl.tail, opt.model, rpn);
  return t;
}

/// Rough instruction count of the lowered program (to bound re-costing).
COLLC_INLINE std::size_t program_size(const schedule& s, int P) {
  const auto p = static_cast<std::size_t>(P);
  std::size_t radix_sum = 0;
  for (int r : s.factors) radix_sum += static_cast<std::size_t>(r < 0 ? -r : r);
  switch (s.fam) {
    case family::recursive_exchange: return p * (radix_sum + 4) * 2;
    case family::cyclic_shift: return s.factors.empty() ? 4 * p * p : p * (radix_sum + 4) * 4;
    case family::tree: return p * static_cast<std::size_t>(std::max(s.roots, 1)) * 8;
    case family::copy_in: return 2 * p * p;
  }
  return p * p;
}

/// Bytes (over all ranks) that cross each boundary in `prog`: read from a
/// peer's shared memory or received from a rank in another block of
/// consecutive ranks of that size.
COLLC_INLINE std::vector<double> crossing(const ir::program& prog, const std::vector<int>& bounds) {
  std::vector<double> out(bounds.size(), 0.0);
  auto count = [&](int r, int peer, std::size_t n) {
    for (std::size_t j = 0; j < bounds.size(); ++j)
      if (r / bounds[j] != peer / bounds[j]) out[j] += static_cast<double>(n);
  };
  for (int r = 0; r < prog.ranks; ++r)
    for (const auto& ins : prog.code[static_cast<std::size_t>(r)]) {
      if (const auto* cp = std::get_if<ir::copy>(&ins)) {
        if (cp->src.buf == ir::buffer::shm && cp->src.owner != r) count(r, cp->src.owner, cp->count);
      } else if (const auto* x = std::get_if<ir::reduce>(&ins)) {
        if (x->a.buf == ir::buffer::shm && x->a.owner != r) count(r, x->a.owner, x->count);
        if (x->b.buf == ir::buffer::shm && x->b.owner != r) count(r, x->b.owner, x->count);
      } else if (const auto* v = std::get_if<ir::recv>(&ins)) {
        count(r, v->peer, v->count);
      }
    }
  return out;
}

/// Re-costs `k` on its lowered program (ir::predict, one-byte elements,
/// cache-line granule) and measures its traffic across `bounds`. The closed
/// form prices trees with several roots, and every ordering of radices on a
/// node, alike; the program does not.
COLLC_INLINE void refine(candidate& k, collective c, int P, std::size_t bytes, int L, int N,
                         const std::vector<int>& bounds, const select_options& opt) {
  const pipeline pl = pipeline_of(c, P, bytes, opt);
  lower_request q;
  q.coll = c;
  q.ranks = P;
  q.count = std::max<std::size_t>(pl.chunk, 1);
  q.granule = 64;
  if (N > 1)
    for (int r = 0; r < P; ++r) q.node_of.push_back(r / L);
  const ir::program prog = lower(k.sched, q);
  const double closed = predict(k.sched, c, P, q.count, opt.model, L == P ? 0 : L);
  const double simulated = ir::predict(prog, opt.model, 1);
  // The tail (if any) scales like the chunk.
  k.seconds = closed > 0 ? k.seconds * simulated / closed : simulated;
  k.refined = true;
  k.crossing = crossing(prog, bounds);
}

}  // namespace detail

COLLC_INLINE std::vector<candidate> candidates(collective c, int P, std::size_t bytes, bool commutative,
                                               const std::vector<int>& node_of, const node_topology& topo,
                                               const select_options& opt) {
  if (P < 1) throw error(errc::invalid_argument, collc::detail::cat("select: number of ranks must be >= 1, got ", P));
  if (!node_of.empty() && node_of.size() != static_cast<std::size_t>(P))
    throw error(errc::invalid_argument,
                collc::detail::cat("select: node_of has ", node_of.size(), " entries for ", P, " ranks"));
  opt.model.validate();
  const std::pair<int, int> shape = detail::node_shape(P, node_of);
  const int L = shape.first, N = shape.second;  // lambdas capture these (clang 14: no structured bindings)
  std::vector<candidate> out;
  for (const auto& [s, aligned] : detail::generate(c, P, bytes, commutative, L, N, topo, opt)) {
    try {
      out.push_back({s, detail::call_seconds(s, c, P, bytes, L, opt), aligned, false, {}});
    } catch (const error&) {
      // a generated schedule the family cannot lower for (c, P): not a candidate
    }
  }
  auto by_cost = [](const candidate& a, const candidate& b) {
    if (a.seconds != b.seconds) return a.seconds < b.seconds;
    return a.sched.to_string() < b.sched.to_string();
  };
  std::sort(out.begin(), out.end(), by_cost);
  if (out.empty() || P <= 1) return out;
  // Stage 2: the cheapest few, then the aligned ones within the tolerance of
  // the best of those, on their programs.
  const double tol = std::max(opt.tie_tolerance, 0.0);
  const std::vector<int> bounds = detail::boundaries(P, L, N, topo);
  std::size_t refined = 0;
  auto try_refine = [&](candidate& k) {
    if (k.refined || detail::program_size(k.sched, P) > opt.refine_max_instructions) return;
    try {
      detail::refine(k, c, P, bytes, L, N, bounds, opt);
      ++refined;
    } catch (const error&) {
      k.refined = false;
    }
  };
  for (std::size_t i = 0; i < out.size() && i < opt.refine_top; ++i) try_refine(out[i]);
  double bar = out.front().seconds;
  for (const auto& k : out)
    if (k.refined) bar = std::min(bar, k.seconds);
  for (std::size_t i = 0, extra = 0; i < out.size() && extra < opt.refine_top; ++i)
    if (out[i].aligned && !out[i].refined && out[i].seconds <= bar * (1 + tol)) {
      try_refine(out[i]);
      ++extra;
    }
  const auto split = std::stable_partition(out.begin(), out.end(), [](const candidate& k) { return k.refined; });
  std::sort(split, out.end(), by_cost);
  if (refined == 0) return out;
  double best = out.front().seconds;
  for (auto it = out.begin(); it != split; ++it) best = std::min(best, it->seconds);
  // Bucket 0 holds the candidates within the tolerance of the best; without a
  // tolerance (or a zero-cost best) the bucket is the time itself.
  auto bucket = [&](double t) {
    if (tol <= 0 || best <= 0) return t <= best ? 0.0 : t;
    return std::floor(std::log(t / best) / std::log1p(tol));
  };
  std::sort(out.begin(), split, [&](const candidate& a, const candidate& b) {
    const double ba = bucket(a.seconds), bb = bucket(b.seconds);
    if (ba != bb) return ba < bb;
    // Each byte counts once per boundary it crosses, so outer traffic weighs more.
    double ta = 0, tb = 0;
    for (double x : a.crossing) ta += x;
    for (double x : b.crossing) tb += x;
    if (ta != tb) return ta < tb;
    if (a.crossing != b.crossing) return a.crossing < b.crossing;
    if (a.seconds != b.seconds) return a.seconds < b.seconds;
    return a.sched.to_string() < b.sched.to_string();
  });
  return out;
}

COLLC_INLINE schedule select(collective c, int P, std::size_t bytes, bool commutative, const std::vector<int>& node_of,
                             const node_topology& topo, const select_options& opt) {
  if (P <= 1) return schedule::copy_in();
  auto k = candidates(c, P, bytes, commutative, node_of, topo, opt);
  if (k.empty())
    throw error(errc::unsupported, collc::detail::cat("select: no schedule for ", to_string(c), " on ", P, " ranks"));
  return k.front().sched;
}

COLLC_INLINE schedule parse_schedule(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return error(errc::parse_error, collc::detail::cat("schedule '", text, "': ", why,
                                                       " (expected recexch{...}[+fold], cyclic{...}, ring, "
                                                       "tree:binomial|K[xR], copyin)"));
  };
  std::string_view t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\n')) t.remove_suffix(1);
  if (t == "ring") return schedule::ring();
  if (t == "copyin" || t == "copy_in" || t == "copy-in") return schedule::copy_in();
  auto number = [&](std::string_view v) {
    int x = 0;
    if (v.empty() || v.size() > 6) throw bad(collc::detail::cat("'", v, "' is not a small number"));
    for (char ch : v) {
      if (ch < '0' || ch > '9') throw bad(collc::detail::cat("'", v, "' is not a number"));
      x = x * 10 + (ch - '0');
    }
    return x;
  };
  if (t == "tree" || t == "binomial") return schedule::tree(0);
  if (t.starts_with("tree:")) {
    std::string_view v = t.substr(5);
    int roots = 1;
    if (const auto x = v.find('x'); x != std::string_view::npos) {
      roots = number(v.substr(x + 1));
      v = v.substr(0, x);
    }
    const int arity = v == "binomial" ? 0 : number(v);
    if (arity == 1) throw bad("tree arity must be binomial or >= 2");
    if (roots < 1) throw bad("tree roots must be >= 1");
    return schedule::tree(arity, roots);
  }
  bool fold = false;
  if (t.ends_with("+fold")) {
    fold = true;
    t.remove_suffix(5);
  }
  auto factors_of = [&](std::string_view v) {
    if (!v.starts_with("{") || !v.ends_with("}")) throw bad("factor set must be written {a,b,...}");
    try {
      return factor_set::parse(v);
    } catch (const error& e) {
      throw bad(e.what());
    }
  };
  if (t.starts_with("recexch")) return schedule::recursive(factors_of(t.substr(7)), fold);
  if (fold) throw bad("+fold applies to recexch only");
  if (t.starts_with("cyclic")) {
    const factor_set f = factors_of(t.substr(6));
    if (f.empty()) throw bad("an empty cyclic set; write ring for the ring");
    return schedule::cyclic(f);
  }
  throw bad("unknown schedule");
}

COLLC_INLINE void check_schedule(const schedule& s, collective c, int P, bool commutative) {
  if (P < 1) throw error(errc::invalid_argument, collc::detail::cat("number of ranks must be >= 1, got ", P));
  if (s.fam == family::cyclic_shift && reduces(c) && !commutative)
    throw error(errc::not_commutative,
                collc::detail::cat("schedule ", s.to_string(),
                                   " is a cyclic shift, which needs a commutative operator (this operator is not)"));
  if (P == 1) return;
  if ((s.fam == family::recursive_exchange && !s.fold) || (s.fam == family::cyclic_shift && !s.factors.empty())) {
    const auto kind = s.fam == family::recursive_exchange ? schedule_kind::recursive : schedule_kind::cyclic;
    const auto v = validate(s.factors, P, c, kind);
    if (!v.ok) throw error(v.code, std::string(v.message()));
  }
  // The closed-form cost walks the same structure as lowering and throws the
  // same errors (folding limits, tree arity, unsupported collectives).
  (void)predict(s, c, P, 64, ir::machine_model{});
}

namespace detail {

/// COLLC_ALGO / COLLC_FACTORS as far as they can be read without a
/// communicator: the factor set parsed, the words and the combination rules
/// checked, a full schedule text parsed. Errors name the variables.
struct env_override {
  std::optional<std::string> algo;
  std::optional<factor_set> factors;
  std::optional<schedule> parsed;  ///< COLLC_ALGO written as a whole schedule
  std::string where;               ///< "COLLC_ALGO='..' COLLC_FACTORS='..'", the variables that are set
  [[nodiscard]] error named(const error& e) const { return error(e.code(), collc::detail::cat(where, ": ", e.what())); }
  [[nodiscard]] bool algo_is(std::string_view a, std::string_view b) const {
    return algo && (*algo == a || *algo == b);
  }
};

COLLC_INLINE std::optional<env_override> read_env_override() {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
  env_override o;
  o.algo = env("COLLC_ALGO");
  const auto factors = env("COLLC_FACTORS");
  if (!o.algo && !factors) return std::nullopt;
  if (o.algo) o.where = collc::detail::cat("COLLC_ALGO='", *o.algo, "'");
  if (o.algo && factors) o.where += ' ';
  if (factors) o.where += collc::detail::cat("COLLC_FACTORS='", *factors, "'");
  try {
    if (factors) {
      o.factors = factor_set::parse(*factors);
      if (o.factors->empty()) throw error(errc::invalid_factor_set, "the factor set is empty");
    }
    if (!o.algo) return o;
    if (o.algo_is("recexch", "recursive_exchange") || o.algo_is("cyclic", "cyclic_shift")) {
      if (!o.factors)
        throw error(errc::invalid_argument,
                    collc::detail::cat(
                        *o.algo,
                        " needs COLLC_FACTORS (e.g. COLLC_FACTORS=-2,2 for 2 ranks), or write the whole schedule: "
                        "COLLC_ALGO='",
                        o.algo->starts_with("rec") ? "recexch{-2,2}" : "cyclic{2,2,2}", "'"));
    } else {
      if (o.factors)
        throw error(
            errc::invalid_argument,
            collc::detail::cat("COLLC_FACTORS goes with COLLC_ALGO=recexch or COLLC_ALGO=cyclic only, not with '",
                               *o.algo, "'"));
      if (*o.algo != "rabenseifner" && *o.algo != "recursive_doubling") o.parsed = parse_schedule(*o.algo);
    }
  } catch (const error& e) {
    throw o.named(e);
  }
  return o;
}

}  // namespace detail

COLLC_INLINE void check_override_from_env() { (void)detail::read_env_override(); }

COLLC_INLINE schedule schedule_of_factor_set(const factor_set& fs, int P, collective c) {
  const auto rec = validate(fs, P, c, schedule_kind::recursive);
  if (rec.ok) return schedule::recursive(fs);
  if (!cyclic_serves(c))
    throw error(rec.code, collc::detail::cat(rec.message(), " (and a cyclic shift does not serve ", to_string(c), ": ",
                                             rooted_not_cyclic, ")"));
  const auto cyc = validate(fs, P, c, schedule_kind::cyclic);
  if (cyc.ok) return schedule::cyclic(fs);
  throw error(rec.code, collc::detail::cat(rec.message(), " (and as a cyclic shift: ", cyc.message(), ")"));
}

COLLC_INLINE std::optional<schedule> override_from_env(collective c, int P, bool commutative) {
  const std::optional<detail::env_override> o = detail::read_env_override();
  if (!o) return std::nullopt;
  schedule s;
  try {
    if (!o->algo) {
      s = schedule_of_factor_set(*o->factors, P, c);
    } else if (o->algo_is("recexch", "recursive_exchange")) {
      s = schedule::recursive(*o->factors);
    } else if (o->algo_is("cyclic", "cyclic_shift")) {
      s = schedule::cyclic(*o->factors);
    } else if (*o->algo == "rabenseifner") {
      s = rabenseifner(P);
    } else if (*o->algo == "recursive_doubling") {
      s = recursive_doubling(P);
    } else {
      s = *o->parsed;
    }
    check_schedule(s, c, P, commutative);
  } catch (const error& e) {
    throw o->named(e);
  }
  return s;
}

}  // namespace collc::algo
