// Tests for include/collc/backend/mpi/registry.hpp: caching on the
// communicator, stamps and failures as node peers see them.
#include "support.hpp"

#include <collc/backend/mpi/registry.hpp>

using collc::mpi::peer_report;
using collc::mpi::registry_for;

TEST_CASE("stamps pack a sequence number and a plan id", "[backend][mpi][registry]") {
  using namespace collc::mpi;
  const std::uint64_t s = pack_stamp(123456789, 42);
  CHECK(stamp_seq(s) == 123456789);
  CHECK(stamp_plan(s) == 42);
  CHECK(stamp_seq(pack_stamp(0, 0xFFFFFF)) == 0);
  // Plan ids are 64-bit; a stamp keeps (and compares) their low 19 bits, so
  // plan 2^24 is not read as plan 0 of another call (was a false mismatch).
  CHECK(stamp_plan(pack_stamp(7, std::int64_t{1} << 24)) == plan_tag(std::int64_t{1} << 24));
  CHECK(stamp_plan(pack_stamp(7, (std::int64_t{1} << 31) + 5)) == plan_tag((std::int64_t{1} << 31) + 5));
  CHECK(stamp_seq(pack_stamp(7, (std::int64_t{1} << 40) + 3)) == 7);
}

TEST_CASE("one registry per communicator while plans hold it", "[backend][mpi][registry]") {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  auto a = registry_for(MPI_COMM_WORLD);
  auto b = registry_for(MPI_COMM_WORLD);
  CHECK(a == b);
  auto c = registry_for(dup);  // duplicates do not inherit it
  CHECK(c != a);
  std::weak_ptr<collc::mpi::registry> w = c;
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
    reg->stamp(5 + collc::mpi::registry_ring, 100 + me);  // same ring slot as 5
    reg->stamp(6, 50);
    if (me == 0) reg->mark_failed(6, collc::errc::timeout, 50, 0);
    MPI_Barrier(comm);
    for (int q = 0; q < P; ++q) {
      const peer_report r5 = reg->look(q, 5);
      CHECK(r5.kind == peer_report::unknown);  // overwritten by call 12
      const peer_report r12 = reg->look(q, 5 + collc::mpi::registry_ring);
      CHECK(r12.kind == peer_report::same_call);
      CHECK(r12.plan_tag == static_cast<std::uint64_t>(100 + q));
      const peer_report r6 = reg->look(q, 6);
      if (q == 0) {
        CHECK(r6.kind == peer_report::failed);
        CHECK(r6.failure == collc::errc::timeout);
        CHECK(r6.origin == 0);
        CHECK(reg->failure_of(q).plan == 50);
      } else {
        CHECK(r6.kind == peer_report::same_call);
        CHECK(r6.plan_tag == 50);
      }
      // A later call not yet stamped: the peer is behind it.
      CHECK(reg->look(q, 5 + 2 * collc::mpi::registry_ring).kind == peer_report::behind);
    }
    MPI_Barrier(comm);
  }
  MPI_Comm_free(&comm);
}
