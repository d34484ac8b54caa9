// The Fortran entry points of libcollc_mpi for Open MPI (docs/pmpi.md).
// Open MPI 4.1's Fortran bindings call PMPI_* themselves, so the C wrappers
// (c_entry.cpp) never see a Fortran caller; this file takes the Fortran
// symbols instead. MPICH's Fortran library calls the C MPI_* names, so this
// file is not built there.
//
// What each binding style references (nm -u on gfortran objects, Open MPI
// 4.1.4):
//   include 'mpif.h', use mpi   mpi_allreduce_, ...       (libmpi_mpifh)
//   use mpi_f08                 mpi_allreduce_f08_, ...   (libmpi_usempif08)
// libmpi_mpifh also exports the other manglings (mpi_allreduce,
// mpi_allreduce__, MPI_ALLREDUCE) for compilers that call those; they take
// the same arguments, so they are aliases of one definition here as there.
// mpi_f08's specific procedures take the same by-reference arguments (a
// handle is a derived type holding one INTEGER, passed by address); only
// their ierror is OPTIONAL, so it may be NULL.
#include <mpi.h>

#include "interpose.hpp"

// Fortran's MPI_IN_PLACE and MPI_BOTTOM are variables (a common block in
// mpif.h and `use mpi`, a bind(C) variable of the same name in mpi_f08); the
// program passes their address. Open MPI 4.1 compares with the single
// mangling its gfortran build defines (nm: only mpi_fortran_in_place_ and
// mpi_fortran_bottom_ exist), so do we: any other address is a buffer for
// Open MPI too, and a call must mean the same with and without collc.
extern "C" int mpi_fortran_in_place_;
extern "C" int mpi_fortran_bottom_;

// Open MPI's own Fortran MPI_Op_create / MPI_Op_free (libmpi_mpifh; mpi_f08's
// versions call them too). Only the Fortran one marks an operator as Fortran,
// so MPI's own fallback calls it with Fortran arguments. Weak: a C program
// preloading this library has no libmpi_mpifh, and these are only reached
// from a Fortran caller, whose program loaded it.
extern "C" void pmpi_op_create_(void (*fn)(), const MPI_Fint* commute, MPI_Fint* op, MPI_Fint* ierror)
    __attribute__((weak));
extern "C" void pmpi_op_free_(MPI_Fint* op, MPI_Fint* ierror) __attribute__((weak));
// Open MPI's own Fortran MPI_Comm_idup (weak for the same reason).
extern "C" void pmpi_comm_idup_(const MPI_Fint* comm, MPI_Fint* newcomm, MPI_Fint* request, MPI_Fint* ierror)
    __attribute__((weak));
// Open MPI's own Fortran MPI_Init / MPI_Init_thread (they set up the Fortran
// side before PMPI_Init), weak for the same reason.
extern "C" void pmpi_init_(MPI_Fint* ierror) __attribute__((weak));
extern "C" void pmpi_init_thread_(const MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierror) __attribute__((weak));

namespace {

namespace pmpi = collc::pmpi;

void* c_buffer(void* buf) { return buf == &mpi_fortran_bottom_ ? MPI_BOTTOM : buf; }
const void* c_send_buffer(void* buf) { return buf == &mpi_fortran_in_place_ ? MPI_IN_PLACE : c_buffer(buf); }

void finish(MPI_Fint* ierror, int code) {
  if (ierror != nullptr) *ierror = code;
}

}  // namespace

