// Conjugate gradients for the 2-D Poisson problem (5-point Laplacian on an
// n x n grid, zero Dirichlet boundary), rows distributed in blocks over MPI
// ranks, vectors in Kokkos::Views, every dot product and norm through one
// persistent collc allreduce plan built before the iteration loop.
//
//   mpiexec -n 4 kokkos_cg [--reproducible] [n=64] [timing repetitions=3]
//
// Times are the median over the timing repetitions of each rank's time per
// iteration (the variants alternate, in reversed order every other
// repetition), then the slowest rank's.
//
// The right-hand side is b = A u* for a known u*, so the solution is checked
// against u* as well as by its true residual ||b - A x|| / ||b||. The same
// solver then runs with MPI_Allreduce for the dot products; the program
// prints iterations and time per iteration of both and checks:
//  - collc: two solves in one process give bitwise identical residual
//    histories, and every rank holds the same history bit for bit (collc's
//    allreduce gives identical results on all ranks);
//  - both: true residual <= 1e-8 and max |x - u*| <= 1e-6 max |u*| (the
//    solve stops at ||r|| <= 1e-10 ||b||; the 2-D Laplacian's condition
//    number, about 0.4 n^2, bounds the error by ~1e-6 for n <= 100);
//  - collc against MPI (which sums in another order, so rounding differs):
//    iteration counts within 2 + 5 %, solutions within 1e-6 max |u*|.
//
// --reproducible adds a third solver whose dot products are reproducible
// (collc::kokkos::reproducible_dot: each rank's part accumulated exactly in a
// collc::exact_sum<double> by a Kokkos reducer, one allreduce plan of one
// accumulator, one rounding). Its whole residual history is then the same bits
// at every rank count, schedule (COLLC_ALGO) and thread count, since every
// other operation is elementwise. It prints, for that solver and for the plain
// collc one, the iterations, the final residual ||r|| in hex and with 17
// digits, a hash (FNV-1a, 64 bits) of the bytes of the whole history, and the
// time per iteration; the same checks apply to it as to the plain solver
// (tests/kokkos_cg_reproducible.cmake compares the lines across runs).
// Exit status 0 iff all checks pass on every rank.
#include <collc/backend/kokkos/plan.hpp>
#include <collc/backend/kokkos/reproducible.hpp>

#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using exec_space = Kokkos::DefaultHostExecutionSpace;  // collc has no device path yet
using vec = Kokkos::View<double*, exec_space::memory_space>;

/// This rank's block of grid rows, with one ghost row above and below.
struct grid {
  int n = 0;                 // grid is n x n interior points
  int row0 = 0, rows = 0;    // global index of the first local row, local row count
  int up = MPI_PROC_NULL;    // rank holding the rows above (smaller index)
  int down = MPI_PROC_NULL;  // rank holding the rows below
  [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(n); }
  [[nodiscard]] std::size_t with_ghosts() const { return size() + 2 * static_cast<std::size_t>(n); }
};

grid make_grid(int n, MPI_Comm comm) {
  int me = 0, P = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  grid g;
  g.n = n;
  g.rows = n / P + (me < n % P ? 1 : 0);
  g.row0 = me * (n / P) + std::min(me, n % P);
  if (me > 0) g.up = me - 1;
  if (me < P - 1) g.down = me + 1;
  return g;
}

