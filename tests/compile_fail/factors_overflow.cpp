// 65536 * 65536 does not fit in int.
// expect: collc::factors: a product of radices overflows int
#include <collc/factors.hpp>

int main() {
  collc::factors<65536, 65536> f;
  return static_cast<int>(f.size());
}
