#pragma once
// The measured table: sizes where this machine's MPI library (Open MPI 4.1.4,
// one node) was faster than collc through libcollc_mpi, so the library hands
// them to MPI (docs/pmpi.md, "When collc takes a call"). Each row comes from
// benchmarks/pmpi_compare.sh (steady state: COLLC_PMPI_FROM_CALL=1,
// COLLC_PMPI_SIZES=all; 3 rounds, medians, ratio = with / without the
// library) or, for P = 3, from docs/benchmarks.md ("Bcast and reduce with the
// shm ring"). Sizes between two measured points belong to the row only when
// both ends lost. The rule reads only values equal on every rank (the
// collective, the communicator's size, the message bytes), so every rank takes
// the same path. Each communicator's state keeps the rows of its size
// (core.cpp: comm_state::mpi_is_faster).
#include "interpose.hpp"

#include <cstddef>

namespace collc::pmpi {

struct mpi_faster_row {
  coll c;
  int ranks;              // communicator size (one node)
  std::size_t min_bytes;  // message bytes per rank, inclusive
  std::size_t max_bytes;
  const char* measured;  // the ratio that put the row here
};

inline constexpr std::size_t any_size = ~std::size_t{0};

// clang-format off
inline constexpr mpi_faster_row mpi_faster_rows[] = {
    // P = 2 (2026-12-04, this VM): bcast and reduce of 8-64 B are one
    // eager copy in Open MPI (0.06-0.08 us); collc's flag hand-off costs more.
    {coll::bcast,                2, 0,          64,       "1.36 at 8 B, 1.23 at 64 B"},
    {coll::bcast,                2, 256 << 10,  any_size, "1.29-1.59 from 256 KiB to 64 MiB"},
    {coll::reduce,               2, 0,          64,       "1.08 at 8 B, 1.24 at 64 B"},
    {coll::reduce,               2, 32 << 10,   2 << 20,  "1.05 at 32 KiB, 1.54 at 256 KiB, 1.05 at 2 MiB"},
    {coll::reduce_scatter_block, 2, 0,          64,       "1.09 at 8 B, 1.11 at 64 B"},
    // P = 3 (docs/benchmarks.md): small rooted collectives and large ones.
    {coll::bcast,                3, 0,          64,       "1.15 at 8-64 B"},
    {coll::reduce,               3, 0,          64,       "1.22 at 8-64 B"},
    {coll::bcast,                3, 256 << 10,  any_size, "up to 1.18 from 256 KiB"},
    {coll::reduce,               3, 256 << 10,  any_size, "up to 1.18 from 256 KiB"},
    // P = 4 (2026-12-04, oversubscribed on 2 cores).
    {coll::bcast,                4, 0,          64,       "2.06 at 8 B, 1.08 at 64 B"},
    {coll::reduce,               4, 0,          8,        "1.36 at 8 B"},
    // P = 8 (2026-12-04, oversubscribed 4x).
    {coll::bcast,                8, 0,          8,        "1.45 at 8 B"},
    {coll::reduce,               8, 0,          8,        "1.26 at 8 B"},
};
// clang-format on

}  // namespace collc::pmpi
