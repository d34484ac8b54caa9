// collc-exact-sum-bench: the cost of reproducible sums (docs/reproducible.md),
// side by side in one run:
//  1. local accumulation of 1 K, 1 M and 16 M doubles (and the dot of 1 M):
//     collc::exact_sum's range add against a plain vectorised double sum
//     (8 independent accumulators, unrolled: what g++ -O2 makes of a good
//     hand-written sum), rank 0 only, in ns per element, the minimum and the
//     median over repetitions, the two timed in alternation;
//  2. allreduce of 1 and 1000 accumulators against the allreduce of 1 and 1000
//     doubles (persistent collc plans, default schedules), time per call =
//     maximum over ranks, median over repetitions; the count-1 rows include
//     the final round() (what reproducible_sum pays).
//
//   mpiexec -n 2 collc-exact-sum-bench [--reps 15] [--quick]
//
// The CG example measures the third figure itself:
//   mpiexec -n 2 kokkos_cg --reproducible 48 5
#include <collc/exact_sum.hpp>
#include <collc/plan.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

#if defined(__GNUC__) && !defined(__clang__)
#define BENCH_UNROLL _Pragma("GCC unroll 8")
#else
#define BENCH_UNROLL
#endif

/// The baseline: a double sum written for the vectoriser (8 independent
/// accumulators, unrolled so they stay in registers). It rounds at every add,
/// so its result depends on n and order; the fastest honest comparison.
[[gnu::noinline]] double plain_sum(const double* x, std::size_t n) {
  double a[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) BENCH_UNROLL for (int j = 0; j < 8; ++j) a[j] += x[i + static_cast<std::size_t>(j)];
  for (; i < n; ++i) a[0] += x[i];
  double s = 0;
  for (double v : a) s += v;
  return s;
}
[[gnu::noinline]] double plain_dot(const double* x, const double* y, std::size_t n) {
  double a[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    BENCH_UNROLL for (int j = 0; j < 8; ++j) a[j] +=
        x[i + static_cast<std::size_t>(j)] * y[i + static_cast<std::size_t>(j)];
  for (const double *p = x + i, *q = y + i; p != x + n; ++p, ++q) a[0] += *p * *q;  // the tail
  double s = 0;
  for (double v : a) s += v;
  return s;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct stats {
  double min, median;
};
stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2]};
}

volatile double sink;  // keeps results alive

void local_rows(int reps) {
  std::printf("\n## local accumulation (rank 0), ns per element: min / median over %d repetitions\n\n", reps);
  std::printf("| n | plain double sum | exact_sum::add | ratio (min) | ratio (median) |\n|---:|---:|---:|---:|---:|\n");
  std::mt19937_64 g(42);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::size_t n : {std::size_t{1000}, std::size_t{1} << 20, std::size_t{16} << 20}) {
    std::vector<double> x(n), y(n);
    for (auto& v : x) v = u(g);
    for (auto& v : y) v = u(g);
    // Small sizes: time batches so a sample is >= ~100 us.
    const int inner = n < 100000 ? static_cast<int>(200000 / n) : 1;
    std::vector<double> tp, te, tpd, ted;
    for (int r = 0; r < reps; ++r) {
      auto t0 = clock_type::now();
      for (int k = 0; k < inner; ++k) sink = plain_sum(x.data(), n);
      tp.push_back(seconds_since(t0) / inner / static_cast<double>(n) * 1e9);
      t0 = clock_type::now();
      for (int k = 0; k < inner; ++k) {
        collc::exact_sum<double> s;
        s.add(x.data(), n);
        sink = s.round();
      }
      te.push_back(seconds_since(t0) / inner / static_cast<double>(n) * 1e9);
      if (n == std::size_t{1} << 20) {
        t0 = clock_type::now();
        sink = plain_dot(x.data(), y.data(), n);
        tpd.push_back(seconds_since(t0) / static_cast<double>(n) * 1e9);
        t0 = clock_type::now();
        collc::exact_sum<double> s;
        s.add_products(x.data(), y.data(), n);
        sink = s.round();
        ted.push_back(seconds_since(t0) / static_cast<double>(n) * 1e9);
      }
    }
    const auto p = summarize(tp), e = summarize(te);
    const std::string label = n == 1000 ? "1 K" : n == (std::size_t{1} << 20) ? "1 M (2^20)" : "16 M (2^24)";
    std::printf("| %s | %.3f / %.3f | %.3f / %.3f | %.2f | %.2f |\n", label.c_str(), p.min, p.median, e.min, e.median,
                e.min / p.min, e.median / p.median);
    if (!tpd.empty()) {
      const auto pd = summarize(tpd), ed = summarize(ted);
      std::printf("| dot, 1 M | %.3f / %.3f | %.3f / %.3f | %.2f | %.2f |\n", pd.min, pd.median, ed.min, ed.median,
                  ed.min / pd.min, ed.median / pd.median);
    }
  }
}

