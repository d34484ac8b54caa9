#pragma once
/// \file
/// collc::exact_sum<F>: an exact, order-independent accumulator for sums of
/// floats or doubles, and therefore an element type whose `+` is truly
/// associative and commutative. Any collc plan with the default operator
/// (collc::plus) on it gives the same bits for every schedule, rank count and
/// partition of the summands. Standard library only.
///
///   collc::exact_sum<double> s;                    // exact zero
///   s.add(x.data(), x.size());                     // vectorised range add
///   s += 1e-300;                                   // one value
///   s += other;                                    // merge: exact, any order
///   double r = s.round();                          // correctly rounded, once
///
///   auto p = collc::make_allreduce<collc::exact_sum<double>>(comm, 1);   // collc/plan.hpp
///   p(&s, &global);  double sum = global.round();  // same bits at any P, any schedule
///
/// Representation (docs/reproducible.md has the reasoning and the numbers): a
/// Kulisch long accumulator (U. Kulisch, "Computer Arithmetic and Validity",
/// de Gruyter 2008; the "superaccumulator" of Collange, Defour, Graillat and
/// Iakymchuk, ParCo 2015): one two's-complement fixed-point integer whose
/// least significant bit is the smallest subnormal (2^-1074 for double) and
/// whose range covers the largest finite value (2^1024) with 64 bits of carry
/// headroom above it, in 64-bit limbs (34 for double: 272 bytes, 6 for float),
/// plus a word of IEEE flags. Every finite float is an integer multiple of the
/// lsb, so adding it is an integer addition: exact. The value of an
/// accumulator is the exact sum of what was added, so its bits are a function
/// of the multiset of summands alone (the representation is canonical: plain
/// two's complement with carries always propagated), `operator==` compares
/// those bits (the value and the IEEE flags: {} and {+0.0} differ, though both
/// round to +0), and rounding happens once, at the end.
///
/// Why not a binned (ReproBLAS) or expansion form: binned numbers are smaller
/// (K = 3 bins: ~48 bytes) but reproducible only, not exact, and their error
/// bound depends on the data's range; the long accumulator is exact and its
/// result is the correctly rounded sum, which is the stronger guarantee and the
/// simpler one to state. Its cost is in the range add (below), which runs on
/// doubles and touches the long accumulator only a few times per block.
///
/// Range add (`add(ptr, n)`, `add_products`): blocks of up to 2048 values go
/// through the error-free extraction of Rump, Ogita and Oishi ("Accurate
/// floating-point summation part I: faithful rounding", SIAM J. Sci. Comput.
/// 31(1), 2008, ExtractScalar), as in Demmel & Nguyen ("Parallel reproducible
/// summation", IEEE TC 64(7), 2015), against boundaries derived from the
/// block's maximum: q = fl(fl(sigma + x) - sigma) is x rounded to the grid of
/// sigma, x - q is exact, and 2048 such q sum exactly in a double. Two levels
/// (86 bits below the block's maximum) cover almost all data; a block whose
/// remainders are not all zero is redone with three levels (129 bits) and its
/// nonzero remainders added one by one, and a block with an Inf or whose
/// maximum is outside [2^-947, 2^1013) is added value by value. So the range
/// add is exact for every input; only its speed depends on the data.
///
/// Semantics (IEEE 754 sums in round-to-nearest, without intermediate
/// rounding or overflow): the result is the exact sum rounded to nearest, ties
/// to even; +Inf if any summand is +Inf (and none is -Inf or NaN), -Inf
/// likewise, NaN (a quiet NaN; payloads are not kept) if any summand is NaN or
/// both infinities occur; a finite exact sum beyond the largest finite value
/// rounds to +-Inf as IEEE overflow does; an exact zero is -0 only when every
/// summand was -0 (and at least one was added), as in IEEE. Values stay exact
/// while the accumulated magnitude is below 2^1101 (double; 2^234 for float),
/// i.e. the sum of at least 2^77 summands of the largest magnitude; beyond that
/// the accumulator saturates to +-Inf (sticky, never wraps) and only that
/// regime depends on the order of additions.
///
/// Not for -ffast-math: it lets the compiler rewrite (sigma + x) - sigma as x
/// (an #error below refuses __FAST_MATH__; -fassociative-math alone must not be
/// used either). FMA contraction does not affect the result: the extraction
/// contains no multiplication and add_products rounds each product first.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include <collc/error.hpp>

