// collc::exact_sum (include/collc/exact_sum.hpp) against a reference written
// for this test: a sign-magnitude big integer over 32-bit digits that holds
// every summand scaled by 2^-lsb exactly, sums it, and checks the rounded
// result by its definition (no closer F on either side; ties to even), not by
// re-running the accumulator's own rounding code.
//  - exact value: the accumulator's limbs equal the reference integer, for
//    random data over the whole range (subnormals, 1e-300, +-1e300, huge
//    cancellations), for value-by-value adds, range adds and merges of random
//    partitions in random orders, all bitwise identical;
//  - correctly rounded: round() is the nearest F, ties to even (also ties
//    built on purpose), for double and float;
//  - the range add's three paths (two levels, three levels plus remainders,
//    value by value) on data built to need each;
//  - IEEE semantics: Inf, NaN, Inf - Inf, overflow to +-Inf without wrapping,
//    saturation beyond the headroom, the sign of an exact zero.
#include <catch2/catch.hpp>
#include <collc/exact_sum.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

using collc::exact_sum;

namespace {

// --- reference: sign-magnitude big integers --------------------------------------

struct bigint {
  bool neg = false;
  std::vector<std::uint32_t> mag;  // little endian, no leading zero digits

  void trim() {
    while (!mag.empty() && mag.back() == 0) mag.pop_back();
    if (mag.empty()) neg = false;
  }
  [[nodiscard]] bool zero() const { return mag.empty(); }
};

int cmp_mag(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (std::size_t i = a.size(); i-- > 0;)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}
std::vector<std::uint32_t> add_mag(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  std::vector<std::uint32_t> r(std::max(a.size(), b.size()) + 1, 0);
  std::uint64_t c = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::uint64_t s = c + (i < a.size() ? a[i] : 0) + (i < b.size() ? b[i] : 0);
    r[i] = static_cast<std::uint32_t>(s);
    c = s >> 32;
  }
  return r;
}
std::vector<std::uint32_t> sub_mag(const std::vector<std::uint32_t>& a,
                                   const std::vector<std::uint32_t>& b) {  // a >= b
  std::vector<std::uint32_t> r(a.size(), 0);
  std::int64_t borrow = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::int64_t d = static_cast<std::int64_t>(a[i]) - (i < b.size() ? b[i] : 0) - borrow;
    borrow = d < 0 ? 1 : 0;
    if (d < 0) d += std::int64_t{1} << 32;
    r[i] = static_cast<std::uint32_t>(d);
  }
  return r;
}
bigint add(const bigint& a, const bigint& b) {
  bigint r;
  if (a.neg == b.neg) {
    r.neg = a.neg;
    r.mag = add_mag(a.mag, b.mag);
  } else if (cmp_mag(a.mag, b.mag) >= 0) {
    r.neg = a.neg;
    r.mag = sub_mag(a.mag, b.mag);
  } else {
    r.neg = b.neg;
    r.mag = sub_mag(b.mag, a.mag);
  }
  r.trim();
  return r;
}
bigint negate(bigint a) {
  if (!a.zero()) a.neg = !a.neg;
  return a;
}
int cmp_abs(const bigint& a, const bigint& b) { return cmp_mag(a.mag, b.mag); }

/// m * 2^shift as a bigint.
bigint shifted(std::uint64_t m, int shift, bool neg) {
  bigint r;
  r.neg = neg;
  r.mag.assign(static_cast<std::size_t>(shift / 32) + 4, 0);
  const int s = shift % 32;
  const std::size_t k = static_cast<std::size_t>(shift / 32);
  const std::uint64_t lo = m << s, hi = s != 0 ? m >> (64 - s) : 0;  // m * 2^s as hi:lo
  r.mag[k] = static_cast<std::uint32_t>(lo);
  r.mag[k + 1] = static_cast<std::uint32_t>(lo >> 32);
  r.mag[k + 2] = static_cast<std::uint32_t>(hi);
  r.mag[k + 3] = static_cast<std::uint32_t>(hi >> 32);
  r.trim();
  return r;
}

