// A plan's element type must be trivially copyable: ranks copy raw bytes.
// expect: T must be trivially copyable
#include <collc/plan.hpp>

#include <string>

int main() {
  auto p = collc::make_allreduce<std::string>(MPI_COMM_WORLD, 1);
  (void)p;
}
