#pragma once
// The verifier's values: hash-consed expression trees (verify.hpp, "Model").
#include <collc/ir/verify.hpp>

#include <collc/error.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace collc::ir::detail::verification {

COLLC_INLINE std::uint64_t mix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Expression trees, hash-consed so that tree equality is id equality. Id 0 is
/// the undefined value. Per node, facts about its in-order leaf sequence are
/// memoised so that checking a correct result is O(1) in the common cases.
class expr_table {
 public:
  struct info {
    std::uint64_t element = 0;   ///< leaf: element index; node: common element when uniform
    std::uint32_t a = 0, b = 0;  ///< node operands; a == 0 marks a leaf
    std::int32_t execution = 0;  ///< common execution of all leaves; -1: leaves differ in element or execution
    std::uint32_t leaves = 1;    ///< number of leaves (with repetition), saturating
    std::int32_t first = 0;      ///< rank of the first leaf in order
    std::int32_t last = 0;       ///< rank of the last leaf in order
    std::int32_t cyclic = 0;     ///< leaves are exactly the distinct ranks cyclic, cyclic+1, ... (mod P); -1: not
    bool ordered = true;         ///< in-order leaves are ranks first, first+1, ..., last (uniform)
    [[nodiscard]] bool is_leaf() const noexcept { return a == 0; }
    [[nodiscard]] bool uniform() const noexcept { return execution >= 0; }
  };

  expr_table(int ranks, bool commutative) : ranks_(ranks), commutative_(commutative) {
    infos_.emplace_back();  // id 0: undefined
    infos_[0].execution = -1;
    infos_[0].cyclic = -1;
    infos_[0].ordered = false;
    infos_[0].leaves = 0;
    rehash(1u << 8);
  }

  /// A fresh leaf; the caller creates each (rank, element, execution) once.
  std::uint32_t leaf(int rank, std::uint64_t element, int execution) {
    info x;
    x.element = element;
    x.execution = execution;
    x.first = x.last = x.cyclic = rank;
    infos_.push_back(x);
    return static_cast<std::uint32_t>(infos_.size() - 1);
  }

  /// The tree `a op b`; undefined if either operand is. For a commutative
  /// operator the operands are put in a canonical order, so a op b and b op a
  /// get one id (IEEE + and * are bitwise commutative, not associative).
  std::uint32_t node(std::uint32_t a, std::uint32_t b) {
    if (a == 0 || b == 0) return 0;
    // Canonical operand order for commutative operators: by first leaf rank,
    // then id (any total order works; this one prints naturally).
    if (commutative_ && std::pair{infos_[b].first, b} < std::pair{infos_[a].first, a}) std::swap(a, b);
    const std::uint64_t key = (std::uint64_t{a} << 32) | b;
    std::size_t slot = mix64(key) & mask_;
    while (keys_[slot] != 0) {
      if (keys_[slot] == key) return values_[slot];
      slot = (slot + 1) & mask_;
    }
    const info& x = infos_[a];
    const info& y = infos_[b];
    info n;
    n.a = a;
    n.b = b;
    const bool uniform = x.uniform() && y.uniform() && x.execution == y.execution && x.element == y.element;
    n.element = x.element;
    n.execution = uniform ? x.execution : -1;
    n.leaves = x.leaves > std::numeric_limits<std::uint32_t>::max() - y.leaves
                   ? std::numeric_limits<std::uint32_t>::max()
                   : x.leaves + y.leaves;
    n.first = x.first;
    n.last = y.last;
    n.ordered = uniform && x.ordered && y.ordered && x.last + 1 == y.first;
    n.cyclic = -1;
    const auto p = static_cast<std::int64_t>(ranks_);
    if (uniform && x.cyclic >= 0 && y.cyclic >= 0 && std::int64_t{n.leaves} <= p) {
      // Two adjacent cyclic rank intervals that together fit in P are again one.
      if ((x.cyclic + std::int64_t{x.leaves}) % p == y.cyclic)
        n.cyclic = x.cyclic;
      else if ((y.cyclic + std::int64_t{y.leaves}) % p == x.cyclic)
        n.cyclic = y.cyclic;
    }
    infos_.push_back(n);
    const auto id = static_cast<std::uint32_t>(infos_.size() - 1);
    keys_[slot] = key;
    values_[slot] = id;
    if (++size_ * 2 > keys_.size()) rehash(keys_.size() * 2);
    return id;
  }