/// A finite F (or 2^max_exponent, `top`) as an exact integer multiple of its smallest subnormal.
template <class F>
bigint to_big(F x) {
  int e = 0;
  const F f = std::frexp(std::fabs(x), &e);  // |x| = f 2^e, f in [0.5, 1)
  constexpr int p = std::numeric_limits<F>::digits;
  constexpr int lsb = std::numeric_limits<F>::min_exponent - p;
  if (x == 0) return {};
  const auto m = static_cast<std::uint64_t>(std::ldexp(f, p));  // exact: p significant bits
  const int shift = e - p - lsb;                                // |x| = m 2^(e - p)
  if (shift >= 0) return shifted(m, shift, x < 0);
  return shifted(m >> -shift, 0, x < 0);  // subnormal: the low bits of m are zero
}
template <class F>
bigint pow2_big(int e) {  // 2^e in lsb units
  constexpr int lsb = std::numeric_limits<F>::min_exponent - std::numeric_limits<F>::digits;
  return shifted(1, e - lsb, false);
}

/// The accumulator's limbs (two's complement) as a bigint.
template <class F>
bigint from_limbs(const exact_sum<F>& s) {
  const auto l = s.limbs();
  std::vector<std::uint64_t> v(l.begin(), l.end());
  const bool neg = (v.back() >> 63) != 0;
  if (neg) {
    std::uint64_t c = 1;
    for (auto& w : v) {
      w = ~w + c;
      c = (c != 0 && w == 0) ? 1 : 0;
    }
  }
  bigint r;
  r.neg = neg;
  for (auto w : v) {
    r.mag.push_back(static_cast<std::uint32_t>(w));
    r.mag.push_back(static_cast<std::uint32_t>(w >> 32));
  }
  r.trim();
  return r;
}

/// The exact sum of finite values.
template <class F>
bigint reference_sum(const std::vector<F>& v) {
  bigint s;
  for (F x : v) s = add(s, to_big(x));
  return s;
}

/// Whether r is the round-to-nearest-even of the exact value S (finite r: no
/// neighbour is closer, ties have an even significand; the neighbour above the
/// largest finite value is 2^max_exponent, IEEE's overflow rule; +-Inf iff
/// |S| >= 2^max_exponent - half an ulp of the largest finite value).
template <class F>
bool correctly_rounded(const bigint& S, F r) {
  constexpr F big = std::numeric_limits<F>::max();
  constexpr int emax = std::numeric_limits<F>::max_exponent, p = std::numeric_limits<F>::digits;
  const bigint threshold = add(pow2_big<F>(emax), negate(pow2_big<F>(emax - p - 1)));
  if (std::isinf(r)) return (r > 0) == !S.neg && !S.zero() && cmp_abs(S, threshold) >= 0;
  if (std::isnan(r)) return false;
  auto big_of = [&](F y) {
    return std::fabs(y) == std::numeric_limits<F>::infinity() ? (y > 0 ? pow2_big<F>(emax) : negate(pow2_big<F>(emax)))
                                                              : to_big(y);
  };
  const bigint d = add(S, negate(big_of(r)));
  for (F n : {std::nextafter(r, std::numeric_limits<F>::infinity()),
              std::nextafter(r, -std::numeric_limits<F>::infinity())}) {
    const bigint dn = add(S, negate(big_of(n)));
    const int c = cmp_abs(d, dn);
    if (c > 0) return false;
    if (c == 0) {  // a tie: r's significand (the encoding's last bit) must be even
      if (std::fabs(r) == big && std::isinf(n)) return false;  // max vs 2^emax: IEEE goes to Inf
      if ((std::bit_cast<std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>>(r) & 1) != 0) return false;
    }
  }
  return true;
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }
bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

// --- data ----------------------------------------------------------------------------

/// Finite values of random sign over the whole exponent range, many subnormals,
/// and cancelling pairs (x and -x, 1e300 and -1e300) so sums are tiny.
template <class F>
std::vector<F> wild_values(std::mt19937_64& g, std::size_t n) {
  using lim = std::numeric_limits<F>;
  std::uniform_int_distribution<int> kind(0, 9), ex(lim::min_exponent - lim::digits, lim::max_exponent - 1);
  std::uniform_real_distribution<F> unit(F(0.5), F(1));
  std::vector<F> v;
  while (v.size() < n) {
    const int k = kind(g);
    F x;
    if (k <= 3) {
      x = std::ldexp(unit(g), ex(g));
    } else if (k == 4) {
      x = std::numeric_limits<F>::denorm_min() * static_cast<F>(g() % 1000);
    } else if (k == 5) {
      x = static_cast<F>(sizeof(F) == 8 ? 1e300 : 1e38) * unit(g);
    } else if (k == 6) {
      x = static_cast<F>(sizeof(F) == 8 ? 1e-300 : 1e-38) * unit(g);
    } else {
      x = unit(g) * static_cast<F>(1 << (g() % 20));
    }
    if (!std::isfinite(x)) x = lim::max();
    if (g() & 1) x = -x;
    v.push_back(x);
    if (k == 5 && v.size() < n) v.push_back(-x);  // huge cancellation
  }
  std::shuffle(v.begin(), v.end(), g);
  return v;
}

