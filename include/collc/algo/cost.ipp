#pragma once
/// \file
/// Definitions of cost.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/algo/cost.hpp>

namespace collc::algo {

namespace detail {

/// P ranks in N nodes of L consecutive ranks (the last node may be short).
struct cost_shape {
  int P = 1, L = 1, N = 1;
  bool irregular = false;  // ranks not in node-aligned blocks (folded schedules)

  cost_shape(int ranks, int per_node) : P(ranks) {
    L = (per_node <= 0 || per_node >= ranks) ? ranks : per_node;
    N = (P + L - 1) / L;
  }
  /// Members of a group (radix a, stride s) on the same node as a member.
  [[nodiscard]] int local_members(int a, int s) const {
    if (N == 1) return a;
    if (s >= L) return 1;
    if (static_cast<std::int64_t>(a) * s <= L) return a;
    return std::clamp(L / s, 1, a);
  }
  /// True when some group (radix a, stride s) spans nodes although it would
  /// fit in one: its span a*s does not divide the node size.
  [[nodiscard]] bool straddles(int a, int s) const {
    if (N == 1) return false;
    if (irregular) return s < L;
    const std::int64_t span = static_cast<std::int64_t>(a) * s;
    return s < L && (span <= L ? L % span != 0 : span % L != 0);
  }
  /// Ranks of a node whose partner at distance d (ring order) is on another node.
  [[nodiscard]] double crossing(std::int64_t d) const {
    return N == 1 ? 0.0 : static_cast<double>(std::min<std::int64_t>(d, L));
  }
};

/// One step of one rank on the critical path.
struct step_terms {
  bool local = false, remote = false;  // partners on the node / on other nodes
  double net = 0;                      // bytes through the node's port
  double copy = 0, reduce = 0;         // bytes copied / reduced by the rank
  int active = 1;                      // ranks of the node moving memory meanwhile
};

COLLC_INLINE double step_time(const step_terms& t, const ir::machine_model& m) {
  double lat = 0;
  if (t.local) lat = m.alpha_sync;
  if (t.remote) lat = std::max(lat, m.alpha_net);
  const double copy = t.copy > 0 ? t.copy * m.copy_per_byte(t.active) : 0.0;
  const double reduce = t.reduce > 0 ? t.reduce * m.reduce_per_byte(t.active) : 0.0;
  return lat + t.net * m.beta_net + copy + reduce;
}

/// Sizes of position ranges: `A` parts of n bytes split on cache lines (as
/// detail::partition does: the largest run of k parts), or `A` blocks of
/// `block` bytes each (reduce_scatter / allgather).
struct slices {
  double n = 0, block = 0;
  std::int64_t units = 0, A = 1;
  bool blocked = false;

