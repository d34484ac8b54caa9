#pragma once
/// \file
/// Tree (reduce, then broadcast; the tree family of Jocksch et al. 2026): fewer copies than a
/// butterfly, at the price of locality; best for small messages and rooted
/// collectives. Each node reduces its children's partials and its own value
/// and passes the result up; the broadcast walks the same edges down.
///
/// The tree over ranks [lo, hi) with leader l splits the other ranks into at
/// most `arity` contiguous chunks, never straddling l (chunks left of l, then
/// chunks right of l), each led by its first rank. Every subtree is thus a
/// contiguous rank range and a node combines (left children, itself, right
/// children) in rank order: correct for non-commutative operators, and the
/// root's value is the one expression every rank receives.
///
/// With `roots` > 1 (one root per socket) the positions are split into
/// `roots` groups, group j reduced to rank j*P/roots over its own tree, so
/// the reduction work and the root's bandwidth are shared.
#include <collc/algo/builder.hpp>
#include <collc/algo/recursive_exchange.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace collc::algo::detail {

struct tree_shape {
  std::vector<int> parent;  // -1 at the root
  std::vector<int> depth;
  std::vector<std::vector<int>> children;  // in rank order
  int max_depth = 0;

  constexpr tree_shape(int ranks, int root, int arity)
      : parent(static_cast<std::size_t>(ranks), -1),
        depth(static_cast<std::size_t>(ranks), 0),
        children(static_cast<std::size_t>(ranks)) {
    build(0, ranks, root, arity, 0);
  }

 private:
  // arity 0: binomial (chunks of 1, 2, 4, ... ranks outward from the leader).
  constexpr void build(int lo, int hi, int leader, int arity, int d) {
    depth[static_cast<std::size_t>(leader)] = d;
    max_depth = std::max(max_depth, d);
    const int left = leader - lo, right = hi - leader - 1;
    if (left + right == 0) return;
    auto& kids = children[static_cast<std::size_t>(leader)];
    auto child = [&](int c_lo, int c_hi) {
      if (c_lo >= c_hi) return;
      parent[static_cast<std::size_t>(c_lo)] = leader;
      kids.push_back(c_lo);
      build(c_lo, c_hi, c_lo, arity, d + 1);
    };
    if (arity == 0) {
      for (int at = leader + 1, size = 1; at < hi; at += size, size *= 2) child(at, std::min(hi, at + size));
      for (int at = leader, size = 1; at > lo; at -= size, size *= 2) child(std::max(lo, at - size), at);
    } else {
      int kl = left == 0 ? 0 : right == 0 ? arity : std::clamp(arity * left / (left + right), 1, arity - 1);
      kl = std::min(kl, left);
      const int kr = std::min(arity - kl, right);
      for (int c = 0; c < kl; ++c) child(lo + left * c / kl, lo + left * (c + 1) / kl);
      for (int c = 0; c < kr; ++c) child(leader + 1 + right * c / kr, leader + 1 + right * (c + 1) / kr);
    }
    std::sort(kids.begin(), kids.end());
  }
};

class tree_lowering {
 public:
  constexpr tree_lowering(builder& b, positions pos) : b_(b), pos_(std::move(pos)) {}

  /// Reduces positions [p_lo, p_hi) over the tree rooted at `root`. Results
  /// go to root's recv if `root_to_recv`, else to a shm region root's
  /// children read during a later broadcast. Several groups reduce together
  /// (one level at a time) so their steps overlap.
  struct group {
    int root;
    std::size_t p_lo, p_hi;
  };

