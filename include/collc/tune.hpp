#pragma once
/// \file
/// Kept for existing includes: this part needs <mpi.h> and lives in
/// collc/backend/mpi/tune.hpp. Prefer <collc/collc.hpp>.
#include <collc/backend/mpi/tune.hpp>
