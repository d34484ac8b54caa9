// Tests for include/collc/factors.hpp: static and runtime factor sets, their
// accessors, parsing and printing, and the validation rules (checked against a
// naive re-statement of the rules written independently below).
#include <catch2/catch.hpp>
#include <collc/factors.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <vector>

using namespace collc;
using C = collective;
using K = schedule_kind;

// ---- compile-only checks -------------------------------------------------

static_assert(std::is_empty_v<factors<-4, -2, 2, 4>>);
static_assert(std::is_empty_v<factors<>>);
static_assert(factors<-4, -2, 2, 4>::size() == 4 && factors<-4, -2, 2, 4>::is_static && !factor_set::is_static);
static_assert(factors<-4, -2, 2, 4>{}[0] == -4 && factors<-4, -2, 2, 4>{}[3] == 4);
static_assert(factors<-4, -2, 2, 4>::reduce_scatter_product() == 8);
static_assert(factors<-4, 2, 4>::reduce_exchange_radices().size() == 1 &&
              factors<-4, 2, 4>::reduce_exchange_radices()[0] == 2);
static_assert(factors<-4, 2, 4>::reduce_exchange_product() == 2 && factors<-4, 2, 4>::allgather_product() == 8);
static_assert(factors<-2, -2, -2, 2, 2, 2>::valid_for<8, C::allreduce, K::recursive>);
static_assert(!factors<-2, -2, -2, 2, 2, 2>::valid_for<6, C::allreduce, K::recursive>);
static_assert(factors<2, 2, 2>::valid_for<7, C::allreduce, K::cyclic>);
static_assert(!factors<2, 2, 2>::valid_for<4, C::allreduce, K::cyclic>);
static_assert(static_validate<7, C::allreduce, K::cyclic, factors<4, 2>>());
static_assert(static_validate<8, C::reduce_scatter, K::recursive, factors<-4, -2>>());
static_assert(factors<-4, 2, 4>{} == factors<-4, 2, 4>{});
static_assert(!(factors<-4, 2, 4>{} == factors<-4, 4>{}));
static_assert(factors<2, 4>{} != factors<4, 2>{});
static_assert(factor_set::parse("{-4, -2, 2, 4}") == factors<-4, -2, 2, 4>{});
static_assert(factor_set{2, 2} == factors<2, 2>{} && factors<2, 2>{} == factor_set{2, 2});
static_assert(validate(factors<2, 2, 2>{}, 7, C::allreduce, K::cyclic).ok);
static_assert(validate(factor_set{2, 2, 4}, 7, C::allreduce, K::cyclic).rule == factor_rule::cyclic_last);
static_assert(mirrored(radix_list{4, 2}) == factors<-4, -2, 2, 4>{});
static_assert(negated(radix_list{4, 2}) == factors<-4, -2>{});
static_assert(factor_set_like<factors<2>> && factor_set_like<factor_set> && !factor_set_like<int>);
static_assert(std::is_trivially_copyable_v<factor_set>);

// ---- accessors, conversion, printing --------------------------------------

TEST_CASE("runtime factor_set accessors split the phases", "[factors]") {
  const factor_set s{-4, -2, 2, 4};
  CHECK(s.size() == 4);
  CHECK(s[1] == -2);
  CHECK(s.reduce_scatter_radices() == radix_list{4, 2});
  CHECK(s.allgather_radices() == radix_list{2, 4});
  CHECK(s.reduce_exchange_radices().empty());
  CHECK(s.reduce_scatter_product() == 8);
  CHECK(s.allgather_product() == 8);
  CHECK(s.reduce_exchange_product() == 1);

  const factor_set t{-3, 2, 2, 3};  // reduce-scatter by 3, reduce-exchange 2, 2, allgather by 3
  CHECK(t.reduce_exchange_radices() == radix_list{2, 2});
  CHECK(t.reduce_exchange_product() == 4);
  CHECK(t.allgather_product() == 12);

  std::vector<int> seen(s.begin(), s.end());
  CHECK(seen == std::vector<int>{-4, -2, 2, 4});
}