  constexpr void reduce(const std::vector<group>& groups, int arity, bool root_to_recv) {
    groups_ = groups;
    trees_.clear();
    for (const auto& g : groups) trees_.emplace_back(b_.ranks(), g.root, arity);
    result_.assign(groups.size(), std::vector<held>(idx(b_.ranks())));
    // Leaves and inner nodes alike offer their own data for their parent.
    const std::size_t input = b_.alloc_shm(total_span());
    std::vector<bool> copied(idx(b_.ranks()), false);
    for (std::size_t j = 0; j < groups.size(); ++j)
      for (int r = 0; r < b_.ranks(); ++r) {
        const int par = trees_[j].parent[idx(r)];
        auto& h = result_[j][idx(r)];
        h.direct = ir::ref{ir::buffer::send, r, 0};
        h.from_send = true;
        h.shared = ir::ref{ir::buffer::shm, r, input + group_base(j)};
        if (par >= 0 && trees_[j].children[idx(r)].empty() && b_.same_node(par, r)) {
          for (std::size_t p = groups[j].p_lo; p < groups[j].p_hi; ++p)
            b_.copy(r,
                    ir::ref{ir::buffer::shm, r, input + group_base(j) + pos_.prefix[p] - pos_.prefix[groups[j].p_lo]},
                    ir::ref{ir::buffer::send, r, pos_.send_at[p]}, pos_.len[p]);
          copied[idx(r)] = true;
        }
      }
    for (int r = 0; r < b_.ranks(); ++r)
      if (copied[idx(r)]) {
        const int ready = b_.publish(r);
        for (auto& per_rank : result_) per_rank[idx(r)].ready = ready;
      }
    const std::size_t partial = b_.alloc_shm(total_span());
    int deepest = 0;
    for (const auto& t : trees_) deepest = std::max(deepest, t.max_depth);
    for (int d = deepest; d >= 0; --d) {
      std::vector<pull> pulls;
      std::vector<std::size_t> node_first;  // per (group, rank) at this depth: first pull
      std::vector<std::pair<std::size_t, int>> nodes;
      for (std::size_t j = 0; j < groups.size(); ++j)
        for (int r = 0; r < b_.ranks(); ++r) {
          if (trees_[j].depth[idx(r)] != d || trees_[j].children[idx(r)].empty()) continue;
          nodes.emplace_back(j, r);
          node_first.push_back(pulls.size());
          for (int c : trees_[j].children[idx(r)]) add_group_pulls(pulls, j, r, c);
        }
      node_first.push_back(pulls.size());
      if (nodes.empty()) continue;
      const auto got = b_.fetch(pulls);
      std::vector<bool> computed(idx(b_.ranks()), false);
      for (std::size_t k = 0; k < nodes.size(); ++k) {
        // Not a structured binding: the lambdas below capture j and r (clang 14 cannot).
        const std::size_t j = nodes[k].first;
        const int r = nodes[k].second;
        const auto& g = groups[j];
        const bool to_recv = root_to_recv && r == g.root;
        // Inputs per position, in rank order: left children, own, right children.
        std::vector<std::vector<ir::ref>> in(g.p_hi - g.p_lo);
        std::size_t pull_at = node_first[k];
        bool own_done = false;
        auto add_own = [&] {
          for (std::size_t p = g.p_lo; p < g.p_hi; ++p)
            in[p - g.p_lo].push_back(ir::ref{ir::buffer::send, r, pos_.send_at[p]});
          own_done = true;
        };
        for (int c : trees_[j].children[idx(r)]) {
          if (c > r && !own_done) add_own();
          // The child's pulls cover the group's positions in order (one per run).
          std::size_t used = 0;
          for (std::size_t p = g.p_lo; p < g.p_hi; ++p) {
            if (pos_.len[p] == 0) continue;
            while (used == pulls[pull_at].count) ++pull_at, used = 0;
            in[p - g.p_lo].push_back(ir::ref{got[pull_at].buf, got[pull_at].owner, got[pull_at].offset + used});
            used += pos_.len[p];
          }
          if (used != 0) ++pull_at;
        }
        if (!own_done) add_own();
        for (std::size_t p = g.p_lo; p < g.p_hi; ++p) {
          if (pos_.len[p] == 0) continue;
          const ir::ref dst =
              to_recv ? ir::ref{ir::buffer::recv, r, pos_.recv_at[p]}
                      : ir::ref{ir::buffer::shm, r, partial + group_base(j) + pos_.prefix[p] - pos_.prefix[g.p_lo]};
          b_.reduce_chain(r, dst, in[p - g.p_lo], pos_.len[p]);
        }
        auto& h = result_[j][idx(r)];
        h.from_send = false;
        h.shared = h.direct = ir::ref{ir::buffer::shm, r, partial + group_base(j)};
        computed[idx(r)] = !to_recv;
      }
      for (int r = 0; r < b_.ranks(); ++r)
        if (computed[idx(r)]) {
          const int ready = b_.publish(r);
          for (std::size_t j = 0; j < groups.size(); ++j)
            if (!trees_[j].children[idx(r)].empty()) result_[j][idx(r)].ready = ready;
        }
    }
  }

