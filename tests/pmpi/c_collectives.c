/* Every collective libcollc_mpi intercepts, called as an ordinary C MPI
 * program calls them, built against the plain MPI library: tests/pmpi/compare.sh
 * runs it with and without the library preloaded and compares the output.
 * Every result of every rank is hashed; rank 0 prints one line per check with
 * the hash of each rank (MPI_Gather is not intercepted). The data make every
 * reduction exact in any order (small integers, powers of two), so the
 * MPI library's results and collc's must be the same bits.
 *   c_collectives [reps]   (each call repeated reps times, default 3, so
 *                           cached plans run again) */
#include <mpi.h>

#include "c_shared.h"

#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHECKS 65536
static char names[MAX_CHECKS][64];
static uint64_t hashes[MAX_CHECKS];
static int n_checks = 0;
static int world_rank, world_size;

static uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Records a result. `stride` bytes per element, of which the first `used`
 * are hashed (pair types and long double have padding MPI need not write). */
static void record(const char* name, const void* p, size_t n, size_t stride, size_t used) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = fnv(h, (const char*)p + i * stride, used);
  if (n_checks >= MAX_CHECKS) {
    fprintf(stderr, "c_collectives: more than %d checks\n", MAX_CHECKS);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  snprintf(names[n_checks], sizeof names[0], "%s", name);
  hashes[n_checks++] = h;
}

typedef struct {
  int v;
  int i;
} int_int;

/* Adds ints or floats, as its datatype argument says: one operator, two
 * types of one size (a plan built for one must not hand it the other). */
static void add_typed(void* in, void* inout, int* len, MPI_Datatype* type) {
  for (int k = 0; k < *len; ++k)
    if (*type == MPI_FLOAT)
      ((float*)inout)[k] += ((const float*)in)[k];
    else
      ((int*)inout)[k] += ((const int*)in)[k];
}

