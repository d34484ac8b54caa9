#pragma once
/// \file
/// Definitions of topology.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/topology.hpp>

namespace collc {

COLLC_INLINE int topology_level::objects() const {
  int n = 0;
  for (int o : of_pu) n = std::max(n, o + 1);
  return n;
}

namespace detail {

COLLC_INLINE int priority_of(std::string_view kind) {
  for (std::size_t i = 0; i < std::size(level_priority); ++i)
    if (level_priority[i] == kind) return static_cast<int>(i);
  return static_cast<int>(std::size(level_priority));
}

COLLC_INLINE std::uint64_t stable_hash64(std::string_view s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

COLLC_INLINE std::string hex64(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

/// Canonical kind for a synthetic-description token, or "" if unknown.
COLLC_INLINE std::string canonical_kind(std::string_view t) {
  std::string k(t);
  for (char& c : k) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (k == "pack" || k == "package" || k == "socket") return "pack";
  if (k == "numa" || k == "node" || k == "numanode") return "numa";
  if (k == "die") return "die";
  if (k == "group" || k == "group0") return "group";
  if (k == "core") return "core";
  if (k == "pu" || k == "thread") return "pu";
  for (char d : {'1', '2', '3', '4', '5'}) {
    const std::string base{'l', d};
    const std::string_view rest = std::string_view(k).substr(k.size() < 2 ? k.size() : 2);
    if (k.starts_with(base) &&
        (rest.empty() || rest == "d" || rest == "u" || rest == "cache" || rest == "dcache" || rest == "ucache"))
      return base;
  }
  return "";
}

COLLC_INLINE bool same_partition(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.size() != b.size()) return false;
  // Object numbers are in PU order, so equal partitions have equal numbers.
  return a == b;
}

}  // namespace detail

COLLC_INLINE node_topology node_topology::flat(int pus) {
  if (pus < 1) throw error(errc::invalid_argument, detail::cat("node_topology::flat: pus must be >= 1, got ", pus));
  node_topology t;
  topology_level pu{"pu", {}, 0};
  for (int p = 0; p < pus; ++p) pu.of_pu.push_back(p);
  t.levels.push_back(std::move(pu));
  return t;
}

COLLC_INLINE node_topology node_topology::from_levels(std::vector<topology_level> raw, std::vector<cache_info> caches) {
  if (raw.empty() || raw.back().kind != "pu")
    throw error(errc::invalid_argument, "node_topology: the last level must be \"pu\"");
  const std::size_t pus = raw.back().of_pu.size();
  for (const auto& l : raw) {
    if (l.of_pu.size() != pus)
      throw error(errc::invalid_argument, detail::cat("node_topology: level '", l.kind, "' covers ", l.of_pu.size(),
                                                      " PUs, the node has ", pus));
    int next = 0;  // objects must be numbered in PU order: 0, then 0 or 1, ...
    for (int o : l.of_pu) {
      if (o < 0 || o > next)
        throw error(errc::invalid_argument,
                    detail::cat("node_topology: level '", l.kind, "' does not number its objects in PU order"));
      if (o == next) ++next;
    }
  }
  node_topology t;
  t.caches = std::move(caches);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const auto& l = raw[i];
    const bool always = l.kind == "pack" || l.kind == "core" || l.kind == "pu";
    if (!always) {
      if (l.objects() <= 1) continue;  // the whole node
      bool beaten = false;
      for (std::size_t j = 0; j < raw.size() && !beaten; ++j) {
        if (j == i || !detail::same_partition(raw[j].of_pu, l.of_pu)) continue;
        const auto& o = raw[j];
        const bool o_always = o.kind == "pack" || o.kind == "core" || o.kind == "pu";
        const int pi = detail::priority_of(l.kind), pj = detail::priority_of(o.kind);
        beaten = o_always || pj < pi || (pj == pi && j < i);
      }
      if (beaten) continue;
    }
    t.levels.push_back(l);
  }
  return t;
}

COLLC_INLINE node_topology node_topology::synthetic(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return error(errc::invalid_argument, detail::cat("synthetic topology '", text, "': ", why));
  };
  struct token {
    std::string kind;
    long long arity;
    std::size_t size;
  };
  std::vector<token> tokens;
  std::size_t i = 0;
  auto skip_blanks = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
  };
  skip_blanks();
  while (i < text.size()) {
    const std::size_t blank = std::min(text.find_first_of(" \t\n", i), text.size());
    const std::size_t colon = text.substr(0, blank).find(':', i);
    if (colon == std::string_view::npos)
      throw bad(detail::cat("expected kind:arity at '", text.substr(i, blank - i), "'"));
    const std::string_view name = text.substr(i, colon - i);
    const std::string kind = detail::canonical_kind(name);
    if (kind.empty()) throw bad(detail::cat("unknown level kind '", name, "'"));
    i = colon + 1;
    long long arity = 0;
    const std::size_t digits_at = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && arity <= (1 << 20))
      arity = arity * 10 + (text[i++] - '0');
    if (i == digits_at || arity < 1 || arity > (1 << 20))
      throw bad(detail::cat("level '", name, "' needs an arity in [1, 1048576]"));
    std::size_t size = 0;
    if (i < text.size() && text[i] == '(') {
      const std::size_t close = text.find(')', i);
      if (close == std::string_view::npos) throw bad(detail::cat("unclosed '(' after level '", name, "'"));
      const std::string_view attrs = text.substr(i + 1, close - i - 1);
      if (attrs.starts_with("size=")) size = parse_size(attrs.substr(5), bad);
      i = close + 1;
    }
    if (i < text.size() && text[i] != ' ' && text[i] != '\t' && text[i] != '\n')
      throw bad(detail::cat("unexpected '", text[i], "' after level '", name, "'"));
    tokens.push_back({kind, arity, size});
    skip_blanks();
  }
  if (tokens.empty()) throw bad("no levels");
  if (tokens.back().kind != "pu") throw bad("the last level must be pu (hwloc 2.9 wants a PU level last)");
  long long pus = 1;
  for (const auto& t : tokens) {
    pus *= t.arity;
    if (pus > (1 << 20)) throw bad("more than 1048576 PUs");
  }
  std::vector<topology_level> raw;
  std::vector<cache_info> caches;
  long long objects = 1;
  for (const auto& t : tokens) {
    objects *= t.arity;
    const long long per = pus / objects;  // PUs per object of this level
    topology_level l{t.kind, {}, t.size};
    l.of_pu.resize(static_cast<std::size_t>(pus));
    for (long long p = 0; p < pus; ++p) l.of_pu[static_cast<std::size_t>(p)] = static_cast<int>(p / per);
    if (t.kind.size() == 2 && t.kind[0] == 'l') caches.push_back({t.kind[1] - '0', t.size, static_cast<int>(per)});
    raw.push_back(std::move(l));
  }
  std::sort(caches.begin(), caches.end(), [](const cache_info& a, const cache_info& b) { return a.depth < b.depth; });
  return from_levels(std::move(raw), std::move(caches));
}

