// Helper of the abort-on-timeout test: rank 0 calls a plan the others never
// call; with COLLC_ON_TIMEOUT=abort and a short COLLC_TIMEOUT it must print
// who waits for whom and abort the job (the test expects that message).
#include <collc/plan.hpp>

#include <mpi.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 100);
  std::vector<double> x(100, 1.0), y(100);
  if (rank == 0) p(x, y);       // times out, prints, aborts
  MPI_Barrier(MPI_COMM_WORLD);  // the others wait here until the abort ends them
  std::printf("collc timeout helper: not aborted\n");
  MPI_Finalize();
  return 0;
}
