/* The persistent collectives' names (MPI 4.0, section 6.13) for the C tests
 * of libcollc_mpi: Open MPI 4.1 has them as extensions, MPIX_*_init. */
#ifndef COLLC_TESTS_PMPI_C_PERSISTENT_NAMES_H
#define COLLC_TESTS_PMPI_C_PERSISTENT_NAMES_H

#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif

#if defined(OPEN_MPI) && MPI_VERSION < 4
#define Allreduce_init MPIX_Allreduce_init
#define Bcast_init MPIX_Bcast_init
#define Reduce_init MPIX_Reduce_init
#define Allgather_init MPIX_Allgather_init
#define Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#else
#define Allreduce_init MPI_Allreduce_init
#define Bcast_init MPI_Bcast_init
#define Reduce_init MPI_Reduce_init
#define Allgather_init MPI_Allgather_init
#define Reduce_scatter_block_init MPI_Reduce_scatter_block_init
#endif

#endif
