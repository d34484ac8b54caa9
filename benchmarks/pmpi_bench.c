/* A plain MPI program that calls one collective in a loop, built against the
 * MPI library only: benchmarks/pmpi_compare.sh runs it with and without
 * libcollc_mpi preloaded, alternating, and compares the medians
 * (docs/pmpi.md). Time per call is the slowest rank's, the median of --reps
 * repetitions of a timed loop. Control traffic uses MPI_Gather and
 * MPI_Barrier, which the library does not intercept.
 *   pmpi_bench --coll allreduce|reduce_scatter_block|allgather|bcast|reduce
 *              [--min BYTES] [--max BYTES] [--reps N]
 *   pmpi_bench --setup     the first calls on new communicators and of new signatures
 * Output: one line per size, "size_bytes us_per_call". */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The slowest rank's value (on rank 0). */
static double slowest(double t) {
  double* all = rank == 0 ? malloc(sizeof(double) * (size_t)size) : NULL;
  MPI_Gather(&t, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  double m = t;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) m = all[r] > m ? all[r] : m;
    free(all);
  }
  return m;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One call of `coll` with `bytes` per rank (doubles; sum where it reduces). */
static void one_call(const char* coll, double* send, double* recv, int n, int root) {
  if (strcmp(coll, "allreduce") == 0)
    MPI_Allreduce(send, recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  else if (strcmp(coll, "reduce_scatter_block") == 0)
    MPI_Reduce_scatter_block(send, recv, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  else if (strcmp(coll, "allgather") == 0)
    MPI_Allgather(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, MPI_COMM_WORLD);
  else if (strcmp(coll, "bcast") == 0)
    MPI_Bcast(recv, n, MPI_DOUBLE, root, MPI_COMM_WORLD);
  else
    MPI_Reduce(send, recv, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
}

static void sweep(const char* coll, long min, long max, int reps) {
  for (long bytes = min; bytes <= max; bytes = bytes < max && bytes * 8 > max ? max : bytes * 8) {
    const int n = (int)(bytes / 8 > 0 ? bytes / 8 : 1);
    /* send holds P blocks for reduce_scatter_block; recv P blocks for allgather. */
    double* send = malloc(sizeof(double) * (size_t)n * (size_t)size);
    double* recv = malloc(sizeof(double) * (size_t)n * (size_t)size);
    for (long k = 0; k < (long)n * size; ++k) send[k] = (double)(k % 13), recv[k] = 0;
    /* Enough calls for ~20 ms at memory speed; at least 5. */
    long iters = 20000000L / (bytes + 4000);
    iters = iters < 5 ? 5 : iters > 4000 ? 4000 : iters;
    for (int w = 0; w < 20 && w < iters; ++w) one_call(coll, send, recv, n, 0); /* past the plan's setup */
    double t[64];
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (long i = 0; i < iters; ++i) one_call(coll, send, recv, n, 0);
      t[r] = slowest((MPI_Wtime() - t0) / (double)iters);
    }
    if (rank == 0) printf("%ld %.3f\n", bytes, 1e6 * median(t, reps));
    fflush(stdout);
    free(send);
    free(recv);
  }
}

/* Setup: the first 20 calls (8 B allreduce) on 10 freshly duplicated
 * communicators, and one call each of 10 new signatures on MPI_COMM_WORLD. */
static void setup(void) {
  enum { TRIALS = 10, CALLS = 20 };
  double t[TRIALS][CALLS];
  double x = rank, y = 0;
  for (int trial = 0; trial < TRIALS; ++trial) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (int c = 0; c < CALLS; ++c) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, dup);
      t[trial][c] = slowest(MPI_Wtime() - t0);
    }
    MPI_Comm_free(&dup);
  }
  double sig[TRIALS];
  double v[64] = {0}, w[64];
  for (int s = 0; s < TRIALS; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(v, w, 20 + s, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* a count not seen before */
    sig[s] = slowest(MPI_Wtime() - t0);
  }
  if (rank == 0) {
    double col[TRIALS], worst = 0, later[TRIALS * CALLS];
    int nl = 0;
    for (int c = 0; c < CALLS; ++c) {
      for (int trial = 0; trial < TRIALS; ++trial) {
        col[trial] = t[trial][c];
        if (c > 0) later[nl++] = t[trial][c];
      }
      const double m = median(col, TRIALS);
      if (m > worst) worst = m;
    }
    for (int trial = 0; trial < TRIALS; ++trial) col[trial] = t[trial][0];
    printf("first call on a new communicator: median %.1f us\n", 1e6 * median(col, TRIALS));
    printf("slowest of its first %d calls (median over communicators): %.1f us\n", CALLS, 1e6 * worst);
    printf("its calls 2-%d: median %.2f us\n", CALLS, 1e6 * median(later, nl));
    printf("one call of a new signature on MPI_COMM_WORLD: median %.1f us\n", 1e6 * median(sig, TRIALS));
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* coll = "allreduce";
  long min = 8, max = 64L << 20;
  int reps = 5, do_setup = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--coll") == 0 && i + 1 < argc)
      coll = argv[++i];
    else if (strcmp(argv[i], "--min") == 0 && i + 1 < argc)
      min = atol(argv[++i]);
    else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc)
      max = atol(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--setup") == 0)
      do_setup = 1;
    else {
      if (rank == 0) fprintf(stderr, "pmpi_bench: unknown argument '%s'\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  const char* known[] = {"allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce"};
  int ok = 0;
  for (int k = 0; k < 5; ++k) ok |= strcmp(coll, known[k]) == 0;
  if (!ok || min < 8 || max < min || reps < 1 || reps > 64) {
    if (rank == 0)
      fprintf(stderr,
              "pmpi_bench: --coll '%s' must be one of allreduce, reduce_scatter_block, allgather, bcast, reduce; "
              "8 <= --min (%ld) <= --max (%ld); 1 <= --reps (%d) <= 64\n",
              coll, min, max, reps);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (do_setup)
    setup();
  else
    sweep(coll, min, max, reps);
  MPI_Finalize();
  return 0;
}
