// Tests for include/collc/ops.hpp: the named operators, the commutativity
// trait, the element/reduction_op concepts, and the reduce/copy kernels
// (every aliasing case, sizes around the kernel's block length).
#include <catch2/catch.hpp>
#include <collc/ops.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace collc;

namespace {

// 2x2 matrices modulo a prime under multiplication: associative, not commutative.
struct mat2 {
  std::int64_t a, b, c, d;
  friend bool operator==(const mat2&, const mat2&) = default;
};
constexpr std::int64_t prime = 1'000'003;
struct mat_mul {
  mat2 operator()(const mat2& x, const mat2& y) const {
    return {(x.a * y.a + x.b * y.c) % prime, (x.a * y.b + x.b * y.d) % prime, (x.c * y.a + x.d * y.c) % prime,
            (x.c * y.b + x.d * y.d) % prime};
  }
};

struct declared_commutative {
  static constexpr bool is_commutative = true;
  int operator()(int x, int y) const { return x + y; }
};
struct declared_not_commutative {
  static constexpr bool is_commutative = false;
  int operator()(int x, int y) const { return x - y; }
};
struct specialised_op {
  int operator()(int x, int y) const { return x * y; }
};
struct no_arithmetic {
  int v;
};

}  // namespace

template <>
struct collc::commutative<specialised_op> : std::true_type {};

TEST_CASE("named operators compute the MPI operation and return T", "[ops]") {
  CHECK(plus{}(2, 3) == 5);
  CHECK(prod{}(4, -3) == -12);
  CHECK(min{}(4, -3) == -3);
  CHECK(max{}(4, -3) == 4);
  CHECK(bit_and{}(0b1100, 0b1010) == 0b1000);
  CHECK(bit_or{}(0b1100, 0b1010) == 0b1110);
  CHECK(bit_xor{}(0b1100, 0b1010) == 0b0110);
  // int8 + int8 is computed in int and must wrap back to int8 (C++20 modular conversion).
  STATIC_REQUIRE(std::is_same_v<decltype(plus{}(std::int8_t{1}, std::int8_t{1})), std::int8_t>);
  CHECK(plus{}(std::int8_t{100}, std::int8_t{100}) == std::int8_t{-56});
  CHECK(prod{}(std::uint8_t{16}, std::uint8_t{17}) == std::uint8_t{16});
  // uint16 * uint16 is computed in int, where 65535 * 65535 overflows (undefined;
  // in a constant expression, not a constant): it must wrap as uint16 does.
  STATIC_REQUIRE(prod{}(std::uint16_t{65535}, std::uint16_t{65535}) == std::uint16_t{1});
  CHECK(plus{}(0.5, 0.25) == 0.75);
}

TEST_CASE("logical operators treat any non-zero value as true and yield 0 or 1", "[ops]") {
  for (int x : {0, 1, 7, -2})
    for (int y : {0, 1, 7, -2}) {
      CHECK(logical_and{}(x, y) == ((x != 0 && y != 0) ? 1 : 0));
      CHECK(logical_or{}(x, y) == ((x != 0 || y != 0) ? 1 : 0));
      CHECK(logical_xor{}(x, y) == (((x != 0) != (y != 0)) ? 1 : 0));
    }
  CHECK(logical_and{}(0.5, -2.0) == 1.0);
  CHECK(logical_or{}(0.0, 0.0) == 0.0);
  CHECK(logical_xor{}(std::int8_t{-128}, std::int8_t{3}) == 0);
}

TEST_CASE("min and max return the first operand on ties", "[ops]") {
  // -0.0 == 0.0, so the sign bit shows which operand came back.
  CHECK(std::signbit(min{}(-0.0, 0.0)));
  CHECK_FALSE(std::signbit(min{}(0.0, -0.0)));
  CHECK(std::signbit(max{}(-0.0, 0.0)));
  CHECK_FALSE(std::signbit(max{}(0.0, -0.0)));
}

