// A static factor set with a 0 radix is a compile error.
// expect: collc::factors: radices must not be 0, 1 or -1
#include <collc/factors.hpp>

int main() {
  collc::factors<-4, 0, 4> f;
  return static_cast<int>(f.size());
}