TEST_CASE("static and runtime sets expose the same phases", "[factors]") {
  using S = factors<-3, -2, 5, 2, 3>;
  const factor_set d = S{};
  const auto same = [](auto a, auto b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); };
  CHECK(same(S::radices(), d.radices()));
  CHECK(same(S::reduce_scatter_radices(), d.reduce_scatter_radices()));
  CHECK(same(S::allgather_radices(), d.allgather_radices()));
  CHECK(same(S::reduce_exchange_radices(), d.reduce_exchange_radices()));
  CHECK(S::reduce_exchange_product() == 5);
  CHECK(d.reduce_exchange_product() == 5);
  CHECK(S::allgather_product() == d.allgather_product());
}

TEST_CASE("product overflow throws errc::overflow", "[factors]") {
  const factor_set pos{65536, 65536};
  try {
    (void)pos.allgather_product();
    FAIL("no throw");
  } catch (const error& e) {
    CHECK(e.code() == errc::overflow);
    CHECK_THAT(e.what(), Catch::Contains("{65536,65536}"));
  }
  const factor_set neg{-46341, -46341};  // 46341^2 = 2147488281 > INT_MAX
  CHECK_THROWS_AS(neg.reduce_scatter_product(), error);
  CHECK(factor_set{-46340, -46340}.reduce_scatter_product() == 46340 * 46340);
}

TEST_CASE("to_string and operator<< print static and runtime sets identically", "[factors]") {
  CHECK(factors<-4, -2, 2, 4>::to_string() == "{-4,-2,2,4}");
  CHECK(factor_set{-4, -2, 2, 4}.to_string() == "{-4,-2,2,4}");
  CHECK(to_string(factors<7>{}) == "{7}");
  CHECK(factor_set{}.to_string() == "{}");
  std::ostringstream a, b;
  a << factors<-16, -4, 2, 4, 16>{};
  b << factor_set::parse("-16,-4,2,4,16");
  CHECK(a.str() == "{-16,-4,2,4,16}");
  CHECK(a.str() == b.str());
  CHECK(factor_set{-2147483647 - 1, 2147483647}.to_string() == "{-2147483648,2147483647}");
}

TEST_CASE("equality across static and runtime sets", "[factors]") {
  CHECK(factor_set{2, 4} == factor_set{2, 4});
  CHECK(factor_set{2, 4} != factor_set{4, 2});
  CHECK(factor_set{2, 4} != factor_set{2, 4, 2});
  CHECK(factor_set{} == factors<>{});
  CHECK(factors<-2, 2>{} == factor_set{-2, 2});
  CHECK(factor_set{-2, 2} != factors<-2, -2, 2, 2>{});
  const std::vector<int> v{-2, 2};
  CHECK(factor_set(std::span<const int>(v)) == factors<-2, 2>{});
}

TEST_CASE("factor_set hashes by value", "[factors]") {
  std::unordered_set<factor_set> set{factor_set{2, 4}, factor_set{4, 2}, factor_set{2, 4}, factors<2, 4>{}};
  CHECK(set.size() == 2);
  CHECK(factor_set{2, 4}.hash() == factor_set(factors<2, 4>{}).hash());
  CHECK(factor_set{2, 4}.hash() != factor_set{4, 2}.hash());
}

// ---- parsing ---------------------------------------------------------------

TEST_CASE("parse accepts braces, spaces and signs", "[factors][parse]") {
  CHECK(factor_set::parse("-4,-2,2,4") == factor_set{-4, -2, 2, 4});
  CHECK(factor_set::parse("{-4,-2,2,4}") == factor_set{-4, -2, 2, 4});
  CHECK(factor_set::parse("  { -4 , -2,2 ,  4 }  ") == factor_set{-4, -2, 2, 4});
  CHECK(factor_set::parse("+8") == factor_set{8});
  CHECK(factor_set::parse("2147483647,-2147483648") == factor_set{2147483647, -2147483647 - 1});
  CHECK(factor_set::parse("").empty());
  CHECK(factor_set::parse("{ }").empty());
  // Syntax only: a parsable but invalid set is returned, validate() rejects it.
  CHECK(factor_set::parse("0,1") == factor_set{0, 1});
}

