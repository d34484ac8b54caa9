// Compiles against collc::mpi (links MPI through the imported target).
#include <collc/plan.hpp>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Finalize();
  return 0;
}
