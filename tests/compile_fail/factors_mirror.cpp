// The allgather tail must mirror the reduce-scatter head: {-4,-2,...,2,4}, not {...,4,2}.
// expect: collc::factors: the allgather tail must mirror the reduce-scatter head in reverse
#include <collc/factors.hpp>

int main() {
  collc::factors<-4, -2, 4, 2> f;
  return static_cast<int>(f.size());
}
