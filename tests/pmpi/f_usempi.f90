! libcollc_mpi's Fortran test through use mpi: the same calls as mpif.h
! (mpi_allreduce_, ...) behind explicit interfaces, handles are INTEGERs.
! The body is f_collectives.inc (built with -cpp by tests/pmpi/fortran.cmake).
#define COMM_T integer
#define OP_T integer
#define TYPE_T integer
#define REQ_T integer
module mpi_style
  use mpi
  implicit none
end module mpi_style

#include "f_collectives.inc"
