// An element type aligned beyond collc's 64-byte buffers: refused at compile
// time (it compiled, and ran with misaligned elements in scratch and staging).
// expect: T's alignment exceeds 64 bytes
#include <collc/collc.hpp>

struct alignas(128) padded {
  double v;
};

int main() {
  auto p = collc::make_bcast<padded>(MPI_COMM_WORLD, 10, 0);
  (void)p;
}