  /// After reduce(): broadcasts each group's result from its root down its
  /// tree into every rank's recv (ranks where !writes(r) skip their recv).
  template <class Pred>
  constexpr void broadcast(Pred writes) {
    const std::size_t relay = b_.alloc_shm(total_span());
    int deepest = 0;
    for (const auto& t : trees_) deepest = std::max(deepest, t.max_depth);
    for (int d = 1; d <= deepest; ++d) {
      std::vector<pull> pulls;
      std::vector<std::pair<std::size_t, int>> nodes;
      for (std::size_t j = 0; j < groups_.size(); ++j)
        for (int r = 0; r < b_.ranks(); ++r) {
          if (trees_[j].depth[idx(r)] != d) continue;
          nodes.emplace_back(j, r);
          add_group_pulls(pulls, j, r, trees_[j].parent[idx(r)]);
        }
      const auto got = b_.fetch(pulls);
      std::vector<bool> relays(idx(b_.ranks()), false);
      std::size_t k = 0;
      for (const auto& [j, r] : nodes) {
        const auto& g = groups_[j];
        const bool inner = !trees_[j].children[idx(r)].empty();
        std::size_t used = 0;
        for (std::size_t p = g.p_lo; p < g.p_hi; ++p) {
          if (pos_.len[p] == 0) continue;
          while (used == pulls[k].count) ++k, used = 0;
          const ir::ref src{got[k].buf, got[k].owner, got[k].offset + used};
          const ir::ref mine{ir::buffer::shm, r, relay + group_base(j) + pos_.prefix[p] - pos_.prefix[g.p_lo]};
          if (inner) b_.copy(r, mine, src, pos_.len[p]);
          if (writes(r)) b_.copy(r, ir::ref{ir::buffer::recv, r, pos_.recv_at[p]}, inner ? mine : src, pos_.len[p]);
          used += pos_.len[p];
        }
        if (used != 0) ++k;
        if (inner) {
          auto& h = result_[j][idx(r)];
          h.shared = h.direct = ir::ref{ir::buffer::shm, r, relay + group_base(j)};
          h.from_send = false;
          relays[idx(r)] = true;
        }
      }
      for (int r = 0; r < b_.ranks(); ++r)
        if (relays[idx(r)]) {
          const int ready = b_.publish(r);
          for (std::size_t j = 0; j < groups_.size(); ++j)
            if (trees_[j].depth[idx(r)] == d) result_[j][idx(r)].ready = ready;
        }
    }
    // Roots copy their own result into recv.
    for (std::size_t j = 0; j < groups_.size(); ++j) {
      const int r = groups_[j].root;
      if (!writes(r) || result_[j][idx(r)].from_send) continue;
      for (std::size_t p = groups_[j].p_lo; p < groups_[j].p_hi; ++p)
        b_.copy(r, ir::ref{ir::buffer::recv, r, pos_.recv_at[p]},
                ir::ref{result_[j][idx(r)].direct.buf, r,
                        result_[j][idx(r)].direct.offset + pos_.prefix[p] - pos_.prefix[groups_[j].p_lo]},
                pos_.len[p]);
    }
  }

  /// bcast's start: the root holds every group in its recv; it shares a
  /// copy in shm for its same-node children.
  constexpr void start_at_root(int root, int arity) {
    groups_ = {group{root, 0, pos_.len.size()}};
    trees_.clear();
    trees_.emplace_back(b_.ranks(), root, arity);
    result_.assign(1, std::vector<held>(idx(b_.ranks())));
    auto& h = result_[0][idx(root)];
    const std::size_t copy = b_.alloc_shm(total_span());
    for (std::size_t p = 0; p < pos_.len.size(); ++p)
      b_.copy(root, ir::ref{ir::buffer::shm, root, copy + pos_.prefix[p]},
              ir::ref{ir::buffer::recv, root, pos_.recv_at[p]}, pos_.len[p]);
    h.shared = h.direct = ir::ref{ir::buffer::shm, root, copy};
    h.from_send = true;  // root's recv already holds the data
    h.ready = b_.publish(root);
  }

