// Tests for include/collc/backend/mpi/segments.hpp through real plans: a
// later plan reuses the segment range of a freed one (no new window) and
// computes right although the range still holds the old plan's flags (flag
// generations); ranks that free plans in different orders still agree on a
// range (a new window); many plans alive at once each get their own range.
#include "support.hpp"

#include <collc/backend/mpi/registry.hpp>
#include <collc/plan.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

using collc_test::all_ranks;
using collc_test::input;

namespace {

/// Runs `calls` allreduces of `count` int64 on `p` and checks each against
/// the rank-order sum every rank computes on its own. Collective.
bool allreduce_ok(collc::plan<std::int64_t>& p, MPI_Comm comm, std::size_t count, int calls, int salt) {
  int P = 1;
  MPI_Comm_size(comm, &P);
  int me = 0;
  MPI_Comm_rank(comm, &me);
  bool ok = true;
  for (int it = 0; it < calls; ++it) {
    std::vector<std::int64_t> send(count), recv(count, -1), want(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
      send[i] = input<std::int64_t>(me, i, it + salt);
      for (int r = 0; r < P; ++r) want[i] += input<std::int64_t>(r, i, it + salt);
    }
    p(send, recv);
    ok = ok && recv == want;
  }
  return all_ranks(ok, comm);
}

int arenas(MPI_Comm comm) { return collc::mpi::registry_for(comm)->arenas(); }

/// Names in /dev/shm that this process created (segments.ipp names them
/// "collc.<pid>.<nonce>.<n>").
int own_shm_names() {
  const std::string prefix = "collc." + std::to_string(::getpid()) + ".";
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec))
    n += e.path().filename().string().starts_with(prefix) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("a one-rank communicator's plans use private memory, no shared window", "[backend][mpi][segments]") {
  MPI_Comm self = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  {
    auto p = collc::make_allreduce<std::int64_t>(self, 100);
    auto b = collc::make_bcast<std::int64_t>(self, 10, 0);
    CHECK(allreduce_ok(p, self, 100, 5, 7));
    CHECK(arenas(self) >= 1);
    CHECK(collc::mpi::registry_for(self)->windows() == 0);
    // COLLC_RANKS_PER_NODE=1 makes every rank a pseudo-node of one: its
    // plans' pools are private too; the physical node's registry lines stay
    // in the window the communicator's ranks share.
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    {
      auto q = collc::make_allreduce<std::int64_t>(c, 100);
      CHECK(allreduce_ok(q, c, 100, 5, 8));
      CHECK(collc::mpi::registry_for(c)->windows() == (collc_test::world_size() > 1 ? arenas(c) : 0));
    }
    MPI_Comm_free(&c);
  }
  MPI_Comm_free(&self);
}

TEST_CASE("a later plan reuses a freed plan's segment and ignores its flags", "[backend][mpi][segments]") {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  {
    auto keep = collc::make_allreduce<std::int64_t>(c, 7);
    auto a = std::make_unique<collc::plan<std::int64_t>>(collc::make_allreduce<std::int64_t>(c, 100));
    CHECK(allreduce_ok(*a, c, 100, 25, 1));  // a's flags count to 25 executions
    const int before = arenas(c);
    a.reset();
    // Same size: takes a's range; a different schedule signals differently.
    auto b = collc::make_allreduce<std::int64_t>(c, 100, collc::algo::schedule::tree(2));
    CHECK(arenas(c) == before);
    CHECK(allreduce_ok(b, c, 100, 30, 2));
    CHECK(allreduce_ok(keep, c, 7, 3, 3));
  }
  MPI_Comm_free(&c);
}

TEST_CASE("a small ring reuses a range that held data: the words heading its copies start at zero",
          "[backend][mpi][segments]") {
  // A bcast of one element rotates over 32 shm copies, each in a line headed
  // by its execution's flag word (layout.hpp, signal_beside_data). Here it
  // takes the range of an allreduce whose shm held large values, where those
  // words now sit: unless every such word is zeroed, a reader finds a
  // "signal" in the old data and reads its copy before the root wrote it
  // (the root sleeps before each call, so the readers are there first).
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  int P = 1, me = 0;
  MPI_Comm_size(c, &P);
  MPI_Comm_rank(c, &me);
  {
    auto keep = collc::make_allreduce<std::int64_t>(c, 7);
    auto a = std::make_unique<collc::plan<std::int64_t>>(collc::make_allreduce<std::int64_t>(c, 512));
    std::vector<std::int64_t> big(512, std::int64_t{1} << 60), out(512);
    (*a)(big, out);
    CHECK(out[0] == (std::int64_t{1} << 60) * P);
    const int before = arenas(c);
    a.reset();
    auto b = collc::make_bcast<std::int64_t>(c, 1, 0);
    CHECK(arenas(c) == before);  // a's range, or a part of it
    bool ok = true;
    for (int it = 0; it < 40; ++it) {  // more than the ring: every copy's line, then reused
      std::int64_t x = me == 0 ? 1000 + it : -1;
      if (me == 0) usleep(2000);
      b(std::span<std::int64_t>(&x, 1));
      ok = ok && x == 1000 + it;
    }
    CHECK(collc_test::all_ranks(ok, c));
    CHECK(allreduce_ok(keep, c, 7, 3, 3));
  }
  MPI_Comm_free(&c);
}

