#pragma once
/// \file
/// L0 of the pipeline: factor sets. A factor set is a short list of signed
/// radices: `-r` is a reduce-scatter step of radix r, `r` an allgather step (for
/// allreduce, the first positives are reduce-exchange steps, see below).
///
///   collc::factors<-4, -2, 2, 4> s;                      // static: an empty type, errors are compile errors
///   collc::factor_set d = collc::factor_set::parse("-4,-2,2,4");  // runtime
///   assert(d == s && d.to_string() == "{-4,-2,2,4}");
///   collc::validate_or_throw(d, 8, collc::collective::allreduce, collc::schedule_kind::recursive);
///
/// Rules (one constexpr checker, detail::find_violation, serves the static and
/// the runtime sets alike):
///  - Intrinsic (need no rank count; compile errors for static sets): no radix
///    is 0, 1 or -1; negatives come before positives; products of the negative
///    magnitudes and of the positives fit in int; when both signs occur, the
///    last k positives mirror the k negatives in reverse.
///  - allreduce `{-a1..-ak, b1..bm}`: m >= k and b(m-k+1..m) == ak..a1; the
///    first m-k positives are reduce-exchange steps. Its *phase* is
///    a1..ak, b1..b(m-k) (reduce-scatter radices, then reduce-exchange radices).
///  - reduce follows the allreduce rule (its final allgather steps gather
///    towards the root); bcast follows the allgather rule. Rooted collectives
///    are mostly served by the tree family; these rules match how
///    algo/lower.hpp reads a factor set for them.
///  - reduce_scatter: negatives only, the phase is their magnitudes.
///    allgather, bcast: positives only, the phase is the radices.
///  - recursive exchange: the product of the phase equals the number of ranks P.
///  - cyclic shift: with the phase r1..rn, r1*..*r(n-1) < P <= r1*..*rn and the
///    last radix minimal, rn == ceil(P / (r1*..*r(n-1))). The product may exceed P.
///  - The empty set is valid for no collective (`factors<>` is still a type, so
///    it can serve as a default template argument).
#include <collc/core.hpp>
#include <collc/error.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace collc {

/// How the ranks exchange within a phase: recursive exchange (product of the
/// radices == P, any operator) or cyclic shift (product may exceed P,
/// commutative operators only).
enum class schedule_kind : std::uint8_t { recursive, cyclic };

constexpr std::string_view to_string(schedule_kind k) noexcept {
  switch (k) {
    case schedule_kind::recursive: return "recursive";
    case schedule_kind::cyclic: return "cyclic";
  }
  return "?";
}

/// The rule a factor set breaks (factor_rule::none if it is valid); lets code
/// react to the kind of failure without parsing messages.
enum class factor_rule : std::uint8_t {
  none,           ///< valid
  ranks,          ///< the number of ranks is below 1
  empty,          ///< the set has no radices
  zero_or_unit,   ///< a radix is 0, 1 or -1
  overflow,       ///< a product (or the magnitude of INT_MIN) does not fit in int
  sign_order,     ///< a negative radix follows a positive one
  wrong_sign,     ///< a radix of the wrong sign for the collective
  mirror,         ///< allreduce: the allgather tail does not mirror the reduce-scatter head
  product,        ///< recursive: the product of the phase differs from the number of ranks
  cyclic_prefix,  ///< cyclic: the radices before the last one already reach the number of ranks
  cyclic_last,    ///< cyclic: the last radix is not ceil(P / product of the others)
};

constexpr std::string_view to_string(factor_rule r) noexcept {
  switch (r) {
    case factor_rule::none: return "none";
    case factor_rule::ranks: return "ranks";
    case factor_rule::empty: return "empty";
    case factor_rule::zero_or_unit: return "zero_or_unit";
    case factor_rule::overflow: return "overflow";
    case factor_rule::sign_order: return "sign_order";
    case factor_rule::wrong_sign: return "wrong_sign";
    case factor_rule::mirror: return "mirror";
    case factor_rule::product: return "product";
    case factor_rule::cyclic_prefix: return "cyclic_prefix";
    case factor_rule::cyclic_last: return "cyclic_last";
  }
  return "?";
}

