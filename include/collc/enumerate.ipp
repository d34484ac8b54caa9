#pragma once
/// \file
/// Definitions of enumerate.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/enumerate.hpp>

namespace collc {

namespace detail {

[[noreturn]] COLLC_INLINE void throw_bad_ranks(const char* what, long long p) {
  throw error(errc::invalid_argument, cat(what, ": number of ranks (", p, ") must be at least 1"));
}

}  // namespace detail

COLLC_INLINE recursive_sequence_range::recursive_sequence_range(int ranks) : ranks_(ranks) {
  if (ranks < 1) detail::throw_bad_ranks("recursive_sequences", ranks);
  for (int d = 1; d <= ranks / d; ++d) {
    if (ranks % d != 0) continue;
    if (d >= 2) divisors_.push_back(d);
    if (ranks / d != d) divisors_.push_back(ranks / d);
  }
  std::sort(divisors_.begin(), divisors_.end());
  for (int rest = ranks, p = 2; rest > 1; ++p) {
    if (p > rest / p) {  // what is left is prime
      primes_.push_back(rest);
      break;
    }
    if (rest % p != 0) continue;
    primes_.push_back(p);
    while (rest % p == 0) rest /= p;
  }
}

COLLC_INLINE cyclic_sequence_range::cyclic_sequence_range(int ranks) : ranks_(ranks) {
  if (ranks < 1) detail::throw_bad_ranks("cyclic_sequences", ranks);
}

[[nodiscard]] COLLC_INLINE recursive_sequence_range recursive_sequences(int ranks) {
  return recursive_sequence_range(ranks);
}

[[nodiscard]] COLLC_INLINE cyclic_sequence_range cyclic_sequences(int ranks) { return cyclic_sequence_range(ranks); }

namespace detail {

__extension__ using uint128 = unsigned __int128;  // __extension__: GCC/Clang type, quiet under -Wpedantic

COLLC_INLINE std::uint64_t mul_mod(std::uint64_t a, std::uint64_t b, std::uint64_t m) {
  return static_cast<std::uint64_t>(static_cast<uint128>(a) * b % m);
}

COLLC_INLINE std::uint64_t pow_mod(std::uint64_t base, std::uint64_t e, std::uint64_t m) {
  std::uint64_t r = 1 % m;
  base %= m;
  for (; e != 0; e >>= 1) {
    if (e & 1) r = mul_mod(r, base, m);
    base = mul_mod(base, base, m);
  }
  return r;
}

/// Miller-Rabin with the first 12 primes as bases: deterministic for every
/// n < 3.3e24, so for all 64-bit n.
COLLC_INLINE bool is_prime_u64(std::uint64_t n) {
  constexpr std::uint64_t bases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  if (n < 2) return false;
  for (std::uint64_t p : bases)
    if (n % p == 0) return n == p;
  std::uint64_t d = n - 1;
  int s = 0;
  for (; (d & 1) == 0; d >>= 1) ++s;
  for (std::uint64_t a : bases) {
    std::uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = mul_mod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

/// Montgomery multiplication modulo an odd n (the subtractive form, which
/// needs no 129-bit intermediate): mul(a, b) = a * b / 2^64 mod n.
struct montgomery {
  std::uint64_t n;
  std::uint64_t inv;  // n^-1 mod 2^64

  explicit montgomery(std::uint64_t modulus) : n(modulus), inv(modulus) {
    for (int i = 0; i < 5; ++i) inv *= 2 - modulus * inv;  // Newton: doubles the correct low bits
  }
  [[nodiscard]] std::uint64_t mul(std::uint64_t a, std::uint64_t b) const {
    const uint128 t = static_cast<uint128>(a) * b;
    const std::uint64_t m = static_cast<std::uint64_t>(t) * inv;  // t - m*n == 0 mod 2^64
    const std::uint64_t hi = static_cast<std::uint64_t>(t >> 64);
    const std::uint64_t mn = static_cast<std::uint64_t>((static_cast<uint128>(m) * n) >> 64);
    return hi >= mn ? hi - mn : hi - mn + n;
  }
};

/// A non-trivial factor of the odd composite n (Pollard's rho, Brent's cycle
/// search with batched gcds). Iterates x -> x^2/2^64 + c in Montgomery
/// arithmetic: still a pseudo-random map mod n, and the extra factors 2^-64 in
/// the batched product are units, so the gcds are unchanged.
COLLC_INLINE std::uint64_t pollard_rho(std::uint64_t n) {
  const montgomery mont(n);
  const auto dist = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : b - a; };
  for (std::uint64_t c = 1;; ++c) {
    const auto f = [&](std::uint64_t v) {
      const std::uint64_t w = mont.mul(v, v) + c;
      return w >= n || w < c ? w - n : w;  // c < n, so one subtraction reduces
    };
    std::uint64_t y = 2, x = 2, ys = 2, q = 1, g = 1;
    constexpr std::uint64_t batch = 128;
    for (std::uint64_t r = 1; g == 1; r *= 2) {
      x = y;
      for (std::uint64_t i = 0; i < r; ++i) y = f(y);
      for (std::uint64_t k = 0; k < r && g == 1; k += batch) {
        ys = y;
        for (std::uint64_t i = 0; i < std::min(batch, r - k); ++i) {
          y = f(y);
          q = mont.mul(q, dist(x, y));
        }
        g = std::gcd(q, n);
      }
    }
    if (g == n) {  // the batch overshot (or q hit 0): redo it one step at a time
      do {
        ys = f(ys);
        g = std::gcd(dist(x, ys), n);
      } while (g == 1);
    }
    if (g != n) return g;
  }
}

COLLC_INLINE void factor_into(std::uint64_t n, std::vector<std::uint64_t>& primes) {
  if (n == 1) return;
  if (is_prime_u64(n)) {
    primes.push_back(n);
    return;
  }
  const std::uint64_t d = pollard_rho(n);
  factor_into(d, primes);
  factor_into(n / d, primes);
}

/// Exponents of the prime factorization of n >= 1 (the prime signature),
/// largest first. Trial division by small primes, then Miller-Rabin + rho.
COLLC_INLINE std::vector<int> prime_signature(std::uint64_t n) {
  std::vector<int> exps;
  for (std::uint64_t p = 2; p < 64 && n > 1; ++p) {
    int e = 0;
    for (; n % p == 0; n /= p) ++e;
    if (e != 0) exps.push_back(e);
  }
  std::vector<std::uint64_t> primes;
  factor_into(n, primes);
  std::sort(primes.begin(), primes.end());
  for (std::size_t i = 0; i < primes.size();) {
    std::size_t j = i;
    while (j < primes.size() && primes[j] == primes[i]) ++j;
    exps.push_back(static_cast<int>(j - i));
    i = j;
  }
  std::sort(exps.rbegin(), exps.rend());
  return exps;
}

/// Omega! / prod(e_k!) for the exponents e, or 0 if it exceeds 2^64 - 1.
COLLC_INLINE std::uint64_t multinomial_saturated(const std::vector<int>& exps) {
  constexpr uint128 limit = std::numeric_limits<std::uint64_t>::max();
  uint128 result = 1;
  std::uint64_t total = 0;
  for (int e : exps) {
    // Multiply by C(total + e, e) one factor at a time: each partial product
    // result * C(total + i, i) is an integer.
    for (int i = 1; i <= e; ++i) {
      result = result * (total + static_cast<std::uint64_t>(i)) / static_cast<std::uint64_t>(i);
      if (result > limit) return 0;
    }
    total += static_cast<std::uint64_t>(e);
  }
  return static_cast<std::uint64_t>(result);
}

[[noreturn]] COLLC_INLINE void throw_count_overflow(const char* what, std::uint64_t p) {
  throw error(errc::overflow, cat(what, "(", p, "): the count exceeds 2^64 - 1"));
}

}  // namespace detail

COLLC_INLINE std::uint64_t count_recursive(std::uint64_t ranks) {
  if (ranks == 0) detail::throw_bad_ranks("count_recursive", 0);
  if (ranks == 1) return 1;
  // H depends only on the exponents e of P. H(e) = sum of H(f) over the
  // divisors f < e of the exponent lattice, H(0) = 1. G_k(e) sums H(f) over
  // f <= e in the first k coordinates and f == e in the others, so
  //   G_0 = H,  G_k(e) = G_(k-1)(e) + G_k(e - u_k),  H(e) = sum_k G_k(e - u_k)
  // (terms with e_k = 0 omitted): all additions, no alternating signs.
  // Every G value below the top is at most H(P), so an overflow anywhere
  // means H(P) itself overflows.
  const std::vector<int> exps = detail::prime_signature(ranks);
  // Shortcut: the orderings of P's prime factors alone, Omega! / prod(e!),
  // are ordered factorizations; if they overflow, so does the count.
  if (detail::multinomial_saturated(exps) == 0) detail::throw_count_overflow("count_recursive", ranks);
  const std::size_t j = exps.size();
  const std::size_t width = j + 1;  // G_0..G_j of one lattice point, side by side
  std::vector<std::size_t> stride(j);
  std::size_t lattice = 1;
  for (std::size_t k = 0; k < j; ++k) {
    stride[k] = lattice;
    lattice *= static_cast<std::size_t>(exps[k] + 1);
  }
  std::vector<std::uint64_t> g(width * lattice);  // g[idx * width + k] = G_k(idx)
  for (std::size_t k = 0; k <= j; ++k) g[k] = 1;
  std::vector<int> digit(j, 0);  // exponent vector of idx
  for (std::size_t idx = 1; idx < lattice; ++idx) {
    for (std::size_t k = 0; k < j; ++k) {  // increment the mixed-radix counter
      if (++digit[k] <= exps[k]) break;
      digit[k] = 0;
    }
    std::uint64_t* here = &g[idx * width];
    std::uint64_t h = 0;
    for (std::size_t k = 0; k < j; ++k)
      if (digit[k] > 0 && __builtin_add_overflow(h, g[(idx - stride[k]) * width + k + 1], &h))
        detail::throw_count_overflow("count_recursive", ranks);
    if (idx + 1 == lattice) return h;
    here[0] = h;
    for (std::size_t k = 0; k < j; ++k) {
      here[k + 1] = here[k];
      if (digit[k] > 0 && __builtin_add_overflow(here[k + 1], g[(idx - stride[k]) * width + k + 1], &here[k + 1]))
        detail::throw_count_overflow("count_recursive", ranks);
    }
  }
  return 1;  // not reached: ranks > 1 has lattice > 1
}

COLLC_INLINE std::uint64_t count_cyclic(std::uint64_t ranks) {
  if (ranks == 0) detail::throw_bad_ranks("count_cyclic", 0);
  if (ranks > cyclic_count_limit)
    throw error(errc::invalid_argument, detail::cat("count_cyclic: number of ranks (", ranks,
                                                    ") exceeds the supported maximum ", cyclic_count_limit));
  const std::size_t n = static_cast<std::size_t>(ranks);
  std::vector<std::uint64_t> h(n, 0);
  std::uint64_t sum = 0;
  if (n > 1) h[1] = 1;
  for (std::size_t d = 1; d < n; ++d) {
    // h[d] is final here: every proper divisor of d is smaller than d.
    if (__builtin_add_overflow(sum, h[d], &sum)) detail::throw_count_overflow("count_cyclic", ranks);
    for (std::size_t m = 2 * d; m < n; m += d)
      if (__builtin_add_overflow(h[m], h[d], &h[m])) detail::throw_count_overflow("count_cyclic", ranks);
  }
  return sum;
}

}  // namespace collc
