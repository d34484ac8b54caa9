// Reduce-scatter (negative) radices must precede allgather (positive) ones.
// expect: collc::factors: negative (reduce-scatter) radices must come before positive ones
#include <collc/factors.hpp>

int main() {
  collc::factors<2, -2> f;
  return static_cast<int>(f.size());
}
