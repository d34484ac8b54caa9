#pragma once
// The measured table: sizes where the MPI library this process runs on beat
// collc on this machine (one node), so libcollc_mpi hands them to that
// library (docs/pmpi.md, "When collc takes a call"). The rows are made, not
// written: `benchmarks/plot.py handoff docs/data/one_node/*.csv` prints them
// from the raw collc-bench CSVs behind the tables of issue 14's bar in
// docs/benchmarks.md ("All five collectives against the better of Open MPI
// and MPICH"), and the
// test `pmpi_measured_table` fails when the block below is not what it makes
// of those files. A row is a run of measured sizes whose paired ratio
// collc / library (median over rounds, double sum, root 0) is above 1; sizes
// between two measured points belong to it only when both ends lost, and a
// run from the smallest (largest) measured size extends to 0 (any) bytes.
// The rule reads only values equal on every rank (the library, the
// collective, the communicator's size, the message bytes), so every rank
// takes the same path. Each communicator's state keeps the rows of its size
// and library (core.cpp: comm_state::mpi_is_faster).
#include "interpose.hpp"

#include <cstddef>

namespace collc::pmpi {

/// The MPI library under the process, from MPI_Get_library_version: rows
/// measured against one library say nothing about another.
enum class library { open_mpi, mpich, other };

struct mpi_faster_row {
  library lib;
  coll c;
  int ranks;              // communicator size (one node)
  std::size_t min_bytes;  // message bytes per rank, inclusive
  std::size_t max_bytes;
  const char* measured;  // the ratios that put the row here
};

inline constexpr std::size_t any_size = ~std::size_t{0};

// clang-format off
inline constexpr mpi_faster_row mpi_faster_rows[] = {
// BEGIN rows made by benchmarks/plot.py handoff
    {library::open_mpi, coll::bcast, 2, 0, 8, "1.29 at 8 B"},
    {library::open_mpi, coll::bcast, 3, 0, 8, "1.04 at 8 B"},
    {library::open_mpi, coll::bcast, 4, 0, 8, "1.02 at 8 B"},
    {library::open_mpi, coll::reduce, 2, 0, 8, "1.37 at 8 B"},
    {library::open_mpi, coll::reduce, 2, 256 << 10, 256 << 10, "1.10 at 256 KiB"},
// END rows made by benchmarks/plot.py handoff
};
// clang-format on

}  // namespace collc::pmpi
