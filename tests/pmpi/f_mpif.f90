! libcollc_mpi's Fortran test through include 'mpif.h': implicit interfaces,
! handles are INTEGERs, MPI_IN_PLACE is a common block the program defines.
! The body is f_collectives.inc (built with -cpp by tests/pmpi/fortran.cmake).
#define COMM_T integer
#define OP_T integer
#define TYPE_T integer
#define REQ_T integer
module mpi_style
  implicit none
  include 'mpif.h'
end module mpi_style

#include "f_collectives.inc"
