// A user's translation unit: the umbrella header and one plan of each
// collective, compiled by tests/warnings/check.sh with -Wall -Wextra
// -Wpedantic -Werror at -O2 and -O3 (g++ and clang++). Never run.
#include <collc/collc.hpp>

#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    std::vector<double> x(64, 1.0), y(64 * 8);
    auto a = collc::make_allreduce<double>(MPI_COMM_WORLD, 64);
    a(x.data(), y.data());
    auto m = collc::make_allreduce<double, collc::max>(MPI_COMM_WORLD, 64, collc::plan_options{});
    m(collc::in_place, x.data());
    auto r = collc::make_reduce<double>(MPI_COMM_WORLD, 64, 0);
    r(x.data(), y.data());
    auto b = collc::make_bcast<double>(MPI_COMM_WORLD, 64, 0);
    b(collc::in_place, x.data());
    collc::allreduce(MPI_COMM_WORLD, x.data(), y.data(), 64);
    (void)collc::reproducible_sum(MPI_COMM_WORLD, std::span<const double>(x));
  }
  MPI_Finalize();
}
