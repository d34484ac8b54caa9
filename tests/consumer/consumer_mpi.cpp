// Compiles against collc::mpi (header-only) or collc::compiled through the
// umbrella header, as the README shows, and builds and runs one plan.
#include <collc/collc.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  {
    int P = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    std::vector<double> x(16, 1.0), y(16);
    auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, x.size());
    p(x.data(), y.data());
    if (y[0] != P) {
      std::fprintf(stderr, "consumer: allreduce gave %g, expected %d\n", y[0], P);
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
