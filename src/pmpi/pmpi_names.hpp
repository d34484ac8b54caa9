#pragma once
// Included first by every translation unit of libcollc_mpi that includes
// collc's headers: each MPI function collc calls is renamed to its PMPI_*
// name, so collc's own setup agreement, node communicators, windows and
// messages never re-enter the library's interposed MPI_* entry points (and
// are not counted as the program's calls). tests/pmpi checks with nm that the
// library refers to no MPI_* function it does not define itself; a function
// added to collc's MPI backend must be added here.
#include <mpi.h>

#define MPI_Abort PMPI_Abort
#define MPI_Allgather PMPI_Allgather
#define MPI_Allreduce PMPI_Allreduce
#define MPI_Barrier PMPI_Barrier
#define MPI_Bcast PMPI_Bcast
#define MPI_Cancel PMPI_Cancel
#define MPI_Comm_create_keyval PMPI_Comm_create_keyval
#define MPI_Comm_dup PMPI_Comm_dup
#define MPI_Comm_free PMPI_Comm_free
#define MPI_Comm_get_attr PMPI_Comm_get_attr
#define MPI_Comm_group PMPI_Comm_group
#define MPI_Comm_idup PMPI_Comm_idup
#define MPI_Comm_rank PMPI_Comm_rank
#define MPI_Comm_set_attr PMPI_Comm_set_attr
#define MPI_Comm_size PMPI_Comm_size
#define MPI_Comm_split PMPI_Comm_split
#define MPI_Comm_split_type PMPI_Comm_split_type
#define MPI_Comm_test_inter PMPI_Comm_test_inter
#define MPI_Error_string PMPI_Error_string
#define MPI_Finalized PMPI_Finalized
#define MPI_Get_processor_name PMPI_Get_processor_name
#define MPI_Group_free PMPI_Group_free
#define MPI_Group_translate_ranks PMPI_Group_translate_ranks
#define MPI_Iallgather PMPI_Iallgather
#define MPI_Iallreduce PMPI_Iallreduce
#define MPI_Ibarrier PMPI_Ibarrier
#define MPI_Ibcast PMPI_Ibcast
#define MPI_Info_create PMPI_Info_create
#define MPI_Info_free PMPI_Info_free
#define MPI_Info_set PMPI_Info_set
#define MPI_Initialized PMPI_Initialized
#define MPI_Iprobe PMPI_Iprobe
#define MPI_Irecv PMPI_Irecv
#define MPI_Isend PMPI_Isend
#define MPI_Query_thread PMPI_Query_thread
#define MPI_Recv PMPI_Recv
#define MPI_Recv_init PMPI_Recv_init
#define MPI_Request_free PMPI_Request_free
#define MPI_Send PMPI_Send
#define MPI_Send_init PMPI_Send_init
#define MPI_Start PMPI_Start
#define MPI_Test PMPI_Test
#define MPI_Type_commit PMPI_Type_commit
#define MPI_Type_create_hindexed PMPI_Type_create_hindexed
#define MPI_Type_free PMPI_Type_free
#define MPI_Win_allocate_shared PMPI_Win_allocate_shared
#define MPI_Win_free PMPI_Win_free
#define MPI_Win_shared_query PMPI_Win_shared_query
#define MPI_Wtime PMPI_Wtime
