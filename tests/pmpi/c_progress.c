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
 *    progresses MPI);
 *  - three persistent allreduces (two on MPI_COMM_WORLD, one on the
 *    duplicate) started in the same order everywhere and completed in an
 *    order of each rank's own (MPI 4.0, sections 6.12-6.13 allow any), rank
 *    0 calling a blocking MPI_Allreduce before its waits: each rank waits
 *    for a request its peers complete only while they wait for another;
 *  - one persistent allreduce started everywhere; rank 0 waits for a
 *    message rank 1 sends only after its own wait for the allreduce, then
 *    waits for the allreduce (MPI_Wait on MPI's own request, and
 *    MPI_Waitall on MPI's own requests, while a collc request is started).
 * An alarm ends a hung run (the test fails instead of waiting for ctest's
 * timeout). Rank 0 prints every allreduce result for compare.sh.
 *   c_progress [iterations]   (default 40) */
#include <mpi.h>

#include "c_persistent_names.h"

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
  enum { m = 70000 };  /* 560 KB: above the 256 KiB chunk, so a call takes several rounds */
  static double in[3][m], out[3][m];
  MPI_Request p[3];
  Allreduce_init(in[0], out[0], m, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p[0]);
  Allreduce_init(in[1], out[1], m, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &p[1]);
  Allreduce_init(in[2], out[2], m, MPI_DOUBLE, MPI_SUM, other, MPI_INFO_NULL, &p[2]);
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
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < m; ++i) in[k][i] = (k + 1) * rank + it + i;
    for (int k = 0; k < 3; ++k) MPI_Start(&p[k]);
    if (rank == 0) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < 3; ++j) {
      const int k = rank % 2 == 1 ? (rank + it + 2 - j) % 3 : (rank + it + j) % 3;  // odd ranks: reversed
      MPI_Wait(&p[k], MPI_STATUS_IGNORE);
    }
    if (rank != 0) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < m; ++i) {
      const double sum = size * (size - 1) / 2.0 + (double)size * (it + i);
      const double want[3] = {sum, 2.0 * (size - 1) + it + i, 3.0 * size * (size - 1) / 2.0 + (double)size * (it + i)};
      for (int k = 0; k < 3; ++k)
        if (out[k][i] != want[k]) {
          fprintf(stderr, "rank %d: persistent allreduce %d, iteration %d, element %d: %.1f, expected %.1f\n", rank,
                  k, it, i, out[k][i], want[k]);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    if (rank == 0)
      printf("persistent completed in any order %d: %.1f %.1f %.1f %.1f %.1f\n", it, out[0][0], out[0][m - 1],
             out[1][7], out[2][m / 2], y);
  }
  for (int it = 0; it < iterations; ++it) {
    for (int i = 0; i < m; ++i) in[0][i] = rank + it + i;
    MPI_Start(&p[0]);
    double note = -1;
    if (size > 1 && rank == 0) {
      MPI_Request r[2];
      MPI_Irecv(&note, 1, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD, &r[0]);
      if (it % 2 == 0) {
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
      } else {
        MPI_Ibarrier(other, &r[1]);  /* the others enter it after their message */
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
      }
      MPI_Wait(&p[0], MPI_STATUS_IGNORE);
    } else {
      MPI_Wait(&p[0], MPI_STATUS_IGNORE);
      if (rank == 1) {
        note = out[0][m - 1];
        MPI_Send(&note, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
      }
      if (it % 2 == 1) { /* nonblocking: a blocking barrier does not match MPI_Ibarrier */
        MPI_Request b;
        MPI_Ibarrier(other, &b);
        MPI_Wait(&b, MPI_STATUS_IGNORE);
      }
    }
    if (rank == 0) printf("mpi request across persistent %d: %.1f %.1f\n", it, out[0][0], note);
  }
  for (int k = 0; k < 3; ++k) MPI_Request_free(&p[k]);
  MPI_Comm_free(&other);
  free(big);
  MPI_Finalize();
  return 0;
}
