// Tests for include/collc/enumerate.hpp: the lazy enumerations against a naive
// generator, the counts against the paper's Table 1, closed formulas and a
// naive divisor recursion, and overflow detection.
#include <catch2/catch.hpp>
#include <collc/enumerate.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <ranges>
#include <set>
#include <vector>

using namespace collc;
using C = collective;
using K = schedule_kind;
using seq = std::vector<int>;

static_assert(std::ranges::input_range<recursive_sequence_range>);
static_assert(std::ranges::input_range<cyclic_sequence_range>);
static_assert(std::input_iterator<recursive_sequence_range::iterator>);

namespace {

__extension__ using u128 = unsigned __int128;

// ---- naive reference generators (independent of enumerate.hpp) -------------

// All ordered factorizations of n into factors >= 2, by trying every factor.
void naive_recursive(int n, seq& prefix, std::set<seq>& out) {
  if (n == 1) {
    out.insert(prefix);
    return;
  }
  for (int f = 2; f <= n; ++f)
    if (n % f == 0) {
      prefix.push_back(f);
      naive_recursive(n / f, prefix, out);
      prefix.pop_back();
    }
}

// All sequences r1..rn (each >= 2) with r1*..*r(n-1) < p <= r1*..*rn and rn
// the least radix that reaches p, found by trying every radix (no ceil formula).
void naive_cyclic(int p, long long product, seq& prefix, std::set<seq>& out) {
  for (int last = 2; last <= p; ++last)
    if (product * last >= p) {  // the first radix that reaches p is the minimal one
      prefix.push_back(last);
      out.insert(prefix);
      prefix.pop_back();
      break;
    }
  for (int r = 2; product * r < p; ++r) {
    prefix.push_back(r);
    naive_cyclic(p, product * r, prefix, out);
    prefix.pop_back();
  }
}

std::set<seq> naive_recursive(int n) {
  std::set<seq> out;
  seq prefix;
  naive_recursive(n, prefix, out);
  return out;
}

std::set<seq> naive_cyclic(int p) {
  std::set<seq> out;
  seq prefix;
  if (p >= 2) naive_cyclic(p, 1, prefix, out);
  return out;
}

template <class Range>
std::vector<seq> collect(const Range& range) {
  std::vector<seq> out;
  for (const radix_list& r : range) out.emplace_back(r.begin(), r.end());
  return out;
}

// Number of ordered factorizations by the defining recursion over divisors,
// memoized on the prime signature: H(e) = sum of H(f) over f < e. In 128 bits,
// so it can certify counts beyond 2^64.
u128 naive_count(const std::vector<int>& exps, std::map<std::vector<int>, u128>& memo) {
  std::vector<int> key = exps;
  std::sort(key.begin(), key.end());
  key.erase(std::remove(key.begin(), key.end(), 0), key.end());
  if (key.empty()) return 1;
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  u128 total = 0;
  std::vector<int> f(key.size(), 0);
  for (;;) {
    if (f != key) total += naive_count(f, memo);
    std::size_t i = 0;
    while (i < f.size() && ++f[i] > key[i]) f[i++] = 0;
    if (i == f.size()) break;
  }
  return memo[key] = total;
}

std::uint64_t ipow(std::uint64_t b, int e) {
  std::uint64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}

bool is_prime_by_trial_division(std::uint64_t n) {
  if (n < 2) return false;
  for (std::uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// Omega! / prod(e!) = orderings of the prime factors with exponents e: a lower
// bound on the ordered factorizations. Exact in 128 bits for Omega <= 34.
u128 multinomial(const std::vector<int>& exps) {
  u128 r = 1;
  int total = 0;
  for (int e : exps)
    for (int i = 1; i <= e; ++i) r = r * static_cast<u128>(++total) / static_cast<u128>(i);
  return r;
}

constexpr u128 two_pow_64 = static_cast<u128>(1) << 64;

}  // namespace

// ---- enumeration --------------------------------------------------------

TEST_CASE("recursive_sequences equals the naive generator for every P <= 64", "[enumerate][recursive]") {
  for (int p = 1; p <= 64; ++p) {
    INFO("P = " << p);
    const auto got = collect(recursive_sequences(p));
    const auto want = naive_recursive(p);
    CHECK(std::set<seq>(got.begin(), got.end()) == want);
    CHECK(got.size() == want.size());               // no duplicates
    CHECK(std::is_sorted(got.begin(), got.end()));  // lexicographic, as documented
    CHECK(count_recursive(static_cast<std::uint64_t>(p)) == want.size());
  }
}

TEST_CASE("cyclic_sequences equals the naive generator for every P <= 64", "[enumerate][cyclic]") {
  for (int p = 1; p <= 64; ++p) {
    INFO("P = " << p);
    const auto got = collect(cyclic_sequences(p));
    const auto want = naive_cyclic(p);
    CHECK(std::set<seq>(got.begin(), got.end()) == want);
    CHECK(got.size() == want.size());
    CHECK(count_cyclic(static_cast<std::uint64_t>(p)) == want.size());
  }
}

TEST_CASE("recursive_sequences(12) in lexicographic order", "[enumerate][recursive]") {
  // 12 = 2*2*3: written out by hand.
  const std::vector<seq> want{{2, 2, 3}, {2, 3, 2}, {2, 6}, {3, 2, 2}, {3, 4}, {4, 3}, {6, 2}, {12}};
  CHECK(collect(recursive_sequences(12)) == want);
}

TEST_CASE("cyclic_sequences(5) by hand", "[enumerate][cyclic]") {
  // Prefixes with product < 5: {}, {2}, {2,2}, {3}, {4}; last = ceil(5 / prefix).
  const std::vector<seq> want{{5}, {2, 3}, {2, 2, 2}, {3, 2}, {4, 2}};
  CHECK(collect(cyclic_sequences(5)) == want);
}

TEST_CASE("P = 1 and invalid P", "[enumerate]") {
  CHECK(collect(recursive_sequences(1)) == std::vector<seq>{seq{}});  // the empty product, documented
  CHECK(collect(cyclic_sequences(1)).empty());
  CHECK(count_recursive(1) == 1);
  CHECK(count_cyclic(1) == 0);
  CHECK(collect(recursive_sequences(7)) == std::vector<seq>{{7}});
  for (int bad : {0, -3}) {
    CHECK_THROWS_AS(recursive_sequences(bad), error);
    CHECK_THROWS_AS(cyclic_sequences(bad), error);
  }
  CHECK_THROWS_AS(count_recursive(0), error);
  CHECK_THROWS_AS(count_cyclic(0), error);
}

TEST_CASE("every enumerated sequence validates with signs added", "[enumerate][validate]") {
  for (int p = 2; p <= 64; ++p) {
    INFO("P = " << p);
    for (const radix_list& r : recursive_sequences(p)) {
      INFO(r.to_string());
      CHECK(validate(mirrored(r), p, C::allreduce, K::recursive).ok);  // {-a.., ..a}
      CHECK(validate(r, p, C::allreduce, K::recursive).ok);            // reduce-exchange only
      CHECK(validate(r, p, C::allgather, K::recursive).ok);
      CHECK(validate(negated(r), p, C::reduce_scatter, K::recursive).ok);
      // A half-mirrored allreduce: RS over the first radix, RE over the rest, AG mirroring.
      factor_set half = [&] {
        radix_list h;
        h.push_back(-r[0]);
        for (std::size_t i = 1; i < r.size(); ++i) h.push_back(r[i]);
        h.push_back(r[0]);
        return factor_set(h);
      }();
      CHECK(validate(half, p, C::allreduce, K::recursive).ok);
    }
    for (const radix_list& r : cyclic_sequences(p)) {
      INFO(r.to_string());
      CHECK(validate(mirrored(r), p, C::allreduce, K::cyclic).ok);
      CHECK(validate(r, p, C::allreduce, K::cyclic).ok);
      CHECK(validate(r, p, C::allgather, K::cyclic).ok);
      CHECK(validate(negated(r), p, C::reduce_scatter, K::cyclic).ok);
    }
  }
}

TEST_CASE("the ranges are lazy: the first sequences of a huge family come at once", "[enumerate]") {
  const int p = 1 << 30;  // count_cyclic would be astronomically large
  auto it = cyclic_sequences(p).begin();
  CHECK(*it == radix_list{p});
  ++it;
  CHECK(*it == radix_list{2, p / 2});
  ++it;
  CHECK(*it == radix_list{2, 2, p / 4});

  const auto range = recursive_sequences(p);
  auto rec = range.begin();
  CHECK(rec->size() == 30);  // 2^30 = 2*2*...*2 comes first
  ++rec;
  radix_list second;
  for (int i = 0; i < 28; ++i) second.push_back(2);
  second.push_back(4);
  CHECK(*rec == second);

  // A large prime has exactly one recursive sequence.
  CHECK(collect(recursive_sequences(2147483647)) == std::vector<seq>{{2147483647}});
}

// ---- counting ---------------------------------------------------------------

TEST_CASE("Table 1 of the paper", "[enumerate][count]") {
  CHECK(count_recursive(8) == 4);
  CHECK(count_cyclic(8) == 10);
  CHECK(count_recursive(64) == 32);
  CHECK(count_cyclic(64) == 409);
  CHECK(count_recursive(128) == 64);
  CHECK(count_cyclic(128) == 1378);
  CHECK(count_recursive(288) == 544);
  CHECK(count_cyclic(288) == 5421);
  // The enumerations produce the same numbers.
  CHECK(collect(recursive_sequences(288)).size() == 544);
  CHECK(collect(cyclic_sequences(288)).size() == 5421);
  CHECK(collect(cyclic_sequences(128)).size() == 1378);
}

TEST_CASE("count_recursive and count_cyclic agree with the divisor recursion up to 5000", "[enumerate][count]") {
  std::vector<std::uint64_t> h(5001, 0);  // h[n] = sum of h[d] over proper divisors d of n
  h[1] = 1;
  for (int n = 2; n <= 5000; ++n)
    for (int d = 1; d < n; ++d)
      if (n % d == 0) h[static_cast<std::size_t>(n)] += h[static_cast<std::size_t>(d)];
  std::uint64_t prefix = 0;
  for (int n = 1; n <= 5000; ++n) {
    INFO("n = " << n);
    CHECK(count_recursive(static_cast<std::uint64_t>(n)) == h[static_cast<std::size_t>(n)]);
    CHECK(count_cyclic(static_cast<std::uint64_t>(n)) == prefix);
    prefix += h[static_cast<std::size_t>(n)];
  }
}

TEST_CASE("count_recursive of large 64-bit P against closed formulas", "[enumerate][count]") {
  const auto t0 = std::chrono::steady_clock::now();
  // p^a: ordered factorizations are the compositions of a, 2^(a-1) of them.
  CHECK(count_recursive(std::uint64_t{1} << 62) == std::uint64_t{1} << 61);
  CHECK(count_recursive(std::uint64_t{1} << 63) == std::uint64_t{1} << 62);
  CHECK(count_recursive(ipow(3, 40)) == std::uint64_t{1} << 39);

  // Primes: one factorization. 2^61 - 1 is a Mersenne prime (M61); 2^64 - 59
  // is the largest prime below 2^64; 4294967291 = 2^32 - 5 and 4294967279 =
  // 2^32 - 17 are prime (checked by trial division here).
  const std::uint64_t p1 = 4294967291ULL, p2 = 4294967279ULL;
  REQUIRE(is_prime_by_trial_division(p1));
  REQUIRE(is_prime_by_trial_division(p2));
  CHECK(count_recursive((std::uint64_t{1} << 61) - 1) == 1);
  CHECK(count_recursive(18446744073709551557ULL) == 1);
  CHECK(count_recursive(p1) == 1);

  // p*q: {pq}, {p,q}, {q,p}. p^2: {p^2}, {p,p}.
  CHECK(count_recursive(p1 * p2) == 3);
  CHECK(count_recursive(p1 * p1) == 2);
  CHECK(count_recursive(1000000007ULL * 998244353ULL) == 3);

  // p^a q: the p-exponents form a composition of a into m parts (C(a-1, m-1)
  // ways); q either joins one of the m factors or stands alone in one of m+1
  // places: sum_m C(a-1, m-1) (2m + 1) = 2^(a-1) (a + 2).
  CHECK(count_recursive((std::uint64_t{1} << 31) * p1) == (std::uint64_t{1} << 30) * 33);
  CHECK(count_recursive(ipow(3, 20) * p2) == (std::uint64_t{1} << 19) * 22);

  // Squarefree with k primes: ordered set partitions, the Fubini numbers
  // a(k) = sum_j C(k, j) a(k - j). Product of the first 15 primes < 2^64.
  std::vector<std::uint64_t> fubini(16, 0);
  fubini[0] = 1;
  for (int k = 1; k <= 15; ++k) {
    std::uint64_t c = 1;  // C(k, j)
    for (int j = 1; j <= k; ++j) {
      c = c * static_cast<std::uint64_t>(k - j + 1) / static_cast<std::uint64_t>(j);
      fubini[static_cast<std::size_t>(k)] += c * fubini[static_cast<std::size_t>(k - j)];
    }
  }
  CHECK(fubini[3] == 13);  // {pqr}: 1 + 6 (two factors) + 6 (three)
  const std::uint64_t primes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47};
  std::uint64_t primorial = 1;
  for (int k = 1; k <= 15; ++k) {
    primorial *= primes[k - 1];
    CHECK(count_recursive(primorial) == fubini[static_cast<std::size_t>(k)]);
  }
  // Three large primes: a(3) = 13.
  const std::uint64_t q1 = 2097133, q2 = 2097143, q3 = 2097169;
  REQUIRE((is_prime_by_trial_division(q1) && is_prime_by_trial_division(q2) && is_prime_by_trial_division(q3)));
  CHECK(count_recursive(q1 * q2 * q3) == 13);
  CHECK(count_recursive(q1 * q1 * q2) == 8);  // p^2 q: 2^1 * (2 + 2)

  // Mixed signatures against the naive divisor recursion (different algorithm).
  std::map<std::vector<int>, u128> memo;
  const std::vector<std::vector<int>> signatures{{5, 3, 2, 1}, {10, 6, 4}, {7, 7, 1, 1, 1}, {20, 3, 3}, {4, 4, 4, 2}};
  for (const auto& sig : signatures) {
    std::uint64_t n = 1;
    for (std::size_t i = 0; i < sig.size(); ++i) n *= ipow(primes[i + 1], sig[i]);  // 3, 5, 7, ...
    INFO("n = " << n);
    CHECK(static_cast<u128>(count_recursive(n)) == naive_count(sig, memo));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 2.0);  // typically a few milliseconds; generous for a loaded machine
}

TEST_CASE("count_recursive reports overflow instead of wrapping", "[enumerate][count][overflow]") {
  // n = 2^15 3^8 5^4 7^3 11^2 13 17 < 2^64. Its 34 prime factors alone can be
  // ordered in 34!/(15! 8! 4! 3! 2!) ways, each an ordered factorization, and
  // that number already exceeds 2^64 - 1.
  const std::vector<int> sig{15, 8, 4, 3, 2, 1, 1};
  const std::uint64_t n = ipow(2, 15) * ipow(3, 8) * ipow(5, 4) * ipow(7, 3) * ipow(11, 2) * 13 * 17;
  REQUIRE(n == 1232456938352640000ULL);
  REQUIRE(multinomial(sig) >= two_pow_64);
  try {
    (void)count_recursive(n);
    FAIL("no overflow reported");
  } catch (const error& e) {
    CHECK(e.code() == errc::overflow);
    CHECK_THAT(e.what(), Catch::Contains("1232456938352640000"));
  }

  // m = 2^7 3^7 5^6 7^5 11^3 13^2 < 2^64: its prime orderings alone stay below
  // 2^64, but H(m) = sum of H(d) over proper divisors d >= sum of their
  // prime-ordering counts, which exceeds 2^64 (summed here in 128 bits).
  const std::vector<int> sig2{7, 7, 6, 5, 3, 2};
  const std::uint64_t m = ipow(2, 7) * ipow(3, 7) * ipow(5, 6) * ipow(7, 5) * ipow(11, 3) * ipow(13, 2);
  REQUIRE(static_cast<u128>(ipow(2, 7) * ipow(3, 7) * ipow(5, 6)) * (ipow(7, 5) * ipow(11, 3) * ipow(13, 2)) ==
          static_cast<u128>(m));  // no wrap in the product
  REQUIRE(multinomial(sig2) < two_pow_64);
  u128 lower_bound = 0;
  std::vector<int> f(sig2.size(), 0);
  for (;;) {
    if (f != sig2) lower_bound += multinomial(f);
    std::size_t i = 0;
    while (i < f.size() && ++f[i] > sig2[i]) f[i++] = 0;
    if (i == f.size()) break;
  }
  REQUIRE(lower_bound >= two_pow_64);
  CHECK_THROWS_MATCHES(count_recursive(m), error,
                       Catch::Predicate<error>([](const error& e) { return e.code() == errc::overflow; }));

  // At the edge, by the p^a q formula 2^(a-1) (a + 2): 2^59 * 3 gives
  // 2^58 * 61 = 17582052945254416384 < 2^64, while 2^60 * 3 gives 2^59 * 62
  // > 2^64. Both have only 2 primes, so the prime orderings (a + 1) are tiny
  // and the overflow must be caught inside the lattice sum.
  CHECK(count_recursive((std::uint64_t{1} << 59) * 3) == (std::uint64_t{1} << 58) * 61);
  REQUIRE(static_cast<u128>(std::uint64_t{1} << 59) * 62 >= two_pow_64);
  CHECK_THROWS_MATCHES(count_recursive((std::uint64_t{1} << 60) * 3), error,
                       Catch::Predicate<error>([](const error& e) { return e.code() == errc::overflow; }));
  CHECK_NOTHROW(count_recursive(std::uint64_t{1} << 63));

  // 2^36 3^8: the divisor recursion (128 bits) gives more than 2^64, yet every
  // partial sum below the top fits, so only the final sum can notice.
  std::map<std::vector<int>, u128> memo;
  REQUIRE(naive_count({36, 8}, memo) >= two_pow_64);
  CHECK_THROWS_MATCHES(count_recursive(ipow(2, 36) * ipow(3, 8)), error,
                       Catch::Predicate<error>([](const error& e) { return e.code() == errc::overflow; }));
  // Just below: 2^35 3^8 fits; compare with the recursion.
  REQUIRE(naive_count({35, 8}, memo) < two_pow_64);
  CHECK(static_cast<u128>(count_recursive(ipow(2, 35) * ipow(3, 8))) == naive_count({35, 8}, memo));
}

TEST_CASE("count_cyclic is fast up to its limit and rejects larger P", "[enumerate][count]") {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t c20 = count_cyclic(std::uint64_t{1} << 20);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 1.0);
  // Cross-check by the definition, summing count_recursive over k < 2^20 would
  // take long; instead check additivity: cyclic(P+1) = cyclic(P) + recursive(P).
  CHECK(count_cyclic((std::uint64_t{1} << 20) + 1) == c20 + count_recursive(std::uint64_t{1} << 20));
  CHECK(count_cyclic(1000) + count_recursive(1000) == count_cyclic(1001));
  CHECK_NOTHROW(count_cyclic(cyclic_count_limit));
  try {
    (void)count_cyclic(cyclic_count_limit + 1);
    FAIL("no error");
  } catch (const error& e) {
    CHECK(e.code() == errc::invalid_argument);
    CHECK_THAT(e.what(), Catch::Contains(std::to_string(cyclic_count_limit + 1)));
  }
}