TEST_CASE("parse errors name the bad token", "[factors][parse]") {
  const auto fails_with = [](std::string_view text, std::string_view token) {
    try {
      (void)factor_set::parse(text);
    } catch (const error& e) {
      CHECK(e.code() == errc::parse_error);
      CHECK_THAT(e.what(), Catch::Contains("'" + std::string(token) + "'"));
      return true;
    }
    return false;
  };
  CHECK(fails_with("2,x,4", "x"));
  CHECK(fails_with("2,4a", "4a"));
  CHECK(fails_with("2,,4", ""));
  CHECK(fails_with("2,4,", ""));
  CHECK(fails_with("-", "-"));
  CHECK(fails_with("2 4", "2 4"));
  CHECK(fails_with("2147483648", "2147483648"));
  CHECK(fails_with("-2147483649", "-2147483649"));
  CHECK(fails_with("99999999999999999999999", "99999999999999999999999"));
  CHECK(fails_with("{2,4", "{2,4"));
  CHECK(fails_with("2,4}", "2,4}"));
  std::string long_text = "2";
  for (int i = 0; i < 64; ++i) long_text += ",2";  // 65 radices
  CHECK(fails_with(long_text, "2"));
}

TEST_CASE("round trip: parse(to_string(s)) == s", "[factors][parse]") {
  for (const factor_set& s :
       {factor_set{-4, -2, 2, 4}, factor_set{7}, factor_set{}, factor_set{-9, -8, 8, 9}, factor_set{-72, 4, 4, 72}})
    CHECK(factor_set::parse(s.to_string()) == s);
}

// ---- the rules on worked examples -----------------------------------------

struct example {
  factor_set set;
  int ranks;
  C coll;
  K kind;
  factor_rule rule;  // expected (none = valid)
};