// The names each Fortran entry point is known by besides its definition
// mpi_X_ (see the top of this file).
#define COLLC_PMPI_FORTRAN_ALIAS(defined, name) \
  COLLC_PMPI_EXPORT decltype(defined) name __attribute__((alias(#defined)));
#define COLLC_PMPI_FORTRAN_NAMES(x, X)              \
  COLLC_PMPI_FORTRAN_ALIAS(mpi_##x##_, mpi_##x)     \
  COLLC_PMPI_FORTRAN_ALIAS(mpi_##x##_, mpi_##x##__) \
  COLLC_PMPI_FORTRAN_ALIAS(mpi_##x##_, MPI_##X)     \
  COLLC_PMPI_FORTRAN_ALIAS(mpi_##x##_, mpi_##x##_f08_)

COLLC_PMPI_EXPORT void mpi_allreduce_(void* send, void* recv, const MPI_Fint* count, const MPI_Fint* type,
                                      const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierror) {
  finish(ierror, pmpi::allreduce(c_send_buffer(send), c_buffer(recv), *count, PMPI_Type_f2c(*type), PMPI_Op_f2c(*op),
                                 PMPI_Comm_f2c(*comm)));
}
COLLC_PMPI_FORTRAN_NAMES(allreduce, ALLREDUCE)

COLLC_PMPI_EXPORT void mpi_reduce_scatter_block_(void* send, void* recv, const MPI_Fint* count, const MPI_Fint* type,
                                                 const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierror) {
  finish(ierror, pmpi::reduce_scatter_block(c_send_buffer(send), c_buffer(recv), *count, PMPI_Type_f2c(*type),
                                            PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}
COLLC_PMPI_FORTRAN_NAMES(reduce_scatter_block, REDUCE_SCATTER_BLOCK)

// recvcounts is an INTEGER array, read in place as int[] (Open MPI does the
// same where MPI_Fint is int, and only copies where it is not).
static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not int: convert recvcounts before calling collc");
COLLC_PMPI_EXPORT void mpi_reduce_scatter_(void* send, void* recv, const MPI_Fint* recvcounts, const MPI_Fint* type,
                                           const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierror) {
  finish(ierror, pmpi::reduce_scatter(c_send_buffer(send), c_buffer(recv), recvcounts, PMPI_Type_f2c(*type),
                                      PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}
COLLC_PMPI_FORTRAN_NAMES(reduce_scatter, REDUCE_SCATTER)

COLLC_PMPI_EXPORT void mpi_allgather_(void* send, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recv,
                                      const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm,
                                      MPI_Fint* ierror) {
  finish(ierror, pmpi::allgather(c_send_buffer(send), *sendcount, PMPI_Type_f2c(*sendtype), c_buffer(recv), *recvcount,
                                 PMPI_Type_f2c(*recvtype), PMPI_Comm_f2c(*comm)));
}
COLLC_PMPI_FORTRAN_NAMES(allgather, ALLGATHER)

COLLC_PMPI_EXPORT void mpi_bcast_(void* buf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* root,
                                  const MPI_Fint* comm, MPI_Fint* ierror) {
  finish(ierror, pmpi::bcast(c_buffer(buf), *count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm)));
}
COLLC_PMPI_FORTRAN_NAMES(bcast, BCAST)

COLLC_PMPI_EXPORT void mpi_reduce_(void* send, void* recv, const MPI_Fint* count, const MPI_Fint* type,
                                   const MPI_Fint* op, const MPI_Fint* root, const MPI_Fint* comm, MPI_Fint* ierror) {
  finish(ierror, pmpi::reduce(c_send_buffer(send), c_buffer(recv), *count, PMPI_Type_f2c(*type), PMPI_Op_f2c(*op),
                              *root, PMPI_Comm_f2c(*comm)));
}
COLLC_PMPI_FORTRAN_NAMES(reduce, REDUCE)

// commute is a default LOGICAL: gfortran's .true. is 1 and Open MPI reads any
// nonzero value as true, so collc does too.
COLLC_PMPI_EXPORT void mpi_op_create_(void (*fn)(), const MPI_Fint* commute, MPI_Fint* op, MPI_Fint* ierror) {
  MPI_Fint code = MPI_SUCCESS;
  pmpi_op_create_(fn, commute, op, &code);
  if (code == MPI_SUCCESS) pmpi::op_created(PMPI_Op_f2c(*op), fn, *commute != 0, pmpi::op_language::fortran);
  finish(ierror, code);
}
COLLC_PMPI_FORTRAN_NAMES(op_create, OP_CREATE)

// collc forgets the operator before MPI frees it: afterwards MPI may hand the
// same handle to the next operator created.
COLLC_PMPI_EXPORT void mpi_op_free_(MPI_Fint* op, MPI_Fint* ierror) {
  pmpi::op_freed(PMPI_Op_f2c(*op));
  MPI_Fint code = MPI_SUCCESS;
  pmpi_op_free_(op, &code);
  finish(ierror, code);
}
COLLC_PMPI_FORTRAN_NAMES(op_free, OP_FREE)

COLLC_PMPI_EXPORT void mpi_comm_idup_(const MPI_Fint* comm, MPI_Fint* newcomm, MPI_Fint* request, MPI_Fint* ierror) {
  pmpi::comm_idup_called(PMPI_Comm_f2c(*comm));
  MPI_Fint code = MPI_SUCCESS;
  pmpi_comm_idup_(comm, newcomm, request, &code);
  finish(ierror, code);
}
COLLC_PMPI_FORTRAN_NAMES(comm_idup, COMM_IDUP)

// MPI_Init from Fortran: Open MPI's goes straight to PMPI_Init, so the C
// wrapper's check that every rank runs with the same COLLC_PMPI_* settings
// (interpose.hpp: settings_agree) happens here.
COLLC_PMPI_EXPORT void mpi_init_(MPI_Fint* ierror) {
  MPI_Fint code = MPI_SUCCESS;
  pmpi_init_(&code);
  finish(ierror, code == MPI_SUCCESS ? pmpi::settings_agree() : code);
}
COLLC_PMPI_FORTRAN_NAMES(init, INIT)

COLLC_PMPI_EXPORT void mpi_init_thread_(const MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierror) {
  MPI_Fint code = MPI_SUCCESS;
  pmpi_init_thread_(required, provided, &code);
  finish(ierror, code == MPI_SUCCESS ? pmpi::settings_agree() : code);
}
COLLC_PMPI_FORTRAN_NAMES(init_thread, INIT_THREAD)
