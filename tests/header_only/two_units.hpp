#pragma once
// The header-only link check (tests/header_only/): two translation units that
// both include <collc/collc.hpp> and build plans, linked into one program.
// Header-only, a definition in collc's headers that is not inline is defined
// in both units and the link fails ("multiple definition"); one that only a
// .ipp of the compiled library defines is missing ("undefined reference").
#include <mpi.h>

#include <string>

namespace two_units {
/// Each unit's checks; the empty string when every result is right, else
/// what differs. Collective: every rank of comm calls them in the same order.
std::string check_first_unit(MPI_Comm comm);
std::string check_second_unit(MPI_Comm comm);
}  // namespace two_units
