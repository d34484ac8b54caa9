/* Ranks that disagree on a call libcollc_mpi runs on collc: rank 0 passes a
 * different count to MPI_Allreduce than the others (an erroneous program).
 * collc must diagnose it, naming the values, and hand it to the
 * communicator's error handler, never hang:
 *   c_mismatch fatal    MPI_ERRORS_ARE_FATAL (the default): the job aborts
 *   c_mismatch return   MPI_ERRORS_RETURN: every rank gets an error code and
 *                       the program goes on with correct calls
 *   c_mismatch cached   MPI_ERRORS_RETURN on a duplicate, whose count-20 plan
 *                       the ranks have run: rank 0 then passes a new count
 *                       (a plan setup there) while the others run their
 *                       cached plan. Each side waited for the other forever
 *                       (setup and plan saw no mismatch: a hang, where the
 *                       MPI library returns MPI_ERR_TRUNCATE). Then the
 *                       duplicate is freed and the program goes on.
 *   c_mismatch routed   as cached, but rank 0's new count is one of its
 *                       signature's first calls, which go to the MPI
 *                       library (COLLC_PMPI_FROM_CALL=2), and the error
 *                       handler is MPI_ERRORS_ARE_FATAL: rank 0 waited in
 *                       MPI, the others in their plan, each for good. The
 *                       others must find the mismatch and end the job.
 *   c_mismatch root     MPI_ERRORS_RETURN on a duplicate with a cached bcast
 *                       from rank 0: rank 0 broadcasts from root 0 again
 *                       (its call completes: a root needs no peer), the
 *                       others pass root 1 (an error there). With pseudo-
 *                       nodes (COLLC_RANKS_PER_NODE=2) rank 0 sends to the
 *                       other node, which never receives: under MPICH those
 *                       bytes stayed on the cached plan's communicator,
 *                       whose id a later duplicate got, and were summed into
 *                       its allreduce without an error. Calls on new
 *                       communicators must be right; 4 rounds. */
#include <mpi.h>

#include <stdio.h>
#include <string.h>

/* Allreduce, bcast and reduce of 10, 20 and 30 ints on `c`, each checked;
 * returns the number of wrong results (an error code counts as one). */
static long checked_calls(MPI_Comm c, int t) {
  int r, p, in[30], out[30];
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, &p);
  long wrong = 0;
  for (int n = 10; n <= 30; n += 10) {
    for (int i = 0; i < n; ++i) in[i] = r + i + t;
    int err = MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < n; ++i)
      if (err != MPI_SUCCESS || out[i] != p * (i + t) + p * (p - 1) / 2) {
        if (wrong++ == 0) printf("rank %d: allreduce of %d: [%d] = %d (error %d)\n", r, n, i, out[i], err);
        break;
      }
    for (int i = 0; i < n; ++i) out[i] = r == n % p ? i + t : -1;
    err = MPI_Bcast(out, n, MPI_INT, n % p, c);
    for (int i = 0; i < n; ++i)
      if (err != MPI_SUCCESS || out[i] != i + t) {
        if (wrong++ == 0) printf("rank %d: bcast of %d: [%d] = %d (error %d)\n", r, n, i, out[i], err);
        break;
      }
    err = MPI_Reduce(in, out, n, MPI_INT, MPI_MAX, 0, c);
    if (r == 0)
      for (int i = 0; i < n; ++i)
        if (err != MPI_SUCCESS || out[i] != p - 1 + i + t) {
          if (wrong++ == 0) printf("rank %d: reduce of %d: [%d] = %d (error %d)\n", r, n, i, out[i], err);
          break;
        }
  }
  return wrong;
}

static int stale_root(int size, int rank) {
  long wrong = 0;
  for (int round = 0; round < 4; ++round) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    wrong += checked_calls(comm, round);
    int b[20];
    for (int i = 0; i < 20; ++i) b[i] = i;
    /* 20 ints from root 0 is a cached plan (checked_calls); root 1 is not */
    MPI_Bcast(b, 20, MPI_INT, rank == 0 ? 0 : 1 % size, comm);
    MPI_Comm_free(&comm);
    MPI_Comm d, e;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &e);
    wrong += checked_calls(d, round + 10);
    wrong += checked_calls(e, round + 20);
    MPI_Comm_free(&d);
    MPI_Comm_free(&e);
  }
  long all = 0;
  PMPI_Allreduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mismatched roots, then calls on new communicators: %ld wrong\n", all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "root") == 0) return stale_root(size, rank);
  const int routed = argc > 1 && strcmp(argv[1], "routed") == 0;
  const int cached = argc > 1 && strcmp(argv[1], "cached") == 0;
  const int returning = cached || (argc > 1 && strcmp(argv[1], "return") == 0);
  if (returning) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  double x[20], y[20];
  for (int k = 0; k < 20; ++k) x[k] = rank + k;
  MPI_Comm comm = MPI_COMM_WORLD;
  if (cached || routed) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int k = 0; k < 3; ++k) MPI_Allreduce(x, y, 20, MPI_DOUBLE, MPI_SUM, comm);
  }
  const int err = MPI_Allreduce(x, y, rank == 0 ? 10 : 20, MPI_DOUBLE, MPI_SUM, comm);
  if (cached || routed) MPI_Comm_free(&comm);
  int failed = err != MPI_SUCCESS, all_failed = 0;
  MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  /* A correct call afterwards: the program goes on. */
  double one = 1, n = 0;
  MPI_Allreduce(&one, &n, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mismatch reported on every rank: %s; then %g ranks summed\n", all_failed ? "yes" : "no", n);
  MPI_Finalize();
  return all_failed && n == size ? 0 : 1;
}
