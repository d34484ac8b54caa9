#pragma once
/// \file
/// Definitions of handles.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/handles.hpp>

#include <cstdint>
#include <string>

namespace collc::mpi {

COLLC_INLINE void throw_mpi_error(int rc, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  std::string message(call);
  message += " failed (code ";
  message += std::to_string(rc);
  message += "): ";
  message += text;
  throw error(errc::mpi_error, message);
}

COLLC_INLINE void* align_line(void* p) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return p == nullptr ? nullptr : reinterpret_cast<void*>((a + 63) & ~std::uintptr_t{63});
}

COLLC_INLINE bool mpi_finalized() noexcept {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

COLLC_INLINE void comm_kind::free(MPI_Comm* c) noexcept {
  if (*c != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(c);
}

COLLC_INLINE void win_kind::free(MPI_Win* w) noexcept {
  if (*w != MPI_WIN_NULL && !mpi_finalized()) MPI_Win_free(w);
}

COLLC_INLINE void type_kind::free(MPI_Datatype* t) noexcept {
  if (*t != MPI_DATATYPE_NULL && !mpi_finalized()) MPI_Type_free(t);
}

}  // namespace collc::mpi
