#pragma once
// Properties 1-3 (contribution, operand_order, identical): what the caller
// of each rank finds in its results at the end of every execution.
#include <collc/ir/verify.hpp>

#include <collc/ir/verify/expr_table.ipp>
#include <collc/ir/verify/memory.ipp>
#include <collc/ir/verify/sequence.ipp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collc::ir::detail::verification {

/// Why a result is not the expected one (property 1), from its leaves: the
/// expected value is leaf(leaf_rank, element, e), or with leaf_rank < 0 the
/// reduction over all ranks of `element`.
COLLC_INLINE std::string mismatch(expr_table& exprs, int ranks, std::uint32_t id, int leaf_rank, std::uint64_t element,
                                  int e) {
  if (id == 0)
    return "holds an uninitialised value (nothing wrote it, or it was computed from an element nothing wrote)";
  const auto& x = exprs[id];
  const auto P = static_cast<std::uint64_t>(ranks);
  const std::uint64_t want = leaf_rank >= 0 ? 1 : P;
  if (x.leaves > 4 * P + 4)
    return cat("combines ", x.leaves, " contributions, expected ", want,
               " (some contribution is counted more than once)");
  std::vector<std::uint32_t> ls;
  exprs.in_order(id, ls, x.leaves);
  for (auto l : ls) {
    const auto& y = exprs[l];
    if (y.execution != e)
      return cat("holds rank ", y.first, "'s input element ", y.element, " of execution ", y.execution,
                 ", expected execution ", e, y.execution < e ? " (a stale value)" : " (overwritten too early)");
  }
  for (auto l : ls) {
    const auto& y = exprs[l];
    if (y.element != element)
      return cat("holds element ", y.element, " of rank ", y.first, "'s input, expected element ", element);
  }
  if (leaf_rank >= 0) {
    if (!x.is_leaf())
      return cat("holds a combination of ", x.leaves, " contributions, expected rank ", leaf_rank, "'s input alone");
    return cat("holds rank ", x.first, "'s input, expected rank ", leaf_rank, "'s");
  }
  std::vector<std::uint32_t> times(static_cast<std::size_t>(ranks), 0);
  for (auto l : ls) ++times[static_cast<std::size_t>(exprs[l].first)];
  for (int q = 0; q < ranks; ++q)
    if (times[static_cast<std::size_t>(q)] > 1)
      return cat("holds rank ", q, "'s contribution ", times[static_cast<std::size_t>(q)], " times: ", exprs.text(id));
  for (int q = 0; q < ranks; ++q)
    if (times[static_cast<std::size_t>(q)] == 0) return cat("lacks rank ", q, "'s contribution: ", exprs.text(id));
  return cat("holds an unexpected value ", exprs.text(id));
}

/// Why a complete result is out of rank order (property 2).
COLLC_INLINE std::string disorder(const expr_table& exprs, int ranks, std::uint32_t id) {
  std::vector<std::uint32_t> ls;
  exprs.in_order(id, ls, static_cast<std::size_t>(ranks));
  std::string seq;
  std::string first_wrong;
  for (std::size_t k = 0; k < ls.size(); ++k) {
    const int q = exprs[ls[k]].first;
    if (first_wrong.empty() && q != static_cast<int>(k)) first_wrong = cat("rank ", q, " is operand ", k);
    if (k < 16) {
      if (k) seq += ' ';
      seq += std::to_string(q);
    }
  }
  if (ls.size() > 16) seq += " ...";
  return cat("combines operands out of rank order (", first_wrong, "; in-order ranks ", seq,
             "); a non-commutative operator needs ranks 0..", ranks - 1, " in order");
}

/// The caller's check of every rank's results, execution by execution.
/// A wrong result is a finding the run keeps (deferred, see verify.hpp,
/// "Order of reports"); a race on reading a result stops the run.
class result_checker {
 public:
  result_checker(const sequence& s, expr_table& exprs)
      : s_(s),
        exprs_(exprs),
        results_(static_cast<std::size_t>(s.executions)),
        done_(static_cast<std::size_t>(s.executions), 0) {}