#if defined(__FAST_MATH__)
#error \
    "collc/exact_sum.hpp: -ffast-math lets the compiler rewrite (sigma + x) - sigma as x, which breaks the exact extraction; compile without it"
#endif
#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0 && __FLT_EVAL_METHOD__ != 1
#error \
    "collc/exact_sum.hpp: double arithmetic is evaluated in excess precision here (FLT_EVAL_METHOD != 0, e.g. x87: -mfpmath=387 or a 32-bit x86 target without -msse2 -mfpmath=sse), which breaks the exact extraction; compile with -msse2 -mfpmath=sse"
#endif

namespace collc {

namespace detail::exact {

template <class F>
struct float_bits;
template <>
struct float_bits<double> {
  using uint = std::uint64_t;
  static constexpr int fraction = 52;
  static constexpr unsigned exponent_mask = 0x7ff;
};
template <>
struct float_bits<float> {
  using uint = std::uint32_t;
  static constexpr int fraction = 23;
  static constexpr unsigned exponent_mask = 0xff;
};

/// The range add's parameters (see the file comment). A block of at most
/// 2^(margin + 1) values whose magnitudes are at most 2^T is cut at
/// sigma = 1.5 * 2^(T + margin): each piece is a multiple of 2^(T + margin - 52)
/// of magnitude <= 2^T, so 2^(margin + 1) pieces and every partial sum are
/// multiples with at most 53 significant bits: exact in a double. Each level
/// takes 53 - margin = 43 bits.
inline constexpr int margin = 10;
inline constexpr std::size_t block = std::size_t{1} << (margin + 1);
inline constexpr int bits_per_level = 53 - margin;
inline constexpr std::size_t lanes = 8;  // independent accumulators: the SLP vectoriser maps them to SIMD lanes
static_assert(block / lanes + lanes < (std::size_t{1} << (margin - 1)), "a lane's bin must stay in its binade");
/// Block maxima with 2^e <= max < 2^(e + 1) outside [min_e, max_e] are added
/// value by value: the first sigma must be finite (e + 1 + margin <= 1023), a
/// level's sum of up to `block` pieces of magnitude <= 2^(e + 1) must be finite
/// too (e + 1 + margin + 1 <= 1023: pieces round up to 2^(e + 1), so 2048 values
/// just below 2^1013 would give a level sum of 2^1024 = Inf), and the third
/// sigma normal (e + 1 + margin - 2 * bits_per_level >= -1022).
inline constexpr int max_e = 1021 - margin;
inline constexpr int min_e = -1022 - 1 - margin + 2 * bits_per_level;

/// 1.5 * 2^s for -1022 <= s <= 1023, built from its bits.
inline double one_and_half_pow2(int s) noexcept {
  return std::bit_cast<double>((static_cast<std::uint64_t>(s + 1023) << 52) | (std::uint64_t{1} << 51));
}

/// Cuts every x[i] (i < n <= block) into Levels pieces on the grids below 2^T1
/// and sums each level exactly into sums[k]. Returns whether the pieces hold
/// every x exactly (false if some x is NaN). When `rest` is given, the
/// remainders after the last level are stored there.
///
/// Each lane keeps a running bin S = sigma + (its pieces so far), as in
/// Demmel & Nguyen's binned sums: S + r rounds r to the grid of S's binade
/// (S stays in [2^s, 2^(s+1)): a lane takes at most block / lanes + lanes pieces
/// of magnitude <= 2^T, below 2^(s-1) = 2^(T + margin - 1) together), so the
/// piece is q = fl(S + r) - S (exact, Sterbenz) and r - q is exact (Rump, Ogita
/// and Oishi, ExtractScalar): three additions per level and value. Ties in
/// fl(S + r) may go either way; only exactness matters here.
// The loops over a block's independent vectors must be unrolled for the bins
// to stay in registers: g++ -O2 keeps a 4-iteration loop over memory
// otherwise (measured 3x slower).
#if defined(__clang__)
#define COLLC_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define COLLC_UNROLL _Pragma("GCC unroll 8")
#else
#define COLLC_UNROLL
#endif

#if defined(__GNUC__)  // g++ and clang++: explicit vectors of the target's width (AVX: 4 doubles, else 2)
#if defined(__AVX__)
inline constexpr std::size_t width = 4;
#else
inline constexpr std::size_t width = 2;
#endif
typedef double vec __attribute__((vector_size(width * sizeof(double))));
typedef std::int64_t ivec __attribute__((vector_size(width * sizeof(double))));
inline vec load(const double* p) noexcept {
  vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline vec splat(double d) noexcept { return vec{} + d; }
inline vec abs(vec v) noexcept { return (vec)((ivec)v & std::numeric_limits<std::int64_t>::max()); }
inline ivec bits(vec v) noexcept { return (ivec)v; }
inline vec max(vec a, vec b) noexcept { return a > b ? a : b; }  // b (the running max) stays if a is NaN
inline void store(double* p, vec v) noexcept { std::memcpy(p, &v, sizeof v); }
inline double lane(vec v, std::size_t j) noexcept { return v[j]; }
inline std::int64_t lane(ivec v, std::size_t j) noexcept { return v[j]; }
#else  // portable: one lane per vector
using vec = double;
using ivec = std::int64_t;
inline constexpr std::size_t width = 1;
inline vec load(const double* p) noexcept { return *p; }
inline vec splat(double d) noexcept { return d; }
inline vec abs(vec v) noexcept { return std::fabs(v); }
inline ivec bits(vec v) noexcept { return std::bit_cast<ivec>(v); }
inline vec max(vec a, vec b) noexcept { return a > b ? a : b; }
inline void store(double* p, vec v) noexcept { *p = v; }
inline double lane(vec v, std::size_t) noexcept { return v; }
inline std::int64_t lane(ivec v, std::size_t) noexcept { return v; }
#endif
inline constexpr std::size_t vectors = lanes / width;  // independent chains per level

/// Cuts every x[i] (i < n <= block) into Levels pieces on the grids below 2^T1
/// and sums each level exactly into sums[k]. Returns whether the pieces hold
/// every x exactly (false if some x is NaN). When `rest` is given, the
/// remainders after the last level are stored there.
///
/// Each lane keeps a running bin S = sigma + (its pieces so far), as in
/// Demmel & Nguyen's binned sums: S + r rounds r to the grid of S's binade
/// (S stays in [2^s, 2^(s+1)): a lane takes at most block / lanes + lanes pieces
/// of magnitude <= 2^T, below 2^(s-1) = 2^(T + margin - 1) together), so the
/// piece is q = fl(S + r) - S (exact, Sterbenz) and r - q is exact (Rump, Ogita
/// and Oishi, ExtractScalar): three additions per level and value. Ties in
/// fl(S + r) may go either way; only exactness matters here.
template <int Levels>
inline bool extract(const double* x, std::size_t n, int T1, double (&sums)[3], double* rest) noexcept {
  double sigma[Levels];
  vec bin[Levels][vectors];
  for (int k = 0; k < Levels; ++k) {
    sigma[k] = one_and_half_pow2(T1 + margin - k * bits_per_level);
    for (std::size_t j = 0; j < vectors; ++j) bin[k][j] = splat(sigma[k]);
  }
  ivec bad[vectors] = {};  // OR of the remainders' bits (integer ops, off the FP adders)
  const std::size_t blocked = n - n % lanes;
  std::size_t i = 0;
  for (; i < blocked; i += lanes) {
    vec r[vectors];
    COLLC_UNROLL
    for (std::size_t j = 0; j < vectors; ++j) r[j] = load(x + i + j * width);
    COLLC_UNROLL
    for (int k = 0; k < Levels; ++k) {
      COLLC_UNROLL
      for (std::size_t j = 0; j < vectors; ++j) {
        const vec b = bin[k][j] + r[j];  // r rounded to the level's grid, plus the bin
        r[j] -= b - bin[k][j];           // exact: the bits below the grid
        bin[k][j] = b;
      }
    }
    COLLC_UNROLL
    for (std::size_t j = 0; j < vectors; ++j) bad[j] |= bits(r[j]);
    if (rest != nullptr) {
      COLLC_UNROLL
      for (std::size_t j = 0; j < vectors; ++j) store(rest + i + j * width, r[j]);
    }
  }
  double tail_bin[Levels];
  std::int64_t tail_bad = 0;
  for (int k = 0; k < Levels; ++k) tail_bin[k] = sigma[k];
  for (; i < n; ++i) {
    double r = x[i];
    for (int k = 0; k < Levels; ++k) {
      const double b = tail_bin[k] + r;
      r -= b - tail_bin[k];
      tail_bin[k] = b;
    }
    tail_bad |= std::bit_cast<std::int64_t>(r);
    if (rest != nullptr) rest[i] = r;
  }
  for (int k = 0; k < 3; ++k) sums[k] = 0;
  for (int k = 0; k < Levels; ++k) {
    for (std::size_t j = 0; j < vectors; ++j)
      for (std::size_t l = 0; l < width; ++l) sums[k] += lane(bin[k][j], l) - sigma[k];  // exact: see `margin`
    sums[k] += tail_bin[k] - sigma[k];
  }
  std::int64_t b = tail_bad;
  for (std::size_t j = 0; j < vectors; ++j)
    for (std::size_t l = 0; l < width; ++l) b |= lane(bad[j], l);
  return (b & std::numeric_limits<std::int64_t>::max()) == 0;  // every remainder +-0
}

/// max |x[i]| over i < n, NaN ignored (a NaN never replaces the running max).
inline double max_abs(const double* x, std::size_t n) noexcept {
  vec m[vectors];
  for (auto& v : m) v = splat(0);
  const std::size_t blocked = n - n % lanes;
  std::size_t i = 0;
  for (; i < blocked; i += lanes) {
    COLLC_UNROLL
    for (std::size_t j = 0; j < vectors; ++j) m[j] = max(abs(load(x + i + j * width)), m[j]);
  }
  double r = 0;
  for (; i < n; ++i) {
    const double a = std::fabs(x[i]);
    r = a > r ? a : r;
  }
  for (std::size_t j = 0; j < vectors; ++j)
    for (std::size_t l = 0; l < width; ++l) r = lane(m[j], l) > r ? lane(m[j], l) : r;
  return r;
}

}  // namespace detail::exact

/// An exact accumulator of `F` (float or double) values; see the file comment.
/// Trivially copyable (collc plans move it as bytes), default-constructed to
/// an exact zero (the identity of `+`), `+` exact, associative and
/// commutative. Example:
///   collc::exact_sum<double> s;  s.add(v.data(), v.size());  double r = s.round();
template <class F>
requires std::is_same_v<F, float> || std::is_same_v<F, double>
class exact_sum {
  using traits = detail::exact::float_bits<F>;
  using uint = typename traits::uint;

