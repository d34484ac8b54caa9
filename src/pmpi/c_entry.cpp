// The C entry points of libcollc_mpi: the MPI names an unmodified C, C++ or
// Python program calls (and, with MPICH, its Fortran bindings too, which call
// the C names). Each forwards to the core (interpose.hpp), which runs the call
// on a collc plan or hands it to the PMPI_* name unchanged.
#include "interpose.hpp"

#include <mpi.h>

namespace pmpi = collc::pmpi;

COLLC_PMPI_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int err = PMPI_Init(argc, argv);
  return err == MPI_SUCCESS ? pmpi::settings_agree() : err;
}

COLLC_PMPI_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int err = PMPI_Init_thread(argc, argv, required, provided);
  return err == MPI_SUCCESS ? pmpi::settings_agree() : err;
}

COLLC_PMPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                    MPI_Comm comm) {
  return pmpi::allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

COLLC_PMPI_EXPORT int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                               MPI_Op op, MPI_Comm comm) {
  return pmpi::reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

COLLC_PMPI_EXPORT int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return pmpi::reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

COLLC_PMPI_EXPORT int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                    int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return pmpi::allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

COLLC_PMPI_EXPORT int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return pmpi::bcast(buffer, count, datatype, root, comm);
}

COLLC_PMPI_EXPORT int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                 int root, MPI_Comm comm) {
  return pmpi::reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

COLLC_PMPI_EXPORT int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  const int err = PMPI_Op_create(user_fn, commute, op);
  if (err == MPI_SUCCESS)
    pmpi::op_created(*op, reinterpret_cast<void (*)()>(user_fn), commute != 0, pmpi::op_language::c);
  return err;
}

COLLC_PMPI_EXPORT int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  pmpi::comm_idup_called(comm);
  return PMPI_Comm_idup(comm, newcomm, request);
}

#if MPI_VERSION >= 4
COLLC_PMPI_EXPORT int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm, MPI_Request* request) {
  pmpi::comm_idup_called(comm);
  return PMPI_Comm_idup_with_info(comm, info, newcomm, request);
}
#endif

COLLC_PMPI_EXPORT int MPI_Op_free(MPI_Op* op) {
  if (op != nullptr) pmpi::op_freed(*op);
  return PMPI_Op_free(op);
}
