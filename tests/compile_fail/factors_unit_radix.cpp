// A radix of 1 is a compile error too, also when the set is only converted.
// expect: collc::factors: radices must not be 0, 1 or -1
#include <collc/factors.hpp>

int main() {
  collc::factor_set s = collc::factors<2, 1, 4>{};
  return static_cast<int>(s.size());
}