 public:
  using value_type = F;
  /// The exponent of the accumulator's least significant bit: F's smallest subnormal.
  static constexpr int lsb_exponent = std::numeric_limits<F>::min_exponent - std::numeric_limits<F>::digits;
  /// Bits from the lsb up to (excluding) 2^max_exponent, the first power of two above every finite F.
  static constexpr int value_bits = std::numeric_limits<F>::max_exponent - lsb_exponent;
  /// 64-bit limbs: the value bits, at least 64 bits of carry headroom, and the sign.
  static constexpr std::size_t limb_count = (static_cast<std::size_t>(value_bits) + 64 + 1 + 63) / 64;
  /// Accumulated magnitudes below 2^(max_exponent + headroom_bits) are exact.
  static constexpr int headroom_bits = static_cast<int>(limb_count * 64) - 1 - value_bits;

  constexpr exact_sum() noexcept = default;
  /// The exact value of x.
  explicit exact_sum(F x) noexcept { add(x); }

  /// Adds one value, exactly.
  exact_sum& add(F x) noexcept {
    const uint b = std::bit_cast<uint>(x);
    const bool negative = (b >> (sizeof(uint) * 8 - 1)) != 0;
    const unsigned e = static_cast<unsigned>(b >> traits::fraction) & traits::exponent_mask;
    std::uint64_t m = b & ((uint{1} << traits::fraction) - 1);
    flags_ |= any | (x == F(0) && negative ? 0 : nonnegzero);
    if (e == traits::exponent_mask) return special(m != 0 ? nan : negative ? minus_inf : plus_inf);
    if ((flags_ & specials) != 0 || (e == 0 && m == 0)) return *this;
    int pos = 0;  // bit index of m's lsb: a subnormal's lsb is the accumulator's lsb
    if (e != 0) {
      m |= std::uint64_t{1} << traits::fraction;
      pos = static_cast<int>(e) - 1;
    }
    add_at(m, pos, negative);
    return *this;
  }
  exact_sum& operator+=(F x) noexcept { return add(x); }