// Each verdict below is worked out by hand from the rules in the task
// statement (comments give the arithmetic), not taken from the code.
const std::vector<example> examples = {
    // recursive exchange
    {{-4, -2, 2, 4}, 8, C::allreduce, K::recursive, factor_rule::none},              // 4*2 = 8
    {{-2, -2, -2, 2, 2, 2}, 8, C::allreduce, K::recursive, factor_rule::none},       // Rabenseifner
    {{2, 2, 2}, 8, C::allreduce, K::recursive, factor_rule::none},                   // recursive doubling
    {{-4, 2, 4}, 8, C::allreduce, K::recursive, factor_rule::none},                  // RS 4, RE 2, AG 4
    {{-4, 4}, 8, C::allreduce, K::recursive, factor_rule::product},                  // 4 != 8
    {{-4, 2, 4}, 6, C::allreduce, K::recursive, factor_rule::product},               // 8 != 6
    {{-4, -2, 4, 2}, 8, C::allreduce, K::recursive, factor_rule::mirror},            // tail {4,2}, head reversed {2,4}
    {{-4, -2, 2}, 8, C::allreduce, K::recursive, factor_rule::mirror},               // 1 positive < 2 negatives
    {{-4, -2}, 8, C::allreduce, K::recursive, factor_rule::mirror},                  // allreduce needs the allgather
    {{2, -2}, 4, C::allreduce, K::recursive, factor_rule::sign_order},               // negative after positive
    {{2, 0, 4}, 8, C::allreduce, K::recursive, factor_rule::zero_or_unit},           // radix 0
    {{1, 8}, 8, C::allgather, K::recursive, factor_rule::zero_or_unit},              // radix 1
    {{-1, -8}, 8, C::reduce_scatter, K::recursive, factor_rule::zero_or_unit},       // radix -1
    {{}, 8, C::allreduce, K::recursive, factor_rule::empty},                         // empty
    {{8}, 0, C::allgather, K::recursive, factor_rule::ranks},                        // P < 1
    {{65536, 65536}, 8, C::allgather, K::recursive, factor_rule::overflow},          // 2^32
    {{-2147483647 - 1}, 8, C::reduce_scatter, K::recursive, factor_rule::overflow},  // |INT_MIN|
    {{-4, -2}, 8, C::reduce_scatter, K::recursive, factor_rule::none},               // 8
    {{-4, -2}, 16, C::reduce_scatter, K::recursive, factor_rule::product},           // 8 != 16
    {{-2, 2}, 2, C::reduce_scatter, K::recursive, factor_rule::wrong_sign},          // positive in RS
    {{2, 4}, 8, C::allgather, K::recursive, factor_rule::none},                      // 8
    {{-4, -2}, 8, C::allgather, K::recursive, factor_rule::wrong_sign},              // negatives in AG
    {{-2, 4}, 8, C::allgather, K::recursive, factor_rule::mirror},   // both signs: intrinsic mirror first
    {{2, 3}, 6, C::bcast, K::recursive, factor_rule::none},          // rooted: as allgather
    {{-2, -3}, 6, C::bcast, K::recursive, factor_rule::wrong_sign},  // bcast: positives only
    {{-2, 3, 2}, 6, C::reduce, K::recursive, factor_rule::none},     // reduce: allreduce shape
    {{-2, -3}, 6, C::reduce, K::recursive, factor_rule::mirror},     // reduce: needs the tail
    {{5}, 1, C::allgather, K::recursive, factor_rule::product},      // 1 rank: nothing is valid
    // cyclic shift: r1*..*r(n-1) < P <= r1*..*rn, rn = ceil(P / r1*..*r(n-1))
    {{2, 2, 2}, 7, C::allreduce, K::cyclic, factor_rule::none},              // 4 < 7 <= 8, ceil(7/4) = 2
    {{2, 2, 2}, 5, C::allreduce, K::cyclic, factor_rule::none},              // 4 < 5 <= 8, ceil(5/4) = 2
    {{2, 2, 2}, 4, C::allreduce, K::cyclic, factor_rule::cyclic_prefix},     // 4 is not < 4
    {{2, 2, 4}, 7, C::allreduce, K::cyclic, factor_rule::cyclic_last},       // 2 suffices
    {{2, 2}, 7, C::allreduce, K::cyclic, factor_rule::cyclic_last},          // 2*2 < 7: too small
    {{4, 2}, 7, C::allreduce, K::cyclic, factor_rule::none},                 // 4 < 7 <= 8
    {{7}, 7, C::allreduce, K::cyclic, factor_rule::none},                    // 1 < 7 <= 7
    {{8}, 7, C::allreduce, K::cyclic, factor_rule::cyclic_last},             // 7 suffices
    {{-2, -2, 2, 2, 2}, 7, C::allreduce, K::cyclic, factor_rule::none},      // phase {2,2,2}
    {{-2, -2, -2, 2, 2, 2}, 7, C::allreduce, K::cyclic, factor_rule::none},  // phase {2,2,2}
    {{-4, 2, 4}, 7, C::allreduce, K::cyclic, factor_rule::none},             // phase {4,2}
    {{-2, 4, 2}, 7, C::allreduce, K::cyclic, factor_rule::none},             // phase {2,4}: 2 < 7 <= 8
    {{-2, 8, 2}, 7, C::allreduce, K::cyclic, factor_rule::cyclic_last},      // phase {2,8}: ceil(7/2) = 4
    {{-3, -3}, 7, C::reduce_scatter, K::cyclic, factor_rule::none},          // 3 < 7 <= 9, ceil(7/3) = 3
    {{3, 3}, 7, C::allgather, K::cyclic, factor_rule::none},                 // same
    {{3, 3}, 10, C::allgather, K::cyclic, factor_rule::cyclic_last},         // ceil(10/3) = 4
    {{5, 2}, 9, C::allgather, K::cyclic, factor_rule::none},                 // 5 < 9 <= 10
    {{2}, 1, C::allgather, K::cyclic, factor_rule::cyclic_prefix},           // 1 is not < 1
};

TEST_CASE("worked examples: verdict and rule", "[factors][validate]") {
  for (const auto& e : examples) {
    INFO(e.set.to_string() << " P=" << e.ranks << " " << to_string(e.coll) << " " << to_string(e.kind));
    const auto v = validate(e.set, e.ranks, e.coll, e.kind);
    CHECK(to_string(v.rule) == to_string(e.rule));
    CHECK(v.ok == (e.rule == factor_rule::none));
    CHECK(v.message().empty() == v.ok);
  }
}

