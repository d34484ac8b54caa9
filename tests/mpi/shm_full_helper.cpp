// Helper of the full-/dev/shm test (tests/mpi/shm_full.sh): 16 allreduce
// plans of 1 MiB alive at once, each run twice with fresh data and checked
// element by element. Under a /dev/shm of a few MiB most of their segments
// do not fit: a plan must then take the MPI window fallback (or fail with an
// error), never die with SIGBUS when a call first touches a page tmpfs
// could not supply (ftruncate reserves nothing; segment_pool::prepare).
#include <collc/plan.hpp>

#include <mpi.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<collc::plan<long, collc::plus>> plans;
  long wrong = 0;
  for (int i = 0; i < 16; ++i) {
    const std::size_t n = (std::size_t{1} << 17) + static_cast<std::size_t>(i);  // distinct plans
    plans.push_back(collc::make_allreduce<long>(MPI_COMM_WORLD, n));
    for (int call = 0; call < 2; ++call) {
      std::vector<long> in(n), out(n, -1);
      for (std::size_t k = 0; k < n; ++k) in[k] = static_cast<long>(k) * (rank + 1) + call;
      plans.back()(in, out);
      // sum over ranks of k (r + 1) + call
      const long ranks_sum = static_cast<long>(size) * (size + 1) / 2;
      for (std::size_t k = 0; k < n; ++k)
        if (out[k] != static_cast<long>(k) * ranks_sum + static_cast<long>(call) * size) ++wrong;
    }
  }
  long wrong_anywhere = 0;
  MPI_Allreduce(&wrong, &wrong_anywhere, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("shm full helper: %d ranks, 16 plans alive, %ld wrong elements: %s\n", size, wrong_anywhere,
                wrong_anywhere == 0 ? "PASS" : "FAIL");
  plans.clear();
  MPI_Finalize();
  return wrong_anywhere == 0 ? 0 : 1;
}
