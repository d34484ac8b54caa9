// An operator object that is not the plan's Op: the diagnostic names the fix
// (the operator as the second template argument), not "a trailing argument must be ...".
// expect: this operator is not the plan's Op. Name the operator as the second template argument: collc::make_allreduce<double, collc::max>
#include <collc/collc.hpp>

int main() {
  auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 10, collc::max{});
  (void)p;
}
