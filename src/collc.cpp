// libcollc_compiled: the type-independent parts of collc, compiled once
// (CMake component `compiled`, target collc::compiled). This file is the only
// place that includes the `.ipp` definition files in compiled mode; in the
// default header-only mode each header includes its own `.ipp` instead
// (include/collc/config.hpp).
#if !defined(COLLC_SEPARATE_COMPILATION)
#error "src/collc.cpp is built with COLLC_SEPARATE_COMPILATION (the collc::compiled target sets it)"
#endif

// One line per definition file, in layer order (docs/architecture.md).
// Core and IR/algo layers (no MPI).
#include <collc/ir/text.ipp>
#include <collc/ir/passes.ipp>
#include <collc/ir/sequence.ipp>
#include <collc/ir/cost.ipp>
#include <collc/ir/verify.ipp>
#include <collc/enumerate.ipp>
#include <collc/topology.ipp>
#include <collc/algo/presets.ipp>
#include <collc/algo/cost.ipp>
#include <collc/algo/select.ipp>
#include <collc/wisdom.ipp>

// The MPI backend's plan layout (a pure function) and its copy into shm use no
// <mpi.h>: built in every configuration.
#include <collc/backend/mpi/layout.ipp>
#include <collc/backend/mpi/shm_copy.ipp>

// MPI backend.
#if defined(COLLC_HAS_MPI)
#include <collc/backend/mpi/handles.ipp>
#include <collc/backend/mpi/options.ipp>
#include <collc/backend/mpi/topology.ipp>
#include <collc/backend/mpi/segments.ipp>
#include <collc/backend/mpi/registry.ipp>
#include <collc/backend/mpi/binder.ipp>
#include <collc/backend/mpi/calibrate.ipp>
#include <collc/backend/mpi/engine.ipp>
#include <collc/backend/mpi/build.ipp>
#include <collc/backend/mpi/tune.ipp>
#endif
