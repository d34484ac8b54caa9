// A plan called after MPI_Finalize (issue 11) must throw a collc::error that
// says so, not crash; destroying it afterwards must not crash either.
// tests/mpi/extra.cmake runs this under mpiexec and looks for the PASS line of
// every rank (and no "FAIL", no signal).
#include <collc/plan.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failures = 0;
  {
    auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 16);
    auto b = collc::make_bcast<double>(MPI_COMM_WORLD, 16, 0);
    std::vector<double> x(16, 1.0), y(16);
    p(x, y);  // works before
    MPI_Finalize();
    for (int which = 0; which < 2; ++which) {
      const char* name = which == 0 ? "allreduce" : "bcast";
      try {
        if (which == 0)
          p(x, y);
        else
          b(y);
        std::printf("finalize_helper rank %d: FAIL: %s after MPI_Finalize returned without an error\n", rank, name);
        ++failures;
      } catch (const collc::error& e) {
        const std::string what = e.what();
        const bool says = what.find("MPI_Finalize") != std::string::npos || what.find("finalized") != std::string::npos;
        std::printf("finalize_helper rank %d: %s after MPI_Finalize threw: %s%s\n", rank, name, what.c_str(),
                    says ? "" : " (FAIL: does not mention MPI_Finalize / finalized)");
        failures += says ? 0 : 1;
      }
      std::fflush(stdout);
    }
  }  // the plans are destroyed here, after MPI_Finalize
  std::printf("finalize_helper rank %d: plans destroyed after MPI_Finalize without crashing%s\n", rank,
              failures ? "; FAIL" : "; PASS");
  std::fflush(stdout);
  return failures ? 1 : 0;
}
