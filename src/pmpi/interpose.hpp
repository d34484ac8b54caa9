#pragma once
// The interposition library's inner interface (libcollc_mpi, docs/pmpi.md):
// what the language entry points (c_entry.cpp, fortran_entry.cpp,
// persistent.cpp) call. It includes only <mpi.h>: the entry points never see
// collc's headers, and the core (core.cpp, plans*.cpp) sees collc's headers
// only through pmpi_names.hpp, so every MPI call collc makes goes to the
// PMPI_* names and never re-enters an interposed function.
//
// Every function here is an MPI collective with MPI's own argument meaning
// (MPI_IN_PLACE in the C spelling; the Fortran entry points translate theirs
// first) and returns an MPI error code. Each decides, from values that are
// equal on every rank, whether the call runs on a collc plan or goes to the
// MPI library (PMPI_*) unchanged, and counts the decision for
// COLLC_PMPI_STATS.
#include <mpi.h>

#include <atomic>
#include <memory>

#if defined(__GNUC__)
#define COLLC_PMPI_EXPORT extern "C" __attribute__((visibility("default")))
#else
#define COLLC_PMPI_EXPORT extern "C"
#endif

namespace collc::pmpi {

/// The intercepted collectives (the index of the statistics tables).
enum class coll : int { allreduce, reduce_scatter_block, reduce_scatter, allgather, bcast, reduce, count_ };

/// "MPI_Allreduce", ...: the name a user sees in the statistics and errors.
const char* mpi_name(coll c) noexcept;

int allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int reduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int reduce_scatter(const void* send, void* recv, const int recvcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int allgather(const void* send, int sendcount, MPI_Datatype sendtype, void* recv, int recvcount, MPI_Datatype recvtype,
              MPI_Comm comm);
int bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm);

/// Right after the MPI library's MPI_Init / MPI_Init_thread: checks that every
/// rank runs with the same COLLC_PMPI_* settings (and that none was refused);
/// otherwise prints the reason and aborts, since ranks that decide differently
/// for the same call would hang.
int settings_agree();

/// The language a user operator was written in: MPI calls a C function as
/// f(void*, void*, int*, MPI_Datatype*) and a Fortran one with the Fortran
/// handle of the datatype (MPI_Fint*).
enum class op_language { c, fortran };

/// MPI_Op_create / MPI_Op_free (C and Fortran): collc needs the function
/// pointer of a user operator, which MPI does not give back; the entry points
/// record it here after the library created the handle.
void op_created(MPI_Op op, void (*fn)(), bool commute, op_language lang);
void op_freed(MPI_Op op);

/// MPI_Comm_idup / MPI_Comm_idup_with_info (C and Fortran), before the MPI
/// library's: a communicator the program duplicates without blocking before
/// collc built a plan on it stays with the MPI library (core.cpp,
/// comm_state::program_idup).
void comm_idup_called(MPI_Comm comm) noexcept;

/// collc's requests started and not yet completed in this process
/// (persistent.cpp counts them). While there are any, MPI_Wait and
/// MPI_Waitall on MPI's own requests wait with wait_giving_turns: MPI lets
/// ranks complete outstanding collectives in any order (MPI 4.0, sections
/// 6.12-6.13), so a peer may be waiting in one of them for this rank, and
/// MPI's progress engine, which would advance MPI's own requests, knows
/// nothing of collc's. A blocking collective the library leaves to MPI
/// cannot wait this way: turning it into MPI's nonblocking form on the ranks
/// with started requests only would not match the blocking form of the
/// others (MPI 4.0, section 6.12), so it blocks without giving turns.
std::atomic<int>& requests_started() noexcept;

/// Completes `*request` (MPI's own) by polling it, each unfinished poll
/// giving collc's started plans a turn (collc::mpi::engine::give_turns: those
/// of `comm`, MPI_COMM_NULL for none, and every communicator's below
/// MPI_THREAD_MULTIPLE). Returns MPI's error code.
int wait_giving_turns(MPI_Comm comm, MPI_Request* request, MPI_Status* status);
/// One turn for collc's started plans, as in wait_giving_turns (errors are
/// kept for the plans' own waits).
void give_turns(MPI_Comm comm) noexcept;

/// A persistent collective on a collc plan (MPI_Allreduce_init and friends,
/// persistent.cpp). Buffers are fixed at creation, as MPI says.
class persistent_call {
 public:
  virtual ~persistent_call() = default;
  /// MPI_Start. Returns an MPI error code.
  virtual int start() = 0;
  /// Advances without blocking; true once the started call has completed
  /// (the result is then in the receive buffer). `*err` gets an MPI error code.
  virtual bool test(int* err) = 0;
  /// True between start() and the test() that reported completion.
  [[nodiscard]] virtual bool active() const = 0;
};

/// A persistent collective on a collc plan, or nullptr when the call goes to
/// the MPI library (the caller then creates MPI's own persistent request).
/// Arguments as the blocking form; `root` is ignored where MPI has none;
/// allgather's send side is `send_count` x `send_type` (count x type: the
/// receive side's block). Collective over comm: the ranks agree whether collc
/// takes it.
std::unique_ptr<persistent_call> make_persistent(coll c, const void* send, void* recv, int count, MPI_Datatype type,
                                                 MPI_Op op, int root, MPI_Comm comm, int send_count = 0,
                                                 MPI_Datatype send_type = MPI_DATATYPE_NULL);

}  // namespace collc::pmpi