namespace detail {

inline constexpr int int_min = std::numeric_limits<int>::min();

/// |r|, or 0 for INT_MIN (whose magnitude does not fit; the checker reports it).
constexpr int magnitude(int r) noexcept { return r >= 0 ? r : (r == int_min ? 0 : -r); }

/// Appends the decimal digits of `u` (after a '-' if `negative`) to `out`
/// (std::to_chars is not constexpr in C++20).
template <class Text>
constexpr void append_digits(Text& out, unsigned long long u, bool negative) {
  char buf[24];
  std::size_t n = 0;
  const bool neg = negative;
  do {
    buf[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) buf[n++] = '-';
  for (std::size_t i = 0; i < n / 2; ++i) {
    const char c = buf[i];
    buf[i] = buf[n - 1 - i];
    buf[n - 1 - i] = c;
  }
  out.append(std::string_view(buf, n));
}

/// Appends the decimal digits of `v` to `out`.
template <class Text>
constexpr void append_integer(Text& out, long long v) {
  const bool neg = v < 0;
  append_digits(out, neg ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v), neg);
}

/// detail::cat (error.hpp) usable in constant evaluation, for constexpr
/// lowering: the same parts (text and integers), the integers written by
/// append_integer because std::to_string is not constexpr in C++20. Appends
/// into one std::string rather than an operator+ chain (g++ 12 reports false
/// -Wrestrict warnings for those once inlined at -O2/-O3).
///   detail::constexpr_cat("radix ", r, " at position ", i)
template <class... Parts>
[[nodiscard]] constexpr std::string constexpr_cat(const Parts&... parts) {
  std::string out;
  const auto hint = []<class Part>(const Part& p) -> std::size_t {
    if constexpr (std::is_integral_v<Part>)
      return 20;
    else
      return std::string_view(p).size();
  };
  out.reserve((std::size_t{0} + ... + hint(parts)));
  const auto add = [&out]<class Part>(const Part& p) {
    if constexpr (std::is_same_v<Part, bool> || std::is_same_v<Part, char>) {
      static_assert(!std::is_same_v<Part, Part>, "collc::detail::constexpr_cat: write a bool or char as text");
    } else if constexpr (std::is_integral_v<Part> && std::is_signed_v<Part>) {
      append_integer(out, static_cast<long long>(p));
    } else if constexpr (std::is_integral_v<Part>) {
      append_digits(out, static_cast<unsigned long long>(p), false);
    } else {
      out.append(std::string_view(p));
    }
  };
  (add(parts), ...);
  return out;
}

/// Appends "{a,b,c}" to `out` (a detail::string_text or detail::fixed_text).
/// Sets longer than `limit` radices are cut with ",...".
template <class Text>
constexpr void append_radices(Text& out, std::span<const int> r, std::size_t limit) {
  out.append("{");
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (i == limit) {
      out.append(",...");
      break;
    }
    if (i != 0) out.append(",");
    append_integer(out, r[i]);
  }
  out.append("}");
}

/// A string of bounded length that can be built during constant evaluation and
/// returned from it (validation messages). Text beyond N characters is dropped.
template <std::size_t N>
class fixed_text {
 public:
  constexpr fixed_text& append(std::string_view s) noexcept {
    for (char c : s) {
      if (size_ == N) return *this;
      data_[size_++] = c;
    }
    return *this;
  }
  constexpr fixed_text& append_int(long long v) noexcept {
    append_integer(*this, v);
    return *this;
  }
  [[nodiscard]] constexpr std::string_view view() const noexcept { return {data_.data(), size_}; }

 private:
  std::array<char, N> data_{};
  std::size_t size_ = 0;
};

/// std::string with the append() spelling fixed_text uses.
struct string_text {
  std::string s;
  constexpr void append(std::string_view v) { s.append(v); }
};

[[nodiscard]] constexpr std::string format_radices(std::span<const int> r) {
  string_text t;
  append_radices(t, r, r.size());
  return std::move(t.s);
}

