#pragma once
/// \file
/// Definitions of presets.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/algo/presets.hpp>

#include <collc/algo/lower.hpp>
#include <collc/enumerate.hpp>
#include <collc/factors.hpp>

namespace collc::algo {

namespace detail {

COLLC_INLINE int floor_pow2(int P) {
  int f = 1;
  while (f * 2 <= P) f *= 2;
  return f;
}

COLLC_INLINE int log2_exact(int f) {
  int k = 0;
  while ((1 << k) < f) ++k;
  return k;
}

}  // namespace detail

COLLC_INLINE schedule recursive_doubling(int P) {
  const int f = detail::floor_pow2(P);
  std::vector<int> r(static_cast<std::size_t>(detail::log2_exact(f)), 2);
  if (r.empty()) r.push_back(P);  // P = 1 is lowered as a copy anyway
  return schedule::recursive(factor_set(std::span<const int>(r)), f != P);
}

COLLC_INLINE schedule rabenseifner(int P) {
  const int f = detail::floor_pow2(P);
  const int k = detail::log2_exact(f);
  if (k == 0) return schedule::recursive(factor_set{P}, f != P);  // P = 1 is lowered as a copy anyway
  // {-2 (k times), 2 (k times)}, built in place: a vector insert here draws a
  // false -Wfree-nonheap-object from g++ 12 at -O2.
  radix_list r;
  for (int i = 0; i < k; ++i) r.push_back(-2);
  for (int i = 0; i < k; ++i) r.push_back(2);
  return schedule::recursive(factor_set(r), f != P);
}

COLLC_INLINE schedule ring() { return schedule::ring(); }

COLLC_INLINE schedule binomial_tree() { return schedule::tree(0); }

COLLC_INLINE std::vector<schedule> all_schedules(collective c, int P, bool commutative) {
  std::vector<schedule> out;
  if (P < 2) return {schedule::copy_in()};
  const bool reducing = reduces(c);
  for (const auto& seq : recursive_sequences(P)) {
    const std::vector<int> s(seq.begin(), seq.end());
    switch (c) {
      case collective::allreduce:
      case collective::reduce:
        for (std::size_t k = 0; k <= s.size(); ++k) {
          std::vector<int> f;
          for (std::size_t i = 0; i < k; ++i) f.push_back(-s[i]);
          for (std::size_t i = k; i < s.size(); ++i) f.push_back(s[i]);
          for (std::size_t i = k; i-- > 0;) f.push_back(s[i]);
          out.push_back(schedule::recursive(factor_set(std::span<const int>(f))));
        }
        break;
      case collective::reduce_scatter: {
        std::vector<int> f;
        for (int a : s) f.push_back(-a);
        out.push_back(schedule::recursive(factor_set(std::span<const int>(f))));
        break;
      }
      case collective::allgather:
      case collective::bcast: out.push_back(schedule::recursive(factor_set(std::span<const int>(s)))); break;
    }
  }
  if (c == collective::allreduce && detail::floor_pow2(P) != P) {
    out.push_back(recursive_doubling(P));
    out.push_back(rabenseifner(P));
  }
  const bool cyclic_ok = (commutative || !reducing) &&
                         (c == collective::allreduce || c == collective::reduce_scatter || c == collective::allgather);
  if (cyclic_ok) {
    for (const auto& seq : cyclic_sequences(P)) {
      const std::vector<int> s(seq.begin(), seq.end());
      std::vector<int> neg;
      for (int a : s) neg.push_back(-a);
      if (c == collective::allreduce) {
        std::vector<int> mirrored = neg;
        mirrored.insert(mirrored.end(), s.rbegin(), s.rend());
        out.push_back(schedule::cyclic(factor_set(std::span<const int>(s))));
        out.push_back(schedule::cyclic(factor_set(std::span<const int>(mirrored))));
      } else {
        out.push_back(schedule::cyclic(factor_set(std::span<const int>(c == collective::reduce_scatter ? neg : s))));
      }
    }
    out.push_back(schedule::ring());
  }
  for (int arity : {0, 2, 3}) {
    out.push_back(schedule::tree(arity));
    if (c != collective::reduce && c != collective::bcast) out.push_back(schedule::tree(arity, 2));
  }
  out.push_back(schedule::copy_in());
  return out;
}

COLLC_INLINE bool uniform_blocks(const std::vector<int>& node_of, int& per_node, int& nodes) {
  const int P = static_cast<int>(node_of.size());
  per_node = 0;
  while (per_node < P && node_of[static_cast<std::size_t>(per_node)] == node_of[0]) ++per_node;
  if (per_node == 0 || P % per_node != 0) return false;
  nodes = P / per_node;
  for (int r = 0; r < P; ++r)
    if (node_of[static_cast<std::size_t>(r)] != node_of[static_cast<std::size_t>(r - r % per_node)] ||
        (r % per_node == 0 && r > 0 &&
         node_of[static_cast<std::size_t>(r)] == node_of[static_cast<std::size_t>(r - 1)]))
      return false;
  return true;
}

COLLC_INLINE schedule default_schedule(collective c, int P, std::size_t bytes, bool commutative,
                                       const std::vector<int>& node_of, int node_cores) {
  (void)commutative;  // every default is correct for non-commutative operators
  if (P <= 1) return schedule::copy_in();
  bool one_node = true;
  for (int n : node_of) one_node = one_node && n == node_of.front();
  const bool small = bytes <= 4096;
  const bool oversubscribed = node_cores > 0 && P > node_cores;
  if (one_node && oversubscribed && bytes <= 65536 && c != collective::reduce_scatter && c != collective::allgather) {
    if (c == collective::allreduce && static_cast<std::size_t>(P) * bytes <= 65536)
      return schedule::recursive(factor_set{P});
    return schedule::tree(std::max(2, P - 1));
  }
  // Oversubscribed rooted calls above 64 KiB and up to 2 MiB: the binomial
  // tree rather than copy-in. Copy-in is van de Geijn's scatter-allgather
  // bcast (and the reduce-scatter + gather reduce): two (three) rounds in
  // which every rank waits on every other, and with more ranks than cores
  // each such round waits for a descheduled rank. In the tree a rank waits on
  // its parent and children only, and a large call's chunks pipeline down
  // its levels (a parent refills its shm once its children read it). Measured on 2
  // cores, P = 3, 4, 8, 7 rounds, ratio to Open MPI in the same run
  // (docs/benchmarks.md, "Large rooted calls"): bcast 128 KiB-2 MiB
  // 0.29-0.46 against copy-in's 0.41-0.62 (P = 8 from 1 MiB alike), reduce
  // 0.14-0.66 against 0.14-0.86 (alike at 2 MiB); at 4 MiB neither wins
  // everywhere, so copy-in stays above 2 MiB.
  if (one_node && oversubscribed && bytes <= (std::size_t{2} << 20) &&
      (c == collective::bcast || c == collective::reduce))
    return schedule::tree(0);
  if (one_node) {
    switch (c) {
      case collective::allreduce:
        // P = 2: {2} at every size (measured on 2 cores, 8 KiB .. 16 MiB: 1.3x to 2x
        // faster than {-2,2}, which synchronizes twice per chunk for half the work each).
        return (small && P <= 16) || P == 2 ? schedule::recursive(factor_set{P})
                                            : schedule::recursive(factor_set{-P, P});
      case collective::reduce_scatter: return schedule::recursive(factor_set{-P});
      case collective::allgather: return schedule::recursive(factor_set{P});
      case collective::reduce:
        // P = 2 up to 2 MiB: the tree (the leaf's message moves to the root
        // once) rather than copy-in (three half-messages cross between the
        // two ranks' cores). Measured on 2 cores, 24 paired rounds, root 0
        // (docs/benchmarks.md): 32 KiB-2 MiB alike or faster in the VM's fast
        // periods (256 KiB 8.4-9.7 against 8.3-12.3 us), 0.6-0.8x copy-in's
        // time in its slow ones, where a cache line between the cores costs
        // ~3x (2 MiB 132-139 against 220-230 us); at 16 MiB copy-in is faster
        // in the fast periods (930-1110 against 1200-1890 us).
        return small || (P == 2 && bytes <= (std::size_t{2} << 20)) ? schedule::tree(0) : schedule::copy_in();
      case collective::bcast: return small ? schedule::tree(0) : schedule::copy_in();
    }
  }
  int L = 0, N = 0;
  if (!uniform_blocks(node_of, L, N)) return schedule::tree(0);
  switch (c) {
    case collective::allreduce:
      return L == 1 ? schedule::recursive(factor_set{N}) : schedule::recursive(factor_set{-L, N, L});
    case collective::reduce_scatter:
      return L == 1 ? schedule::recursive(factor_set{-N}) : schedule::recursive(factor_set{-L, -N});
    case collective::allgather:
      return L == 1 ? schedule::recursive(factor_set{N}) : schedule::recursive(factor_set{N, L});
    default: return schedule::tree(0);
  }
}

}  // namespace collc::algo
