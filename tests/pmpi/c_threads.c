/* MPI_THREAD_MULTIPLE (what mpi4py asks for): two threads per rank, each
 * with its own duplicate of MPI_COMM_WORLD, call collectives at the same time.
 * libcollc_mpi locks its tables, not the plans, so the two streams run
 * concurrently on their own plans. Rank 0 prints a hash of every result of
 * every rank and thread (tests/pmpi/compare.sh compares the output with and
 * without the library).
 *   c_threads [fresh]   (default 0)
 * With `fresh` > 0 each thread then makes `fresh` new duplicates of its
 * communicator, one after the other, and calls one allreduce on each: the
 * two threads set up first plans on new communicators at the same time,
 * over and over (Open MPI 4.1 failed this with MPI_ERR_TRUNCATE in libnbc
 * when collc issued its first round's allgather after MPI_Comm_idup). */
#include <mpi.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { CALLS = 60 };

typedef struct {
  MPI_Comm comm;
  int id;
  int fresh;
  uint64_t hash;
} stream;

static uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static void* run(void* arg) {
  stream* s = (stream*)arg;
  int rank, size;
  MPI_Comm_rank(s->comm, &rank);
  MPI_Comm_size(s->comm, &size);
  s->hash = 1469598103934665603ull;
  double x[512], y[512];
  for (int call = 0; call < CALLS; ++call) {
    const int n = 1 + (call * 37 + s->id * 11) % 512;
    for (int k = 0; k < n; ++k) x[k] = rank * (s->id + 1) + k + call;
    MPI_Allreduce(x, y, n, MPI_DOUBLE, s->id ? MPI_MAX : MPI_SUM, s->comm);
    s->hash = fnv(s->hash, y, sizeof(double) * (size_t)n);
    MPI_Bcast(x, n, MPI_DOUBLE, call % size, s->comm);
    s->hash = fnv(s->hash, x, sizeof(double) * (size_t)n);
  }
  for (int f = 0; f < s->fresh; ++f) {
    MPI_Comm fresh;
    MPI_Comm_dup(s->comm, &fresh);
    const int n = 1 + (f * 13 + s->id * 5) % 64;
    for (int k = 0; k < n; ++k) x[k] = rank * (s->id + 1) + k + f;
    MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, fresh);
    s->hash = fnv(s->hash, y, sizeof(double) * (size_t)n);
    MPI_Comm_free(&fresh);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) printf("MPI_THREAD_MULTIPLE not provided\n");
    MPI_Finalize();
    return 0;
  }
  const int fresh = argc > 1 ? atoi(argv[1]) : 0;
  if (fresh < 0) {
    if (rank == 0) fprintf(stderr, "c_threads: fresh (%s) must be >= 0\n", argv[1]);
    MPI_Finalize();
    return 2;
  }
  stream s[2];
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    MPI_Comm_dup(MPI_COMM_WORLD, &s[i].comm);
    s[i].id = i;
    s[i].fresh = fresh;
  }
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, run, &s[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  uint64_t mine[2] = {s[0].hash, s[1].hash};
  uint64_t* all = rank == 0 ? malloc(sizeof(uint64_t) * 2 * (size_t)size) : NULL;
  MPI_Gather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r)
      printf("rank %d: thread 0 %016llx thread 1 %016llx\n", r, (unsigned long long)all[2 * r],
             (unsigned long long)all[2 * r + 1]);
    free(all);
  }
  for (int i = 0; i < 2; ++i) MPI_Comm_free(&s[i].comm);
  MPI_Finalize();
  return 0;
}