constexpr bool equal_radices(std::span<const int> a, std::span<const int> b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

/// What detail::find_violation found; the message is built from it on demand,
/// so compile-time checks pay only for the arithmetic.
struct violation {
  factor_rule rule = factor_rule::none;
  int position = -1;          ///< index of the offending radix, if one is to blame
  int value = 0;              ///< the offending radix
  std::int64_t product = 0;   ///< product rules: the product that broke the rule
  std::int64_t expected = 0;  ///< product rules: what it had to be (P, or the minimal last radix)
  std::size_t phase = 0;      ///< product rules: number of radices in the phase
  bool negatives = false;     ///< overflow: whether the negative (reduce-scatter) product overflowed
};

struct sign_counts {
  std::size_t negatives = 0;  ///< k
  std::size_t positives = 0;  ///< m
};

constexpr sign_counts count_signs(std::span<const int> r) noexcept {
  sign_counts c;
  for (int x : r) ++(x < 0 ? c.negatives : c.positives);
  return c;
}

/// Intrinsic rules: those that need neither a rank count nor a collective.
/// (The empty set passes here; find_violation rejects it.)
constexpr violation check_intrinsic(std::span<const int> r) noexcept {
  for (std::size_t i = 0; i < r.size(); ++i)
    if (r[i] == 0 || r[i] == 1 || r[i] == -1)
      return {factor_rule::zero_or_unit, static_cast<int>(i), r[i], 0, 0, 0, false};
  bool seen_positive = false;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r[i] > 0) seen_positive = true;
    if (r[i] < 0 && seen_positive) return {factor_rule::sign_order, static_cast<int>(i), r[i], 0, 0, 0, false};
  }
  // Products of the two signs separately; every product collc forms (phases,
  // prefixes) divides one of these, so this is the only overflow check needed.
  int neg_product = 1, pos_product = 1;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r[i] == int_min) return {factor_rule::overflow, static_cast<int>(i), r[i], 0, 0, 0, true};
    int& p = r[i] < 0 ? neg_product : pos_product;
    if (__builtin_mul_overflow(p, magnitude(r[i]), &p))
      return {factor_rule::overflow, static_cast<int>(i), r[i], 0, 0, 0, r[i] < 0};
  }
  const auto [k, m] = count_signs(r);
  if (k > 0 && m > 0) {
    // Negatives occupy [0, k), positives [k, k + m); the tail is the last k positives.
    if (m < k) return {factor_rule::mirror, -1, 0, 0, 0, 0, false};
    for (std::size_t j = 0; j < k; ++j)
      if (r[r.size() - 1 - j] != -r[j])
        return {factor_rule::mirror, static_cast<int>(r.size() - 1 - j), r[r.size() - 1 - j], 0, 0, 0, false};
  }
  return {};
}

/// Collectives whose factor set has the allreduce shape {-a.., b.., mirror}.
constexpr bool allreduce_shaped(collective c) noexcept { return c == collective::allreduce || c == collective::reduce; }

/// Number of leading radices (as magnitudes) that form the phase the product
/// rule applies to: for allreduce, a1..ak,b1..b(m-k) is exactly the first m.
constexpr std::size_t phase_length(std::span<const int> r, collective c) noexcept {
  return allreduce_shaped(c) ? count_signs(r).positives : r.size();
}

/// The rules that need no rank count: the intrinsic ones and the collective's
/// shape (signs, the allreduce tail). find_violation checks these first.
constexpr violation find_shape_violation(std::span<const int> r, collective c) noexcept {
  if (r.empty()) return {factor_rule::empty, -1, 0, 0, 0, 0, false};
  if (const auto v = check_intrinsic(r); v.rule != factor_rule::none) return v;
  const auto [k, m] = count_signs(r);
  if (c == collective::reduce_scatter && m > 0)
    return {factor_rule::wrong_sign, static_cast<int>(k), r[k], 0, 0, 0, false};
  if ((c == collective::allgather || c == collective::bcast) && k > 0)
    return {factor_rule::wrong_sign, 0, r[0], 0, 0, 0, false};
  if (allreduce_shaped(c) && m == 0) return {factor_rule::mirror, -1, 0, 0, 0, 0, false};
  return {};
}

/// The one checker behind validate(), valid_for and static_validate().
constexpr violation find_violation(std::span<const int> r, int ranks, collective c, schedule_kind kind) noexcept {
  if (ranks < 1) return {factor_rule::ranks, -1, 0, 0, ranks, 0, false};
  if (const auto v = find_shape_violation(r, c); v.rule != factor_rule::none) return v;

  const std::size_t n = phase_length(r, c);
  // No overflow below: the phase product equals the product of the negatives
  // (reduce_scatter) or of the positives (the others; allreduce by the mirror rule).
  std::int64_t prefix = 1;
  for (std::size_t i = 0; i + 1 < n; ++i) prefix *= magnitude(r[i]);
  const std::int64_t last = magnitude(r[n - 1]);
  if (kind == schedule_kind::recursive) {
    if (prefix * last != ranks) return {factor_rule::product, -1, 0, prefix * last, ranks, n, false};
    return {};
  }
  if (prefix >= ranks) return {factor_rule::cyclic_prefix, -1, 0, prefix, ranks, n, false};
  const std::int64_t need = (ranks + prefix - 1) / prefix;
  if (last != need) return {factor_rule::cyclic_last, static_cast<int>(n - 1), r[n - 1], prefix, need, n, false};
  return {};
}

}  // namespace detail

/// A list of (usually positive) radices, stored inline: the return type of the
/// runtime phase accessors and what the enumerations yield. At most
/// `max_size` radices; no longer list of radices >= 2 in magnitude fits in int
/// (31 radices of one sign already multiply to 2^31 or more).
///
///   collc::radix_list r{2, 4};
///   r.push_back(2);  // {2,4,2}
class radix_list {
 public:
  static constexpr std::size_t max_size = 64;
  using value_type = int;
  using size_type = std::size_t;
  using const_iterator = const int*;
  using iterator = const int*;