  static slices split(double bytes, std::int64_t parts) {
    slices s;
    s.n = bytes;
    s.A = std::max<std::int64_t>(parts, 1);
    s.units = static_cast<std::int64_t>(std::ceil(bytes / static_cast<double>(cost_granule)));
    return s;
  }
  static slices blocks(double bytes_per_block, std::int64_t parts) {
    slices s;
    s.block = bytes_per_block;
    s.A = std::max<std::int64_t>(parts, 1);
    s.blocked = true;
    return s;
  }
  [[nodiscard]] double of(std::int64_t k) const {
    if (blocked) return static_cast<double>(k) * block;
    const std::int64_t u = (units * k + A - 1) / A;
    return std::min(n, static_cast<double>(u) * static_cast<double>(cost_granule));
  }
};

COLLC_INLINE std::int64_t prod(const std::vector<int>& v) {
  std::int64_t p = 1;
  for (int a : v) p *= a;
  return p;
}

COLLC_INLINE std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Recursive exchange (and copy-in) on `ranks` ranks (F for a folded
/// schedule), steps rs (reduce-scatter) and re (reduce-exchange), following
/// recursive_exchange_lowering step by step.
COLLC_INLINE double recexch_time(collective c, const std::vector<int>& rs, const std::vector<int>& re,
                                 const cost_shape& sh, double bytes, const ir::machine_model& m,
                                 double head_start = -1) {
  const bool blocked = c == collective::reduce_scatter || c == collective::allgather;
  const std::int64_t A = prod(rs);
  const slices sl = blocked ? slices::blocks(bytes, A) : slices::split(bytes, A);
  std::vector<int> stride{1};
  for (int a : rs) stride.push_back(stride.back() * a);
  for (int a : re) stride.push_back(stride.back() * a);
  int busy = sh.L;  // ranks of a node moving memory in the next exchange
  auto exchange = [&](int a, int s, double piece, double copy, double reduce) {
    step_terms t;
    const int g = sh.local_members(a, s);
    t.local = g > 1;
    t.remote = g < a;
    t.net = static_cast<double>(sh.L) * (a - g) * piece;
    if (g == a && sh.straddles(a, s)) {  // a group across a node boundary: k members on one
      t.remote = true;                   // side each send a-k pieces, at most a^2/4
      t.net = static_cast<double>(a) * a / 4 * piece;
    }
    t.copy = copy;
    t.reduce = reduce;
    t.active = busy;
    busy = sh.L;
    return step_time(t, m);
  };
  auto copy_time = [&](double b, int active) { return b > 0 ? b * m.copy_per_byte(active) : 0.0; };
  double T = 0;
  std::int64_t held = A;  // positions a rank holds
  switch (c) {
    case collective::allreduce:
    case collective::reduce:
    case collective::reduce_scatter: {
      const int a0 = rs.empty() ? re[0] : rs[0];
      if (sh.local_members(a0, 1) > 1) {  // copy-in for same-node readers of step 1
        const double b = rs.empty() ? sl.of(A) : sl.of(A) - sl.of(A / rs[0]);
        T += copy_time(b, sh.L);
      }
      if (head_start >= 0) T = std::max(T, head_start);  // folding ranks are busy meanwhile
      for (std::size_t i = 0; i < rs.size(); ++i) {
        const int a = rs[i];
        const double piece = sl.of(held / a);
        // Below a cache line per part some parts are empty: fewer ranks reduce.
        if (!blocked && sl.units < A)
          busy = std::max(1, static_cast<int>(static_cast<double>(sh.L) * static_cast<double>(sl.units) / A));
        T += exchange(a, stride[i], piece, 0, (a - 1) * piece);
        held /= a;
      }
      for (std::size_t j = 0; j < re.size(); ++j) {
        const int b = re[j];
        const double cur = sl.of(held);
        const bool rooted_last = c == collective::reduce && rs.empty() && j + 1 == re.size();
        if (rooted_last) {  // only the root reduces, its node's port takes every remote input
          step_terms t;
          const int g = sh.local_members(b, stride[rs.size() + j]);
          t.local = g > 1;
          t.remote = g < b;
          t.net = (b - g) * cur;
          t.reduce = (b - 1) * cur;
          T += step_time(t, m);
        } else {
          T += exchange(b, stride[rs.size() + j], cur, 0, (b - 1) * cur);
        }
      }
      if (c == collective::allreduce)
        for (std::size_t i = rs.size(); i-- > 0;) {
          const int a = rs[i];
          const double cur = sl.of(held);
          T += exchange(a, stride[i], cur, a * cur, 0);
          held *= a;
        }
      if (c == collective::reduce && !rs.empty()) {  // gather_to(root): positions from the root's node first
        step_terms t;
        const std::int64_t local_pos = std::min<std::int64_t>(A, sh.L);
        t.local = sh.L > 1;
        t.remote = local_pos < A;
        t.net = sl.of(A) - sl.of(local_pos);
        t.copy = sl.of(A);
        T += step_time(t, m);
      }
      break;
    }
    case collective::allgather: {
      held = 1;
      if (!rs.empty() && sh.local_members(rs.back(), stride[rs.size() - 1]) > 1) T += copy_time(sl.of(1), sh.L);
      for (std::size_t i = rs.size(); i-- > 0;) {
        const int a = rs[i];
        const double cur = sl.of(held);
        T += exchange(a, stride[i], cur, a * cur, 0);
        held *= a;
      }
      break;
    }
    case collective::bcast: {
      if (sh.L > 1) T += copy_time(sl.of(A), 1);  // the root shares its data in shm
      // scatter_from(root): every rank fetches its final position from the root.
      step_terms t;
      t.local = sh.L > 1;
      t.remote = sh.N > 1;
      t.net = sl.of(A) * static_cast<double>(sh.P - sh.L) / static_cast<double>(sh.P);
      t.copy = sl.of(1);
      t.active = sh.L;
      T += step_time(t, m);
      held = 1;
      for (std::size_t i = rs.size(); i-- > 0;) {
        const int a = rs[i];
        const double cur = sl.of(held);
        T += exchange(a, stride[i], cur, a * cur, 0);
        held *= a;
      }
      break;
    }
  }
  return T;
}

COLLC_INLINE double recursive_time(const schedule& s, collective c, const cost_shape& sh, double bytes,
                                   const ir::machine_model& m) {
  const int P = sh.P;
  const exchange_steps st = recursive_steps(s, c, P);
  const std::vector<int>& rs = st.rs;
  const std::vector<int>& re = st.re;
  if (!s.fold) return recexch_time(c, rs, re, sh, bytes, m);
  const std::int64_t total = st.product;
  // Fold in (2i hands its vector to 2i+1, which adds it), the exchange over
  // F virtual ranks, fold out (2i+1 hands the result back).
  const int F = static_cast<int>(total);
  const bool pair_local = sh.L > 1;
  // Folding pairs per node move memory while the other ranks wait or copy in.
  const int folding = std::max(1, static_cast<int>(static_cast<std::int64_t>(sh.L) * (P - F) / P));
  const double in = pair_local ? bytes * m.copy_per_byte(sh.L) + m.alpha_sync : m.alpha_net + bytes * m.beta_net;
  const double fold_in = in + bytes * m.reduce_per_byte(folding);
  const double out = pair_local ? 2 * bytes * m.copy_per_byte(folding) + m.alpha_sync
                                : m.alpha_net + bytes * m.beta_net + bytes * m.copy_per_byte(folding);
  // The F virtual ranks are odd ranks 1, 3, .. then every rank: spread unevenly over the nodes.
  cost_shape virt(F, sh.N == 1 ? F : std::max(1, static_cast<int>(std::lround(double(sh.L) * F / P))));
  virt.irregular = virt.N > 1;
  return recexch_time(c, rs, re, virt, bytes, m, fold_in) + out;
}

/// Bytes leaving a node when every rank pulls `blocks(t)` blocks of `blk`
/// bytes from the rank t*s ahead (t = 1..a-1, ring order; `total` is the sum
/// of blocks(t)). Partners at distance >= L are off-node for all L ranks of
/// a node, so only the t < L/s terms need a loop.
template <class Blocks>
double cyclic_port_bytes(const cost_shape& sh, int a, std::int64_t s, double blk, std::int64_t total, Blocks blocks) {
  if (sh.N == 1) return 0;
  double bytes = 0;
  std::int64_t near = 0;
  for (std::int64_t t = 1; t < a && t * s < sh.L; ++t) {
    bytes += static_cast<double>(blocks(static_cast<int>(t))) * blk * sh.crossing(t * s);
    near += blocks(static_cast<int>(t));
  }
  return bytes + static_cast<double>(total - near) * blk * sh.L;
}

COLLC_INLINE double ring_time(collective c, const cost_shape& sh, double bytes, const ir::machine_model& m) {
  const int P = sh.P;
  const bool blocked = c == collective::reduce_scatter || c == collective::allgather;
  const double blk = blocked ? bytes : slices::split(bytes, P).of(1);
  // A ring step depends on the left neighbour's previous step only, so the
  // critical path crosses each ring edge in turn: of P-1 consecutive edges,
  // (P-1) N / P leave a node (alpha_net), the rest are flag handoffs. The
  // first rank of a node receives every block of the phase over the network:
  // P-1 blocks through its node's port.
  const double steps = P - 1;
  const double crossings = sh.N == 1 ? 0.0 : steps * sh.N / P;
  const double hops =
      crossings * m.alpha_net + (steps - crossings) * m.alpha_sync + (sh.N == 1 ? 0.0 : steps * blk * m.beta_net);
  const double copy = m.copy_per_byte(sh.L), reduce = m.reduce_per_byte(sh.L);
  double T = 0;
  if (c != collective::allgather) {
    T += (P - 1) * blk * copy;           // copy-in of the P-1 blocks peers read
    T += hops + (P - 1) * blk * reduce;  // P-1 steps: add the left partial
    if (c == collective::reduce_scatter) return T;
    T += blk * copy;  // own result block into recv
  } else {
    T += 2 * blk * copy;  // own block into shm and recv
  }
  T += hops + ((P - 1) + (P - 2)) * blk * copy;  // each step: into recv, and (but the last) into shm
  return T;
}

COLLC_INLINE double cyclic_time(const schedule& s, collective c, const cost_shape& sh, double bytes,
                                const ir::machine_model& m) {
  if (!cyclic_serves(c))
    throw error(errc::unsupported, collc::detail::cat("cyclic shift for ", to_string(c), ": ", rooted_not_cyclic));
  if (s.factors.empty()) return ring_time(c, sh, bytes, m);
  const int P = sh.P;
  const phases ph = cyclic_steps(s, c, P);  // the factor-set rules and lowering's limits, as algo::lower checks them
  const std::int64_t Pl = P;
  const double copy = m.copy_per_byte(sh.L), reduce = m.reduce_per_byte(sh.L);
  auto lat = [&](std::int64_t s) {
    double l = (s < sh.L && sh.L > 1) ? m.alpha_sync : 0.0;
    if (sh.N > 1) l = std::max(l, m.alpha_net);
    return l;
  };
  // Bruck allgather of one `blk` per rank (growing strides, last truncated).
  auto bruck = [&](const std::vector<int>& a, double blk) {
    double T = blk * copy;  // own block into shm
    std::int64_t s = 1;
    for (int r : a) {
      const std::int64_t next = s * r, have = std::min(next, Pl);
      auto from = [&](int t) { return std::max<std::int64_t>(0, std::min((t + 1) * s, have) - t * s); };
      T += lat(s) + cyclic_port_bytes(sh, r, s, blk, have - s, from) * m.beta_net +
           static_cast<double>(have) * blk * copy;
      s = next;
    }
    return T;
  };
  // Reduce-scatter over P blocks with growing strides (mirror of the allgather).
  auto reduce_scatter = [&](const std::vector<int>& a, double blk) {
    double T = static_cast<double>(P) * blk * copy;  // every block into shm
    std::int64_t s = 1;
    for (int r : a) {
      const std::int64_t next = s * r, kept = ceil_div(Pl, next);
      auto from = [&](int t) { return ceil_div(std::max<std::int64_t>(0, Pl - t * s), next); };
      T += lat(s) + cyclic_port_bytes(sh, r, s, blk, ceil_div(Pl, s) - kept, from) * m.beta_net +
           static_cast<double>(ceil_div(Pl, s) - kept) * blk * reduce;
      s = next;
    }
    return T;
  };
  auto mirrored_allgather = [&](const std::vector<int>& a, double blk) {
    std::vector<std::int64_t> s(a.size() + 1, 1);
    for (std::size_t i = 0; i < a.size(); ++i) s[i + 1] = s[i] * a[i];
    double T = 0;
    for (std::size_t i = a.size(); i-- > 0;) {
      const std::int64_t si = s[i], have = ceil_div(Pl, si);
      auto from = [&](int t) { return ceil_div(std::max<std::int64_t>(0, have - t), a[i]); };
      T += lat(si) + cyclic_port_bytes(sh, a[i], si, blk, have - ceil_div(have, a[i]), from) * m.beta_net +
           static_cast<double>(have) * blk * copy;
    }
    return T;
  };
  switch (c) {
    case collective::allreduce:
      if (!ph.rs.empty()) {
        const double blk = slices::split(bytes, P).of(1);
        return reduce_scatter(ph.rs, blk) + mirrored_allgather(ph.rs, blk);
      }
      // Disseminate whole contributions, then reduce the P of them in rank order.
      return bruck(ph.ag, bytes) + (P - 1) * bytes * reduce;
    case collective::reduce_scatter: return reduce_scatter(ph.rs, bytes);
    case collective::allgather: return bruck(ph.ag, bytes);
    default: return 0;
  }
}

/// Tree over [lo, lo+size) led by its first rank (tree_shape's rule for a
/// subtree): reduce time to the leader's partial, and broadcast time from the
/// leader's data to the last rank of the subtree. Memoized on (size, lo mod L),
/// which fixes the subtree's shape and where node boundaries fall in it.
class tree_cost {
 public:
  /// `overlap`: trees run side by side (one per root), each rank in all of them.
  tree_cost(const cost_shape& sh, int arity, double bytes, const ir::machine_model& m, int overlap = 1)
      : sh_(sh), arity_(arity), overlap_(overlap), n_(bytes), m_(m) {}

  /// Seconds until the leader of [lo, lo+size) holds its subtree's reduction
  /// (leaves: until their contribution is readable by their parent).
  double reduce(std::int64_t lo, std::int64_t size) {
    const auto key = std::make_pair(size, sh_.N == 1 ? 0 : lo % sh_.L);
    if (auto it = reduce_memo_.find(key); it != reduce_memo_.end()) return it->second;
    double local = -1, remote = -1;
    int kids = 0, remote_kids = 0;
    for_children(lo, size, [&](std::int64_t c_lo, std::int64_t c_size) {
      ++kids;
      if (same_node(lo, c_lo)) {
        const double ready = c_size == 1 ? n_ * m_.copy_per_byte(sh_.L) : reduce(c_lo, c_size);
        local = std::max(local, ready + m_.alpha_sync);
      } else {
        ++remote_kids;
        remote = std::max(remote, (c_size == 1 ? 0.0 : reduce(c_lo, c_size)) + m_.alpha_net);
      }
    });
    if (remote >= 0) remote += remote_kids * n_ * m_.beta_net;
    const double start = std::max({0.0, local, remote});
    const double t = kids == 0 ? 0.0 : start + kids * n_ * m_.reduce_per_byte(active(size));
    reduce_memo_[key] = t;
    return t;
  }

  /// Seconds from the leader's data being ready until every other rank of
  /// [lo, lo+size) has it in recv.
  double broadcast(std::int64_t lo, std::int64_t size) {
    const auto key = std::make_pair(size, sh_.N == 1 ? 0 : lo % sh_.L);
    if (auto it = bcast_memo_.find(key); it != bcast_memo_.end()) return it->second;
    double t = 0;
    int sent = 0, local_kids = 0;
    for_children(lo, size, [&](std::int64_t c_lo, std::int64_t) { local_kids += same_node(lo, c_lo) ? 1 : 0; });
    // Same-node siblings get the data at once and copy together (times the
    // trees running side by side); remote ones arrive one after the other.
    const double copy = n_ * m_.copy_per_byte(std::clamp(local_kids * overlap_, 1, sh_.L));
    for_children(lo, size, [&](std::int64_t c_lo, std::int64_t c_size) {
      double arrive = m_.alpha_sync;
      if (!same_node(lo, c_lo)) arrive = m_.alpha_net + (++sent) * n_ * m_.beta_net;
      t = std::max(t, c_size == 1 ? arrive + copy : arrive + 2 * copy + broadcast(c_lo, c_size));
    });
    bcast_memo_[key] = t;
    return t;
  }

 private:
  [[nodiscard]] bool same_node(std::int64_t a, std::int64_t b) const { return a / sh_.L == b / sh_.L; }
  // Ranks of a node busy with subtrees of this size at the same time.
  [[nodiscard]] int active(std::int64_t size) const {
    const std::int64_t busy = overlap_ * std::max<std::int64_t>(1, sh_.L / std::max<std::int64_t>(size, 1));
    return static_cast<int>(std::min<std::int64_t>(busy, sh_.L));
  }
  template <class F>
  void for_children(std::int64_t lo, std::int64_t size, F&& child) const {
    const std::int64_t hi = lo + size, right = size - 1;
    if (right == 0) return;
    if (arity_ == 0) {
      for (std::int64_t at = lo + 1, w = 1; at < hi; at += w, w *= 2) child(at, std::min(hi, at + w) - at);
    } else {
      const std::int64_t k = std::min<std::int64_t>(arity_, right);
      for (std::int64_t c = 0; c < k; ++c) {
        const std::int64_t a = lo + 1 + right * c / k, b = lo + 1 + right * (c + 1) / k;
        if (b > a) child(a, b - a);
      }
    }
  }

  cost_shape sh_;
  int arity_, overlap_;
  double n_;
  const ir::machine_model& m_;
  std::map<std::pair<std::int64_t, std::int64_t>, double> reduce_memo_, bcast_memo_;
};

COLLC_INLINE double tree_time(const schedule& s, collective c, const cost_shape& sh, double bytes,
                              const ir::machine_model& m) {
  const int P = sh.P;
  if (s.arity == 1 || s.arity < 0)
    throw error(errc::invalid_argument, collc::detail::cat("tree arity ", s.arity, " must be 0 (binomial) or >= 2"));
  if (s.roots < 1 || s.roots > P)
    throw error(errc::invalid_argument, collc::detail::cat("tree roots ", s.roots, " must be in [1, ", P, "]"));
  const int roots = (c == collective::reduce || c == collective::bcast) ? 1 : s.roots;
  const double copy1 = m.copy_per_byte(1);
  switch (c) {
    case collective::allreduce: {
      // Groups of n/roots reduce and broadcast over their own trees at once.
      const double part = slices::split(bytes, roots).of(1);
      tree_cost t(sh, s.arity, part, m, roots);
      return t.reduce(0, P) + t.broadcast(0, P);
    }
    case collective::reduce: {
      tree_cost t(sh, s.arity, bytes, m);
      return t.reduce(0, P);
    }
    case collective::bcast: {
      tree_cost t(sh, s.arity, bytes, m);
      return bytes * copy1 + t.broadcast(0, P);  // the root shares its data in shm first
    }
    case collective::reduce_scatter: {
      // Reduce all P blocks (split over the roots), then every rank fetches its
      // block from its group's root.
      const double all = bytes * P / roots;
      tree_cost t(sh, s.arity, all, m, roots);
      step_terms scatter;  // a group of P/roots ranks fetches from its root
      const int group = std::max(1, P / roots);
      scatter.local = sh.L > 1 && group > 1;
      scatter.remote = sh.N > 1 && (group > sh.L || (group > 1 && sh.L % group != 0));
      scatter.net = bytes * static_cast<double>(P - std::min(P, sh.L)) / roots;
      scatter.copy = bytes;
      scatter.active = sh.L;
      return t.reduce(0, P) + step_time(scatter, m);
    }
    case collective::allgather: {
      // Rank 0 collects every block, then broadcasts all P of them.
      step_terms gather;
      gather.local = sh.L > 1;
      gather.remote = sh.N > 1;
      gather.net = bytes * static_cast<double>(P - std::min(P, sh.L));
      gather.copy = bytes * P;
      const double share = sh.L > 1 ? bytes * m.copy_per_byte(sh.L) : 0.0;
      tree_cost t(sh, s.arity, bytes * P, m);
      return share + step_time(gather, m) + t.broadcast(0, P);
    }
  }
  return 0;
}

}  // namespace detail

COLLC_INLINE double predict(const schedule& s, collective c, int P, std::size_t bytes, const ir::machine_model& m,
                            int ranks_per_node) {
  m.validate();
  if (P < 1) throw error(errc::invalid_argument, collc::detail::cat("number of ranks must be >= 1, got ", P));
  if (ranks_per_node < 0)
    throw error(errc::invalid_argument, collc::detail::cat("ranks per node must be >= 0, got ", ranks_per_node));
  const detail::cost_shape sh(P, ranks_per_node);
  const double n = static_cast<double>(bytes);
  if (P == 1) return c == collective::bcast ? 0.0 : n * m.copy_per_byte(1);
  switch (s.fam) {
    case family::recursive_exchange: return detail::recursive_time(s, c, sh, n, m);
    case family::cyclic_shift: return detail::cyclic_time(s, c, sh, n, m);
    case family::tree: return detail::tree_time(s, c, sh, n, m);
    case family::copy_in: {
      factor_set f;
      switch (c) {
        case collective::allreduce:
        case collective::reduce: f = factor_set{-P, P}; break;
        case collective::reduce_scatter: f = factor_set{-P}; break;
        default: f = factor_set{P}; break;
      }
      return detail::recursive_time(schedule::recursive(f), c, sh, n, m);
    }
  }
  throw error(errc::invalid_argument, "unknown schedule family");
}

}  // namespace collc::algo
