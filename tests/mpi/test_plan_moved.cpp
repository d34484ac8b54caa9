// A moved-from plan (issue 11): calling it, starting it, waiting on it or
// asking it what it was built as throws collc::error (errc::invalid_argument,
// "moved"), never dereferences the engine it gave away. In its own executable: before the fix these calls
// crash the process, which would hide every other test of a shared one.
#include "support.hpp"

#include <collc/plan.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

using collc::errc;
using namespace collc_test;

namespace {

void check_moved(const std::optional<std::pair<errc, std::string>>& e, const char* what) {
  INFO(what << ": " << (e ? e->second : std::string("no error")));
  CHECK(e.has_value());
  if (e) {
    CHECK(e->first == errc::invalid_argument);
    CHECK(contains(e->second, "moved"));
  }
}

}  // namespace

TEST_CASE("a moved-from plan throws instead of crashing", "[backend][mpi][safety][moved]") {
  const int P = world_size();
  auto p = collc::make_allreduce<std::int64_t>(MPI_COMM_WORLD, 8);
  std::vector<std::int64_t> x(8, 1), y(8, -1);
  auto q = std::move(p);  // NOLINT(bugprone-use-after-move): the point of the test
  check_moved(error_of([&] { p(x, y); }), "p(x, y)");
  check_moved(error_of([&] { p(x.data(), y.data()); }), "p(x.data(), y.data())");
  check_moved(error_of([&] { p(collc::in_place, y); }), "p(in_place, y)");
  check_moved(error_of([&] { p.start(x, y); }), "p.start(x, y)");
  check_moved(error_of([&] { p.wait(); }), "p.wait()");
  check_moved(error_of([&] { (void)p.test(); }), "p.test()");
  // The plan it moved to works.
  q(x, y);
  CHECK(y[7] == P);
  // Move assignment leaves the source moved-from too.
  auto r = collc::make_bcast<std::int64_t>(MPI_COMM_WORLD, 8, 0);
  r = std::move(q);  // r's bcast plan is destroyed (collectively, on every rank alike)
  check_moved(error_of([&] { q(x, y); }), "q(x, y) after r = std::move(q)");
  r(x, y);
  CHECK(y[0] == P);
}

TEST_CASE("a moved-from plan's accessors throw, naming the accessor", "[backend][mpi][safety][moved]") {
  auto p = collc::make_reduce<std::int64_t>(MPI_COMM_WORLD, 8, 0);
  auto q = std::move(p);  // NOLINT(bugprone-use-after-move): the point of the test
  // Before, each of these read the engine through a null pointer (kind() and
  // send_count() crashed the process).
  const auto accessor = [&](const char* name, auto&& get) {
    const auto e = error_of([&] { (void)get(); });
    check_moved(e, name);
    if (e) CHECK(contains(e->second, name));
  };
  accessor("kind()", [&] { return p.kind(); });
  accessor("count()", [&] { return p.count(); });
  accessor("root()", [&] { return p.root(); });
  accessor("ranks()", [&] { return p.ranks(); });
  accessor("send_count()", [&] { return p.send_count(); });
  accessor("recv_count()", [&] { return p.recv_count(); });
  accessor("in_place_count()", [&] { return p.in_place_count(); });
  accessor("schedule()", [&] { return p.schedule(); });
  accessor("schedule_name()", [&] { return p.schedule_name(); });
  accessor("name()", [&] { return p.name(); });
  accessor("chunk_elements()", [&] { return p.chunk_elements(); });
  accessor("executions_per_call()", [&] { return p.executions_per_call(); });
  accessor("programs()", [&] { return p.programs().size(); });
  accessor("program_rank()", [&] { return p.program_rank(); });
  accessor("uses_messages()", [&] { return p.uses_messages(); });
  accessor("shm_bytes_per_rank()", [&] { return p.shm_bytes_per_rank(); });
  accessor("scratch_bytes_per_rank()", [&] { return p.scratch_bytes_per_rank(); });
  accessor("stage_bytes_per_rank()", [&] { return p.stage_bytes_per_rank(); });
  accessor("comm_of_program()", [&] { return p.comm_of_program().size(); });
  accessor("node_of_program()", [&] { return p.node_of_program().size(); });
  // The plan it moved to answers.
  CHECK(q.kind() == collc::collective::reduce);
  CHECK(q.count() == 8);
  CHECK(q.ranks() == world_size());
}
