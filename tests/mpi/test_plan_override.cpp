// Expert overrides reach plans built with the default selection:
// COLLC_ALGO / COLLC_FACTORS (set alike on every rank, like MPICH CVARs)
// replace the default schedule, an explicit schedule argument wins over
// them, and an invalid override is a clear error naming the value.
#include <catch2/catch.hpp>
#include <collc/plan.hpp>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

namespace {

struct scoped_env {
  std::string name;
  scoped_env(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~scoped_env() { unsetenv(name.c_str()); }
};

int comm_size() {
  int p = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

}  // namespace

TEST_CASE("COLLC_ALGO selects the schedule of default plans", "[backend][mpi][override]") {
  const int P = comm_size();
  if (P < 2) return;  // one rank: every schedule lowers to a copy
  scoped_env e("COLLC_ALGO", "ring");
  auto p = collc::make_allreduce<long long>(MPI_COMM_WORLD, 10);
  CHECK(p.schedule().to_string() == "ring");
  std::vector<long long> x(10, 1), y(10, 0);
  p(x, y);
  CHECK(y == std::vector<long long>(10, P));
  // An explicit schedule argument wins over the environment.
  auto q = collc::make_allreduce<long long>(MPI_COMM_WORLD, 10, collc::algo::schedule::copy_in());
  CHECK(q.schedule().to_string() == "copyin");
}

TEST_CASE("COLLC_FACTORS selects the factor set of default plans", "[backend][mpi][override]") {
  const int P = comm_size();
  if (P < 2) return;
  const std::string fs = std::to_string(-P) + "," + std::to_string(P);
  scoped_env e("COLLC_FACTORS", fs.c_str());
  auto p = collc::make_allreduce<long long>(MPI_COMM_WORLD, 7);
  CHECK(p.schedule().to_string() == "recexch{" + fs + "}");
  std::vector<long long> x(7), y(7, 0);
  std::iota(x.begin(), x.end(), 1);
  p(x, y);
  for (int i = 0; i < 7; ++i) CHECK(y[static_cast<std::size_t>(i)] == static_cast<long long>(P) * (i + 1));
}

TEST_CASE("an invalid override is refused with the bad value named", "[backend][mpi][override][errors]") {
  const int P = comm_size();
  scoped_env e("COLLC_FACTORS", "2,x");
  try {
    auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 4);
    (void)p;
    FAIL("expected an error for COLLC_FACTORS=2,x");
  } catch (const collc::error& err) {
    CHECK_THAT(err.what(), Catch::Contains("COLLC_FACTORS"));
  }
  (void)P;
}
