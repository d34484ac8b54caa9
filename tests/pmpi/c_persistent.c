/* Persistent collectives (MPI 4.0, section 6.13) as an ordinary C program
 * uses them, built against the plain MPI library: tests/pmpi/compare.sh runs
 * it with and without libcollc_mpi preloaded and compares the output.
 * Each request is started and completed several times, with every
 * completion function, alone and in arrays mixed with point-to-point
 * requests to the neighbours. Every result of every rank is hashed; rank 0
 * prints one line per check with the hash of each rank (MPI_Gather is not
 * intercepted). Data are small integers: exact in any reduction order.
 *   c_persistent [reps]   (starts per request, default 5) */
#include <mpi.h>

#include "c_persistent_names.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHECKS 1024
static char names[MAX_CHECKS][80];
static uint64_t hashes[MAX_CHECKS];
static int n_checks = 0;
static int world_rank, world_size;

static void record(const char* name, const void* p, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ ((const unsigned char*)p)[i]) * 1099511628211ull;
  if (n_checks >= MAX_CHECKS) {
    fprintf(stderr, "c_persistent: more than %d checks\n", MAX_CHECKS);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  snprintf(names[n_checks], sizeof names[0], "%s", name);
  hashes[n_checks++] = h;
}

/* MPI_STATUSES_IGNORE, hidden from GCC, which takes MPICH's (MPI_Status*)1
 * for an array too short (-Wstringop-overflow). */
static MPI_Status* volatile statuses_ignore;

static void check(int err, const char* what) {
  if (err != MPI_SUCCESS) {
    fprintf(stderr, "c_persistent: %s returned %d on rank %d\n", what, err, world_rank);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "c_persistent: rank %d: %s\n", world_rank, what);
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
}

/* MPI_Test until done. */
static void test_loop(MPI_Request* r) {
  int flag = 0;
  while (!flag) check(MPI_Test(r, &flag, MPI_STATUS_IGNORE), "MPI_Test");
}

/* Point-to-point to both neighbours, for mixed arrays: 4 requests in p2p[]. */
static void post_neighbours(MPI_Comm comm, int* out, int* in, int seq, MPI_Request p2p[4]) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  out[0] = rank * 100 + seq, out[1] = -rank - seq;
  check(MPI_Irecv(&in[0], 1, MPI_INT, left, 7, comm, &p2p[0]), "MPI_Irecv");
  check(MPI_Irecv(&in[1], 1, MPI_INT, right, 8, comm, &p2p[1]), "MPI_Irecv");
  check(MPI_Isend(&out[0], 1, MPI_INT, right, 7, comm, &p2p[2]), "MPI_Isend");
  check(MPI_Isend(&out[1], 1, MPI_INT, left, 8, comm, &p2p[3]), "MPI_Isend");
}

/* MPICH 4.0.2's persistent allgather leaves other ranks' blocks of a later
 * start stale; its plain run takes the result from MPI_Allgather instead. */
static void reference_allgather(int conforming, int* mine, int* all, MPI_Comm comm) {
  if (!conforming) check(MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm), "MPI_Allgather");
}