COLLC_INLINE int node_topology::level_index(std::string_view kind) const {
  for (std::size_t i = 0; i < levels.size(); ++i)
    if (levels[i].kind == kind) return static_cast<int>(i);
  return -1;
}

COLLC_INLINE std::string node_topology::describe() const {
  std::string uniform, totals;
  bool is_uniform = true;
  int parent_objects = 1;
  std::vector<int> parent_of_pu(static_cast<std::size_t>(pus()), 0);
  for (const auto& l : levels) {
    const int n = l.objects();
    // children of each parent object
    std::vector<int> seen(static_cast<std::size_t>(n), -1), kids(static_cast<std::size_t>(parent_objects), 0);
    for (std::size_t p = 0; p < l.of_pu.size(); ++p) {
      const auto o = static_cast<std::size_t>(l.of_pu[p]);
      if (seen[o] < 0) {
        seen[o] = parent_of_pu[p];
        ++kids[static_cast<std::size_t>(parent_of_pu[p])];
      }
    }
    for (int k : kids) is_uniform = is_uniform && k == kids.front();
    if (!uniform.empty()) uniform += ' ', totals += ' ';
    uniform += detail::cat(l.kind, ":", kids.empty() ? 0 : kids.front());
    totals += detail::cat(l.kind, "=", n);
    parent_of_pu = l.of_pu;
    parent_objects = n;
  }
  return is_uniform ? uniform : totals;
}

COLLC_INLINE std::string node_topology::fingerprint() const {
  std::string s = "collc-node-1;";
  for (const auto& l : levels) {
    s += detail::cat(l.kind, ":", l.cache_bytes, "[");
    for (int o : l.of_pu) s += detail::cat(o, ",");
    s += "]";
  }
  for (const auto& c : caches) s += detail::cat(";L", c.depth, "=", c.bytes, "/", c.pus_per_cache);
  s += ";bind";
  for (const auto& b : bindings) s += detail::cat(":", b.level, ".", b.object);
  return detail::hex64(detail::stable_hash64(s));
}