  /// Adds x[0..n), exactly; vectorised (see the file comment).
  exact_sum& add(const F* x, std::size_t n) noexcept {
    double wide[detail::exact::block];
    for (std::size_t i = 0; i < n; i += detail::exact::block) {
      const std::size_t m = n - i < detail::exact::block ? n - i : detail::exact::block;
      if constexpr (std::is_same_v<F, double>) {
        add_block(x + i, m, wide);
      } else {
        for (std::size_t j = 0; j < m; ++j) wide[j] = x[i + j];  // exact widening
        add_block(wide, m, wide);
      }
    }
    return *this;
  }
  exact_sum& add(std::span<const F> x) noexcept { return add(x.data(), x.size()); }

  /// Adds the products x[i] * y[i], i < n, each rounded to F first (as a
  /// reproducible BLAS dot): the result is the correctly rounded sum of the
  /// rounded products, the same for any order and partition; a product that
  /// overflows is +-Inf, as in an IEEE dot.
  exact_sum& add_products(const F* x, const F* y, std::size_t n) noexcept {
    double prod[detail::exact::block];
    for (std::size_t i = 0; i < n; i += detail::exact::block) {
      const std::size_t m = n - i < detail::exact::block ? n - i : detail::exact::block;
      for (std::size_t j = 0; j < m; ++j) prod[j] = static_cast<F>(x[i + j] * y[i + j]);
      add_block(prod, m, prod);
    }
    return *this;
  }
  /// x and y must have equal sizes (collc::error otherwise: a silent
  /// truncation to the shorter one would be a wrong dot product).
  exact_sum& add_products(std::span<const F> x, std::span<const F> y) {
    if (x.size() != y.size())
      throw error(errc::invalid_argument, "collc::exact_sum::add_products: x has " + std::to_string(x.size()) +
                                              " elements, y has " + std::to_string(y.size()));
    return add_products(x.data(), y.data(), x.size());
  }