TEST_CASE("commutativity trait: named ops yes, unknown ops no, opt-in both ways", "[ops][commutative]") {
  STATIC_REQUIRE(commutative_v<plus>);
  STATIC_REQUIRE(commutative_v<prod>);
  STATIC_REQUIRE(commutative_v<min>);
  STATIC_REQUIRE(commutative_v<max>);
  STATIC_REQUIRE(commutative_v<bit_and>);
  STATIC_REQUIRE(commutative_v<bit_or>);
  STATIC_REQUIRE(commutative_v<bit_xor>);
  STATIC_REQUIRE(commutative_v<logical_and>);
  STATIC_REQUIRE(commutative_v<logical_or>);
  STATIC_REQUIRE(commutative_v<logical_xor>);
  STATIC_REQUIRE_FALSE(commutative_v<mat_mul>);
  STATIC_REQUIRE(commutative_v<declared_commutative>);
  STATIC_REQUIRE_FALSE(commutative_v<declared_not_commutative>);
  STATIC_REQUIRE(commutative_v<specialised_op>);
  STATIC_REQUIRE(commutative_v<const plus&>);
  auto lambda = [](int x, int y) { return x + y; };
  STATIC_REQUIRE_FALSE(commutative_v<decltype(lambda)>);
  STATIC_REQUIRE(std::is_empty_v<plus>);
}

TEST_CASE("element and reduction_op concepts", "[ops][concepts]") {
  STATIC_REQUIRE(element<int>);
  STATIC_REQUIRE(element<mat2>);
  STATIC_REQUIRE_FALSE(element<std::string>);
  STATIC_REQUIRE(reduction_op<plus, double>);
  STATIC_REQUIRE(reduction_op<mat_mul, mat2>);
  STATIC_REQUIRE(reduction_op<bit_xor, std::uint16_t>);
  STATIC_REQUIRE_FALSE(reduction_op<bit_xor, double>);
  STATIC_REQUIRE_FALSE(reduction_op<plus, no_arithmetic>);
  STATIC_REQUIRE_FALSE(reduction_op<min, mat2>);
  STATIC_REQUIRE_FALSE(reduction_op<mat_mul, int>);
}

