// Helper of the abort-on-timeout tests: rank 0 calls a plan the others never
// call (or, with the argument "setup", builds a second plan the others never
// build); with COLLC_ON_TIMEOUT=abort and a short COLLC_TIMEOUT it must print
// who waits for whom and abort the job (the tests expect that message). With
// "first-round", the first plan's setup times out and MPI_Finalize follows.
#include <collc/plan.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc > 1 && std::strcmp(argv[1], "first-round") == 0) {
    // COLLC_TIMEOUT far below what the first plan's round takes: a clear
    // error, then MPI_Finalize must not crash on the round left pending.
    try {
      auto q = collc::make_allreduce<double>(MPI_COMM_WORLD, 8);
      std::printf("collc timeout helper: built\n");
    } catch (const collc::error& e) {
      std::printf("collc timeout helper: %s\n", e.what());
    }
    MPI_Finalize();
    return 0;
  }
  auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 100);
  std::vector<double> x(100, 1.0), y(100);
  const bool setup = argc > 1 && std::strcmp(argv[1], "setup") == 0;
  if (rank == 0 && setup) auto q = collc::make_allreduce<double>(MPI_COMM_WORLD, 200);  // times out in setup
  if (rank == 0 && !setup) p(x, y);  // times out in the call, prints, aborts
  MPI_Barrier(MPI_COMM_WORLD);       // the others wait here until the abort ends them
  std::printf("collc timeout helper: not aborted\n");
  MPI_Finalize();
  return 0;
}