  /// allgather's start: `root` collects every rank's position (rank b's
  /// send holds position b) into a shm region, to broadcast it afterwards.
  constexpr void gather_flat(int root, int arity) {
    groups_ = {group{root, 0, pos_.len.size()}};
    trees_.clear();
    trees_.emplace_back(b_.ranks(), root, arity);
    result_.assign(1, std::vector<held>(idx(b_.ranks())));
    std::size_t m = 0;
    for (auto n : pos_.len) m = std::max(m, n);
    const std::size_t input = b_.alloc_shm(m);
    std::vector<pull> pulls;
    for (int r = 0; r < b_.ranks(); ++r) {
      const auto p = static_cast<std::size_t>(r);
      int ready = 0;
      if (r != root && b_.same_node(r, root) && pos_.len[p] != 0) {
        b_.copy(r, ir::ref{ir::buffer::shm, r, input}, ir::ref{ir::buffer::send, r, 0}, pos_.len[p]);
        ready = b_.publish(r);
      }
      if (pos_.len[p] != 0)
        pulls.push_back(
            pull{root, r, ir::ref{ir::buffer::shm, r, input}, ir::ref{ir::buffer::send, r, 0}, pos_.len[p], ready, p});
    }
    const auto got = b_.fetch(pulls);
    const std::size_t all = b_.alloc_shm(total_span());
    for (std::size_t k = 0; k < pulls.size(); ++k)
      b_.copy(root, ir::ref{ir::buffer::shm, root, all + pos_.prefix[pulls[k].first]}, got[k], pulls[k].count);
    auto& h = result_[0][idx(root)];
    h.shared = h.direct = ir::ref{ir::buffer::shm, root, all};
    h.from_send = false;
    h.ready = b_.publish(root);
  }

  /// Every rank fetches position `mine(r)` from the root of the group
  /// holding it, into recv (reduce_scatter after a tree reduce).
  template <class Mine>
  constexpr void scatter(Mine mine) {
    std::vector<pull> pulls;
    for (int r = 0; r < b_.ranks(); ++r) {
      const std::size_t p = mine(r);
      std::size_t j = 0;
      while (!(groups_[j].p_lo <= p && p < groups_[j].p_hi)) ++j;
      const int root = groups_[j].root;
      const auto& h = result_[j][idx(root)];
      const std::size_t off = pos_.prefix[p] - pos_.prefix[groups_[j].p_lo];
      if (pos_.len[p] == 0) continue;
      pulls.push_back(pull{r, root, ir::ref{h.shared.buf, root, h.shared.offset + off},
                           ir::ref{h.direct.buf, root, h.direct.offset + off}, pos_.len[p], h.ready, p});
    }
    const auto got = b_.fetch(pulls);
    for (std::size_t k = 0; k < pulls.size(); ++k)
      b_.copy(pulls[k].consumer, ir::ref{ir::buffer::recv, pulls[k].consumer, pos_.recv_at[pulls[k].first]}, got[k],
              pulls[k].count);
  }

 private:
  struct held {
    ir::ref shared, direct;  // start of the group's data (positions p_lo..)
    bool from_send = true;   // direct is the user buffer, addressed per position
    int ready = 0;
  };
  static constexpr std::size_t idx(int r) { return static_cast<std::size_t>(r); }

  [[nodiscard]] constexpr std::size_t total_span() const { return pos_.span(0, pos_.len.size()); }
  [[nodiscard]] constexpr std::size_t group_base(std::size_t j) const { return pos_.prefix[groups_[j].p_lo]; }

  // Pulls group j's data of rank `from` into rank `to`, one pull per run.
  constexpr void add_group_pulls(std::vector<pull>& pulls, std::size_t j, int to, int from) const {
    const auto& g = groups_[j];
    const auto& h = result_[j][idx(from)];
    const std::size_t start = pulls.size();
    for (std::size_t p = g.p_lo; p < g.p_hi; ++p) {
      if (pos_.len[p] == 0) continue;
      const std::size_t off = pos_.prefix[p] - pos_.prefix[g.p_lo];
      const ir::ref shared{h.shared.buf, from, h.shared.offset + off};
      const ir::ref direct = h.from_send && h.direct.buf == ir::buffer::send
                                 ? ir::ref{ir::buffer::send, from, pos_.send_at[p]}
                             : h.from_send ? ir::ref{ir::buffer::recv, from, pos_.recv_at[p]}
                                           : ir::ref{h.direct.buf, from, h.direct.offset + off};
      if (pulls.size() > start) {
        auto& last = pulls.back();
        if (last.shared.offset + last.count == shared.offset && last.direct.buf == direct.buf &&
            last.direct.offset + last.count == direct.offset) {
          last.count += pos_.len[p];
          continue;
        }
      }
      pulls.push_back(pull{to, from, shared, direct, pos_.len[p], h.ready, p});
    }
  }

  builder& b_;
  positions pos_;
  std::vector<group> groups_;
  std::vector<tree_shape> trees_;
  std::vector<std::vector<held>> result_;  // [group][rank]
};

}  // namespace collc::algo::detail