  constexpr radix_list() noexcept = default;
  constexpr radix_list(std::initializer_list<int> r) : radix_list(std::span<const int>(r.begin(), r.size())) {}
  constexpr explicit radix_list(std::span<const int> r) {
    if (r.size() > max_size) throw_too_long(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) data_[i] = r[i];
    size_ = r.size();
  }

  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] constexpr int operator[](std::size_t i) const noexcept { return data_[i]; }
  [[nodiscard]] constexpr const int* data() const noexcept { return data_.data(); }
  [[nodiscard]] constexpr const int* begin() const noexcept { return data_.data(); }
  [[nodiscard]] constexpr const int* end() const noexcept { return data_.data() + size_; }
  [[nodiscard]] constexpr int back() const noexcept { return data_[size_ - 1]; }
  [[nodiscard]] constexpr std::span<const int> radices() const noexcept { return {data_.data(), size_}; }

  /// Throws collc::error(errc::invalid_factor_set) when the list is full.
  constexpr void push_back(int r) {
    if (size_ == max_size) throw_too_long(size_ + 1);
    data_[size_++] = r;
  }
  constexpr void pop_back() noexcept { data_[--size_] = 0; }
  constexpr void set_back(int r) noexcept { data_[size_ - 1] = r; }
  constexpr void clear() noexcept { *this = radix_list{}; }

  /// "{2,4,2}", the same form as factor_set::to_string.
  [[nodiscard]] std::string to_string() const { return detail::format_radices(radices()); }

  friend constexpr bool operator==(const radix_list& a, const radix_list& b) noexcept {
    return detail::equal_radices(a.radices(), b.radices());
  }

 private:
  [[noreturn]] static void throw_too_long(std::size_t n) {
    throw error(errc::invalid_factor_set, detail::constexpr_cat("a list of ", n, " radices is longer than ", max_size,
                                                                " (its product would overflow int)"));
  }
  std::array<int, max_size> data_{};  // slots past size_ stay 0
  std::size_t size_ = 0;
};

/// Anything that exposes its signed radices as a contiguous int range:
/// collc::factors<...>, collc::factor_set (and radix_list, read as signed radices).
template <class F>
concept factor_set_like = requires(const F& f) {
  { f.radices() } -> std::convertible_to<std::span<const int>>;
};

/// The result of validate(): `ok`, the error code a throw would carry, the
/// rule that failed and a message naming the offending value and the rule.
/// Usable in constant expressions (the message is held inline).
///
///   auto v = collc::validate(collc::factor_set{-4, 2, 4}, 6, collc::collective::allreduce,
///                            collc::schedule_kind::recursive);
///   // !v.ok, v.rule == collc::factor_rule::product, v.message() names 8 and 6
struct validation {
  bool ok = true;
  errc code = errc::invalid_factor_set;
  factor_rule rule = factor_rule::none;
  detail::fixed_text<480> text;

  /// Empty when ok.
  [[nodiscard]] constexpr std::string_view message() const noexcept { return text.view(); }
  constexpr explicit operator bool() const noexcept { return ok; }
};