static void run_all(MPI_Comm comm, const char* tag, int reps, int preloaded, int conforming) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  char name[80];
  enum { N = 300, M = 5 };
  double ar_in[N], ar_out[N], ip[N];
  int bc0[64], bc1[1000];
  long rd_in[9], rd_out[9];
  int* ag = malloc(sizeof(int) * 3 * (size_t)size);
  int ag_mine[3];
  double* rs_in = malloc(sizeof(double) * M * (size_t)size);
  double rs_out[M];
  const int root1 = size - 1;
  MPI_Request ar, ar_ip, b0, b1, rd, agr, rsb;

  /* Buffers are bound at creation: every start reads what they hold then. */
  check(Allreduce_init(ar_in, ar_out, N, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &ar), "Allreduce_init");
  check(Allreduce_init(MPI_IN_PLACE, ip, N, MPI_DOUBLE, MPI_MAX, comm, MPI_INFO_NULL, &ar_ip), "Allreduce_init");
  check(Bcast_init(bc0, 64, MPI_INT, 0, comm, MPI_INFO_NULL, &b0), "Bcast_init");
  check(Bcast_init(bc1, 1000, MPI_INT, root1, comm, MPI_INFO_NULL, &b1), "Bcast_init");
  check(Reduce_init(rd_in, rd_out, 9, MPI_LONG, MPI_SUM, 0, comm, MPI_INFO_NULL, &rd), "Reduce_init");
  check(Allgather_init(ag_mine, 3, MPI_INT, ag, 3, MPI_INT, comm, MPI_INFO_NULL, &agr), "Allgather_init");
  check(Reduce_scatter_block_init(rs_in, rs_out, M, MPI_DOUBLE, MPI_SUM, comm, MPI_INFO_NULL, &rsb),
        "Reduce_scatter_block_init");

  for (int rep = 0; rep < reps; ++rep) {
    /* MPI_Wait, and MPI_Request_get_status once done (the request stays active until the wait). */
    for (int k = 0; k < N; ++k) ar_in[k] = (double)((rank + 1) * (k % 31) + rep);
    check(MPI_Start(&ar), "MPI_Start");
    int flag = 0;
    while (!flag) check(MPI_Request_get_status(ar, &flag, MPI_STATUS_IGNORE), "MPI_Request_get_status");
    MPI_Status st;
    check(MPI_Wait(&ar, &st), "MPI_Wait");
    expect(ar != MPI_REQUEST_NULL, "a persistent request stays allocated after MPI_Wait");
    snprintf(name, sizeof name, "%s allreduce wait rep %d", tag, rep);
    record(name, ar_out, sizeof ar_out);
    /* Inactive now: MPI_Wait and MPI_Test return at once, MPI_Request_get_status says complete. */
    check(MPI_Wait(&ar, MPI_STATUS_IGNORE), "MPI_Wait (inactive)");
    check(MPI_Test(&ar, &flag, MPI_STATUS_IGNORE), "MPI_Test (inactive)");
    expect(flag == 1, "MPI_Test on an inactive request sets flag");
    check(MPI_Request_get_status(ar, &flag, MPI_STATUS_IGNORE), "MPI_Request_get_status (inactive)");
    expect(flag == 1, "MPI_Request_get_status on an inactive request sets flag");

    /* In place, MPI_Test loop. */
    for (int k = 0; k < N; ++k) ip[k] = (double)((rank * 7 + k) % 50 - rep);
    check(MPI_Start(&ar_ip), "MPI_Start");
    test_loop(&ar_ip);
    snprintf(name, sizeof name, "%s allreduce in place test rep %d", tag, rep);
    record(name, ip, sizeof ip);

    /* MPI_Waitall: two persistent collectives among point-to-point requests. */
    {
      for (int k = 0; k < 64; ++k) bc0[k] = rank == 0 ? k * 3 + rep : -1;
      for (int k = 0; k < 1000; ++k) bc1[k] = rank == root1 ? k ^ rep : -1;
      int out[2], in[2];
      MPI_Request all[6];
      MPI_Status sts[6];
      post_neighbours(comm, out, in, rep, all);
      all[4] = b0;
      all[5] = b1;
      check(MPI_Start(&all[4]), "MPI_Start");
      check(MPI_Start(&all[5]), "MPI_Start");
      check(MPI_Waitall(6, all, sts), "MPI_Waitall");
      for (int k = 0; k < 4; ++k) expect(all[k] == MPI_REQUEST_NULL, "MPI_Waitall frees point-to-point requests");
      expect(all[4] == b0 && all[5] == b1, "MPI_Waitall keeps persistent requests");
      snprintf(name, sizeof name, "%s bcast root 0 waitall rep %d", tag, rep);
      record(name, bc0, sizeof bc0);
      snprintf(name, sizeof name, "%s bcast root %d waitall rep %d", tag, root1, rep);
      record(name, bc1, sizeof bc1);
      snprintf(name, sizeof name, "%s neighbours waitall rep %d", tag, rep);
      record(name, in, sizeof in);
    }

    /* MPI_Waitany over reduce, allgather, point-to-point and a null request
     * until none is active. Completed persistent requests stay in the array,
     * inactive, and are skipped (MPI 4.0, section 3.7.5), except where the
     * library does not conform (see main): there the array's copy is set to
     * MPI_REQUEST_NULL. */
    {
      for (int k = 0; k < 9; ++k) rd_in[k] = rank * 11 + k - rep, rd_out[k] = -7;
      ag_mine[0] = rank, ag_mine[1] = rank * rank + rep, ag_mine[2] = -rank;
      int out[2], in[2];
      MPI_Request all[7];
      post_neighbours(comm, out, in, rep + 100, all);
      all[4] = rd;
      all[5] = MPI_REQUEST_NULL;
      all[6] = agr;
      check(MPI_Startall(1, &all[4]), "MPI_Startall");
      check(MPI_Start(&all[6]), "MPI_Start");
      int done = 0, seen = 0;
      for (;;) {
        int index;
        MPI_Status s;
        check(MPI_Waitany(7, all, &index, &s), "MPI_Waitany");
        if (index == MPI_UNDEFINED) break;
        expect(index >= 0 && index < 7 && index != 5 && !(seen >> index & 1), "MPI_Waitany index");
        seen |= 1 << index;
        ++done;
        if (index == 4 || index == 6) {
          expect(all[index] == (index == 4 ? rd : agr), "MPI_Waitany keeps persistent requests");
          if (!conforming) all[index] = MPI_REQUEST_NULL;
        }
      }
      expect(done == 6, "MPI_Waitany completes each request once");
      snprintf(name, sizeof name, "%s reduce waitany rep %d", tag, rep);
      record(name, rd_out, sizeof rd_out); /* untouched at other ranks */
      snprintf(name, sizeof name, "%s allgather waitany rep %d", tag, rep);
      reference_allgather(conforming, ag_mine, ag, comm);
      record(name, ag, sizeof(int) * 3 * (size_t)size);
      snprintf(name, sizeof name, "%s neighbours waitany rep %d", tag, rep);
      record(name, in, sizeof in);
    }

    /* MPI_Startall of all seven, completed by MPI_Testsome loops (with point-to-point). */
    {
      for (int k = 0; k < N; ++k) ar_in[k] = (double)(rank - k % 5 + rep);
      for (int k = 0; k < N; ++k) ip[k] = (double)((rank + k) % 9);
      for (int k = 0; k < 64; ++k) bc0[k] = rank == 0 ? 1000 + k + rep : 0;
      for (int k = 0; k < 1000; ++k) bc1[k] = rank == root1 ? 5 * k - rep : 0;
      for (int k = 0; k < 9; ++k) rd_in[k] = (long)(rank - 4) * k + rep, rd_out[k] = 0;
      ag_mine[0] = 2 * rank + rep, ag_mine[1] = rep, ag_mine[2] = rank;
      for (int k = 0; k < M * size; ++k) rs_in[k] = rank * 10 + k + rep;
      int out[2], in[2];
      MPI_Request all[11] = {ar, ar_ip, b0, b1, rd, agr, rsb};
      check(MPI_Startall(7, all), "MPI_Startall");
      post_neighbours(comm, out, in, rep + 200, all + 7);
      int done = 0;
      while (done < 11) {
        int outcount, idx[11];
        MPI_Status sts[11];
        check(MPI_Testsome(11, all, &outcount, idx, sts), "MPI_Testsome");
        expect(outcount != MPI_UNDEFINED, "MPI_Testsome finds active requests");
        for (int j = 0; j < outcount; ++j) {
          expect(idx[j] >= 0 && idx[j] < 11, "MPI_Testsome index");
          expect(idx[j] >= 7 || all[idx[j]] != MPI_REQUEST_NULL, "MPI_Testsome keeps persistent requests");
          if (!conforming && idx[j] < 7) all[idx[j]] = MPI_REQUEST_NULL;
        }
        done += outcount;
      }
      int outcount, idx[11];
      check(MPI_Testsome(11, all, &outcount, idx, statuses_ignore), "MPI_Testsome (none active)");
      expect(outcount == MPI_UNDEFINED, "MPI_Testsome outcount MPI_UNDEFINED with no active request");
      snprintf(name, sizeof name, "%s startall testsome rep %d", tag, rep);
      record(name, ar_out, sizeof ar_out);
      record(name, ip, sizeof ip);
      record(name, bc0, sizeof bc0);
      record(name, bc1, sizeof bc1);
      record(name, rd_out, sizeof rd_out);
      reference_allgather(conforming, ag_mine, ag, comm);
      record(name, ag, sizeof(int) * 3 * (size_t)size);
      record(name, rs_out, sizeof rs_out);
      record(name, in, sizeof in);
    }

    /* Progress across the two kinds (legal MPI): even ranks wait for the
     * collective before their large receive, odd ranks for their large send
     * before the collective, so each side's wait must progress the other kind. */
    {
      enum { BIG = 1 << 18 };
      int* big = malloc(sizeof(int) * BIG);
      const int partner = rank ^ 1;
      MPI_Request p2p = MPI_REQUEST_NULL;
      for (int k = 0; k < BIG; ++k) big[k] = rank % 2 ? k - rep : -1;
      for (int k = 0; k < N; ++k) ar_in[k] = (double)(rank * 3 - k % 7 + rep);
      if (partner < size && rank % 2 == 0) check(MPI_Irecv(big, BIG, MPI_INT, partner, 9, comm, &p2p), "MPI_Irecv");
      if (partner < size && rank % 2 == 1) check(MPI_Isend(big, BIG, MPI_INT, partner, 9, comm, &p2p), "MPI_Isend");
      check(MPI_Start(&ar), "MPI_Start");
      if (rank % 2 == 0) check(MPI_Wait(&ar, MPI_STATUS_IGNORE), "MPI_Wait");
      check(MPI_Wait(&p2p, MPI_STATUS_IGNORE), "MPI_Wait");
      if (rank % 2 == 1) check(MPI_Wait(&ar, MPI_STATUS_IGNORE), "MPI_Wait");
      snprintf(name, sizeof name, "%s allreduce against a large message rep %d", tag, rep);
      record(name, ar_out, sizeof ar_out);
      record(name, big, sizeof(int) * BIG);
      free(big);
    }

    /* MPI_Testall and MPI_Waitsome on persistent requests alone; a Testany loop. */
    {
      for (int k = 0; k < M * size; ++k) rs_in[k] = (rank + 1) * k - rep;
      for (int k = 0; k < N; ++k) ip[k] = (double)(rank * k % 13 + rep);
      MPI_Request two[2] = {rsb, ar_ip};
      check(MPI_Startall(2, two), "MPI_Startall");
      int flag = 0;
      MPI_Status sts[2];
      if (conforming)
        while (!flag) check(MPI_Testall(2, two, &flag, sts), "MPI_Testall");
      else
        check(MPI_Waitall(2, two, sts), "MPI_Waitall");
      snprintf(name, sizeof name, "%s reduce_scatter_block testall rep %d", tag, rep);
      record(name, rs_out, sizeof rs_out);
      record(name, ip, sizeof ip);

      for (int k = 0; k < 64; ++k) bc0[k] = rank == 0 ? 7 * k + rep : 1;
      check(MPI_Start(&b0), "MPI_Start");
      check(MPI_Start(&rd), "MPI_Start");
      MPI_Request pair[2] = {b0, rd};
      int left = 2;
      while (left > 0) {
        int outcount, idx[2];
        check(MPI_Waitsome(2, pair, &outcount, idx, statuses_ignore), "MPI_Waitsome");
        expect(outcount >= 1, "MPI_Waitsome completes one at least");
        if (!conforming)
          for (int j = 0; j < outcount; ++j) pair[idx[j]] = MPI_REQUEST_NULL;
        left -= outcount;
      }
      int outcount, idx[2];
      check(MPI_Waitsome(2, pair, &outcount, idx, statuses_ignore), "MPI_Waitsome (none active)");
      expect(outcount == MPI_UNDEFINED, "MPI_Waitsome outcount MPI_UNDEFINED with no active request");
      snprintf(name, sizeof name, "%s bcast waitsome rep %d", tag, rep);
      record(name, bc0, sizeof bc0);
      record(name, rd_out, sizeof rd_out);

      check(MPI_Start(&agr), "MPI_Start");
      MPI_Request one[2] = {MPI_REQUEST_NULL, agr};
      int index = -1;
      flag = 0;
      while (!flag) check(MPI_Testany(2, one, &index, &flag, MPI_STATUS_IGNORE), "MPI_Testany");
      expect(index == 1, "MPI_Testany index");
      if (!conforming) one[1] = MPI_REQUEST_NULL;
      check(MPI_Testany(2, one, &index, &flag, MPI_STATUS_IGNORE), "MPI_Testany (none active)");
      expect(flag == 1 && index == MPI_UNDEFINED, "MPI_Testany with no active request");
      check(MPI_Waitany(2, one, &index, MPI_STATUS_IGNORE), "MPI_Waitany (none active)");
      expect(index == MPI_UNDEFINED, "MPI_Waitany with no active request");
      snprintf(name, sizeof name, "%s allgather testany rep %d", tag, rep);
      reference_allgather(conforming, ag_mine, ag, comm);
      record(name, ag, sizeof(int) * 3 * (size_t)size);
    }
  }

  /* MPI_Cancel on a persistent collective: erroneous in MPI (section 6.12);
   * libcollc_mpi refuses it with an error code. Plain MPI libraries differ,
   * so only checked when preloaded; nothing printed to stdout either way. */
  if (preloaded) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    expect(MPI_Cancel(&ar) != MPI_SUCCESS, "MPI_Cancel on a persistent collective returns an error");
    /* Freeing or starting an active one is erroneous too: refused, the request intact. */
    check(MPI_Start(&ar), "MPI_Start");
    expect(MPI_Start(&ar) != MPI_SUCCESS, "MPI_Start on an active persistent collective returns an error");
    expect(MPI_Request_free(&ar) != MPI_SUCCESS && ar != MPI_REQUEST_NULL,
           "MPI_Request_free on an active persistent collective returns an error");
    check(MPI_Wait(&ar, MPI_STATUS_IGNORE), "MPI_Wait");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
  }

  MPI_Request* reqs[] = {&ar, &ar_ip, &b0, &b1, &rd, &agr, &rsb};
  for (int k = 0; k < 7; ++k) {
    check(MPI_Request_free(reqs[k]), "MPI_Request_free");
    expect(*reqs[k] == MPI_REQUEST_NULL, "MPI_Request_free sets MPI_REQUEST_NULL");
  }
  free(ag);
  free(rs_in);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  statuses_ignore = MPI_STATUSES_IGNORE;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const int reps = argc > 1 ? atoi(argv[1]) : 5;
  const char* pre = getenv("LD_PRELOAD");
  const int preloaded = pre != NULL && strstr(pre, "collc_mpi") != NULL;
  /* MPICH 4.0.2's own persistent collectives break three rules: MPI_Waitany,
   * MPI_Testany and MPI_Testsome report an inactive one again (MPI 4.0,
   * section 3.7.5: they skip inactive requests), MPI_Testall on pending ones
   * fails with MPI_ERR_PENDING, and allgather reads stale blocks. Its plain
   * run leaves completed requests out of the arrays, waits with MPI_Waitall
   * instead of MPI_Testall and takes allgather results from MPI_Allgather. */
#if defined(MPICH_VERSION)
  const int conforming = preloaded;
#else
  const int conforming = 1;
#endif
  run_all(MPI_COMM_WORLD, "world", reps, preloaded, conforming);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run_all(dup, "dup", reps, preloaded, conforming);
  MPI_Comm_free(&dup);
  run_all(MPI_COMM_SELF, "self", 2, preloaded, conforming);

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
