// allreduce_demo: a persistent collc plan run in a loop next to MPI_Allreduce.
// For each message size it builds a plan with the default schedule, checks
// the result against MPI_Allreduce (and that all ranks hold the same bits),
// then times both, alternating blocks of calls, and prints the medians.
//
//   mpiexec -n 2 allreduce_demo              # sizes 64 B .. 4 MiB
//   mpiexec -n 4 allreduce_demo 4096 65536   # chosen sizes in bytes
#include <collc/plan.hpp>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Appends the seconds per call of `reps` calls of `f` to `samples`.
template <class F>
void per_call(F&& f, int reps, std::vector<double>& samples) {
  const double t0 = MPI_Wtime();
  for (int i = 0; i < reps; ++i) f();
  samples.push_back((MPI_Wtime() - t0) / reps);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {64, 512, 4096, 32768, 262144, 4194304};
  int failures = 0;
  if (rank == 0) {
    std::printf("collc allreduce demo: %d ranks, double, collc::plus\n", size);
    std::printf("%10s  %-24s %12s %12s %7s  %s\n", "bytes", "schedule", "collc [us]", "MPI [us]", "ratio", "check");
  }
  try {
    for (std::size_t bytes : sizes) {
      const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(double));
      auto plan = collc::make_allreduce<double>(MPI_COMM_WORLD, n);
      std::vector<double> send(n), mine(n), ref(n);
      for (std::size_t i = 0; i < n; ++i) send[i] = std::sin(static_cast<double>(i) + 0.37 * rank) * (rank + 1);

      // Check: against MPI_Allreduce (rounding may differ with the association),
      // and bitwise agreement of all ranks (MPI requires it).
      plan(send, mine);
      MPI_Allreduce(send.data(), ref.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      int ok = 1;
      for (std::size_t i = 0; i < n; ++i)
        if (std::fabs(mine[i] - ref[i]) > 1e-12 * (1 + std::fabs(ref[i])) * size) ok = 0;
      std::vector<double> first(mine);
      MPI_Bcast(first.data(), static_cast<int>(n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (std::memcmp(first.data(), mine.data(), n * sizeof(double)) != 0) ok = 0;
      MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      failures += ok ? 0 : 1;

      // Time: alternate blocks of collc and MPI calls (a barrier starts each
      // block); report the median per-call time of the slowest rank.
      const int reps = bytes <= 65536 ? 200 : (bytes <= 1048576 ? 20 : 4);
      const int blocks = 15;
      std::vector<double> tc, tm;
      for (int b = 0; b < blocks; ++b) {
        MPI_Barrier(MPI_COMM_WORLD);
        per_call([&] { plan(send, mine); }, reps, tc);
        MPI_Barrier(MPI_COMM_WORLD);
        per_call(
            [&] { MPI_Allreduce(send.data(), ref.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); },
            reps, tm);
      }
      double t[2] = {median(tc), median(tm)};
      MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (rank == 0)
        std::printf("%10zu  %-24s %12.2f %12.2f %7.2f  %s\n", n * sizeof(double), plan.schedule_name().c_str(),
                    t[0] * 1e6, t[1] * 1e6, t[0] / t[1], ok ? "ok" : "WRONG");
    }
  } catch (const collc::error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
