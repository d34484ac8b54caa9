// Two plan_options: decided by the argument types alone, so refused at compile time.
// expect: at most one schedule, one collc::plan_options and one operator
#include <collc/collc.hpp>

int main() {
  auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, 10, collc::plan_options{}, collc::plan_options{});
  (void)p;
}