namespace detail {

constexpr std::string_view phase_name(std::span<const int> r, collective c) noexcept {
  if (c == collective::reduce_scatter) return "reduce-scatter phase";
  if (!allreduce_shaped(c)) return "allgather phase";
  const auto [k, m] = count_signs(r);
  if (k == 0) return "reduce-exchange phase";
  return m == k ? "reduce-scatter phase" : "reduce-scatter + reduce-exchange phase";
}

/// Magnitudes of the first n radices, as text.
template <class Text>
constexpr void append_phase(Text& t, std::span<const int> r, std::size_t n) {
  std::array<int, radix_list::max_size> m{};
  if (n > m.size()) n = m.size();
  for (std::size_t i = 0; i < n; ++i) m[i] = magnitude(r[i]);
  append_radices(t, std::span<const int>(m.data(), n), 24);
}

/// Turns a violation into the validation result and its message.
constexpr validation describe(const violation& v, std::span<const int> r, int ranks, collective c) noexcept {
  validation out;
  out.rule = v.rule;
  if (v.rule == factor_rule::none) return out;
  out.ok = false;
  auto& t = out.text;
  if (v.rule == factor_rule::ranks) {
    out.code = errc::invalid_argument;
    t.append("number of ranks (").append_int(ranks).append(") must be at least 1");
    return out;
  }
  t.append("factor set ");
  append_radices(t, r, 24);
  const auto at = [&] { t.append(" at position ").append_int(v.position); };
  switch (v.rule) {
    case factor_rule::empty: t.append(" is empty; it is valid for no collective"); break;
    case factor_rule::zero_or_unit:
      t.append(": radix ").append_int(v.value);
      at();
      t.append(" is not allowed: radices must not be 0, 1 or -1");
      break;
    case factor_rule::overflow:
      out.code = errc::overflow;
      if (v.value == int_min) {
        t.append(": radix ").append_int(v.value);
        at();
        t.append(" overflows int when negated");
      } else {
        t.append(v.negatives ? ": product of the reduce-scatter (negative) radices"
                             : ": product of the positive radices");
        t.append(" overflows int at radix ").append_int(v.value).append(" (position ").append_int(v.position);
        t.append(")");
      }
      break;
    case factor_rule::sign_order:
      t.append(": negative radix ").append_int(v.value);
      at();
      t.append(" follows a positive radix; reduce-scatter radices (negative) must come first");
      break;
    case factor_rule::wrong_sign:
      t.append(": radix ").append_int(v.value);
      at();
      t.append(" is not allowed for ").append(to_string(c));
      t.append(c == collective::reduce_scatter ? ", which takes negative radices only"
                                               : ", which takes positive radices only");
      break;
    case factor_rule::mirror: {
      const auto [k, m] = count_signs(r);
      const std::size_t tail = m < k ? m : k;
      t.append(": allgather tail ");
      append_radices(t, r.subspan(r.size() - tail), 24);
      t.append(" does not mirror reduce-scatter head ");
      append_radices(t, r.first(k), 24);
      std::array<int, radix_list::max_size> e{};
      for (std::size_t j = 0; j < k && j < e.size(); ++j) e[j] = magnitude(r[k - 1 - j]);
      t.append(" (expected ");
      append_radices(t, std::span<const int>(e.data(), k < e.size() ? k : e.size()), 24);
      t.append(m < k ? " as the last positives)" : ")");
      break;
    }
    case factor_rule::product:
      t.append(": product of the ").append(phase_name(r, c)).append(" (").append_int(v.product);
      t.append(") must equal the number of ranks (").append_int(ranks).append(") for recursive exchange (phase ");
      append_phase(t, r, v.phase);
      t.append(")");
      break;
    case factor_rule::cyclic_prefix:
      t.append(": in the ").append(phase_name(r, c)).append(" ");
      append_phase(t, r, v.phase);
      t.append(" the radices before the last multiply to ").append_int(v.product);
      t.append(", which must be less than the number of ranks (").append_int(ranks).append(") for cyclic shift");
      break;
    case factor_rule::cyclic_last:
      t.append(": last radix ").append_int(v.value);
      if (magnitude(v.value) > v.expected) {
        t.append(" is not minimal: ").append_int(v.expected).append(" suffices for ").append_int(ranks);
        t.append(" ranks (in the ").append(phase_name(r, c)).append(" ");
        append_phase(t, r, v.phase);
        t.append(" the radices before it multiply to ").append_int(v.product).append(")");
      } else {
        t.append(" is too small: in the ").append(phase_name(r, c)).append(" ");
        append_phase(t, r, v.phase);
        t.append(", ").append_int(v.product).append(" * ").append_int(magnitude(v.value)).append(" < ");
        t.append_int(ranks).append(" ranks; cyclic shift needs ").append_int(v.expected);
      }
      break;
    default: break;
  }
  return out;
}

template <std::size_t N, bool Negative>
constexpr std::array<int, N> select_magnitudes(std::span<const int> r) noexcept {
  std::array<int, N> out{};
  std::size_t j = 0;
  for (int x : r)
    if ((x < 0) == Negative && j < N) out[j++] = magnitude(x);
  return out;
}

/// Product of `r`, with a flag instead of a value when it does not fit in int.
struct checked_product {
  int value = 1;
  bool overflow = false;
};
constexpr checked_product product_of(std::span<const int> r) noexcept {
  checked_product p;
  for (int x : r)
    if (__builtin_mul_overflow(p.value, x, &p.value)) return {0, true};
  return p;
}

}  // namespace detail

/// Checks `f` for `ranks` ranks, collective `c` and schedule kind `kind`.
/// Never throws; usable in constant expressions. Positions in messages are
/// 0-based indices into the set.
///
///   static_assert(collc::validate(collc::factors<2, 2, 2>{}, 7, collc::collective::allreduce,
///                                 collc::schedule_kind::cyclic).ok);
template <factor_set_like F>
constexpr validation validate(const F& f, int ranks, collective c, schedule_kind kind) noexcept {
  const std::span<const int> r = f.radices();
  return detail::describe(detail::find_violation(r, ranks, c, kind), r, ranks, c);
}

/// validate(), throwing collc::error (code: invalid_factor_set, overflow, or
/// invalid_argument for ranks < 1) with the same message. constexpr, so
/// lowering (which is) checks its factor sets with it too.
template <factor_set_like F>
constexpr void validate_or_throw(const F& f, int ranks, collective c, schedule_kind kind) {
  const auto v = validate(f, ranks, c, kind);
  if (!v.ok) throw error(v.code, std::string(v.message()));
}