TEST_CASE("messages name the offending value and the rule", "[factors][validate]") {
  const auto msg = [](const factor_set& s, int p, C c, K k) { return std::string(validate(s, p, c, k).message()); };
  CHECK_THAT(msg({2, 2, 4}, 7, C::allreduce, K::cyclic), Catch::Contains("last radix 4 is not minimal: 2 suffices"));
  CHECK_THAT(msg({2, 0, 4}, 8, C::allreduce, K::recursive), Catch::Contains("radix 0 at position 1"));
  CHECK_THAT(msg({-4}, 8, C::reduce_scatter, K::recursive),
             Catch::Contains("factor set {-4}: product of the reduce-scatter phase (4)") &&
                 Catch::Contains("number of ranks (8)"));
  CHECK_THAT(msg({-4, -2, 4, 2}, 8, C::allreduce, K::recursive),
             Catch::Contains("allgather tail {4,2} does not mirror reduce-scatter head {-4,-2}"));
  CHECK_THAT(msg({2, -2}, 4, C::allreduce, K::recursive), Catch::Contains("negative radix -2 at position 1"));
  CHECK_THAT(msg({2, 2, 2}, 4, C::allreduce, K::cyclic), Catch::Contains("multiply to 4") && Catch::Contains("(4)"));
  CHECK_THAT(msg({65536, 65536}, 8, C::allgather, K::recursive),
             Catch::Contains("overflows int") && Catch::Contains("65536"));
  CHECK_THAT(msg({-4, -2}, 8, C::allgather, K::recursive),
             Catch::Contains("radix -4 at position 0") && Catch::Contains("allgather"));
  CHECK_THAT(msg({8}, 0, C::allgather, K::recursive), Catch::Contains("number of ranks (0)"));
}

TEST_CASE("validate_or_throw throws collc::error with the matching code", "[factors][validate]") {
  CHECK_NOTHROW(validate_or_throw(factors<-4, -2, 2, 4>{}, 8, C::allreduce, K::recursive));
  const auto code_of = [](const factor_set& s, int p) {
    try {
      validate_or_throw(s, p, C::allgather, K::recursive);
    } catch (const error& e) {
      return e.code();
    }
    return errc::unsupported;  // stands for "did not throw"
  };
  CHECK(code_of({2, 3}, 5) == errc::invalid_factor_set);
  CHECK(code_of({65536, 65536}, 8) == errc::overflow);
  CHECK(code_of({2}, 0) == errc::invalid_argument);
  CHECK(code_of({2, 3}, 6) == errc::unsupported);
}

TEST_CASE("long sets: 64 radices fit, 65 are rejected at construction", "[factors]") {
  std::vector<int> v(64, 2);
  const factor_set s{std::span<const int>(v)};
  CHECK(s.size() == 64);
  CHECK(validate(s, 8, C::allgather, K::recursive).rule == factor_rule::overflow);  // 2^64
  v.push_back(2);
  CHECK_THROWS_AS(factor_set(std::span<const int>(v)), error);
}

// ---- static and runtime agree ----------------------------------------------

template <class S>
void check_agreement() {
  const factor_set d = S{};
  CHECK(S::to_string() == d.to_string());
  for (int p = 1; p <= 20; ++p)
    for (C c : {C::allreduce, C::reduce_scatter, C::allgather, C::reduce, C::bcast})
      for (K k : {K::recursive, K::cyclic}) {
        const auto vs = validate(S{}, p, c, k);
        const auto vd = validate(d, p, c, k);
        CHECK(vs.rule == vd.rule);
        CHECK(vs.message() == vd.message());
        CHECK(vs.code == vd.code);
      }
}

TEST_CASE("static and runtime sets get the same verdicts and messages", "[factors][validate]") {
  check_agreement<factors<-4, -2, 2, 4>>();
  check_agreement<factors<2, 2, 2>>();
  check_agreement<factors<-2, -2, 2, 2, 2>>();
  check_agreement<factors<-3, -3>>();
  check_agreement<factors<4, 2>>();
  check_agreement<factors<5>>();
  check_agreement<factors<-4, 2, 4>>();
  check_agreement<factors<>>();
  // valid_for is the same checker at compile time.
  CHECK(factors<4, 2>::valid_for<7, C::allreduce, K::cyclic> ==
        validate(factor_set{4, 2}, 7, C::allreduce, K::cyclic).ok);
  CHECK(factors<4, 2>::valid_for<9, C::allreduce, K::cyclic> ==
        validate(factor_set{4, 2}, 9, C::allreduce, K::cyclic).ok);
  CHECK_FALSE(factors<4, 2>::valid_for<9, C::allreduce, K::cyclic>);
}

// ---- property check against an independent statement of the rules ------------