/// The accumulators of a random partition of v into `parts`, merged in a random order.
template <class F>
exact_sum<F> merged_partition(const std::vector<F>& v, int parts, std::mt19937_64& g) {
  std::vector<std::vector<F>> piece(static_cast<std::size_t>(parts));
  for (F x : v) piece[g() % piece.size()].push_back(x);
  std::vector<exact_sum<F>> acc;
  for (auto& p : piece) {
    std::shuffle(p.begin(), p.end(), g);
    exact_sum<F> s;
    if (g() & 1)
      s.add(p.data(), p.size());
    else
      for (F x : p) s += x;
    acc.push_back(s);
  }
  while (acc.size() > 1) {  // random merge tree
    const std::size_t i = g() % acc.size();
    std::size_t j = g() % (acc.size() - 1);
    if (j >= i) ++j;
    acc[i] = (g() & 1) ? acc[i] + acc[j] : acc[j] + acc[i];
    acc.erase(acc.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return acc.front();
}

template <class F>
void check_random(std::uint64_t seed, int trials) {
  std::mt19937_64 g(seed);
  for (int t = 0; t < trials; ++t) {
    const std::size_t n = t < 5 ? static_cast<std::size_t>(t) : g() % 6000;
    const auto v = wild_values<F>(g, n);
    INFO("trial " << t << ", n = " << n);
    const bigint ref = reference_sum(v);
    exact_sum<F> one;
    for (F x : v) one += x;
    exact_sum<F> range;
    range.add(v.data(), v.size());
    const auto part = merged_partition(v, 1 + static_cast<int>(g() % 9), g);
    const bigint got = from_limbs(one);
    REQUIRE((got.neg == ref.neg && got.mag == ref.mag));
    REQUIRE(range == one);
    REQUIRE(part == one);
    REQUIRE(std::memcmp(&part, &one, sizeof(one)) == 0);
    const F r = one.round();
    CHECK(correctly_rounded(ref, r));
    CHECK(same_bits(range.round(), r));
  }
}

}  // namespace

TEST_CASE("exact_sum is a trivially copyable value type", "[exact_sum]") {
  static_assert(std::is_trivially_copyable_v<exact_sum<double>>);
  static_assert(std::is_standard_layout_v<exact_sum<double>>);
  static_assert(sizeof(exact_sum<double>) == 35 * 8);
  static_assert(sizeof(exact_sum<float>) == 7 * 8);
  static_assert(exact_sum<double>::lsb_exponent == -1074 && exact_sum<float>::lsb_exponent == -149);
  CHECK(same_bits(exact_sum<double>{}.round(), 0.0));
}

TEST_CASE("exact value and correct rounding on wild random data: double", "[exact_sum][properties]") {
  check_random<double>(2024, 300);
}

TEST_CASE("exact value and correct rounding on wild random data: float", "[exact_sum][properties]") {
  check_random<float>(77, 300);
}

TEST_CASE("sums whose naive result is far off", "[exact_sum][properties]") {
  // 1e300, many small values, -1e300: the naive sum loses every small value.
  std::vector<double> v{1e300};
  for (int i = 0; i < 1000; ++i) v.push_back(1.0 + i * 1e-3);
  v.push_back(-1e300);
  exact_sum<double> s;
  s.add(v.data(), v.size());
  double naive = 0;
  for (double x : v) naive += x;
  CHECK(naive == 0.0);
  CHECK(correctly_rounded(reference_sum(v), s.round()));
  CHECK(s.round() == 1499.5);
  // Condition number ~1e32: the naive sum of this order is off by ~1e16 ulps.
  std::vector<double> w{1e16, 1.0, -1e16, 1e-16, 3.0, -3.0, 0.5};
  exact_sum<double> t;
  for (double x : w) t += x;
  CHECK(correctly_rounded(reference_sum(w), t.round()));
  CHECK(t.round() == 1.5 + 1e-16);
  // Subnormals only: exact.
  const double d = std::numeric_limits<double>::denorm_min();
  exact_sum<double> u;
  for (int i = 0; i < 4097; ++i) u += d;
  CHECK(u.round() == 4097 * d);
}

TEST_CASE("round to nearest, ties to even, at every magnitude", "[exact_sum]") {
  for (int e : {-1000, -60, 0, 52, 500, 1000}) {
    const double one = std::ldexp(1.0, e), half_ulp = std::ldexp(1.0, e - 53);
    exact_sum<double> tie{one};
    tie += half_ulp;  // exactly halfway between one and its successor: even is one
    CHECK(same_bits(tie.round(), one));
    exact_sum<double> odd_tie{one + 2 * half_ulp};
    odd_tie += half_ulp;  // halfway above an odd significand: rounds up
    CHECK(same_bits(odd_tie.round(), one + 4 * half_ulp));
    tie += std::numeric_limits<double>::denorm_min();  // just above the tie
    CHECK(same_bits(tie.round(), std::nextafter(one, 2 * one)));
    // Below a power of two the spacing halves: one - 2^(e-54) is a tie with the
    // predecessor (even: one), and a bit less goes down.
    exact_sum<double> below{one};
    below += -std::ldexp(1.0, e - 54);
    CHECK(same_bits(below.round(), one));
    below += -std::numeric_limits<double>::denorm_min();
    CHECK(same_bits(below.round(), std::nextafter(one, 0.0)));
    CHECK(correctly_rounded(add(to_big(one), add(negate(to_big(std::ldexp(1.0, e - 54))),
                                                 negate(to_big(std::numeric_limits<double>::denorm_min())))),
                            below.round()));
  }
  exact_sum<float> f{1.0f};
  f += std::ldexp(1.0f, -24);
  CHECK(same_bits(f.round(), 1.0f));
  f += std::numeric_limits<float>::denorm_min();
  CHECK(same_bits(f.round(), std::nextafter(1.0f, 2.0f)));
}

TEST_CASE("the range add's three paths agree with value-by-value adds", "[exact_sum]") {
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> u(-1, 1);
  auto check = [&](const std::vector<double>& v) {
    exact_sum<double> a, b;
    a.add(v.data(), v.size());
    for (double x : v) b += x;
    CHECK(a == b);
    CHECK(correctly_rounded(reference_sum(v), a.round()));
  };
  std::vector<double> v(5000);
  for (auto& x : v) x = u(g);  // two levels (86 bits below each block's maximum)
  check(v);
  for (std::size_t i = 0; i < v.size(); i += 37) v[i] = std::ldexp(u(g), -60);  // three levels
  check(v);
  for (std::size_t i = 0; i < v.size(); i += 101) v[i] = std::ldexp(u(g), -200);  // remainders one by one
  check(v);
  for (auto& x : v) x = std::ldexp(u(g), 1015);  // beyond the first sigma's range: value by value
  check(v);
  for (auto& x : v) x = std::ldexp(u(g), -1000);  // below the third sigma's range
  check(v);
  v.assign(3000, -0.0);  // zeros only
  check(v);
  // Block maxima right at the limits of the extraction range (2^-947 and 2^1012).
  for (int e : {-948, -947, -946, 1011, 1012, 1013}) {
    for (auto& x : v) x = std::ldexp(u(g), e);
    v[7] = std::ldexp(0.75, e + 1);
    check(v);
  }
}

TEST_CASE("add_products is the exact sum of the rounded products", "[exact_sum]") {
  std::mt19937_64 g(9);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(4500), y(4500), p(4500);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::ldexp(u(g), static_cast<int>(g() % 200) - 100);
    y[i] = std::ldexp(u(g), static_cast<int>(g() % 200) - 100);
    p[i] = x[i] * y[i];
  }
  exact_sum<double> d;
  d.add_products(x.data(), y.data(), x.size());
  exact_sum<double> ref;
  for (double q : p) ref += q;
  CHECK(d == ref);
  CHECK(correctly_rounded(reference_sum(p), d.round()));
  std::vector<float> xf(x.begin(), x.end()), yf(y.begin(), y.end()), pf(x.size());
  for (std::size_t i = 0; i < xf.size(); ++i) pf[i] = xf[i] * yf[i];
  exact_sum<float> df, rf;
  df.add_products(xf.data(), yf.data(), xf.size());
  for (float q : pf) rf += q;
  CHECK(df == rf);
  // Spans of different sizes are an error that names both (the shorter one was used, silently).
  exact_sum<double> s;
  CHECK_THROWS_WITH(s.add_products(std::span<const double>(x.data(), 5), std::span<const double>(y.data(), 4)),
                    "collc::exact_sum::add_products: x has 5 elements, y has 4");
  CHECK(s == exact_sum<double>{});
}