namespace detail {

/// validate() without the rules that need the rank count (the product and
/// cyclic-shift rules): for schedules that place their ranks by a rule of
/// their own (recursive exchange with the remainder folded in).
template <factor_set_like F>
constexpr validation validate_shape(const F& f, collective c) noexcept {
  const std::span<const int> r = f.radices();
  return describe(find_shape_violation(r, c), r, 1, c);
}

/// validate_shape(), throwing collc::error like validate_or_throw.
template <factor_set_like F>
constexpr void validate_shape_or_throw(const F& f, collective c) {
  const auto v = validate_shape(f, c);
  if (!v.ok) throw error(v.code, std::string(v.message()));
}

}  // namespace detail

/// A static factor set: an empty type whose intrinsic errors (0, 1, -1, sign
/// order, mirror, overflow) are compile errors. Rules that need the rank
/// count: `valid_for<P, C, K>` and collc::static_validate.
///
///   using rabenseifner8 = collc::factors<-2, -2, -2, 2, 2, 2>;
///   static_assert(rabenseifner8::valid_for<8, collc::collective::allreduce, collc::schedule_kind::recursive>);
///   collc::factor_set d = rabenseifner8{};  // implicit conversion to the runtime set
template <int... R>
struct factors {
 private:
  static constexpr std::array<int, sizeof...(R)> values_{R...};
  static constexpr factor_rule intrinsic_ = detail::check_intrinsic(values_).rule;
  static constexpr std::size_t k_ = ((R < 0 ? std::size_t{1} : std::size_t{0}) + ... + std::size_t{0});
  static constexpr std::size_t m_ = sizeof...(R) - k_;
  static constexpr std::size_t x_ = m_ > k_ ? m_ - k_ : 0;
  static constexpr auto negatives_ = detail::select_magnitudes<k_, true>(values_);
  static constexpr auto positives_ = detail::select_magnitudes<m_, false>(values_);

 public:
  static_assert(intrinsic_ != factor_rule::zero_or_unit, "collc::factors: radices must not be 0, 1 or -1");
  static_assert(intrinsic_ != factor_rule::sign_order,
                "collc::factors: negative (reduce-scatter) radices must come before positive ones");
  static_assert(intrinsic_ != factor_rule::mirror,
                "collc::factors: the allgather tail must mirror the reduce-scatter head in reverse, "
                "as in factors<-4,-2,2,4>");
  static_assert(intrinsic_ != factor_rule::overflow, "collc::factors: a product of radices overflows int");

  static constexpr bool is_static = true;

  [[nodiscard]] static constexpr std::size_t size() noexcept { return sizeof...(R); }
  [[nodiscard]] static constexpr bool empty() noexcept { return sizeof...(R) == 0; }
  [[nodiscard]] constexpr int operator[](std::size_t i) const noexcept { return values_[i]; }
  [[nodiscard]] static constexpr std::span<const int> radices() noexcept { return values_; }
  [[nodiscard]] static constexpr const int* begin() noexcept { return values_.data(); }
  [[nodiscard]] static constexpr const int* end() noexcept { return values_.data() + sizeof...(R); }

  /// The negative radices as positive radices, in order.
  [[nodiscard]] static constexpr std::span<const int> reduce_scatter_radices() noexcept { return negatives_; }
  /// The positive radices, in order.
  [[nodiscard]] static constexpr std::span<const int> allgather_radices() noexcept { return positives_; }
  /// Allreduce: the first m-k positives (the steps that do not mirror a reduce-scatter step).
  [[nodiscard]] static constexpr std::span<const int> reduce_exchange_radices() noexcept {
    return std::span<const int>(positives_).first(x_);
  }
  // Products cannot overflow: that is a compile error above.
  [[nodiscard]] static constexpr int reduce_scatter_product() noexcept {
    return detail::product_of(reduce_scatter_radices()).value;
  }
  [[nodiscard]] static constexpr int allgather_product() noexcept {
    return detail::product_of(allgather_radices()).value;
  }
  [[nodiscard]] static constexpr int reduce_exchange_product() noexcept {
    return detail::product_of(reduce_exchange_radices()).value;
  }

  /// "{-4,-2,2,4}".
  [[nodiscard]] static std::string to_string() { return detail::format_radices(radices()); }

  /// Whether this set is valid for P ranks, collective C, schedule kind K.
  template <int P, collective C, schedule_kind K>
  static constexpr bool valid_for = detail::find_violation(values_, P, C, K).rule == factor_rule::none;

