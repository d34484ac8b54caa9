#pragma once
/// \file
/// The umbrella header: everything of collc this build can use.
///
///   #include <collc/collc.hpp>
///   auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, n);  p(x, y);
///
/// Always: the core (factor sets, operators, exact sums, the IR and the
/// schedules it is lowered from). With MPI (<mpi.h> found, or the CMake
/// component collc::mpi, which defines COLLC_HAS_MPI): persistent plans, the
/// blocking calls, tuning and reproducible sums. With the Kokkos component
/// (COLLC_HAS_KOKKOS): plans over Kokkos Views. With hwloc (COLLC_HAS_HWLOC):
/// the node topology read from hwloc. A backend's headers can also be
/// included alone (collc/backend/<name>/...).
///
/// MPI's C++ bindings (removed in MPI-3) cost about a second of every
/// translation unit that includes Open MPI's or MPICH's mpi.h through mpicxx;
/// collc uses the C API only and skips them unless mpi.h came first.
#include <collc/config.hpp>
#include <collc/core.hpp>
#include <collc/error.hpp>
#include <collc/exact_sum.hpp>
#include <collc/factors.hpp>
#include <collc/ops.hpp>
#include <collc/algo/schedule.hpp>
#include <collc/ir/program.hpp>

#if !defined(COLLC_HAS_MPI) && __has_include(<mpi.h>)
#define COLLC_HAS_MPI 1
#endif

#if COLLC_HAS_MPI
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <collc/backend/mpi/plan.hpp>
#include <collc/backend/mpi/blocking.hpp>
#include <collc/backend/mpi/calibrate.hpp>
#include <collc/backend/mpi/reproducible.hpp>
#include <collc/backend/mpi/tune.hpp>
#endif

#if COLLC_HAS_MPI && defined(COLLC_HAS_KOKKOS) && COLLC_HAS_KOKKOS
#include <collc/backend/kokkos/plan.hpp>
#include <collc/backend/kokkos/reproducible.hpp>
#endif

#if defined(COLLC_HAS_HWLOC) && COLLC_HAS_HWLOC
#include <collc/backend/hwloc/topology.hpp>
#endif
