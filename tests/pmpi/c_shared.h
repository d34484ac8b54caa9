/* Element types and user operators that the C tests of libcollc_mpi share
 * (c_collectives.c, c_random.c). */
#ifndef COLLC_TESTS_PMPI_C_SHARED_H
#define COLLC_TESTS_PMPI_C_SHARED_H

#include <mpi.h>

typedef struct {
  double v;
  int i;
} double_int; /* MPI_DOUBLE_INT */
typedef struct {
  short v;
  int i;
} short_int; /* MPI_SHORT_INT: padding between the fields, which MPI need not write */
typedef struct {
  int m, c;
} affine; /* x -> m x + c (mod MOD): composition is not commutative */

enum { MOD = 1000003 };

/* invec op inoutvec: apply invec's map (the lower rank) first, then inoutvec's. */
static void compose(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const affine* a = (const affine*)in;
  affine* b = (affine*)inout;
  for (int k = 0; k < *len; ++k) {
    const long long m = (long long)a[k].m * b[k].m % MOD;
    const long long c = ((long long)b[k].m * a[k].c + b[k].c) % MOD;
    b[k].m = (int)m;
    b[k].c = (int)c;
  }
}

static void add_doubles(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int k = 0; k < *len; ++k) ((double*)inout)[k] += ((const double*)in)[k];
}

#endif