  /// Merges another accumulator: exact, so any order of merges gives the same bits.
  exact_sum& operator+=(const exact_sum& o) noexcept {
    flags_ |= o.flags_;
    if ((flags_ & specials) != 0) return special(0);
    const bool sa = negative_value(), sb = o.negative_value();
    std::uint64_t carry = 0;
    for (std::size_t i = 0; i < limb_count; ++i) {
      const std::uint64_t t = limb_[i] + carry;
      carry = t < carry ? 1 : 0;
      const std::uint64_t r = t + o.limb_[i];
      carry |= r < t ? 1 : 0;
      limb_[i] = r;
    }
    if (sa == sb && negative_value() != sa) return special(sa ? minus_inf : plus_inf);  // beyond the headroom
    return *this;
  }
  /// The exact sum of both (what collc::plus computes in a plan).
  friend exact_sum operator+(exact_sum a, const exact_sum& b) noexcept { return a += b; }

  /// The sum rounded to the nearest F, ties to even (see the file comment for
  /// Inf, NaN, overflow and the sign of zero).
  [[nodiscard]] F round() const noexcept {
    if ((flags_ & nan) != 0 || (flags_ & (plus_inf | minus_inf)) == (plus_inf | minus_inf))
      return std::numeric_limits<F>::quiet_NaN();
    if ((flags_ & plus_inf) != 0) return std::numeric_limits<F>::infinity();
    if ((flags_ & minus_inf) != 0) return -std::numeric_limits<F>::infinity();
    const bool negative = negative_value();
    std::uint64_t mag[limb_count];
    std::uint64_t borrow = 1;  // magnitude of a negative value: ~v + 1
    for (std::size_t i = 0; i < limb_count; ++i) {
      mag[i] = negative ? ~limb_[i] + borrow : limb_[i];
      if (negative) borrow = borrow != 0 && mag[i] == 0 ? 1 : 0;
    }
    std::size_t top = limb_count;
    while (top > 0 && mag[top - 1] == 0) --top;
    if (top == 0) return (flags_ & any) != 0 && (flags_ & nonnegzero) == 0 ? -F(0) : F(0);
    constexpr int p = std::numeric_limits<F>::digits;
    int h = static_cast<int>(top - 1) * 64 + 63 - std::countl_zero(mag[top - 1]);  // highest set bit
    F r;
    if (h < p) {
      r = std::ldexp(static_cast<F>(mag[0]), lsb_exponent);  // below 2^p lsbs: exact (subnormal or smallest binade)
    } else {
      std::uint64_t sig = bits(mag, h - p + 1, p);
      const bool half = bits(mag, h - p, 1) != 0;
      if (half && (sig & 1 || any_below(mag, h - p))) {  // nearest; ties to even
        if (++sig >> p) {
          sig >>= 1;
          ++h;
        }
      }
      r = std::ldexp(static_cast<F>(sig), h - (p - 1) + lsb_exponent);  // exact, or Inf on overflow
    }
    return negative ? -r : r;
  }
  explicit operator F() const noexcept { return round(); }

