#pragma once
/// \file
/// Kept for existing includes: the MPI plans now live in
/// collc/backend/mpi/plan.hpp (they need <mpi.h>). Prefer <collc/collc.hpp>.
#include <collc/backend/mpi/plan.hpp>
