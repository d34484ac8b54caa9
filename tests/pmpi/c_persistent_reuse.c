/* Persistent collectives that collc takes, freed, then persistent collectives
 * it leaves to the MPI library (a derived datatype with a user operator, a
 * padded pair type on a one-rank communicator, count 0), in turns. MPICH
 * 4.0.2 gives a new persistent collective the object of a freed request and
 * never starts it when that object held a persistent send or receive with
 * peer MPI_PROC_NULL: with libcollc_mpi's stand-ins (persistent receives from
 * MPI_PROC_NULL) freed with their requests, the library's own request hung
 * in MPI_Wait. Rank 0 prints every result (compare.sh diffs the
 * runs with and without the library).
 *   c_persistent_reuse [rounds] */
#include <mpi.h>

#include "c_persistent_names.h"

#include <stdio.h>
#include <stdlib.h>

static void pair_sum(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < 2 * *len; ++i) b[i] += a[i];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rounds = argc > 1 ? atoi(argv[1]) : 4;
  int rank, size, wrong = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm alone; /* one rank: a padded pair type goes to MPI there */
  MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &alone);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  MPI_Op op;
  MPI_Op_create(pair_sum, 1, &op);
  for (int round = 0; round < rounds; ++round) {
    MPI_Request req;
    /* collc's: started twice, then freed (its stand-in with it). */
    double x[10], y[10];
    for (int i = 0; i < 10; ++i) x[i] = rank + i + round;
    Allreduce_init(x, y, 10, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    for (int k = 0; k < 2; ++k) {
      MPI_Start(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&req);
    for (int i = 0; i < 10; ++i) wrong += y[i] != (double)size * (i + round) + size * (size - 1) / 2.0;
    if (rank == 0) printf("round %d collc allreduce y[9]=%g\n", round, y[9]);
    /* The MPI library's: a derived type with a user operator. */
    int a[10], b[10];
    for (int i = 0; i < 10; ++i) a[i] = rank * 100 + i + round;
    Allreduce_init(a, b, 5, pair, op, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    for (int k = 0; k < 2; ++k) {
      MPI_Start(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&req);
    for (int i = 0; i < 10; ++i) wrong += b[i] != 100 * size * (size - 1) / 2 + size * (i + round);
    if (rank == 0) printf("round %d derived allreduce b[9]=%d\n", round, b[9]);
    /* The MPI library's: MPI_LONG_INT (padded) on one rank, and count 0. */
    struct {
      long v;
      int i;
    } p[8];
    for (int i = 0; i < 8; ++i) p[i].v = i + round, p[i].i = rank;
    Bcast_init(p, 8, MPI_LONG_INT, 0, alone, MPI_INFO_NULL, &req);
    MPI_Start(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Request_free(&req);
    for (int i = 0; i < 8; ++i) wrong += p[i].v != i + round || p[i].i != rank;
    Bcast_init(p, 0, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    MPI_Start(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Request_free(&req);
    if (rank == 0) printf("round %d one-rank and empty bcasts done\n", round);
  }
  int any = 0;
  MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("c_persistent_reuse: %d wrong results\n", any);
  MPI_Op_free(&op);
  MPI_Type_free(&pair);
  MPI_Comm_free(&alone);
  MPI_Finalize();
  return any != 0;
}