  /// Whether the result is NaN / +-Inf by the rules above (no rounding needed).
  [[nodiscard]] bool is_nan() const noexcept {
    return (flags_ & nan) != 0 || (flags_ & (plus_inf | minus_inf)) == (plus_inf | minus_inf);
  }
  [[nodiscard]] bool is_inf() const noexcept { return !is_nan() && (flags_ & (plus_inf | minus_inf)) != 0; }

  /// The fixed-point value (two's complement, limb 0 least significant, bit 0
  /// worth 2^lsb_exponent); all zero once the result is NaN or +-Inf.
  [[nodiscard]] std::span<const std::uint64_t, limb_count> limbs() const noexcept {
    return std::span<const std::uint64_t, limb_count>(limb_);
  }

  /// Equal values (and flags) compare equal; the representation is canonical,
  /// so this is also bitwise equality.
  friend bool operator==(const exact_sum&, const exact_sum&) = default;

 private:
  // flags_: OR of per-summand facts, so merging them is order-independent.
  static constexpr std::uint64_t any = 1;         // something was added
  static constexpr std::uint64_t nonnegzero = 2;  // something other than -0 was added
  static constexpr std::uint64_t plus_inf = 4, minus_inf = 8, nan = 16;
  static constexpr std::uint64_t specials = plus_inf | minus_inf | nan;

  [[nodiscard]] bool negative_value() const noexcept { return (limb_[limb_count - 1] >> 63) != 0; }

  // The fixed-point part is meaningless once the result is NaN or Inf: zeroed,
  // so equal results have equal bits.
  exact_sum& special(std::uint64_t flag) noexcept {
    flags_ |= flag;
    for (auto& l : limb_) l = 0;
    return *this;
  }

  /// value += (negative ? -m : m) * 2^(pos + lsb_exponent), m < 2^54, carries propagated.
  void add_at(std::uint64_t m, int pos, bool negative) noexcept {
    const auto k = static_cast<std::size_t>(pos / 64);
    const int s = pos % 64;
    const std::uint64_t lo = m << s, hi = s != 0 ? m >> (64 - s) : 0;
    const bool was_negative = negative_value();
    if (!negative) {
      limb_[k] += lo;
      const std::uint64_t up = hi + (limb_[k] < lo ? 1 : 0);
      limb_[k + 1] += up;
      bool carry = limb_[k + 1] < up;
      for (std::size_t i = k + 2; carry && i < limb_count; ++i) carry = ++limb_[i] == 0;
      if (!was_negative && negative_value()) special(plus_inf);
    } else {
      const std::uint64_t old = limb_[k];
      limb_[k] = old - lo;
      const std::uint64_t up = hi + (old < lo ? 1 : 0);
      const std::uint64_t old1 = limb_[k + 1];
      limb_[k + 1] = old1 - up;
      bool borrow = old1 < up;
      for (std::size_t i = k + 2; borrow && i < limb_count; ++i) borrow = limb_[i]-- == 0;
      if (was_negative && !negative_value()) special(minus_inf);
    }
  }

