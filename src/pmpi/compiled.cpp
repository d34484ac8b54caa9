// collc's type-independent parts (src/collc.cpp, what libcollc_compiled
// holds), compiled into libcollc_mpi with every MPI call on its PMPI_* name.
#include "pmpi_names.hpp"

#include "../collc.cpp"