static void check(int err, const char* what) {
  if (err != MPI_SUCCESS) {
    fprintf(stderr, "c_collectives: %s returned %d on rank %d\n", what, err, world_rank);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

/* Every intercepted call on `comm`, `tag` naming the communicator in the output. */
static void run_all(MPI_Comm comm, const char* tag, int reps) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  char name[64];
  const int counts[] = {1, 7, 1000, 70000};
  for (int rep = 0; rep < reps; ++rep) {
    /* Allreduce of doubles, sum, at sizes across the chunking boundary; in place on odd reps. */
    for (int ci = 0; ci < 4; ++ci) {
      const int n = counts[ci];
      double* x = malloc(sizeof(double) * n);
      double* y = malloc(sizeof(double) * n);
      for (int k = 0; k < n; ++k) x[k] = (double)((rank + 1) * (k % 97) + rep);
      if (rep % 2) {
        check(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
        memcpy(y, x, sizeof(double) * n);
      } else {
        check(MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
      }
      snprintf(name, sizeof name, "%s allreduce double sum n=%d rep %d", tag, n, rep);
      record(name, y, n, sizeof(double), sizeof(double));
      free(x);
      free(y);
    }
    /* Integer types and every integer operator. */
    {
      int64_t a[5], b[5];
      for (int k = 0; k < 5; ++k) a[k] = (int64_t)(rank - 2) * (k + 1) * 1000000007LL;
      check(MPI_Allreduce(a, b, 5, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce int64 sum rep %d", tag, rep);
      record(name, b, 5, 8, 8);
      int i[3] = {rank * 7 - 3, -rank, rank % 2}, j[3];
      const MPI_Op iops[] = {MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_PROD};
      const char* inames[] = {"max", "min", "band", "bor", "bxor", "land", "lor", "lxor", "prod"};
      for (int o = 0; o < 9; ++o) {
        check(MPI_Allreduce(i, j, 3, MPI_INT, iops[o], comm), "MPI_Allreduce");
        snprintf(name, sizeof name, "%s allreduce int %s rep %d", tag, inames[o], rep);
        record(name, j, 3, 4, 4);
      }
      unsigned u[2] = {4000000000u - (unsigned)rank, (unsigned)rank}, v[2];
      check(MPI_Allreduce(u, v, 2, MPI_UNSIGNED, MPI_MIN, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce unsigned min rep %d", tag, rep);
      record(name, v, 2, 4, 4);
      signed char c[4] = {(signed char)(100 + rank), -100, (signed char)rank, 1}, d[4];
      check(MPI_Allreduce(c, d, 4, MPI_SIGNED_CHAR, MPI_SUM, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce schar sum (wraps) rep %d", tag, rep);
      record(name, d, 4, 1, 1);
      uint16_t s[3] = {(uint16_t)(rank & 1), 0, 1}, t[3];
      check(MPI_Allreduce(s, t, 3, MPI_UINT16_T, MPI_LXOR, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce uint16 lxor rep %d", tag, rep);
      record(name, t, 3, 2, 2);
      bool bl[2] = {rank == 1, true}, bm[2];
      check(MPI_Allreduce(bl, bm, 2, MPI_C_BOOL, MPI_LOR, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce bool lor rep %d", tag, rep);
      record(name, bm, 2, 1, 1);
      check(MPI_Allreduce(MPI_IN_PLACE, bl, 2, MPI_C_BOOL, MPI_LAND, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce bool land in place rep %d", tag, rep);
      record(name, bl, 2, 1, 1);
    }
    /* Floating point: float product of powers of two, float max, long double sum, complex. */
    {
      float f[3] = {rank % 2 ? 2.0f : 0.5f, (float)rank, -(float)rank}, g[3];
      check(MPI_Allreduce(f, g, 3, MPI_FLOAT, MPI_PROD, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce float prod rep %d", tag, rep);
      record(name, g, 3, 4, 4);
      check(MPI_Allreduce(f, g, 3, MPI_FLOAT, MPI_MAX, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce float max rep %d", tag, rep);
      record(name, g, 3, 4, 4);
      long double l[2] = {rank + 0.5L, -3.0L * rank}, m[2];
      check(MPI_Allreduce(l, m, 2, MPI_LONG_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
      double md[2] = {(double)m[0], (double)m[1]};
      snprintf(name, sizeof name, "%s allreduce long double sum rep %d", tag, rep);
      record(name, md, 2, 8, 8);
      double complex z[2] = {rank + 1.0 * I, 1.0 + (rank % 2) * I}, w[2];
      check(MPI_Allreduce(z, w, 2, MPI_C_DOUBLE_COMPLEX, MPI_SUM, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce complex sum rep %d", tag, rep);
      record(name, w, 2, 16, 16);
      check(MPI_Allreduce(MPI_IN_PLACE, z + 1, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce complex prod in place rep %d", tag, rep);
      record(name, z + 1, 1, 16, 16);
    }
    /* Pair types with MINLOC / MAXLOC (ties broken by the smaller index). */
    {
      double_int p[3] = {{(double)(rank % 3), rank}, {-(double)rank, rank}, {1.0, size - rank}}, q[3];
      check(MPI_Allreduce(p, q, 3, MPI_DOUBLE_INT, MPI_MAXLOC, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce double_int maxloc rep %d", tag, rep);
      for (int k = 0; k < 3; ++k) record(name, &q[k].v, 1, 8, 8), record(name, &q[k].i, 1, 4, 4);
      int_int r2[2] = {{rank % 2, rank}, {-rank, 7}}, s2[2];
      check(MPI_Allreduce(r2, s2, 2, MPI_2INT, MPI_MINLOC, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce 2int minloc rep %d", tag, rep);
      record(name, s2, 2, 8, 8);
      short_int t2[1] = {{(short)(rank % 2), rank}}, u2[1];
      check(MPI_Allreduce(t2, u2, 1, MPI_SHORT_INT, MPI_MAXLOC, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce short_int maxloc rep %d", tag, rep);
      record(name, &u2[0].v, 1, 2, 2), record(name, &u2[0].i, 1, 4, 4);
    }
    /* User operators: not commutative (rank order matters) on MPI_2INT, and
     * a commutative one created anew for each call and freed. */
    {
      affine a[4], b[4];
      for (int k = 0; k < 4; ++k) a[k] = (affine){2 + rank + k, 3 * rank + k};
      MPI_Op op;
      check(MPI_Op_create(compose, 0, &op), "MPI_Op_create");
      check(MPI_Allreduce(a, b, 4, MPI_2INT, op, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce user op (not commutative) rep %d", tag, rep);
      record(name, b, 4, 8, 8);
      check(MPI_Reduce(a, b, 4, MPI_2INT, op, size - 1, comm), "MPI_Reduce");
      snprintf(name, sizeof name, "%s reduce user op (not commutative) root %d rep %d", tag, size - 1, rep);
      if (rank == size - 1)
        record(name, b, 4, 8, 8);
      else
        record(name, "", 0, 1, 1);
      MPI_Op_free(&op);
      double x[300], y[300];
      for (int k = 0; k < 300; ++k) x[k] = rank * k;
      check(MPI_Op_create(add_doubles, 1, &op), "MPI_Op_create");
      check(MPI_Allreduce(x, y, 300, MPI_DOUBLE, op, comm), "MPI_Allreduce");
      MPI_Op_free(&op);
      snprintf(name, sizeof name, "%s allreduce user op (commutative, new each call) rep %d", tag, rep);
      record(name, y, 300, 8, 8);
      /* One operator on MPI_INT, then MPI_FLOAT, same count: each call's
       * function sees its own datatype. */
      int ia[3] = {rank + 1, 2 * rank, 7}, ib[3];
      float fa[3] = {1.5f * (float)(rank + 1), 0.25f, -2.0f}, fb[3];
      check(MPI_Op_create(add_typed, 1, &op), "MPI_Op_create");
      check(MPI_Allreduce(ia, ib, 3, MPI_INT, op, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce user op on int rep %d", tag, rep);
      record(name, ib, 3, 4, 4);
      check(MPI_Allreduce(fa, fb, 3, MPI_FLOAT, op, comm), "MPI_Allreduce");
      snprintf(name, sizeof name, "%s allreduce user op on float rep %d", tag, rep);
      record(name, fb, 3, 4, 4);
      MPI_Op_free(&op);
    }
    /* Reduce_scatter_block and Reduce_scatter (equal counts on collc, unequal to MPI). */
    {
      const int n = 5;
      double* x = malloc(sizeof(double) * n * size);
      double y[5];
      for (int k = 0; k < n * size; ++k) x[k] = rank * 10 + k;
      check(MPI_Reduce_scatter_block(x, y, n, MPI_DOUBLE, MPI_SUM, comm), "MPI_Reduce_scatter_block");
      snprintf(name, sizeof name, "%s reduce_scatter_block rep %d", tag, rep);
      record(name, y, n, 8, 8);
      check(MPI_Reduce_scatter_block(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, comm), "MPI_Reduce_scatter_block");
      snprintf(name, sizeof name, "%s reduce_scatter_block max in place rep %d", tag, rep);
      record(name, x, n, 8, 8);
      int* rc = malloc(sizeof(int) * size);
      for (int k = 0; k < size; ++k) rc[k] = n;
      for (int k = 0; k < n * size; ++k) x[k] = rank + k;
      check(MPI_Reduce_scatter(x, y, rc, MPI_DOUBLE, MPI_SUM, comm), "MPI_Reduce_scatter");
      snprintf(name, sizeof name, "%s reduce_scatter equal rep %d", tag, rep);
      record(name, y, n, 8, 8);
      for (int k = 0; k < size; ++k) rc[k] = 1 + k % 2;
      check(MPI_Reduce_scatter(x, y, rc, MPI_DOUBLE, MPI_SUM, comm), "MPI_Reduce_scatter");
      snprintf(name, sizeof name, "%s reduce_scatter unequal rep %d", tag, rep);
      record(name, y, rc[rank], 8, 8);
      free(rc);
      free(x);
    }
    /* Allgather: ints, in place, and a contiguous derived type (dense: bytes on collc). */
    {
      int mine[3] = {rank, rank * rank, -rank};
      int* all = malloc(sizeof(int) * 3 * size);
      check(MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm), "MPI_Allgather");
      snprintf(name, sizeof name, "%s allgather int rep %d", tag, rep);
      record(name, all, 3 * size, 4, 4);
      for (int k = 0; k < 3 * size; ++k) all[k] = -1;
      memcpy(all + 3 * rank, mine, sizeof mine);
      check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 3, MPI_INT, comm), "MPI_Allgather");
      snprintf(name, sizeof name, "%s allgather int in place rep %d", tag, rep);
      record(name, all, 3 * size, 4, 4);
      MPI_Datatype three;
      MPI_Type_contiguous(3, MPI_INT, &three);
      MPI_Type_commit(&three);
      check(MPI_Allgather(mine, 1, three, all, 3, MPI_INT, comm), "MPI_Allgather");
      MPI_Type_free(&three);
      snprintf(name, sizeof name, "%s allgather contiguous type rep %d", tag, rep);
      record(name, all, 3 * size, 4, 4);
      free(all);
    }
    /* Bcast from every root, small and large, and a strided type (to MPI). */
    for (int rr = 0; rr < world_size; ++rr) { /* the same number of checks on every rank */
      const int root = rr % size;
      const int sizes[] = {1, 100, 300000};
      for (int si = 0; si < 3; ++si) {
        char* buf = malloc((size_t)sizes[si]);
        for (int k = 0; k < sizes[si]; ++k) buf[k] = (char)(rank == root ? (k * 7 + root + rep) : -1);
        check(MPI_Bcast(buf, sizes[si], MPI_BYTE, root, comm), "MPI_Bcast");
        snprintf(name, sizeof name, "%s bcast %d B root %d rep %d", tag, sizes[si], root, rep);
        record(name, buf, (size_t)sizes[si], 1, 1);
        free(buf);
      }
      double v[10];
      for (int k = 0; k < 10; ++k) v[k] = rank == root ? k + root : -1;
      MPI_Datatype every_other;
      MPI_Type_vector(5, 1, 2, MPI_DOUBLE, &every_other);
      MPI_Type_commit(&every_other);
      check(MPI_Bcast(v, 1, every_other, root, comm), "MPI_Bcast");
      MPI_Type_free(&every_other);
      snprintf(name, sizeof name, "%s bcast vector type root %d rep %d", tag, root, rep);
      record(name, v, 10, 8, 8);
    }
    /* Reduce to every root, in place at the root on odd reps. */
    for (int rr = 0; rr < world_size; ++rr) {
      const int root = rr % size;
      double x[9], y[9];
      for (int k = 0; k < 9; ++k) x[k] = rank * 3 + k, y[k] = -7;
      if (rep % 2 && rank == root)
        check(MPI_Reduce(MPI_IN_PLACE, x, 9, MPI_DOUBLE, MPI_SUM, root, comm), "MPI_Reduce");
      else
        check(MPI_Reduce(x, y, 9, MPI_DOUBLE, MPI_SUM, root, comm), "MPI_Reduce");
      snprintf(name, sizeof name, "%s reduce sum root %d rep %d", tag, root, rep);
      if (rank == root)
        record(name, rep % 2 ? x : y, 9, 8, 8);
      else
        record(name, y, 9, 8, 8); /* untouched at non-roots */
      int m[2] = {rank, -rank}, r[2] = {0, 0};
      check(MPI_Reduce(m, rank == root ? r : NULL, 2, MPI_INT, MPI_MAX, root, comm), "MPI_Reduce");
      snprintf(name, sizeof name, "%s reduce int max root %d rep %d", tag, root, rep);
      record(name, r, 2, 4, 4);
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int reps = argc > 1 ? atoi(argv[1]) : 3;
  run_all(MPI_COMM_WORLD, "world", reps);
  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run_all(dup, "dup", reps);
  MPI_Comm_free(&dup);
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_size - world_rank, &half); /* reversed order */
  run_all(half, "split", reps);
  MPI_Comm_free(&half);
  run_all(MPI_COMM_SELF, "self", reps);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup); /* a second dup after the first was freed */
  run_all(dup, "dup2", 1);
  MPI_Comm_free(&dup);

  uint64_t* all = world_rank == 0 ? malloc(sizeof(uint64_t) * (size_t)n_checks * world_size) : NULL;
  MPI_Gather(hashes, n_checks, MPI_UINT64_T, all, n_checks, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (world_rank == 0) {
    for (int c = 0; c < n_checks; ++c) {
      printf("%s:", names[c]);
      for (int r = 0; r < world_size; ++r) printf(" %016llx", (unsigned long long)all[(size_t)r * n_checks + c]);
      printf("\n");
    }
    free(all);
  }
  MPI_Finalize();
  return 0;
}