/// Median over repetitions of the maximum over ranks of the time per call.
template <class T, class Before>
double time_plan(collc::plan<T>& p, std::vector<T>& send, std::vector<T>& recv, int reps, int iters, Before&& after) {
  std::vector<double> t;
  for (int w = 0; w < 3; ++w) p(send, recv);
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = clock_type::now();
    for (int i = 0; i < iters; ++i) {
      p(send, recv);
      after(recv);
    }
    double mine = seconds_since(t0) / iters, worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t.push_back(worst);
  }
  return summarize(t).median;
}

void allreduce_rows(int reps, int P, int me) {
  if (me == 0) {
    std::printf("\n## allreduce, P = %d, us per call (max over ranks, median over %d repetitions)\n\n", P, reps);
    std::printf("| count | double | exact_sum<double> (%zu B each) | ratio |\n|---:|---:|---:|---:|\n",
                sizeof(collc::exact_sum<double>));
  }
  std::mt19937_64 g(static_cast<std::uint64_t>(me) + 1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}}) {
    std::vector<double> ds(count), dr(count);
    std::vector<collc::exact_sum<double>> es(count), er(count);
    for (std::size_t i = 0; i < count; ++i) {
      ds[i] = u(g);
      es[i] = collc::exact_sum<double>(ds[i]);
    }
    auto pd = collc::make_allreduce<double>(MPI_COMM_WORLD, count);
    auto pe = collc::make_allreduce<collc::exact_sum<double>>(MPI_COMM_WORLD, count);
    const int iters = count == 1 ? 2000 : 200;
    const double td = time_plan(pd, ds, dr, reps, iters, [](std::vector<double>&) {});
    const double te = time_plan(pe, es, er, reps, iters, [count](std::vector<collc::exact_sum<double>>& r) {
      if (count == 1) sink = r[0].round();
    });
    if (me == 0)
      std::printf("| %zu%s | %.3f | %.3f | %.2f |\n", count, count == 1 ? " (+ round)" : "", td * 1e6, te * 1e6,
                  te / td);
  }
  auto sd = collc::make_allreduce<double>(MPI_COMM_WORLD, 1);
  auto se = collc::make_allreduce<collc::exact_sum<double>>(MPI_COMM_WORLD, 1);
  if (me == 0)
    std::printf("\nschedules at count 1: double %s, exact_sum %s (the default rule)\n", sd.schedule_name().c_str(),
                se.schedule_name().c_str());
  // What one element costs locally: the merge the plan's reduce runs, and round().
  if (me == 0) {
    std::vector<collc::exact_sum<double>> a(1000), b(1000);
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = collc::exact_sum<double>(u(g));
      b[i] = collc::exact_sum<double>(-u(g));
    }
    std::vector<double> tm, tr;
    for (int r = 0; r < reps; ++r) {
      auto t0 = clock_type::now();
      for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
      tm.push_back(seconds_since(t0) / static_cast<double>(a.size()) * 1e9);
      t0 = clock_type::now();
      double acc = 0;
      for (const auto& v : a) acc += v.round();
      sink = acc;
      tr.push_back(seconds_since(t0) / static_cast<double>(a.size()) * 1e9);
    }
    std::printf("one merge (a += b): %.1f ns, one round(): %.1f ns (median)\n", summarize(tm).median,
                summarize(tr).median);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int reps = 15;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
  }
  if (quick) reps = 2;
  if (me == 0) {
    std::printf("# collc-exact-sum-bench: %d rank(s), sizeof(exact_sum<double>) = %zu B\n", P,
                sizeof(collc::exact_sum<double>));
    local_rows(reps);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  allreduce_rows(reps, P, me);
  MPI_Finalize();
  return 0;
}
