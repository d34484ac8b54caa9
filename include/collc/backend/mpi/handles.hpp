#pragma once
/// \file
/// MPI error checking and owning handles (communicator, window, datatype,
/// request) for the MPI backend. Every MPI call of the backend goes through
/// COLLC_MPI_CHECK so a failing call becomes a collc::error(errc::mpi_error)
/// naming the call and MPI's own message, instead of MPI's default abort.
#include <collc/config.hpp>
#include <collc/error.hpp>

#include <mpi.h>

#include <utility>

namespace collc::mpi {

/// Throws collc::error(errc::mpi_error) naming `call`, `rc` and MPI's message.
[[noreturn]] void throw_mpi_error(int rc, const char* call);

/// Inline in both modes: it wraps every MPI call, the hot path's too, and
/// only a failure (throw_mpi_error) needs to leave the caller.
inline void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw_mpi_error(rc, call);
}

/// Shared windows are not cache-line aligned (Open MPI 4.1 hands out 8-byte
/// aligned slots), so window users allocate 64 bytes more and align up. A
/// mapping starts on a page, so every process finds the same line.
void* align_line(void* p) noexcept;

}  // namespace collc::mpi

/// Evaluates an MPI call and throws collc::error(errc::mpi_error) naming it on failure.
#define COLLC_MPI_CHECK(call) ::collc::mpi::mpi_check((call), #call)

namespace collc::mpi {

/// Whether MPI_Finalize already ran (then no MPI object may be freed: an
/// owner outliving MPI only forgets its handle; the process is ending).
bool mpi_finalized() noexcept;

// MPI's handles are not distinct types in every implementation (MPICH's
// MPI_Comm, MPI_Win and MPI_Datatype are all int) and their null values are
// not constant expressions in others (Open MPI's are addresses of globals),
// so each kind of owner names its null value and its free function.
struct comm_kind {
  using handle = MPI_Comm;
  static MPI_Comm null() noexcept { return MPI_COMM_NULL; }
  static void free(MPI_Comm* c) noexcept;
};
struct win_kind {
  using handle = MPI_Win;
  static MPI_Win null() noexcept { return MPI_WIN_NULL; }
  static void free(MPI_Win* w) noexcept;
};
struct type_kind {
  using handle = MPI_Datatype;
  static MPI_Datatype null() noexcept { return MPI_DATATYPE_NULL; }
  static void free(MPI_Datatype* t) noexcept;
};

/// Move-only owner of one MPI handle that starts out as MPI's null handle;
/// the kind's free() releases it (never throws: a destructor cannot report).
template <class Kind>
class mpi_owner {
  using Handle = typename Kind::handle;

 public:
  mpi_owner() = default;
  mpi_owner(mpi_owner&& o) noexcept : h_(std::exchange(o.h_, Kind::null())) {}
  mpi_owner& operator=(mpi_owner&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, Kind::null());
    }
    return *this;
  }
  mpi_owner(const mpi_owner&) = delete;
  mpi_owner& operator=(const mpi_owner&) = delete;
  ~mpi_owner() { reset(); }

  void reset() noexcept {
    Kind::free(&h_);
    h_ = Kind::null();
  }
  [[nodiscard]] Handle get() const noexcept { return h_; }
  /// For MPI calls that create the handle: `MPI_Comm_dup(c, h.out())`.
  Handle* out() noexcept {
    reset();
    return &h_;
  }
  /// For MPI calls that update the handle in place (MPI_Type_commit).
  Handle* ptr() noexcept { return &h_; }
  explicit operator bool() const noexcept { return h_ != Kind::null(); }

 private:
  Handle h_ = Kind::null();
};

using comm_owner = mpi_owner<comm_kind>;
using win_owner = mpi_owner<win_kind>;
using type_owner = mpi_owner<type_kind>;

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/handles.ipp>
#endif