  template <int... S>
  friend constexpr bool operator==(factors, factors<S...>) noexcept {
    return detail::equal_radices(values_, factors<S...>::radices());
  }
  template <class CharT, class Traits>
  friend std::basic_ostream<CharT, Traits>& operator<<(std::basic_ostream<CharT, Traits>& os, factors) {
    return os << to_string();
  }
};

/// Compile-time validation of a static set for P ranks with readable
/// messages; returns true so it can sit inside a static_assert.
///
///   static_assert(collc::static_validate<7, collc::collective::allreduce, collc::schedule_kind::cyclic,
///                                        collc::factors<4, 2>>());
template <int P, collective C, schedule_kind K, class F>
consteval bool static_validate() {
  constexpr auto v = detail::find_violation(F::radices(), P, C, K);
  static_assert(v.rule != factor_rule::ranks, "collc::static_validate: the number of ranks must be at least 1");
  static_assert(v.rule != factor_rule::empty, "collc::static_validate: an empty factor set is valid for no collective");
  static_assert(v.rule != factor_rule::wrong_sign,
                "collc::static_validate: reduce_scatter takes negative radices only; allgather and bcast take "
                "positive radices only");
  static_assert(v.rule != factor_rule::mirror,
                "collc::static_validate: allreduce and reduce need an allgather tail that mirrors the "
                "reduce-scatter head");
  static_assert(v.rule != factor_rule::product,
                "collc::static_validate: recursive exchange needs the product of the phase's radices to equal the "
                "number of ranks");
  static_assert(v.rule != factor_rule::cyclic_prefix,
                "collc::static_validate: cyclic shift needs the radices before the last one to multiply to less than "
                "the number of ranks");
  static_assert(v.rule != factor_rule::cyclic_last,
                "collc::static_validate: cyclic shift needs the last radix to be minimal: ceil(ranks / product of the "
                "radices before it)");
  return v.rule == factor_rule::none;
}

/// A runtime factor set: the same interface as collc::factors, with the
/// radices stored inline (at most 64; a longer set cannot be valid).
///
///   collc::factor_set s = collc::factor_set::parse("{-4, -2, 2, 4}");
///   s.reduce_scatter_radices();  // {4,2}
///   s.reduce_exchange_radices(); // {}
///   collc::factor_set t{2, 2, 2};  // recursive doubling for 8 ranks
class factor_set {
 public:
  static constexpr bool is_static = false;
  static constexpr std::size_t max_size = radix_list::max_size;

  /// The empty set (valid for no collective).
  constexpr factor_set() noexcept = default;
  constexpr factor_set(std::initializer_list<int> r) : radices_(r) {}
  constexpr factor_set(std::span<const int> r) : radices_(r) {}
  constexpr factor_set(const radix_list& r) noexcept : radices_(r) {}
  template <int... R>
  constexpr factor_set(factors<R...>) : radices_(factors<R...>::radices()) {}

  /// Parses "-4,-2,2,4", "{-4, -2, 2, 4}" or "" / "{}" (the empty set).
  /// Throws collc::error(errc::parse_error) naming the bad token. Checks
  /// syntax only: call validate() for the rules.
  static constexpr factor_set parse(std::string_view text);

  [[nodiscard]] constexpr std::size_t size() const noexcept { return radices_.size(); }
  [[nodiscard]] constexpr bool empty() const noexcept { return radices_.empty(); }
  [[nodiscard]] constexpr int operator[](std::size_t i) const noexcept { return radices_[i]; }
  [[nodiscard]] constexpr std::span<const int> radices() const noexcept { return radices_.radices(); }
  [[nodiscard]] constexpr const int* begin() const noexcept { return radices_.begin(); }
  [[nodiscard]] constexpr const int* end() const noexcept { return radices_.end(); }

  /// The negative radices as positive radices, in order.
  [[nodiscard]] constexpr radix_list reduce_scatter_radices() const noexcept { return select(true, max_size); }
  /// The positive radices, in order.
  [[nodiscard]] constexpr radix_list allgather_radices() const noexcept { return select(false, max_size); }
  /// Allreduce: the first m-k positives (the steps that do not mirror a reduce-scatter step).
  [[nodiscard]] constexpr radix_list reduce_exchange_radices() const noexcept {
    const auto [k, m] = detail::count_signs(radices());
    return select(false, m > k ? m - k : 0);
  }
  /// Products of the phases; throw collc::error(errc::overflow) if one does not fit in int.
  [[nodiscard]] constexpr int reduce_scatter_product() const {
    return checked(reduce_scatter_radices(), "reduce-scatter");
  }
  [[nodiscard]] constexpr int allgather_product() const { return checked(allgather_radices(), "allgather"); }
  [[nodiscard]] constexpr int reduce_exchange_product() const {
    return checked(reduce_exchange_radices(), "reduce-exchange");
  }

