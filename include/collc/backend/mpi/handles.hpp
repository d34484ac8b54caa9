#pragma once
/// \file
/// MPI error checking and owning handles (communicator, window, datatype,
/// request) for the MPI backend. Every MPI call of the backend goes through
/// COLLC_MPI_CHECK so a failing call becomes a collc::error(errc::mpi_error)
/// naming the call and MPI's own message, instead of MPI's default abort.
#include <collc/error.hpp>

#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>

namespace collc::detail {

[[noreturn]] inline void throw_mpi_error(int rc, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw error(errc::mpi_error, std::string(call) + " failed (code " + std::to_string(rc) + "): " + text);
}

inline void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw_mpi_error(rc, call);
}

/// Shared windows are not cache-line aligned (Open MPI 4.1 hands out 8-byte
/// aligned slots), so window users allocate 64 bytes more and align up. A
/// mapping starts on a page, so every process finds the same line.
inline void* align_line(void* p) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return p == nullptr ? nullptr : reinterpret_cast<void*>((a + 63) & ~std::uintptr_t{63});
}

}  // namespace collc::detail

/// Evaluates an MPI call and throws collc::error(errc::mpi_error) naming it on failure.
#define COLLC_MPI_CHECK(call) ::collc::detail::mpi_check((call), #call)

namespace collc::detail {

/// Whether MPI_Finalize already ran (then no MPI object may be freed: an
/// owner outliving MPI only forgets its handle; the process is ending).
inline bool mpi_finalized() noexcept {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

// MPI's handles are not distinct types in every implementation (MPICH's
// MPI_Comm, MPI_Win and MPI_Datatype are all int) and their null values are
// not constant expressions in others (Open MPI's are addresses of globals),
// so each kind of owner names its null value and its free function.
struct comm_kind {
  using handle = MPI_Comm;
  static MPI_Comm null() noexcept { return MPI_COMM_NULL; }
  static void free(MPI_Comm* c) noexcept {
    if (*c != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(c);
  }
};
struct win_kind {
  using handle = MPI_Win;
  static MPI_Win null() noexcept { return MPI_WIN_NULL; }
  static void free(MPI_Win* w) noexcept {
    if (*w != MPI_WIN_NULL && !mpi_finalized()) MPI_Win_free(w);
  }
};
struct type_kind {
  using handle = MPI_Datatype;
  static MPI_Datatype null() noexcept { return MPI_DATATYPE_NULL; }
  static void free(MPI_Datatype* t) noexcept {
    if (*t != MPI_DATATYPE_NULL && !mpi_finalized()) MPI_Type_free(t);
  }
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

}  // namespace collc::detail