TEST_CASE("Inf, NaN and overflow behave as IEEE sums, never wrap", "[exact_sum]") {
  constexpr double inf = std::numeric_limits<double>::infinity(), big = std::numeric_limits<double>::max();
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  auto sum = [](std::vector<double> v, bool range) {
    exact_sum<double> s;
    if (range)
      s.add(v.data(), v.size());
    else
      for (double x : v) s += x;
    return s;
  };
  for (bool range : {false, true}) {
    INFO("range add: " << range);
    CHECK(sum({1.0, inf, -5.0}, range).round() == inf);
    CHECK(sum({1.0, -inf}, range).round() == -inf);
    CHECK(std::isnan(sum({inf, 2.0, -inf}, range).round()));
    CHECK(std::isnan(sum({1.0, qnan, 2.0}, range).round()));
    CHECK(sum({big, big}, range).round() == inf);  // the exact sum overflows: +Inf, as IEEE
    CHECK(sum({-big, -big}, range).round() == -inf);
    CHECK(sum({big, big, -big}, range).round() == big);             // no intermediate overflow: exact
    CHECK(sum({big, std::ldexp(1.0, 970)}, range).round() == inf);  // max + half an ulp: tie to even = Inf
    CHECK(sum({big, std::ldexp(1.0, 969)}, range).round() == big);
    // 2048 values just below 2^1013 fill one range-add block; their pieces round up to 2^1013 and
    // a level sum of 2^1024 overflowed to Inf although the exact sum is `big` (and 0 with the negations).
    const double below = std::nextafter(std::ldexp(1.0, 1013), 0.0);
    std::vector<double> top(2048, below);
    CHECK(sum(top, range).round() == big);
    top.insert(top.end(), 2048, -below);
    CHECK(sum(top, range).round() == 0.0);
    CHECK(!sum(top, range).is_inf());
    std::vector<double> many(3000, 1.0);
    many[1234] = qnan;
    CHECK(std::isnan(sum(many, range).round()));
    many[1234] = -inf;
    CHECK(sum(many, range).round() == -inf);
  }
  // NaN and Inf make every order and merge give the same bits.
  exact_sum<double> a{inf}, b{2.0}, c{-inf};
  CHECK(((a + b) + c) == (a + (b + c)));
  CHECK(((a + b) + c) == ((c + a) + b));
  CHECK((a + b).is_inf());
  CHECK((a + c).is_nan());
  // Beyond the headroom: a doubling chain saturates to +-Inf (sticky) instead of wrapping.
  for (double sign : {1.0, -1.0}) {
    exact_sum<double> s{sign * big};
    bool saturated = false;
    for (int i = 0; i < exact_sum<double>::headroom_bits + 4 && !saturated; ++i) {
      s += s;
      saturated = s.is_inf();
      if (!saturated) {
        CHECK(s.round() == sign * inf);            // the exact value rounds to Inf already
        CHECK((from_limbs(s).neg) == (sign < 0));  // never wrapped
      }
    }
    CHECK(saturated);
    CHECK(s.round() == sign * inf);
    CHECK(std::all_of(s.limbs().begin(), s.limbs().end(), [](std::uint64_t l) { return l == 0; }));
  }
}

TEST_CASE("the sign of an exact zero follows IEEE", "[exact_sum]") {
  auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  exact_sum<double> empty;
  CHECK(bits(empty.round()) == bits(0.0));
  exact_sum<double> negz{-0.0};
  negz += -0.0;
  CHECK(bits(negz.round()) == bits(-0.0));
  CHECK(bits((negz + exact_sum<double>{0.0}).round()) == bits(0.0));
  CHECK(bits((negz + empty).round()) == bits(-0.0));  // the empty sum is the identity
  exact_sum<double> cancel{1.5};
  cancel += -1.5;
  CHECK(bits(cancel.round()) == bits(0.0));
  std::vector<double> z(5000, -0.0);
  exact_sum<double> zr;
  zr.add(z.data(), z.size());
  CHECK(bits(zr.round()) == bits(-0.0));
}
