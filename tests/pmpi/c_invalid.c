/* Erroneous calls must fail under libcollc_mpi as they fail without it: with
 * MPI_ERRORS_RETURN, each call below returns an error class, which rank 0
 * prints; tests/pmpi/compare.sh requires the same output with and without the
 * library (the library hands such calls to the MPI library, which reports
 * them). Before the fix, a call on MPI_COMM_NULL returned MPI_SUCCESS under
 * the library. */
#include <mpi.h>

#include <stdio.h>

static void report(const char* what, int err) {
  int cls = MPI_SUCCESS;
  if (err != MPI_SUCCESS) MPI_Error_class(err, &cls);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) printf("%s: %s (class %d)\n", what, err == MPI_SUCCESS ? "success" : "error", cls);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double x[4] = {1, 2, 3, 4}, y[4 * 64];
  for (int rep = 0; rep < 2; ++rep) { /* the second time, collc has seen each signature */
    report("allreduce on MPI_COMM_NULL", MPI_Allreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_NULL));
    report("bcast on MPI_COMM_NULL", MPI_Bcast(x, 4, MPI_DOUBLE, 0, MPI_COMM_NULL));
    report("reduce on MPI_COMM_NULL", MPI_Reduce(x, y, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_NULL));
    report("allreduce with MPI_DATATYPE_NULL",
           MPI_Allreduce(x, y, 4, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD));
    report("allreduce with MPI_OP_NULL", MPI_Allreduce(x, y, 4, MPI_DOUBLE, MPI_OP_NULL, MPI_COMM_WORLD));
    report("allreduce with count -1", MPI_Allreduce(x, y, -1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    report("bcast with root = size", MPI_Bcast(x, 4, MPI_DOUBLE, size, MPI_COMM_WORLD));
    report("reduce with root -1", MPI_Reduce(x, y, 4, MPI_DOUBLE, MPI_SUM, -1, MPI_COMM_WORLD));
    report("a correct allreduce", MPI_Allreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  }
  MPI_Finalize();
  return 0;
}