  /// Rank r's caller reads its results of execution e at clock `now` (the
  /// boundary before execution e + 1, where a race is reported).
  /// Stops at the first wrong element of the rank; once every rank's
  /// results of e are right, compares them across ranks (property 3).
  finding check(int r, int e, tick now, memory& mem, const tick* v) {
    auto& all = results_[static_cast<std::size_t>(e)];
    if (all.empty()) all.resize(static_cast<std::size_t>(s_.ranks));
    const program& p = s_.first();
    const std::size_t n = s_.at(e).count, stride = s_.at(e).stride();
    const auto each = [&](std::size_t count, auto&& element) -> finding {
      for (std::size_t i = 0; i < count; ++i)
        if (auto f = element(i)) return f;
      return std::nullopt;
    };
    finding f;
    switch (p.coll) {
      case collective::allreduce:
        f = each(n, [&](std::size_t i) { return check_element(r, e, i, -1, i, now, mem, v); });
        break;
      case collective::reduce:
        if (r == p.root) f = each(n, [&](std::size_t i) { return check_element(r, e, i, -1, i, now, mem, v); });
        break;
      case collective::reduce_scatter:
        f = each(n, [&](std::size_t i) {
          return check_element(r, e, i, -1, static_cast<std::size_t>(r) * stride + i, now, mem, v);
        });
        break;
      case collective::allgather:
        for (int q = 0; q < s_.ranks && !f; ++q)
          f = each(n, [&](std::size_t i) {
            return check_element(r, e, static_cast<std::size_t>(q) * stride + i, q, i, now, mem, v);
          });
        break;
      case collective::bcast:
        f = each(n, [&](std::size_t i) { return check_element(r, e, i, p.root, i, now, mem, v); });
        break;
    }
    if (f) return f;
    if (++done_[static_cast<std::size_t>(e)] == s_.ranks) return check_identical(e);
    return std::nullopt;
  }

 private:
  /// Property 1 (and 2) for one result element of rank r; the expected value
  /// is leaf(leaf_rank, element, e), or with leaf_rank < 0 the reduction over
  /// all ranks of `element`.
  finding check_element(int r, int e, std::size_t offset, int leaf_rank, std::uint64_t element, tick now, memory& mem,
                        const tick* v) {
    const ref where{buffer::recv, r, 0};
    const std::size_t at = mem.loc(where, 0) + offset;
    if (auto race = mem.read(at, {r, &where, offset}, now, v))
      return violation(property::race, r, -1, e + 1, std::move(*race));
    const cell& c = mem[at];
    const std::uint32_t id = c.value;
    const program& p = s_.first();
    if (p.coll == collective::allreduce)
      results_[static_cast<std::size_t>(e)][static_cast<std::size_t>(r)].push_back(id);
    const auto& x = exprs_[id];
    const int last = s_.ranks - 1;
    bool ok;
    if (leaf_rank >= 0)
      ok = id != 0 && x.is_leaf() && x.first == leaf_rank && x.element == element && x.execution == e;
    else
      ok = id != 0 && x.uniform() && x.element == element && x.execution == e &&
           ((x.ordered && x.first == 0 && x.last == last) || exprs_.each_rank_once(id));
    const bool in_order = leaf_rank >= 0 || s_.o.commutative || (x.ordered && x.first == 0 && x.last == last);
    if (ok && in_order) return std::nullopt;
    // Point at the instruction that wrote the element in this execution, if any.
    std::ptrdiff_t index = -1;
    if (c.w_rank == r && c.w_clock > s_.clock_of(r, e, -1))
      index = static_cast<std::ptrdiff_t>(c.w_clock - s_.clock_of(r, e, 0));
    std::string what = cat("recv[", offset, ']');
    if (p.coll == collective::allgather) what += cat(" (block of rank ", leaf_rank, ", element ", element, ')');
    if (!ok)
      return violation(property::contribution, r, index, e,
                       cat(what, ' ', mismatch(exprs_, s_.ranks, id, leaf_rank, element, e)));
    return violation(property::operand_order, r, index, e, cat(what, ' ', disorder(exprs_, s_.ranks, id)));
  }

  /// Property 3: all ranks hold the same tree per element. Only allreduce
  /// needs it: allgather and bcast results are pinned to a single leaf by the
  /// contribution check, and reduce / reduce_scatter results have one owner.
  finding check_identical(int e) {
    auto& res = results_[static_cast<std::size_t>(e)];
    if (s_.first().coll == collective::allreduce) {
      const auto& ref0 = res[0];
      for (int r = 1; r < s_.ranks; ++r) {
        const auto& mine = res[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < mine.size(); ++i)
          if (mine[i] != ref0[i])
            return violation(property::identical, r, -1, e,
                             cat("recv[", i, "] is computed as ", exprs_.text(mine[i]), ", but rank 0 computes ",
                                 exprs_.text(ref0[i]), "; the ranks' floating-point results could differ"));
      }
    }
    res.clear();
    res.shrink_to_fit();
    return std::nullopt;
  }

  const sequence& s_;
  expr_table& exprs_;
  std::vector<std::vector<std::vector<std::uint32_t>>> results_;  // allreduce: [execution][rank] result ids
  std::vector<int> done_;                                         // [execution]: ranks whose results are checked
};

}  // namespace collc::ir::detail::verification