/// Fills the ghost rows of `p` (layout: ghost row, rows, ghost row) from the
/// neighbours; boundary ranks keep zero ghosts (the Dirichlet boundary).
void exchange_halo(const grid& g, const vec& p, MPI_Comm comm) {
  exec_space().fence();  // the kernels that wrote p are done before MPI reads it
  double* base = p.data();
  const std::size_t n = static_cast<std::size_t>(g.n);
  MPI_Sendrecv(base + n, g.n, MPI_DOUBLE, g.up, 0, base + n + g.size(), g.n, MPI_DOUBLE, g.down, 0, comm,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(base + g.size(), g.n, MPI_DOUBLE, g.down, 1, base, g.n, MPI_DOUBLE, g.up, 1, comm, MPI_STATUS_IGNORE);
}

/// y = A p on the local rows (p with ghosts, y without).
void apply(const grid& g, const vec& p, const vec& y) {
  const int n = g.n;
  Kokkos::parallel_for(
      "cg::apply", Kokkos::RangePolicy<exec_space>(0, g.size()), KOKKOS_LAMBDA(std::size_t k) {
        const std::size_t c = k + static_cast<std::size_t>(n);  // index in p
        const int j = static_cast<int>(k % static_cast<std::size_t>(n));
        const double west = j > 0 ? p(c - 1) : 0.0, east = j < n - 1 ? p(c + 1) : 0.0;
        y(k) = 4.0 * p(c) - p(c - static_cast<std::size_t>(n)) - p(c + static_cast<std::size_t>(n)) - west - east;
      });
}

double local_dot(const grid& g, const vec& a, std::size_t a_off, const vec& b, std::size_t b_off) {
  double s = 0;
  Kokkos::parallel_reduce(
      "cg::dot", Kokkos::RangePolicy<exec_space>(0, g.size()),
      KOKKOS_LAMBDA(std::size_t k, double& acc) { acc += a(k + a_off) * b(k + b_off); }, s);
  return s;
}

struct solve_result {
  int iterations = 0;
  double seconds = 0;
  std::vector<double> history;  // ||r_k|| for k = 0, 1, ...
  std::vector<double> x;        // this rank's rows of the solution
  double true_residual = 0;     // ||b - A x|| / ||b||
};

/// CG from x = 0. `dot(a, a_off, b, b_off)` returns the global dot product of
/// the local rows of a and b (starting at the given offsets).
template <class Dot>
solve_result cg(const grid& g, const vec& b, Dot&& dot, MPI_Comm comm, double tol, int max_iter) {
  const std::size_t n = static_cast<std::size_t>(g.n), N = g.size();
  vec x("x", N), r("r", N), p("p", g.with_ghosts()), ap("ap", N);
  Kokkos::deep_copy(r, b);
  Kokkos::parallel_for(
      "cg::init", Kokkos::RangePolicy<exec_space>(0, N), KOKKOS_LAMBDA(std::size_t k) { p(k + n) = b(k); });
  solve_result out;
  const double bnorm = std::sqrt(dot(b, 0, b, 0));
  double rr = bnorm * bnorm;
  out.history.push_back(std::sqrt(rr));
  MPI_Barrier(comm);
  const auto t0 = std::chrono::steady_clock::now();
  int it = 0;
  while (it < max_iter && std::sqrt(rr) > tol * bnorm) {
    exchange_halo(g, p, comm);
    apply(g, p, ap);
    const double alpha = rr / dot(p, n, ap, 0);
    Kokkos::parallel_for(
        "cg::update", Kokkos::RangePolicy<exec_space>(0, N), KOKKOS_LAMBDA(std::size_t k) {
          x(k) += alpha * p(k + n);
          r(k) -= alpha * ap(k);
        });
    const double rr_next = dot(r, 0, r, 0);
    const double beta = rr_next / rr;
    rr = rr_next;
    Kokkos::parallel_for(
        "cg::direction", Kokkos::RangePolicy<exec_space>(0, N),
        KOKKOS_LAMBDA(std::size_t k) { p(k + n) = r(k) + beta * p(k + n); });
    out.history.push_back(std::sqrt(rr));
    ++it;
  }
  exec_space().fence();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.iterations = it;

  // True residual with plain MPI (an independent check of the result).
  vec xg("xg", g.with_ghosts());
  Kokkos::parallel_for(
      "cg::copy", Kokkos::RangePolicy<exec_space>(0, N), KOKKOS_LAMBDA(std::size_t k) { xg(k + n) = x(k); });
  exchange_halo(g, xg, comm);
  apply(g, xg, ap);
  double local[2] = {0, 0}, global[2] = {0, 0};
  auto h_ap = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ap);
  auto h_b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  auto h_x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
  for (std::size_t k = 0; k < N; ++k) {
    local[0] += (h_b(k) - h_ap(k)) * (h_b(k) - h_ap(k));
    local[1] += h_b(k) * h_b(k);
  }
  MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, comm);
  out.true_residual = std::sqrt(global[0] / global[1]);
  out.x.assign(h_x.data(), h_x.data() + N);
  return out;
}

double max_over_ranks(double v, MPI_Comm comm) {
  double m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm);
  return m;
}

/// FNV-1a over the bytes of the history: equal hashes for equal bit patterns.
std::uint64_t history_hash(const std::vector<double>& h) {
  std::uint64_t x = 0xcbf29ce484222325ull;
  for (double v : h) {
    unsigned char b[sizeof v];
    std::memcpy(b, &v, sizeof v);
    for (unsigned char c : b) x = (x ^ c) * 0x100000001b3ull;
  }
  return x;
}

