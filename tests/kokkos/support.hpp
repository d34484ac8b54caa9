// Shared by the Kokkos backend tests: Kokkos initialised once for the test
// program (MPI is initialised by the Catch main), the execution space they
// run on, and the collectives they sweep; plus the MPI tests' helpers.
#pragma once
#include "../mpi/support.hpp"

#include <collc/backend/kokkos/plan.hpp>
#include <collc/core.hpp>

namespace collc_test {

using exec_space = Kokkos::DefaultHostExecutionSpace;

struct kokkos_session {
  kokkos_session() { Kokkos::initialize(); }
  ~kokkos_session() { Kokkos::finalize(); }
};
inline const kokkos_session session;

inline constexpr collc::collective all_collectives[] = {collc::collective::allreduce, collc::collective::reduce_scatter,
                                                        collc::collective::allgather, collc::collective::reduce,
                                                        collc::collective::bcast};

}  // namespace collc_test
