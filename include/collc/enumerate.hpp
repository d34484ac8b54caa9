#pragma once
/// \file
/// Enumerating and counting the phases a factor set can have for P ranks.
///
///   for (const collc::radix_list& r : collc::recursive_sequences(8))   // {2,2,2} {2,4} {4,2} {8}
///     collc::validate_or_throw(collc::mirrored(r), 8, collc::collective::allreduce,
///                              collc::schedule_kind::recursive);     // {-2,-2,-2,2,2,2} ...
///   collc::count_recursive(288);  // 544, without enumerating
///   collc::count_cyclic(288);     // 5421
///
/// The ranges are lazy: each step computes the next sequence from the current
/// one, so iterating the first few of a huge family costs only those few.
/// They yield all-positive radix lists (the phase); the caller adds signs for
/// its collective: collc::mirrored (allreduce with reduce-scatter and mirroring
/// allgather), collc::negated (reduce_scatter), or the list itself (allgather,
/// or an allreduce of reduce-exchange steps only).
///
/// Counting (the paper's Table 1): recursive(N) is the number of ordered
/// factorizations of N into factors >= 2, with recursive(1) = 1 (the empty
/// product); cyclic(N) = sum of recursive(k) over 1 <= k < N, since a cyclic
/// sequence is any ordered factorization of a prefix product k < N followed by
/// the one minimal last radix ceil(N / k).
#include <collc/config.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace collc {

/// Largest P count_cyclic accepts: the count sums recursive(k) over every
/// k < P (a sieve of P entries, 8 bytes each).
inline constexpr std::uint64_t cyclic_count_limit = std::uint64_t{1} << 22;

/// Lazy range over all ordered factorizations of P into radices >= 2 (the
/// phases of recursive exchange), in lexicographic order. P = 1 yields one
/// empty list (the empty product), which is not a valid factor set: a 1-rank
/// collective needs no exchange. Obtain it from collc::recursive_sequences.
class recursive_sequence_range {
 public:
  class iterator {
   public:
    using value_type = radix_list;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    [[nodiscard]] const radix_list& operator*() const noexcept { return seq_; }
    [[nodiscard]] const radix_list* operator->() const noexcept { return &seq_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.done_; }

   private:
    friend class recursive_sequence_range;
    explicit iterator(const recursive_sequence_range* range) : range_(range), done_(false) { complete(range->ranks_); }
    // Appends the lexicographically smallest factorization of `rest`: its
    // prime factors in ascending order.
    void complete(int rest) {
      for (int p : range_->primes_)
        while (rest % p == 0) {
          seq_.push_back(p);
          rest /= p;
        }
    }
    // The current sequence ends (.., a, b): b is the largest first element
    // of any factorization of b, so (.., a, b) is the last sequence that
    // starts with (.., a). The successor raises a to the next divisor d of
    // a*b and continues with the smallest factorization of a*b/d.
    void advance() {
      const std::size_t n = seq_.size();
      if (n <= 1) {
        done_ = true;
        return;
      }
      const int a = seq_[n - 2];
      const int r = a * seq_[n - 1];  // divides P, so fits
      const auto& divs = range_->divisors_;
      auto it = std::upper_bound(divs.begin(), divs.end(), a);
      while (r % *it != 0) ++it;  // r itself is a divisor > a, so this stops
      seq_.pop_back();
      seq_.set_back(*it);
      complete(r / *it);
    }

    const recursive_sequence_range* range_ = nullptr;
    radix_list seq_;
    bool done_ = true;
  };

  /// Throws collc::error(errc::invalid_argument) for ranks < 1.
  explicit recursive_sequence_range(int ranks);

  [[nodiscard]] iterator begin() const { return iterator(this); }
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }
  [[nodiscard]] int ranks() const noexcept { return ranks_; }

 private:
  int ranks_;
  std::vector<int> divisors_;  // divisors >= 2 of ranks_, ascending
  std::vector<int> primes_;    // distinct prime factors of ranks_, ascending
};

