// Thread-safety promise (issue 11, docs/mpi_backend.md): under
// MPI_THREAD_MULTIPLE, different plans on different communicators may run
// concurrently from different threads. Two threads, each with its own
// duplicate of MPI_COMM_WORLD and its own plans (an allreduce and a bcast),
// make several hundred calls each at once and check every result exactly.
// Phase 1 builds the plans on the main thread, phase 2 in the threads
// themselves (setup concurrently on two communicators). Own main: the Catch
// main initializes MPI_THREAD_SERIALIZED. Exit 0 and "PASS" on rank 0 when
// every rank passed; skipped (exit 0, "SKIP") without MPI_THREAD_MULTIPLE.
#include <collc/plan.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

struct result {
  long calls = 0, bad = 0;
  std::string first;
};

/// Thread `t`: `calls` calls alternating allreduce and bcast on `comm`.
void work(int t, MPI_Comm comm, collc::plan<std::int64_t>* ar, collc::plan<std::int64_t>* bc, int calls,
          result& out) {
  try {
    int me = 0, P = 1;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &P);
    std::optional<collc::plan<std::int64_t>> own_ar, own_bc;
    if (!ar) {  // phase 2: this thread builds its own plans
      own_ar.emplace(collc::make_allreduce<std::int64_t>(comm, t == 0 ? 3000 : 40));
      own_bc.emplace(collc::make_bcast<std::int64_t>(comm, t == 0 ? 2000 : 5000, P - 1 - t % P));
      ar = &*own_ar;
      bc = &*own_bc;
    }
    const std::size_t na = ar->count(), nb = bc->count();
    std::vector<std::int64_t> x(na), y(na), b(nb);
    for (int it = 0; it < calls; ++it) {
      for (std::size_t i = 0; i < na; ++i) x[i] = (me + 1) * 1000 + static_cast<std::int64_t>(i % 977) + it + 7 * t;
      (*ar)(x, y);
      ++out.calls;
      for (std::size_t i = 0; i < na; ++i) {
        std::int64_t want = 0;
        for (int r = 0; r < P; ++r) want += (r + 1) * 1000 + static_cast<std::int64_t>(i % 977) + it + 7 * t;
        if (y[i] != want) {
          ++out.bad;
          if (out.first.empty())
            out.first = "allreduce call " + std::to_string(it) + " element " + std::to_string(i) + ": " +
                        std::to_string(y[i]) + " != " + std::to_string(want);
          break;
        }
      }
      const int root = bc->root();
      for (std::size_t i = 0; i < nb; ++i)
        b[i] = me == root ? static_cast<std::int64_t>(i) * 3 + it + 11 * t : -1;
      (*bc)(b);
      ++out.calls;
      for (std::size_t i = 0; i < nb; ++i)
        if (b[i] != static_cast<std::int64_t>(i) * 3 + it + 11 * t) {
          ++out.bad;
          if (out.first.empty())
            out.first = "bcast call " + std::to_string(it) + " element " + std::to_string(i) + ": " +
                        std::to_string(b[i]);
          break;
        }
    }
  } catch (const std::exception& e) {
    ++out.bad;
    if (out.first.empty()) out.first = std::string("exception: ") + e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) std::printf("thread_safety: SKIP: MPI_THREAD_MULTIPLE not provided (level %d)\n", provided);
    MPI_Finalize();
    return 0;
  }
  const int calls = 300;
  long bad_total = 0;
  for (int phase = 1; phase <= 2; ++phase) {
    MPI_Comm comm[2];
    MPI_Comm_dup(MPI_COMM_WORLD, &comm[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm[1]);
    result res[2];
    {
      std::optional<collc::plan<std::int64_t>> ar[2], bc[2];
      if (phase == 1)
        for (int t = 0; t < 2; ++t) {
          ar[t].emplace(collc::make_allreduce<std::int64_t>(comm[t], t == 0 ? 3000 : 40));
          bc[t].emplace(collc::make_bcast<std::int64_t>(comm[t], t == 0 ? 2000 : 5000, (t * (P - 1)) % P));
        }
      std::thread th[2];
      for (int t = 0; t < 2; ++t)
        th[t] = std::thread(work, t, comm[t], phase == 1 ? &*ar[t] : nullptr, phase == 1 ? &*bc[t] : nullptr,
                            calls, std::ref(res[t]));
      for (auto& x : th) x.join();
    }
    long v[2] = {res[0].bad + res[1].bad, res[0].calls + res[1].calls};
    for (int t = 0; t < 2; ++t)
      if (!res[t].first.empty())
        std::printf("thread_safety rank %d phase %d thread %d: FAIL: %s\n", rank, phase, t, res[t].first.c_str());
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("thread_safety phase %d (%s): %d ranks, %ld calls, %ld failed\n", phase,
                  phase == 1 ? "plans built on the main thread" : "plans built in the threads", P, v[1], v[0]);
    bad_total += v[0];
    MPI_Comm_free(&comm[0]);
    MPI_Comm_free(&comm[1]);
  }
  if (rank == 0) std::printf("thread_safety: %s\n", bad_total ? "FAIL" : "PASS");
  std::fflush(stdout);
  MPI_Finalize();
  return bad_total ? 1 : 0;
}
