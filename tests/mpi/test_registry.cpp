// Tests for include/collc/backend/mpi/registry.hpp: caching on the
// communicator, stamps and failures as node peers see them.
#include "support.hpp"

#include <collc/backend/mpi/registry.hpp>

using collc::detail::peer_report;
using collc::detail::registry_for;

TEST_CASE("stamps pack a sequence number and a plan id", "[backend][mpi][registry]") {
  using namespace collc::detail;
  const std::uint64_t s = pack_stamp(123456789, 42);
  CHECK(stamp_seq(s) == 123456789);
  CHECK(stamp_plan(s) == 42);
  CHECK(stamp_seq(pack_stamp(0, 0xFFFFFF)) == 0);
}

TEST_CASE("one registry per communicator while plans hold it", "[backend][mpi][registry]") {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  auto a = registry_for(MPI_COMM_WORLD);
  auto b = registry_for(MPI_COMM_WORLD);
  CHECK(a == b);
  auto c = registry_for(dup);  // duplicates do not inherit it
  CHECK(c != a);
  std::weak_ptr<collc::detail::registry> w = c;
  c.reset();
  CHECK(w.expired());
  auto d = registry_for(dup);  // made again, collectively
  CHECK(d);
  d.reset();
  MPI_Comm_free(&dup);  // the attribute's delete callback frees the cached holder
}

TEST_CASE("peers on the node see stamps and failures", "[backend][mpi][registry]") {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  {
    auto reg = registry_for(comm);
    const int me = collc_test::world_rank(), P = collc_test::world_size();
    reg->stamp(5, me + 1);
    reg->stamp(12, 100 + me);  // same ring slot as 5 (ring of 7)
    reg->stamp(6, 50);
    if (me == 0) reg->mark_failed(6, collc::errc::timeout);
    MPI_Barrier(comm);
    for (int q = 0; q < P; ++q) {
      const peer_report r5 = reg->look(q, 5);
      CHECK(r5.kind == peer_report::unknown);  // overwritten by call 12
      const peer_report r12 = reg->look(q, 12);
      CHECK(r12.kind == peer_report::same_call);
      CHECK(r12.plan_id == 100 + q);
      const peer_report r6 = reg->look(q, 6);
      if (q == 0) {
        CHECK(r6.kind == peer_report::failed);
        CHECK(r6.failure == collc::errc::timeout);
      } else {
        CHECK(r6.kind == peer_report::same_call);
        CHECK(r6.plan_id == 50);
      }
      CHECK(reg->look(q, 13).kind == peer_report::unknown);
    }
    MPI_Barrier(comm);
  }
  MPI_Comm_free(&comm);
}
