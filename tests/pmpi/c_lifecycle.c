/* Communicator and request lifecycles around libcollc_mpi (docs/pmpi.md),
 * found by a probe of the library; each result is checked against PMPI_*,
 * the MPI library's own, and rank 0 prints a digest.
 *
 *   c_lifecycle finalize   An MPI_COMM_SELF attribute set before the first
 *                          collective: its delete callback runs inside
 *                          MPI_Finalize, after the library freed its
 *                          communicator states, and calls collectives on
 *                          MPI_COMM_WORLD and a duplicate (freeing it). The
 *                          library read a freed state there: SIGSEGV.
 *                          Run by compare.sh, with and without the library.
 *   c_lifecycle freed      A persistent allreduce whose communicator the
 *                          program freed (MPI_Comm_free leaves pending
 *                          requests valid), completed by MPI_Wait and by an
 *                          MPI_Test loop while a peer is late. The library's
 *                          waits probed the freed handle: SIGSEGV. Open MPI
 *                          4.1's own persistent request crashes here too, so
 *                          this mode runs with the library only.
 *   c_lifecycle idup       A communicator duplicated with MPI_Comm_idup, and
 *                          collectives on it while that request is pending,
 *                          each rank testing the request a different number
 *                          of times first (MPI lets collectives follow a
 *                          nonblocking one before it completes). The
 *                          library's first plan on it (an MPI_Iallgather and
 *                          an MPI_Comm_idup of its own) then met Open MPI's
 *                          pending context-id rounds in a different order on
 *                          each rank: MPI_ERR_TRUNCATE or a rank killed, 10
 *                          runs of 10. Run by compare.sh.
 *   c_lifecycle alias      Send and receive buffers that overlap without
 *                          MPI_IN_PLACE (erroneous in MPI; Open MPI computes
 *                          MPI_Allreduce(x, x, ...) as if in place, and old
 *                          codes rely on it): allreduce, reduce at the root,
 *                          reduce_scatter_block and allgather, blocking and
 *                          persistent, each checked against PMPI_* on
 *                          separate buffers holding the same input. The
 *                          library aborted the job ("use collc::in_place").
 *                          Run with the library only (MPICH rejects the
 *                          call itself).
 */
#include <mpi.h>

#include "c_persistent_names.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static MPI_Comm dup_comm = MPI_COMM_NULL;
static long mismatches = 0;

/* Five allreduces on `c`, each compared with PMPI_Allreduce on the same input. */
static void check_allreduce(MPI_Comm c, const char* where) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  for (int k = 0; k < 5; ++k) {
    int in[7], out[7], ref[7];
    for (int i = 0; i < 7; ++i) in[i] = r * 10 + i + k;
    MPI_Allreduce(in, out, 7, MPI_INT, MPI_SUM, c);
    PMPI_Allreduce(in, ref, 7, MPI_INT, MPI_SUM, c);
    for (int i = 0; i < 7; ++i)
      if (out[i] != ref[i]) {
        ++mismatches;
        printf("c_lifecycle: %s: element %d is %d, MPI says %d\n", where, i, out[i], ref[i]);
      }
  }
}

static int at_self_delete(MPI_Comm c, int keyval, void* value, void* extra) {
  (void)c, (void)keyval, (void)value, (void)extra;
  int r = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  check_allreduce(MPI_COMM_WORLD, "finalize callback, MPI_COMM_WORLD");
  check_allreduce(dup_comm, "finalize callback, duplicate");
  MPI_Comm_free(&dup_comm);
  if (r == 0) printf("c_lifecycle finalize: callback inside MPI_Finalize done, %ld mismatches\n", mismatches);
  fflush(stdout);
  return MPI_SUCCESS;
}

static int run_finalize(void) {
  int keyval = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_self_delete, &keyval, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL);  /* before the library's own */
  MPI_Comm_dup(MPI_COMM_WORLD, &dup_comm);
  check_allreduce(MPI_COMM_WORLD, "MPI_COMM_WORLD");
  check_allreduce(dup_comm, "duplicate");
  MPI_Finalize();
  return mismatches == 0 ? 0 : 1;
}

