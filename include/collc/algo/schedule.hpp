#pragma once
/// \file
/// A typed schedule (L1) as a value: which family, with which parameters.
/// Plans hold one and print it; lowering (lower.hpp) turns one into programs.
#include <collc/factors.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace collc::algo {

enum class family : std::uint8_t { recursive_exchange, cyclic_shift, tree, copy_in };

constexpr std::string_view to_string(family f) noexcept {
  switch (f) {
    case family::recursive_exchange: return "recexch";
    case family::cyclic_shift: return "cyclic";
    case family::tree: return "tree";
    case family::copy_in: return "copyin";
  }
  return "?";
}

/// A typed schedule (L1): which family, with which parameters. A value: it
/// prints, compares and copies; it knows nothing of MPI.
///
///   schedule::recursive({-2, -2, 2, 2})  // Rabenseifner on 4 ranks
///   schedule::recursive({2, 2}, true)    // recursive doubling, remainder folded in
///   schedule::cyclic({2, 2, 2})          // dissemination on 5..8 ranks
///   schedule::ring()                     // cyclic shift by one rank, P-1 steps each way
///   schedule::tree(0)                    // binomial tree; tree(k) k-ary, tree(k, 2) two roots
///   schedule::copy_in()                  // every rank reads every peer's slice (radix P)
struct schedule {
  family fam = family::recursive_exchange;
  factor_set factors;  ///< signed radices (recursive exchange, cyclic shift; empty = ring)
  int arity = 2;       ///< tree: children per node, 0 = binomial
  int roots = 1;       ///< tree: data split over this many roots (one per socket)
  bool fold = false;   ///< recursive exchange: the P - prod ranks beyond the
                       ///< factor product fold into partners (Thakur, Rabenseifner & Gropp 2005)

  static constexpr schedule recursive(factor_set f, bool fold = false) {
    return {family::recursive_exchange, f, 2, 1, fold};
  }
  static constexpr schedule cyclic(factor_set f) { return {family::cyclic_shift, f, 2, 1, false}; }
  static constexpr schedule ring() { return {family::cyclic_shift, {}, 2, 1, false}; }
  static constexpr schedule tree(int arity, int roots = 1) { return {family::tree, {}, arity, roots, false}; }
  static constexpr schedule copy_in() { return {family::copy_in, {}, 2, 1, false}; }

  friend constexpr bool operator==(const schedule&, const schedule&) = default;

  /// "recexch{-2,2}", "recexch{2,2}+fold", "cyclic{2,2,2}", "ring", "tree:3",
  /// "tree:binomial", "tree:2x2" (two roots), "copyin". parse() reads it back.
  [[nodiscard]] std::string to_string() const {
    switch (fam) {
      case family::tree: {
        std::string s = "tree:";
        s += arity == 0 ? std::string("binomial") : std::to_string(arity);
        if (roots > 1) {
          s += 'x';
          s += std::to_string(roots);
        }
        return s;
      }
      case family::copy_in: return "copyin";
      case family::cyclic_shift: {
        if (factors.empty()) return "ring";
        std::string s = "cyclic";
        s += factors.to_string();
        return s;
      }
      case family::recursive_exchange: {
        std::string s = "recexch";
        s += factors.to_string();
        if (fold) s += "+fold";
        return s;
      }
    }
    return "?";
  }
};

/// Whether the cyclic-shift family serves collective `c`: its lowering
/// (lower.hpp, cyclic_steps) implements allreduce, reduce_scatter and
/// allgather; the rooted collectives (reduce, bcast) take the other families.
/// Factor-set validity (factors.hpp) does not depend on this.
constexpr bool cyclic_serves(collective c) noexcept { return c != collective::reduce && c != collective::bcast; }

/// Why, for messages.
inline constexpr std::string_view rooted_not_cyclic =
    "rooted collectives are lowered by the tree, copy-in and recursive exchange families";

}  // namespace collc::algo