int run(int n, int reps, bool reproducible) {
  const MPI_Comm comm = MPI_COMM_WORLD;
  int me = 0, P = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  const grid g = make_grid(n, comm);
  const std::size_t N = g.size(), nn = static_cast<std::size_t>(n);

  // Manufactured solution u* and b = A u*.
  vec u("u", g.with_ghosts()), b("b", N);
  {
    auto h = Kokkos::create_mirror_view(u);
    for (std::size_t k = 0; k < N; ++k) {
      const double i = g.row0 + static_cast<double>(k / nn) + 1, j = static_cast<double>(k % nn) + 1;
      h(k + nn) = std::sin(3.0 * i / (n + 1)) * std::cos(2.0 * j / (n + 1)) + 0.01 * std::fmod(i * 7 + j * 13, 5.0);
    }
    Kokkos::deep_copy(u, h);
  }
  exchange_halo(g, u, comm);
  apply(g, u, b);
  auto h_u = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), u);
  double umax = 0;
  for (std::size_t k = 0; k < N; ++k) umax = std::max(umax, std::abs(h_u(k + nn)));
  umax = max_over_ranks(umax, comm);

  const double tol = 1e-10;
  const int max_iter = 10 * n;

  // The persistent plan and its two one-element Views, built once.
  auto plan = collc::kokkos::make_allreduce<exec_space, double, Kokkos::Sum<double>>(comm, 1);
  vec local("dot_local", 1), global("dot_global", 1);
  const exec_space exec;
  // The Views are host memory (exec_space is a host space): the scalar goes
  // in and out directly. The plan fences exec on entry, runs its one-element
  // copies inline (collc::kokkos::inline_bytes) and global is ready on
  // return (docs/kokkos_backend.md); deep_copy would launch a fill kernel
  // and fence twice per dot product for one double.
  auto collc_sum = [&](double v) {
    local(0) = v;
    plan(exec, local, global);
    return global(0);
  };
  auto mpi_sum = [&](double v) {
    double s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, comm);
    return s;
  };

  auto dot_of = [&](auto&& allreduce) {
    return [&g, allreduce](const vec& a, std::size_t a_off, const vec& b, std::size_t b_off) {
      return allreduce(local_dot(g, a, a_off, b, b_off));
    };
  };
  // The reproducible dot: exact local accumulation, one allreduce of one accumulator, one rounding.
  auto rplan = collc::kokkos::make_reproducible_allreduce<exec_space, double>(comm);
  auto reproducible_dot = [&](const vec& a, std::size_t a_off, const vec& b, std::size_t b_off) {
    const auto rows = std::make_pair(a_off, a_off + N);
    const auto rows_b = std::make_pair(b_off, b_off + N);
    return collc::kokkos::reproducible_dot(rplan, exec, Kokkos::subview(a, rows), Kokkos::subview(b, rows_b));
  };

  solve_result c1 = cg(g, b, dot_of(collc_sum), comm, tol, max_iter);
  solve_result c2 = cg(g, b, dot_of(collc_sum), comm, tol, max_iter);
  solve_result m1 = cg(g, b, dot_of(mpi_sum), comm, tol, max_iter);
  solve_result r1, r2;
  if (reproducible) {
    r1 = cg(g, b, reproducible_dot, comm, tol, max_iter);
    r2 = cg(g, b, reproducible_dot, comm, tol, max_iter);
  }
  // Time per iteration of `reps` more solves per variant. Each repetition
  // runs every variant once, in an order that reverses from one repetition
  // to the next (ABBA), so neither a drift of the machine nor going first
  // favours one; each rank's median, then the slowest rank's.
  std::vector<double> t_c, t_m, t_r;
  auto timed = [&](std::vector<double>& into, auto&& dot, int iterations) {
    into.push_back(cg(g, b, dot, comm, tol, max_iter).seconds / std::max(1, iterations));
  };
  for (int k = 0; k < reps; ++k) {
    auto plain = [&] { timed(t_c, dot_of(collc_sum), c1.iterations); };
    auto mpi = [&] { timed(t_m, dot_of(mpi_sum), m1.iterations); };
    auto repro = [&] {
      if (reproducible) timed(t_r, reproducible_dot, r1.iterations);
    };
    if (k % 2 == 0) {
      plain(), mpi(), repro();
    } else {
      repro(), mpi(), plain();
    }
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
  };
  const double median_c = max_over_ranks(median(t_c), comm);
  const double median_m = max_over_ranks(median(t_m), comm);
  const double median_r = max_over_ranks(median(t_r), comm);

  std::vector<std::string> failures;
  auto require = [&](bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  };
  auto error_to = [&](const std::vector<double>& x, auto&& ref) {
    double e = 0;
    for (std::size_t k = 0; k < N; ++k) e = std::max(e, std::abs(x[k] - ref(k)));
    return max_over_ranks(e, comm);
  };
  const double err_c = error_to(c1.x, [&](std::size_t k) { return h_u(k + nn); });
  const double err_m = error_to(m1.x, [&](std::size_t k) { return h_u(k + nn); });
  const double diff = error_to(c1.x, [&](std::size_t k) { return m1.x[k]; });

  auto same_history = [&](const solve_result& x, const solve_result& y, const char* who) {
    require(x.history.size() == y.history.size() &&
                std::memcmp(x.history.data(), y.history.data(), x.history.size() * sizeof(double)) == 0,
            std::string(who) + ": two solves gave different residual histories");
    // Every rank holds rank 0's history bit for bit.
    std::vector<double> h0 = x.history;
    int len = static_cast<int>(h0.size()), same = 1;
    MPI_Bcast(&len, 1, MPI_INT, 0, comm);
    h0.resize(static_cast<std::size_t>(len));
    MPI_Bcast(h0.data(), len, MPI_DOUBLE, 0, comm);
    same = h0.size() == x.history.size() && std::memcmp(h0.data(), x.history.data(), h0.size() * sizeof(double)) == 0;
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, comm);
    require(same == 1, std::string(who) + ": residual histories differ between ranks");
  };
  same_history(c1, c2, "collc");
  if (reproducible) same_history(r1, r2, "collc reproducible");
  std::vector<const solve_result*> solvers{&c1, &m1};
  if (reproducible) solvers.push_back(&r1);
  for (const auto* s : solvers) {
    const char* who = s == &c1 ? "collc" : s == &m1 ? "MPI_Allreduce" : "collc reproducible";
    require(s->iterations < max_iter, std::string(who) + ": no convergence in " + std::to_string(max_iter));
    require(s->true_residual <= 1e-8, std::string(who) + ": true residual " + std::to_string(s->true_residual));
  }
  require(err_c <= 1e-6 * umax, "collc: max |x - u*| = " + std::to_string(err_c));
  require(err_m <= 1e-6 * umax, "MPI_Allreduce: max |x - u*| = " + std::to_string(err_m));
  require(diff <= 1e-6 * umax, "collc and MPI_Allreduce solutions differ by " + std::to_string(diff));
  require(std::abs(c1.iterations - m1.iterations) <= 2 + m1.iterations / 20,
          "iteration counts differ: collc " + std::to_string(c1.iterations) + ", MPI_Allreduce " +
              std::to_string(m1.iterations));
  if (reproducible) {
    const double err_r = error_to(r1.x, [&](std::size_t k) { return h_u(k + nn); });
    require(err_r <= 1e-6 * umax, "collc reproducible: max |x - u*| = " + std::to_string(err_r));
    require(std::abs(r1.iterations - m1.iterations) <= 2 + m1.iterations / 20,
            "iteration counts differ: collc reproducible " + std::to_string(r1.iterations) + ", MPI_Allreduce " +
                std::to_string(m1.iterations));
  }

  int ok = failures.empty() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
  for (const auto& f : failures) std::fprintf(stderr, "kokkos_cg: rank %d: FAILED: %s\n", me, f.c_str());
  if (me == 0) {
    std::printf("kokkos_cg: %dx%d Poisson on %d rank(s), Kokkos %s, collc schedule %s\n", n, n, P, exec_space::name(),
                plan.schedule_name().c_str());
    std::printf("  collc plan:    %4d iterations, true residual %.2e, max error %.2e, %.3f us/iteration\n",
                c1.iterations, c1.true_residual, err_c, median_c * 1e6);
    std::printf("  MPI_Allreduce: %4d iterations, true residual %.2e, max error %.2e, %.3f us/iteration\n",
                m1.iterations, m1.true_residual, err_m, median_m * 1e6);
    std::printf("  max |x_collc - x_mpi| = %.2e; collc histories bitwise identical over 2 solves and %d rank(s)\n",
                diff, P);
    // One line per solver whose fields before "time" must match across runs
    // for the reproducible one (tests/kokkos_cg_reproducible.cmake).
    auto summary = [&](const char* who, const solve_result& s, double per_it) {
      const double final_r = s.history.back();
      std::printf(
          "kokkos_cg: %s: iterations %d final residual %a (%.17g) history hash %016llx time %.3f us/iteration\n", who,
          s.iterations, final_r, final_r, static_cast<unsigned long long>(history_hash(s.history)), per_it * 1e6);
    };
    summary("plain", c1, median_c);
    if (reproducible) {
      summary("reproducible", r1, median_r);
      std::printf("kokkos_cg: reproducible / plain time per iteration: %.2f (schedule of the exact_sum plan: %s)\n",
                  median_r / median_c, rplan.schedule_name().c_str());
    }
    std::printf("kokkos_cg: %s\n", ok ? "passed" : "FAILED");
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  Kokkos::initialize(argc, argv);
  try {
    bool reproducible = false;
    std::vector<const char*> args;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--reproducible") == 0)
        reproducible = true;
      else
        args.push_back(argv[i]);
    }
    const int n = args.size() > 0 ? std::atoi(args[0]) : 64;
    const int reps = args.size() > 1 ? std::atoi(args[1]) : 3;
    int P = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (n < P || n > 4096 || reps < 1) {
      std::fprintf(stderr, "usage: kokkos_cg [--reproducible] [n in [ranks, 4096]] [repetitions >= 1]\n");
      rc = 2;
    } else {
      rc = run(n, reps, reproducible);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kokkos_cg: %s\n", e.what());
    rc = 1;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return rc;
}
