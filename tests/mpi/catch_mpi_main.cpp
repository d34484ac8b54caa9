// Catch2 main for MPI tests: every rank runs every test case; failures are
// combined across ranks so the exit status (and rank 0's summary) reflects
// a failure on any rank. Ranks other than 0 print only when they fail.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) {
    MPI_Finalize();
    return rc;
  }
  if (rank != 0) session.configData().showSuccessfulTests = false;
  int failed = session.run();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("collc mpi test: %d rank(s), %s\n", size, any_failed ? "FAILED on some rank" : "passed on all ranks");
  }
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
