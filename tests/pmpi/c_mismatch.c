/* Ranks that disagree on a call libcollc_mpi runs on collc: rank 0 passes a
 * different count to MPI_Allreduce than the others (an erroneous program).
 * collc must diagnose it, naming the values, and hand it to the
 * communicator's error handler, never hang:
 *   c_mismatch fatal    MPI_ERRORS_ARE_FATAL (the default): the job aborts
 *   c_mismatch return   MPI_ERRORS_RETURN: every rank gets an error code and
 *                       the program goes on with correct calls */
#include <mpi.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int returning = argc > 1 && strcmp(argv[1], "return") == 0;
  if (returning) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  double x[20], y[20];
  for (int k = 0; k < 20; ++k) x[k] = rank + k;
  const int err = MPI_Allreduce(x, y, rank == 0 ? 10 : 20, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int failed = err != MPI_SUCCESS, all_failed = 0;
  MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  /* A correct call afterwards: the program goes on. */
  double one = 1, n = 0;
  MPI_Allreduce(&one, &n, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mismatch reported on every rank: %s; then %g ranks summed\n", all_failed ? "yes" : "no", n);
  MPI_Finalize();
  return all_failed && n == size ? 0 : 1;
}