static int run_freed(void) {
  int r = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  int in[16], out[16], ref[16];
  MPI_Request q = MPI_REQUEST_NULL;
  Allreduce_init(in, out, 16, MPI_INT, MPI_SUM, c, MPI_INFO_NULL, &q);
  MPI_Comm_free(&c);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 16; ++i) in[i] = r + i * round;
    if (r == p - 1) usleep(50000); /* the others wait, polling */
    MPI_Start(&q);
    if (round % 2 == 0) {
      MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else {
      int done = 0;
      while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    }
    PMPI_Allreduce(in, ref, 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (memcmp(out, ref, sizeof out) != 0) ++mismatches;
  }
  MPI_Request_free(&q);
  long all = 0;
  PMPI_Allreduce(&mismatches, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("c_lifecycle freed: 4 rounds on a freed communicator, %ld wrong results\n", all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}

static int run_idup(void) {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  for (int it = 0; it < 30; ++it) {
    MPI_Comm base = MPI_COMM_NULL, fresh = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &base);
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Comm_idup(base, &fresh, &q);
    int done = 0;
    for (int k = 0; k < (r + it) % 3 && !done; ++k) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    check_allreduce(base, "a communicator whose MPI_Comm_idup is pending");
    int root_value = it;
    MPI_Bcast(&root_value, 1, MPI_INT, it % 2, base);
    if (root_value != it) ++mismatches;
    if (!done) MPI_Wait(&q, MPI_STATUS_IGNORE);
    check_allreduce(fresh, "the duplicate");
    check_allreduce(base, "after the duplication completed");
    MPI_Comm_free(&fresh);
    MPI_Comm_free(&base);
  }
  long all = 0;
  PMPI_Allreduce(&mismatches, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("c_lifecycle idup: 30 communicators with a pending MPI_Comm_idup, %ld wrong results\n", all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}

/* Compares `n` ints with the reference; counts and names a mismatch. */
static void expect_same(const int* got, const int* want, int n, const char* what) {
  for (int i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      ++mismatches;
      printf("c_lifecycle alias: %s: element %d is %d, MPI on separate buffers says %d\n", what, i, got[i], want[i]);
      return;
    }
}

static int run_alias(void) {
  int r = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  enum { N = 24 };
  int* buf = malloc(sizeof(int) * N * (size_t)p);
  int* in = malloc(sizeof(int) * N * (size_t)p);
  int* ref = malloc(sizeof(int) * N * (size_t)p);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < N * p; ++i) in[i] = r * 1000 + i + round;
    /* allreduce(x, x): the same buffer. */
    memcpy(buf, in, sizeof(int) * N);
    MPI_Allreduce(buf, buf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Allreduce(in, ref, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect_same(buf, ref, N, "MPI_Allreduce(x, x)");
    /* allreduce with the receive buffer shifted by 3 elements into the send buffer. */
    memcpy(buf, in, sizeof(int) * N);
    MPI_Allreduce(buf, buf + 3, N - 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    PMPI_Allreduce(in, ref, N - 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    expect_same(buf + 3, ref, N - 3, "MPI_Allreduce(x, x + 3)");
    /* reduce(x, x) at the root, 0 or 1. */
    const int root = round % p;
    memcpy(buf, in, sizeof(int) * N);
    MPI_Reduce(buf, buf, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    PMPI_Reduce(in, ref, N, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    if (r == root) expect_same(buf, ref, N, "MPI_Reduce(x, x)");
    /* reduce_scatter_block(x, x): the block lands on the start of the send buffer. */
    memcpy(buf, in, sizeof(int) * N * (size_t)p);
    MPI_Reduce_scatter_block(buf, buf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Reduce_scatter_block(in, ref, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    expect_same(buf, ref, N, "MPI_Reduce_scatter_block(x, x)");
    /* allgather(x, x): the rank's block is read from the start of the receive buffer. */
    memcpy(buf, in, sizeof(int) * N);
    MPI_Allgather(buf, N, MPI_INT, buf, N, MPI_INT, MPI_COMM_WORLD);
    PMPI_Allgather(in, N, MPI_INT, ref, N, MPI_INT, MPI_COMM_WORLD);
    expect_same(buf, ref, N * p, "MPI_Allgather(x, x)");
    /* A persistent allreduce(x, x), started twice with new data. */
    MPI_Request q = MPI_REQUEST_NULL;
    Allreduce_init(buf, buf, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q);
    for (int k = 0; k < 2; ++k) {
      for (int i = 0; i < N; ++i) buf[i] = in[i] + k;
      for (int i = 0; i < N; ++i) in[N + i] = in[i] + k;
      MPI_Start(&q);
      MPI_Wait(&q, MPI_STATUS_IGNORE);
      PMPI_Allreduce(in + N, ref, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      expect_same(buf, ref, N, "persistent MPI_Allreduce_init(x, x)");
    }
    MPI_Request_free(&q);
  }
  free(buf);
  free(in);
  free(ref);
  long all = 0;
  PMPI_Allreduce(&mismatches, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) printf("c_lifecycle alias: 3 rounds of overlapping buffers, %ld wrong results\n", all);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "finalize") == 0) return run_finalize();
  if (strcmp(mode, "freed") == 0) return run_freed();
  if (strcmp(mode, "idup") == 0) return run_idup();
  if (strcmp(mode, "alias") == 0) return run_alias();
  fprintf(stderr, "c_lifecycle: mode must be finalize, freed, idup or alias, got '%s'\n", mode);
  MPI_Abort(MPI_COMM_WORLD, 2);
  return 2;
}