namespace {

// Sizes around the kernel's 128-byte blocks for 1-, 2-, 4-, 8- and 32-byte types.
const std::vector<std::size_t> kernel_sizes = {0, 1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 64, 127, 128, 129, 130, 1000};

// reduce_into against an element-by-element evaluation of op, for distinct
// buffers, dst == a, dst == b, dst == a == b, and a == b. One element past the
// end of dst holds a sentinel that must survive.
template <class T, class Op, class Gen>
void check_reduce_into(const Op& op, Gen gen) {
  for (std::size_t n : kernel_sizes) {
    CAPTURE(n);
    std::vector<T> a, b, want, want_same;
    for (std::size_t i = 0; i < n; ++i) {
      a.push_back(gen(2 * i));
      b.push_back(gen(2 * i + 1));
    }
    for (std::size_t i = 0; i < n; ++i) {
      want.push_back(op(a[i], b[i]));
      want_same.push_back(op(a[i], a[i]));
    }
    const T sentinel = gen(999'999);
    auto with_sentinel = [&](std::vector<T> v) {
      v.push_back(sentinel);
      return v;
    };
    auto body = [&](const std::vector<T>& v) { return std::vector<T>(v.begin(), v.begin() + static_cast<long>(n)); };

    {
      INFO("distinct buffers");
      std::vector<T> dst(n + 1, gen(12345));
      dst[n] = sentinel;
      detail::reduce_into(dst.data(), a.data(), b.data(), n, op);
      CHECK(body(dst) == want);
      CHECK(dst[n] == sentinel);
    }
    {
      INFO("dst == a");
      auto x = with_sentinel(a);
      detail::reduce_into(x.data(), x.data(), b.data(), n, op);
      CHECK(body(x) == want);
      CHECK(x[n] == sentinel);
    }
    {
      INFO("dst == b");
      auto y = with_sentinel(b);
      detail::reduce_into(y.data(), a.data(), y.data(), n, op);
      CHECK(body(y) == want);
      CHECK(y[n] == sentinel);
    }
    {
      INFO("dst == a == b");
      auto z = with_sentinel(a);
      detail::reduce_into(z.data(), z.data(), z.data(), n, op);
      CHECK(body(z) == want_same);
      CHECK(z[n] == sentinel);
    }
    {
      INFO("a == b, dst distinct");
      std::vector<T> dst(n + 1, gen(12345));
      dst[n] = sentinel;
      detail::reduce_into(dst.data(), a.data(), a.data(), n, op);
      CHECK(body(dst) == want_same);
      CHECK(dst[n] == sentinel);
    }
  }
}

mat2 make_mat(std::size_t i) {
  const auto k = static_cast<std::int64_t>(i);
  return {(k * 7 + 1) % prime, (k * 13 + 2) % prime, (k * k + 3) % prime, (k * 5 + 4) % prime};
}

}  // namespace

TEST_CASE("reduce_into: arithmetic types, every aliasing case", "[ops][kernel]") {
  SECTION("double plus") {
    check_reduce_into<double>(plus{}, [](std::size_t i) { return 0.1 * static_cast<double>(i) - 3.0; });
  }
  SECTION("int64 plus") {
    check_reduce_into<std::int64_t>(plus{}, [](std::size_t i) { return static_cast<std::int64_t>(i * i) - 50; });
  }
  SECTION("int8 plus wraps") {
    check_reduce_into<std::int8_t>(plus{}, [](std::size_t i) { return static_cast<std::int8_t>(i * 37); });
  }
  SECTION("float min") {
    check_reduce_into<float>(min{}, [](std::size_t i) { return static_cast<float>((i * 7919) % 101) - 50.0f; });
  }
  SECTION("int32 logical_xor") {
    check_reduce_into<std::int32_t>(logical_xor{}, [](std::size_t i) { return static_cast<std::int32_t>(i % 3); });
  }
  SECTION("uint16 bit_xor") {
    check_reduce_into<std::uint16_t>(bit_xor{}, [](std::size_t i) { return static_cast<std::uint16_t>(i * 40503u); });
  }
}

TEST_CASE("reduce_into keeps operand order for non-commutative operators", "[ops][kernel]") {
  SECTION("arithmetic type through the blocked loop: 2a - b") {
    auto two_a_minus_b = [](std::int64_t x, std::int64_t y) { return 2 * x - y; };
    check_reduce_into<std::int64_t>(two_a_minus_b, [](std::size_t i) { return static_cast<std::int64_t>(i * 3 + 1); });
    std::int64_t a[] = {10, 20}, b[] = {1, 2}, dst[2];
    detail::reduce_into(dst, a, b, 2, two_a_minus_b);
    CHECK(dst[0] == 19);
    CHECK(dst[1] == 38);
  }
  SECTION("2x2 matrix product mod p") {
    check_reduce_into<mat2>(mat_mul{}, make_mat);
    // [[1,1],[0,1]] * [[1,0],[1,1]] = [[2,1],[1,1]], the other order gives [[1,1],[1,2]].
    mat2 a{1, 1, 0, 1}, b{1, 0, 1, 1}, dst{};
    detail::reduce_into(&dst, &a, &b, 1, mat_mul{});
    CHECK(dst == mat2{2, 1, 1, 1});
  }
}

TEST_CASE("copy_elems copies n elements, tolerates n == 0 and dst == src", "[ops][kernel]") {
  detail::copy_elems(static_cast<double*>(nullptr), static_cast<const double*>(nullptr), 0);
  std::vector<mat2> src, dst(130, mat2{-1, -1, -1, -1});
  for (std::size_t i = 0; i < 129; ++i) src.push_back(make_mat(i));
  detail::copy_elems(dst.data(), src.data(), 129);
  CHECK(std::vector<mat2>(dst.begin(), dst.begin() + 129) == src);
  CHECK(dst[129] == mat2{-1, -1, -1, -1});
  const auto before = src;
  detail::copy_elems(src.data(), src.data(), src.size());
  CHECK(src == before);
  std::array<int, 3> x{1, 2, 3}, y{0, 0, 0};
  detail::copy_elems(y.data() + 1, x.data(), 2);
  CHECK(y == std::array<int, 3>{0, 1, 2});
}

namespace {
// An operator that reduces whole ranges (as an MPI user function does): it
// records each call, and its element form must not be used by reduce_into.
struct range_sum {
  int* ranges;
  int* elements;
  int operator()(int a, int b) const {
    ++*elements;
    return a + b;
  }
  void reduce_range(int* dst, const int* a, const int* b, std::size_t n) const {
    ++*ranges;
    for (std::size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
  }
};
}  // namespace

TEST_CASE("reduce_into calls an operator's reduce_range once per range", "[ops][kernel]") {
  int ranges = 0, elements = 0;
  std::vector<int> a{1, 2, 3, 4, 5}, b{10, 20, 30, 40, 50}, dst(5);
  detail::reduce_into(dst.data(), a.data(), b.data(), 5, range_sum{&ranges, &elements});
  CHECK(dst == std::vector<int>{11, 22, 33, 44, 55});
  detail::reduce_into(a.data(), a.data(), b.data(), 5, range_sum{&ranges, &elements});  // dst == a
  CHECK(a == std::vector<int>{11, 22, 33, 44, 55});
  CHECK(ranges == 2);
  CHECK(elements == 0);
}