COLLC_INLINE rank_binding node_topology::locate(const std::vector<int>& pu_set) const {
  std::vector<int> in;
  for (int p : pu_set)
    if (p >= 0 && p < pus()) in.push_back(p);
  if (in.empty()) return {};
  for (int k = static_cast<int>(levels.size()) - 1; k >= 0; --k) {
    const auto& of = levels[static_cast<std::size_t>(k)].of_pu;
    const int o = of[static_cast<std::size_t>(in.front())];
    bool all = true;
    for (int p : in) all = all && of[static_cast<std::size_t>(p)] == o;
    if (all) return {k, o};
  }
  return {};
}

COLLC_INLINE node_topology node_topology::with_compact_ranks(int ranks) const {
  node_topology t = *this;
  t.bindings.clear();
  const int n = pus();
  for (int r = 0; r < ranks; ++r) {
    const int p = ranks <= n ? r : static_cast<int>(static_cast<long long>(r) * n / ranks);
    t.bindings.push_back({static_cast<int>(levels.size()) - 1, p});
  }
  return t;
}

COLLC_INLINE std::vector<std::pair<std::string, int>> node_topology::rank_blocks(int ranks) const {
  if (ranks < 1) throw error(errc::invalid_argument, detail::cat("rank_blocks: ranks must be >= 1, got ", ranks));
  if (levels.empty()) return {{"node", ranks}};
  const std::vector<rank_binding> bind =
      bindings.size() == static_cast<std::size_t>(ranks) ? bindings : with_compact_ranks(ranks).bindings;
  // First PU of each object of each level (to find a binding's ancestors).
  std::vector<std::vector<int>> first_pu(levels.size());
  for (std::size_t k = 0; k < levels.size(); ++k) {
    first_pu[k].assign(static_cast<std::size_t>(levels[k].objects()), -1);
    for (std::size_t p = levels[k].of_pu.size(); p-- > 0;)
      first_pu[k][static_cast<std::size_t>(levels[k].of_pu[p])] = static_cast<int>(p);
  }
  auto ancestor = [&](int r, std::size_t k) {  // object of level k holding rank r, or -1
    const rank_binding& b = bind[static_cast<std::size_t>(r)];
    if (b.level < static_cast<int>(k) || b.level >= static_cast<int>(levels.size())) return -1;
    const auto& firsts = first_pu[static_cast<std::size_t>(b.level)];
    if (b.object < 0 || b.object >= static_cast<int>(firsts.size())) return -1;
    return levels[k].of_pu[static_cast<std::size_t>(firsts[static_cast<std::size_t>(b.object)])];
  };
  auto fits = [&](int d, std::size_t k) {  // every block of d ranks inside one level-k object
    for (int lo = 0; lo < ranks; lo += d) {
      const int o = ancestor(lo, k);
      if (o < 0) return false;
      for (int r = lo + 1; r < lo + d; ++r)
        if (ancestor(r, k) != o) return false;
    }
    return true;
  };
  std::vector<std::pair<std::string, int>> out;
  int b = 1;
  for (std::size_t k = levels.size(); k-- > 0;) {
    int best = b;
    for (int d = b * 2; d <= ranks; d += b)
      if (ranks % d == 0 && fits(d, k)) best = d;
    if (best > b) {
      out.emplace_back(levels[k].kind, best);
      b = best;
    }
  }
  if (b < ranks) out.emplace_back("node", ranks);
  return out;
}

COLLC_INLINE std::vector<int> node_topology::rank_radices(int ranks) const {
  std::vector<int> out;
  int b = 1;
  for (const auto& [kind, size] : rank_blocks(ranks)) {
    out.push_back(size / b);
    b = size;
  }
  return out;
}

COLLC_INLINE std::size_t node_topology::cache_bytes_per_rank(int ranks_on_node) const {
  if (caches.empty() || ranks_on_node < 1 || pus() < 1) return 0;
  const cache_info& llc = caches.back();
  const double ranks_per_pu = std::max(1.0, static_cast<double>(ranks_on_node) / pus());
  return static_cast<std::size_t>(static_cast<double>(llc.bytes) / (llc.pus_per_cache * ranks_per_pu));
}

}  // namespace collc