  /// "{-4,-2,2,4}", identical to collc::factors<-4,-2,2,4>::to_string().
  [[nodiscard]] constexpr std::string to_string() const { return detail::format_radices(radices()); }

  /// FNV-1a over the radices, for hash maps (std::hash<collc::factor_set> uses it).
  [[nodiscard]] constexpr std::size_t hash() const noexcept {
    std::uint64_t h = 1469598103934665603ULL;
    for (int x : radices()) {
      h ^= static_cast<std::uint32_t>(x);
      h *= 1099511628211ULL;
    }
    return static_cast<std::size_t>(h);
  }

  friend constexpr bool operator==(const factor_set& a, const factor_set& b) noexcept {
    return a.radices_ == b.radices_;
  }
  template <class CharT, class Traits>
  friend std::basic_ostream<CharT, Traits>& operator<<(std::basic_ostream<CharT, Traits>& os, const factor_set& s) {
    return os << s.to_string();
  }

 private:
  constexpr radix_list select(bool negative, std::size_t limit) const noexcept {
    radix_list out;
    for (int x : radices())
      if ((x < 0) == negative && out.size() < limit) out.push_back(detail::magnitude(x));
    return out;
  }
  constexpr int checked(const radix_list& r, const char* phase) const {
    const auto p = detail::product_of(r.radices());
    if (p.overflow)
      throw error(errc::overflow, detail::constexpr_cat("factor set ", to_string(), ": product of the ", phase,
                                                        " radices overflows int"));
    return p.value;
  }

  radix_list radices_;
};

constexpr factor_set factor_set::parse(std::string_view text) {
  const auto fail = [&](std::string_view token, std::string_view why) {
    throw error(errc::parse_error,
                detail::constexpr_cat("cannot parse factor set \"", text, "\": token '", token, "' ", why));
  };
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  const auto trim = [&](std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
  };
  std::string_view body = trim(text);
  if (!body.empty() && body.front() == '{') {
    if (body.back() != '}') fail(body, "opens a brace that is never closed");
    body = trim(body.substr(1, body.size() - 2));
  } else if (!body.empty() && body.back() == '}') {
    fail(body, "closes a brace that was never opened");
  }
  factor_set out;
  if (body.empty()) return out;
  for (;;) {
    const std::size_t comma = body.find(',');
    const std::string_view token = trim(body.substr(0, comma));
    std::string_view digits = token;
    bool negative = false;
    if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) {
      negative = digits.front() == '-';
      digits.remove_prefix(1);
    }
    if (token.empty()) fail(token, "is empty (stray comma?)");
    if (digits.empty()) fail(token, "is not an integer");
    std::int64_t value = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') fail(token, "is not an integer");
      value = value * 10 + (c - '0');
      if (value > std::int64_t{std::numeric_limits<int>::max()} + 1) fail(token, "does not fit in int");
    }
    if (negative) value = -value;
    if (value > std::numeric_limits<int>::max()) fail(token, "does not fit in int");
    if (out.size() == max_size) fail(token, "exceeds the 64 radices a factor set can hold");
    out.radices_.push_back(static_cast<int>(value));
    if (comma == std::string_view::npos) break;
    body = body.substr(comma + 1);
  }
  return out;
}

/// "{-4,-2,2,4}" for any factor set, static or runtime.
template <factor_set_like F>
[[nodiscard]] std::string to_string(const F& f) {
  return detail::format_radices(f.radices());
}

/// {-r1,..,-rn, rn,..,r1}: reduce-scatter over `phase`, then the mirroring
/// allgather (Rabenseifner's shape for phase {2,2,2}).
///
///   collc::mirrored(collc::radix_list{4, 2}) == collc::factor_set{-4, -2, 2, 4}
[[nodiscard]] constexpr factor_set mirrored(std::span<const int> phase) {
  radix_list out;
  for (int r : phase) out.push_back(-r);
  for (std::size_t i = phase.size(); i-- > 0;) out.push_back(phase[i]);
  return out;
}
[[nodiscard]] constexpr factor_set mirrored(const radix_list& phase) { return mirrored(phase.radices()); }

/// {-r1,..,-rn}: the reduce_scatter set over `phase`.
[[nodiscard]] constexpr factor_set negated(std::span<const int> phase) {
  radix_list out;
  for (int r : phase) out.push_back(-r);
  return out;
}
[[nodiscard]] constexpr factor_set negated(const radix_list& phase) { return negated(phase.radices()); }

}  // namespace collc

template <>
struct std::hash<collc::factor_set> {
  std::size_t operator()(const collc::factor_set& s) const noexcept { return s.hash(); }
};
