// Helper of the kill test (tests/mpi/kill_check.cmake): every rank runs a
// plan in a loop; rank 1 SIGKILLs itself in the middle of a call, so its
// peers are killed by mpiexec while they wait inside a collective. Before
// that, rank 0 writes what /dev/shm and `ipcs -m` show while the plans are
// alive (argv[1]), so the check can prove it would have seen a leak.
#include <collc/plan.hpp>

#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::size_t n = 1 << 17;
  auto a = collc::make_allreduce<double>(MPI_COMM_WORLD, n);
  collc::plan_options o;
  o.ranks_per_node = 2;
  auto b = collc::make_allgather<int>(MPI_COMM_WORLD, 1000, o);
  std::vector<double> x(n, 1.0), y(n);
  std::vector<int> mine(1000, rank), all(1000 * static_cast<std::size_t>(size));
  a(x, y);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0 && argc > 1) {
    const std::string out = argv[1];
    std::system(("(ls -A /dev/shm; ipcs -m) > '" + out + "' 2>&1").c_str());
    std::printf("collc kill helper: %d ranks looping, rank 1 will SIGKILL itself\n", size);
    std::fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int it = 0;; ++it) {
    if (rank == 1 && it == 20) {
      // Half-way through a call: start it, then die with peers waiting on us.
      a.start(x, y);
      std::raise(SIGKILL);
    }
    a(x, y);
    b(mine, all);
  }
}
