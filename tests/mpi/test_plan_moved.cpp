// A moved-from plan (issue 11): calling it, starting it or waiting on it
// throws collc::error (errc::invalid_argument, "moved"), never dereferences
// the engine it gave away. In its own executable: before the fix these calls
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