/// Lazy range over all cyclic-shift phases for P ranks: sequences r1..rn,
/// each >= 2, with r1*..*r(n-1) < P <= r1*..*rn and rn = ceil(P / (r1*..*r(n-1))).
/// Order: prefixes r1..r(n-1) in depth-first (preorder) lexicographic order,
/// so {P} comes first. P = 1 yields nothing. Obtain it from collc::cyclic_sequences.
class cyclic_sequence_range {
 public:
  class iterator {
   public:
    using value_type = radix_list;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    [[nodiscard]] const radix_list& operator*() const noexcept { return out_; }
    [[nodiscard]] const radix_list* operator->() const noexcept { return &out_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept { return it.done_; }

   private:
    friend class cyclic_sequence_range;
    explicit iterator(int ranks) : ranks_(ranks), done_(ranks < 2) {
      if (!done_) emit();
    }
    // Output = prefix + the minimal last radix.
    void emit() {
      out_ = prefix_;
      out_.push_back(static_cast<int>((ranks_ + product_ - 1) / product_));
    }
    // Preorder walk over prefixes with product < P: descend (append 2) if
    // possible, else raise the last radix, else back up and raise an earlier one.
    void advance() {
      if (product_ * 2 < ranks_) {
        prefix_.push_back(2);
        product_ *= 2;
        emit();
        return;
      }
      while (!prefix_.empty()) {
        const std::int64_t last = prefix_.back();
        const std::int64_t base = product_ / last;
        if (base * (last + 1) < ranks_) {
          prefix_.set_back(static_cast<int>(last + 1));
          product_ = base * (last + 1);
          emit();
          return;
        }
        prefix_.pop_back();
        product_ = base;
      }
      done_ = true;
    }

    std::int64_t ranks_ = 0;
    std::int64_t product_ = 1;  // product of prefix_, always < ranks_
    radix_list prefix_;
    radix_list out_;
    bool done_ = true;
  };

  /// Throws collc::error(errc::invalid_argument) for ranks < 1.
  explicit cyclic_sequence_range(int ranks);

  [[nodiscard]] iterator begin() const { return iterator(ranks_); }
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }
  [[nodiscard]] int ranks() const noexcept { return ranks_; }

 private:
  int ranks_;
};

/// All recursive-exchange phases for P ranks, lazily:
///   for (const auto& r : collc::recursive_sequences(12)) ...  // {2,2,3} {2,3,2} {2,6} {3,2,2} {3,4} {4,3} {6,2} {12}
[[nodiscard]] recursive_sequence_range recursive_sequences(int ranks);

/// All cyclic-shift phases for P ranks, lazily:
///   for (const auto& r : collc::cyclic_sequences(5)) ...  // {5} {2,3} {2,2,2} {3,2} {4,2}
[[nodiscard]] cyclic_sequence_range cyclic_sequences(int ranks);

/// Number of ordered factorizations of P into factors >= 2 (recursive
/// exchange phases), for any 64-bit P, without enumerating them;
/// count_recursive(1) == 1. Throws collc::error: errc::invalid_argument for
/// P = 0, errc::overflow if the count exceeds 2^64 - 1.
///
///   collc::count_recursive(288) == 544;  collc::count_recursive(1ULL << 62) == 1ULL << 61
std::uint64_t count_recursive(std::uint64_t ranks);

/// Number of cyclic-shift phases for P ranks: the sum of count_recursive(k)
/// over 1 <= k < P (count_cyclic(1) == 0). P at most collc::cyclic_count_limit
/// (a sieve over multiples, O(P log P), about 0.1 s at the limit). Throws
/// collc::error(errc::invalid_argument) for P = 0 or P above the limit,
/// errc::overflow if the sum does not fit in 64 bits.
///
///   collc::count_cyclic(7) == 9;  collc::count_cyclic(288) == 5421
std::uint64_t count_cyclic(std::uint64_t ranks);

}  // namespace collc

#if COLLC_HEADER_ONLY
#include <collc/enumerate.ipp>
#endif