TEST_CASE("ranks that freed plans in different orders get a new segment", "[backend][mpi][segments]") {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  int me = 0, P = 1;
  MPI_Comm_rank(c, &me);
  MPI_Comm_size(c, &P);
  {
    auto a = std::make_unique<collc::plan<std::int64_t>>(collc::make_allreduce<std::int64_t>(c, 64));
    auto b = std::make_unique<collc::plan<std::int64_t>>(collc::make_allreduce<std::int64_t>(c, 64));
    CHECK(allreduce_ok(*a, c, 64, 4, 4));
    CHECK(allreduce_ok(*b, c, 64, 4, 5));
    const int before = arenas(c);
    // Even ranks free a, odd ranks free b: their views of the free ranges differ.
    (me % 2 == 0 ? a : b).reset();
    auto d = collc::make_allreduce<std::int64_t>(c, 64);
    if (P > 1) {
      CHECK(arenas(c) == before + 1);
    } else {
      CHECK(arenas(c) == before);
    }
    CHECK(allreduce_ok(d, c, 64, 20, 6));
    a.reset();
    b.reset();
    auto e = collc::make_allreduce<std::int64_t>(c, 64);  // both ranges free everywhere again
    CHECK(allreduce_ok(e, c, 64, 20, 7));
    CHECK(allreduce_ok(d, c, 64, 5, 8));
  }
  MPI_Comm_free(&c);
}

TEST_CASE("many plans alive at once share arenas and keep their own ranges", "[backend][mpi][segments]") {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  {
    std::vector<collc::plan<std::int64_t>> plans;
    for (int k = 0; k < 12; ++k)
      plans.push_back(collc::make_allreduce<std::int64_t>(c, 10 + 40 * static_cast<std::size_t>(k)));
    // About 100 KiB of segments per rank (both shm copies of up to 3.6 KiB
    // each): a few 64 KiB arenas, not one window per plan.
    CHECK(arenas(c) <= 4);
    for (int round = 0; round < 3; ++round)
      for (int k = 0; k < 12; ++k)
        CHECK(allreduce_ok(plans[static_cast<std::size_t>(k)], c, 10 + 40 * static_cast<std::size_t>(k), 2,
                           100 * round + k));
  }
  MPI_Comm_free(&c);
}

TEST_CASE("one host: the node's segments are POSIX shared memory, its name gone after the first plan",
          "[backend][mpi][segments]") {
  // On one host the communicator is its own node communicator (no split)
  // and rank 0 creates the first arena ahead, naming it in the allgather of
  // host keys; the first plan's agreement says every rank mapped it, and
  // rank 0 removes the name then (a killed job leaves nothing behind).
  const int P = collc_test::world_size(), me = collc_test::world_rank();
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  {
    auto reg = collc::mpi::registry_for(c);
    // Before any plan: the name is there on rank 0 (so the check below can
    // see one), and nowhere else.
    const int before = own_shm_names();
    CHECK(all_ranks(before == (me == 0 && P > 1 ? 1 : 0)));
    auto p = collc::make_allreduce<std::int64_t>(c, 1000);
    CHECK(all_ranks(own_shm_names() == 0));
    CHECK(allreduce_ok(p, c, 1000, 4, 11));
    CHECK(reg->mpi_windows() == 0);
    CHECK(reg->windows() == (P > 1 ? arenas(c) : 0));
    CHECK_FALSE(reg->shared_memory_failed());
    // A plan that needs a new arena (larger than the first's 64 KiB per
    // rank) maps it with a broadcast name, removed at once.
    auto big = collc::make_allreduce<std::int64_t>(c, std::size_t{1} << 17);
    CHECK(all_ranks(own_shm_names() == 0));
    CHECK(allreduce_ok(big, c, std::size_t{1} << 17, 2, 12));
    CHECK(reg->mpi_windows() == 0);
  }
  MPI_Comm_free(&c);
}
