// Tests for include/collc/ir/program.hpp: buffer capacities by collective and
// the per-execution signal count that wait values are relative to.
#include <catch2/catch.hpp>
#include <collc/ir/program.hpp>

using namespace collc;

TEST_CASE("program buffer capacities follow MPI counts", "[ir][program]") {
  ir::program p;
  p.ranks = 4;
  p.count = 3;
  p.coll = collective::reduce_scatter;
  CHECK(p.send_count() == 12);
  CHECK(p.recv_count() == 3);
  p.coll = collective::allgather;
  CHECK(p.send_count() == 3);
  CHECK(p.recv_count() == 12);
  p.coll = collective::bcast;
  CHECK(p.send_count() == 0);
  CHECK(p.recv_count() == 3);
}

TEST_CASE("signals_per_execution counts one flag of one rank", "[ir][program]") {
  ir::program p;
  p.ranks = 2;
  p.flags = 2;
  p.code = {{ir::signal{0}, ir::wait{1, 0, 1}, ir::signal{1}, ir::signal{0}}, {ir::signal{0}}};
  CHECK(p.signals_per_execution(0, 0) == 2);
  CHECK(p.signals_per_execution(0, 1) == 1);
  CHECK(p.signals_per_execution(1, 0) == 1);
  CHECK(p.signals_per_execution(1, 1) == 0);
}
