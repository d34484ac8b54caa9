// Helpers shared by the MPI backend tests: deterministic per-rank inputs that
// every rank can regenerate (so each rank computes the expected result on its
// own, without communication), a sequential rank-order reference fold, a
// non-commutative element type, and cross-rank agreement checks.
#pragma once
#include <mpi.h>
#include <catch2/catch.hpp>
#include <collc/error.hpp>
#include <collc/ir/program.hpp>
#include <collc/plan.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace collc_test {

/// Runs f, returns the collc::error it threw (code, message) or nullopt.
template <class F>
std::optional<std::pair<collc::errc, std::string>> error_of(F&& f) {
  try {
    f();
  } catch (const collc::error& e) {
    return std::pair{e.code(), std::string(e.what())};
  }
  return std::nullopt;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

/// True when plans on MPI_COMM_WORLD with options `o` span (pseudo-)nodes
/// (COLLC_RANKS_PER_NODE, o.ranks_per_node): their default chunk is then the
/// network's. Collective: builds a one-element plan.
inline bool plans_span_nodes(const collc::plan_options& o = {}) {
  return collc::make_allreduce<double>(MPI_COMM_WORLD, 1, o).node_of_program().back() > 0;
}

/// True on every rank iff `ok` on every rank of `comm` (so all ranks take the
/// same branch and rank 0 reports a failure seen anywhere).
inline bool all_ranks(bool ok, MPI_Comm comm = MPI_COMM_WORLD) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, comm);
  return v == 1;
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// 2x2 matrix product modulo a prime: associative, not commutative.
struct mat2 {
  std::uint32_t a, b, c, d;
  friend bool operator==(const mat2&, const mat2&) = default;
};
inline constexpr std::uint64_t mat_prime = 1000003;
struct mat_mul {  // no is_commutative: collc must treat it as non-commutative
  mat2 operator()(const mat2& x, const mat2& y) const {
    auto m = [](std::uint64_t p, std::uint64_t q, std::uint64_t r, std::uint64_t s) {
      return static_cast<std::uint32_t>((p * q + r * s) % mat_prime);
    };
    return {m(x.a, y.a, x.b, y.c), m(x.a, y.b, x.b, y.d), m(x.c, y.a, x.d, y.c), m(x.c, y.b, x.d, y.d)};
  }
};

/// Element i of rank r's input in call `it` (types used by the tests).
template <class T>
T input(int r, std::size_t i, int it);
template <>
inline std::int64_t input<std::int64_t>(int r, std::size_t i, int it) {
  return static_cast<std::int64_t>(
             mix(static_cast<std::uint64_t>(r) * 1000003u + i * 31u + static_cast<std::uint64_t>(it)) % 2000001) -
         1000000;
}
template <>
inline double input<double>(int r, std::size_t i, int it) {
  const std::uint64_t h = mix(static_cast<std::uint64_t>(r) << 40 ^ i << 8 ^ static_cast<std::uint64_t>(it));
  return static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;  // [-1, 1)
}
template <>
inline mat2 input<mat2>(int r, std::size_t i, int it) {
  const std::uint64_t h = mix(static_cast<std::uint64_t>(r) * 7919u + i * 104729u + static_cast<std::uint64_t>(it));
  return {static_cast<std::uint32_t>(h % mat_prime), static_cast<std::uint32_t>((h >> 20) % mat_prime),
          static_cast<std::uint32_t>((h >> 40) % mat_prime), static_cast<std::uint32_t>((h >> 7) % mat_prime)};
}
template <>
inline char input<char>(int r, std::size_t i, int it) {
  return static_cast<char>('a' + (r * 7 + static_cast<int>(i % 19) + it) % 26);
}

/// The send buffer of rank r (send_count elements; bcast: the root's data).
template <class T>
std::vector<T> send_data(collc::collective c, int r, int P, std::size_t n, int it) {
  const std::size_t len = c == collc::collective::reduce_scatter ? n * static_cast<std::size_t>(P) : n;
  std::vector<T> v(len);
  for (std::size_t i = 0; i < len; ++i) v[i] = input<T>(r, i, it);
  return v;
}

/// The expected recv buffer of rank `me`: a sequential left fold in rank
/// order ((x0 op x1) op x2) ..., computed from regenerated inputs.
template <class T, class Op>
std::vector<T> expected(collc::collective c, int me, int P, std::size_t n, int root, int it, Op op = {}) {
  using collc::collective;
  std::vector<std::vector<T>> in(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) in[static_cast<std::size_t>(r)] = send_data<T>(c, r, P, n, it);
  std::vector<T> out;
  if constexpr (!std::is_invocable_v<Op, const T&, const T&>) {
    if (collc::reduces(c)) return out;
  } else {
    if (collc::reduces(c)) {
      switch (c) {
        case collective::reduce_scatter:
          out.assign(in[0].begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me) * n),
                     in[0].begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(me + 1) * n));
          for (int r = 1; r < P; ++r)
            for (std::size_t i = 0; i < n; ++i)
              out[i] = op(out[i], in[static_cast<std::size_t>(r)][static_cast<std::size_t>(me) * n + i]);
          break;
        default:  // allreduce, reduce
          out = in[0];
          for (int r = 1; r < P; ++r)
            for (std::size_t i = 0; i < n; ++i) out[i] = op(out[i], in[static_cast<std::size_t>(r)][i]);
          break;
      }
      return out;
    }
  }
  switch (c) {
    case collective::allgather:
      for (int r = 0; r < P; ++r)
        out.insert(out.end(), in[static_cast<std::size_t>(r)].begin(), in[static_cast<std::size_t>(r)].end());
      break;
    case collective::bcast: out = in[static_cast<std::size_t>(root)]; break;
    default: break;
  }
  return out;
}

/// Element-wise comparison; doubles within a relative tolerance (the
/// schedule may associate differently from the sequential fold).
template <class T>
std::size_t mismatches(const std::vector<T>& got, const std::vector<T>& want, std::size_t* first = nullptr) {
  std::size_t bad = 0;
  if (got.size() != want.size()) return got.size() + want.size() + 1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>)
      ok = std::fabs(got[i] - want[i]) <= 1e-12 * (1 + std::fabs(want[i])) * 64;
    else
      ok = got[i] == want[i];
    if (!ok && bad++ == 0 && first) *first = i;
  }
  return bad;
}

/// Whether `buf` is bitwise identical on every rank of `comm` (MPI requires
/// allreduce results to be the same everywhere).
template <class T>
bool identical_everywhere(const std::vector<T>& buf, MPI_Comm comm = MPI_COMM_WORLD) {
  std::vector<T> first(buf);
  MPI_Bcast(first.data(), static_cast<int>(first.size() * sizeof(T)), MPI_BYTE, 0, comm);
  // An empty vector's data() may be null, and memcmp's arguments must not be
  // (even for 0 bytes): UBSan's nonnull-attribute at count 0.
  return all_ranks(buf.empty() || std::memcmp(first.data(), buf.data(), buf.size() * sizeof(T)) == 0, comm);
}

}  // namespace collc_test
