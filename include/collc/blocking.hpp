#pragma once
/// \file
/// Kept for existing includes: this part needs <mpi.h> and lives in
/// collc/backend/mpi/blocking.hpp. Prefer <collc/collc.hpp>.
#include <collc/backend/mpi/blocking.hpp>