  [[nodiscard]] const info& operator[](std::uint32_t id) const { return infos_[id]; }

  /// True if the leaves of `id` are exactly one of each rank 0..P-1 (any
  /// order); the caller checks uniformity. Memoised: results are shared by ranks.
  bool each_rank_once(std::uint32_t id) {
    const info& x = infos_[id];
    if (x.leaves != static_cast<std::uint32_t>(ranks_)) return false;
    if (x.cyclic >= 0) return true;
    if (auto it = exact_.find(id); it != exact_.end()) return it->second;
    std::vector<std::uint32_t> ls;
    in_order(id, ls, static_cast<std::size_t>(ranks_));
    std::vector<bool> seen(static_cast<std::size_t>(ranks_), false);
    bool ok = ls.size() == static_cast<std::size_t>(ranks_);
    for (auto l : ls) {
      const auto r = static_cast<std::size_t>(infos_[l].first);
      if (seen[r]) ok = false;
      seen[r] = true;
    }
    exact_.emplace(id, ok);
    return ok;
  }

  /// The first `limit` leaves of `id` in order (leaf ids).
  void in_order(std::uint32_t id, std::vector<std::uint32_t>& out, std::size_t limit) const {
    out.clear();
    if (id == 0) return;
    std::vector<std::uint32_t> stack{id};
    while (!stack.empty() && out.size() < limit) {
      const auto n = stack.back();
      stack.pop_back();
      if (infos_[n].is_leaf()) {
        out.push_back(n);
      } else {
        stack.push_back(infos_[n].b);
        stack.push_back(infos_[n].a);
      }
    }
  }

  /// Human-readable tree, e.g. "((0+1)+(2+3))"; leaves are ranks when the root
  /// is uniform, else "rank[element]@execution". Cut at about `budget` characters.
  [[nodiscard]] std::string text(std::uint32_t id, std::size_t budget = 160) const {
    std::string s;
    text_into(id, s, budget, infos_[id].uniform());
    return s;
  }

 private:
  void text_into(std::uint32_t id, std::string& s, std::size_t budget, bool short_leaves) const {
    if (s.size() >= budget) {
      if (s.size() < budget + 3) s += "...";
      return;
    }
    if (id == 0) {
      s += "undefined";
      return;
    }
    const info& x = infos_[id];
    if (x.is_leaf()) {
      s += std::to_string(x.first);
      if (!short_leaves) s += collc::detail::cat('[', x.element, "]@", x.execution);
      return;
    }
    s += '(';
    text_into(x.a, s, budget, short_leaves);
    s += '+';
    text_into(x.b, s, budget, short_leaves);
    s += ')';
  }

  void rehash(std::size_t n) {
    std::vector<std::uint64_t> keys(n, 0);
    std::vector<std::uint32_t> values(n, 0);
    mask_ = n - 1;
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] == 0) continue;
      std::size_t slot = mix64(keys_[i]) & mask_;
      while (keys[slot] != 0) slot = (slot + 1) & mask_;
      keys[slot] = keys_[i];
      values[slot] = values_[i];
    }
    keys_.swap(keys);
    values_.swap(values);
  }

  int ranks_;
  bool commutative_;
  std::vector<info> infos_;
  std::vector<std::uint64_t> keys_;  // open addressing; key 0 is free (operand ids are >= 1)
  std::vector<std::uint32_t> values_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::unordered_map<std::uint32_t, bool> exact_;
};

}  // namespace collc::ir::detail::verification
