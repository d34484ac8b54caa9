// Compiles against collc::kokkos: Kokkos headers resolve through the repaired
// Kokkos::kokkos target (Debian's config points at a missing directory).
#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  { Kokkos::View<double*> v("v", 4); }
  Kokkos::finalize();
  return 0;
}