// The rules restated naively (vectors, direct loops, "minimal" as a search),
// deliberately not sharing code or structure with factors.hpp.
factor_rule naive_rule(const std::vector<int>& s, int p, C c, K k) {
  if (p < 1) return factor_rule::ranks;
  if (s.empty()) return factor_rule::empty;
  for (int r : s)
    if (r >= -1 && r <= 1) return factor_rule::zero_or_unit;
  for (std::size_t i = 1; i < s.size(); ++i)
    if (s[i - 1] > 0 && s[i] < 0) return factor_rule::sign_order;
  long long negp = 1, posp = 1;
  for (int r : s) {
    (r < 0 ? negp : posp) *= (r < 0 ? -static_cast<long long>(r) : r);
    if (negp > 2147483647LL || posp > 2147483647LL) return factor_rule::overflow;
  }
  std::vector<int> neg, pos;
  for (int r : s) (r < 0 ? neg : pos).push_back(r < 0 ? -r : r);
  if (!neg.empty() && !pos.empty()) {
    if (pos.size() < neg.size()) return factor_rule::mirror;
    std::vector<int> tail(pos.end() - static_cast<long>(neg.size()), pos.end());
    std::reverse(tail.begin(), tail.end());
    if (tail != neg) return factor_rule::mirror;
  }
  std::vector<int> phase;
  switch (c) {
    case C::reduce_scatter:
      if (!pos.empty()) return factor_rule::wrong_sign;
      phase = neg;
      break;
    case C::allreduce:
    case C::reduce:
      if (pos.empty()) return factor_rule::mirror;
      phase = neg;
      phase.insert(phase.end(), pos.begin(), pos.end() - static_cast<long>(neg.size()));
      break;
    default:
      if (!neg.empty()) return factor_rule::wrong_sign;
      phase = pos;
  }
  long long all = 1;
  for (int r : phase) all *= r;
  if (k == K::recursive) return all == p ? factor_rule::none : factor_rule::product;
  const long long before = all / phase.back();
  if (!(before < p)) return factor_rule::cyclic_prefix;
  int smallest = 2;  // the least radix that reaches p
  while (before * smallest < p) ++smallest;
  return phase.back() == smallest ? factor_rule::none : factor_rule::cyclic_last;
}

// Every sequence of length <= len over [lo, hi].
std::vector<std::vector<int>> all_sets(int lo, int hi, std::size_t len) {
  std::vector<std::vector<int>> out{{}}, frontier{{}};
  for (std::size_t l = 0; l < len; ++l) {
    std::vector<std::vector<int>> next;
    for (const auto& s : frontier)
      for (int r = lo; r <= hi; ++r) {
        next.push_back(s);
        next.back().push_back(r);
      }
    frontier.swap(next);
    out.insert(out.end(), frontier.begin(), frontier.end());
  }
  return out;
}

TEST_CASE("validate agrees with a naive statement of the rules on all short sets", "[factors][validate][property]") {
  auto sets = all_sets(-9, 9, 3);
  const auto four = all_sets(-4, 4, 4);
  sets.insert(sets.end(), four.begin(), four.end());
  sets.push_back({46341, 46341});  // overflow by a little
  sets.push_back({-46341, -46341, 46341, 46341});
  sets.push_back({-2147483647 - 1, 2});
  std::size_t checked = 0, valid = 0, mismatches = 0;
  for (const auto& s : sets)
    for (int p = 0; p <= 17; ++p)
      for (C c : {C::allreduce, C::reduce_scatter, C::allgather, C::reduce, C::bcast})
        for (K k : {K::recursive, K::cyclic}) {
          const auto v = validate(factor_set(std::span<const int>(s)), p, c, k);
          const auto expected = naive_rule(s, p, c, k);
          if (v.rule != expected && ++mismatches <= 5) {
            INFO(factor_set(std::span<const int>(s)).to_string()
                 << " P=" << p << " " << to_string(c) << " " << to_string(k) << ": " << v.message());
            CHECK(to_string(v.rule) == to_string(expected));
          }
          ++checked;
          valid += v.ok;
        }
  CHECK(mismatches == 0);
  CHECK(checked > 2000000);
  CHECK(valid > 1000);  // the sample holds plenty of valid sets, not only errors
}