  /// Adds a double that is a multiple of 2^lsb_exponent (pieces and remainders
  /// of the range add; for float accumulators they come from widened floats).
  void add_wide(double v) noexcept {
    if constexpr (std::is_same_v<F, double>) {
      add(v);
    } else {
      const auto b = std::bit_cast<std::uint64_t>(v);
      const bool negative = (b >> 63) != 0;
      const auto e = static_cast<int>((b >> 52) & 0x7ff);
      std::uint64_t m = b & ((std::uint64_t{1} << 52) - 1);
      if (e == 0x7ff) {
        special(m != 0 ? nan : negative ? minus_inf : plus_inf);
        return;
      }
      if ((flags_ & specials) != 0 || (e == 0 && m == 0)) return;
      if (e != 0) m |= std::uint64_t{1} << 52;
      int pos = (e != 0 ? e - 1 : 0) - 1074 - lsb_exponent;
      if (pos < 0) {  // the bits below the float lsb are zero (v is a multiple of it)
        m >>= -pos;
        pos = 0;
      }
      add_at(m, pos, negative);
    }
  }

  /// One block of at most detail::exact::block doubles (`scratch` may be x).
  void add_block(const double* x, std::size_t n, double* scratch) noexcept {
    namespace ex = detail::exact;
    if (n == 0) return;
    const double mx = ex::max_abs(x, n);
    const int e = mx > 0 ? std::ilogb(mx) : ex::min_e - 1;
    if ((flags_ & specials) != 0 || !(mx > 0) || e < ex::min_e || e > ex::max_e) {
      for (std::size_t i = 0; i < n; ++i) add_scalar_wide(x[i]);  // zeros, NaNs only, Inf, extreme range
      return;
    }
    flags_ |= any | nonnegzero;  // mx > 0: some summand is not -0
    double sums[3];
    if (ex::extract<2>(x, n, e + 1, sums, nullptr)) {
      add_wide(sums[0]);
      add_wide(sums[1]);
      return;
    }
    // Some value has bits more than 86 below the block's maximum (or is NaN):
    // three levels, then the remainders one by one (into scratch, which may
    // overwrite x: x is not read again).
    ex::extract<3>(x, n, e + 1, sums, scratch);
    for (double s : sums) add_wide(s);
    for (std::size_t i = 0; i < n; ++i)
      if (scratch[i] != 0 || scratch[i] != scratch[i]) add_wide(scratch[i]);
  }

  void add_scalar_wide(double v) noexcept {
    if constexpr (std::is_same_v<F, double>) {
      add(v);
    } else {
      add(static_cast<F>(v));  // exact: v was widened from an F
    }
  }

  /// `count` (<= 64) bits of a starting at bit `lo`.
  static std::uint64_t bits(const std::uint64_t* a, int lo, int count) noexcept {
    const auto k = static_cast<std::size_t>(lo / 64);
    const int s = lo % 64;
    std::uint64_t v = a[k] >> s;
    if (s != 0 && k + 1 < limb_count) v |= a[k + 1] << (64 - s);
    return count == 64 ? v : v & ((std::uint64_t{1} << count) - 1);
  }
  /// Whether any bit of a below bit `pos` is set.
  static bool any_below(const std::uint64_t* a, int pos) noexcept {
    const auto k = static_cast<std::size_t>(pos / 64);
    const int s = pos % 64;
    if (s != 0 && (a[k] & ((std::uint64_t{1} << s) - 1)) != 0) return true;
    for (std::size_t i = 0; i < k; ++i)
      if (a[i] != 0) return true;
    return false;
  }

  std::uint64_t limb_[limb_count] = {};
  std::uint64_t flags_ = 0;
};

/// The exact sum of x[0..n) as an accumulator (to merge or to reduce across ranks).
template <class F>
exact_sum<F> exact_accumulate(std::span<const F> x) noexcept {
  exact_sum<F> s;
  s.add(x);
  return s;
}

static_assert(std::is_trivially_copyable_v<exact_sum<double>> && std::is_trivially_copyable_v<exact_sum<float>>);
static_assert(exact_sum<double>::limb_count == 34 && exact_sum<double>::headroom_bits >= 64);
static_assert(exact_sum<float>::limb_count == 6 && exact_sum<float>::headroom_bits >= 64);

}  // namespace collc

#undef COLLC_UNROLL
