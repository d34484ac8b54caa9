/* MPI's progress rule under libcollc_mpi: a rank blocked in a collective
 * still advances its other pending operations (MPI 4.0, section 3.7.4), and
 * correct MPI programs rely on it. Two such programs, each a deadlock if a
 * collective's wait only watched shared memory:
 *  - rank 0 starts a send of 1 MiB (above the eager limit: rendezvous, so
 *    the data moves only while rank 0 progresses MPI) to rank 1, then calls
 *    MPI_Allreduce, then waits for the send; rank 1 receives first, then
 *    calls MPI_Allreduce;
 *  - every rank starts MPI_Ibarrier on a duplicate; rank 0 calls
 *    MPI_Allreduce before it waits for the barrier, the others after (a
 *    barrier of more than two ranks has rounds rank 0 sends only while it
 *    progresses MPI).
 * An alarm ends a hung run (the test fails instead of waiting for ctest's
 * timeout). Rank 0 prints every allreduce result for compare.sh.
 *   c_progress [iterations]   (default 40) */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  alarm(60);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iterations = argc > 1 ? atoi(argv[1]) : 40;
  const int n = 1 << 20;
  char* big = calloc(n, 1);
  MPI_Comm other;
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  for (int it = 0; it < iterations; ++it) {
    double x = rank + it, y = 0;
    if (size > 1 && rank == 0) {
      MPI_Request r;
      MPI_Isend(big, n, MPI_CHAR, 1, 5, MPI_COMM_WORLD, &r);
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      if (rank == 1) MPI_Recv(big, n, MPI_CHAR, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("send across allreduce %d: %.1f\n", it, y);
    MPI_Request b;
    MPI_Ibarrier(other, &b);
    if (rank == 0) {
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Wait(&b, MPI_STATUS_IGNORE);
    } else {
      MPI_Wait(&b, MPI_STATUS_IGNORE);
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("ibarrier across allreduce %d: %.1f\n", it, y);
  }
  MPI_Comm_free(&other);
  free(big);
  MPI_Finalize();
  return 0;
}