// ---- the `collc factors` tool (tools/cmd_factors.hpp) ----------------------
#if __has_include(<fmt/format.h>)
#include "../tools/cmd_factors.hpp"

namespace {
std::string run_tool(std::vector<std::string_view> args) {
  std::string out;
  const int rc = collc::tools::factors_command(args, [&](std::string_view s) { out += s; });
  CHECK(rc == 0);
  return out;
}
errc tool_error(std::vector<std::string_view> args) {
  try {
    (void)run_tool(std::move(args));
  } catch (const error& e) {
    return e.code();
  }
  return errc::unsupported;  // stands for "no error"
}
}  // namespace

TEST_CASE("collc factors prints the counts and lists", "[enumerate][tool]") {
  const std::string both = run_tool({"288"});
  CHECK_THAT(both, Catch::Contains("recursive: 544") && Catch::Contains("cyclic: 5421"));
  const std::string rec = run_tool({"288", "--kind", "recursive"});
  CHECK_THAT(rec, Catch::Contains("544") && !Catch::Contains("5421"));
  CHECK(run_tool({"8", "--list"}) ==
        "P = 8\nrecursive: 4\n  {2,2,2}\n  {2,4}\n  {4,2}\n  {8}\ncyclic: 10\n  {8}\n  {2,4}\n  {2,2,2}\n"
        "  {2,3,2}\n  {3,3}\n  {3,2,2}\n  {4,2}\n  {5,2}\n  {6,2}\n  {7,2}\n");
  CHECK(run_tool({"12", "--kind", "recursive", "--list", "--limit", "3"}) ==
        "P = 12\nrecursive: 8\n  {2,2,3}\n  {2,3,2}\n  {2,6}\n  ... 5 more (raise --limit)\n");
  CHECK_THAT(run_tool({"18446744073709551557", "--kind", "recursive"}), Catch::Contains("recursive: 1\n"));
}

TEST_CASE("collc factors rejects bad arguments", "[enumerate][tool]") {
  CHECK(tool_error({"x"}) == errc::invalid_argument);
  CHECK(tool_error({"0"}) == errc::invalid_argument);
  CHECK(tool_error({"-3"}) == errc::invalid_argument);
  CHECK(tool_error({}) == errc::invalid_argument);
  CHECK(tool_error({"8", "9"}) == errc::invalid_argument);
  CHECK(tool_error({"8", "--bogus"}) == errc::invalid_argument);
  CHECK(tool_error({"8", "--kind", "ring"}) == errc::invalid_argument);
  CHECK(tool_error({"8", "--limit"}) == errc::invalid_argument);
  CHECK(tool_error({"8", "--limit", "-1"}) == errc::invalid_argument);
  CHECK(tool_error({"5000000"}) == errc::invalid_argument);                    // too big for cyclic counting
  CHECK(tool_error({"5000000", "--kind", "recursive"}) == errc::unsupported);  // fine for recursive
  CHECK(tool_error({"3000000000", "--kind", "recursive", "--list"}) == errc::invalid_argument);
  CHECK(tool_error({"1232456938352640000", "--kind", "recursive"}) == errc::overflow);
}
#endif
