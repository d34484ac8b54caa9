! libcollc_mpi's Fortran test through use mpi_f08: other entry points
! (mpi_allreduce_f08_, ...), handles are derived types holding one INTEGER,
! ierror is optional. The body is f_collectives.inc (built with -cpp by
! tests/pmpi/fortran.cmake).
#define COMM_T type(MPI_Comm)
#define OP_T type(MPI_Op)
#define TYPE_T type(MPI_Datatype)
#define REQ_T type(MPI_Request)
module mpi_style
  use mpi_f08
  implicit none
end module mpi_style

#include "f_collectives.inc"
