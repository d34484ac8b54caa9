# libcollc_mpi's Fortran tests, one program per binding style: include
# 'mpif.h', use mpi, use mpi_f08. Each is built as a user builds an unmodified
# program, with the MPI's mpif90 and no collc library, then compare.sh runs it
# plain and with libcollc_mpi preloaded. Under Open MPI the library's Fortran
# entry points take the calls (COLLC_PMPI_FORTRAN); under MPICH its Fortran
# bindings call the C names. At 3 ranks the count of MPI_Allreduce calls is
# checked exactly, so a call caught twice (or missed) fails.
# The project does not enable CMake's Fortran language for this: a custom
# command calls the wrapper.
if(COLLC_PMPI_FORTRAN)
  find_program(COLLC_MPIFORT NAMES mpif90.openmpi mpif90 DOC "the MPI's Fortran compiler wrapper")
else()
  find_program(COLLC_MPIFORT NAMES mpif90.mpich DOC "the MPI's Fortran compiler wrapper")
endif()
if(NOT COLLC_MPIFORT)
  message(STATUS "collc: no mpif90 (Debian: gfortran and libopenmpi-dev); the Fortran tests of libcollc_mpi are skipped")
  return()
endif()

set(_collc_fortran_programs "")
foreach(style IN ITEMS mpif usempi usempif08)
  # Each program gets its own folder: all three define modules of the same names.
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/fortran_${style})
  file(MAKE_DIRECTORY ${dir})
  set(flags "")
  if(style STREQUAL "mpif")
    # mpif.h has no interfaces; gfortran 10+ rejects one routine called with
    # different buffer types in one file unless told that this is intended
    # (and then warns about each call, which is what mpif.h means).
    set(flags -fallow-argument-mismatch -w)
  endif()
  add_custom_command(OUTPUT ${dir}/f_${style}
    COMMAND ${COLLC_MPIFORT} -cpp -O1 ${flags} -I${CMAKE_CURRENT_SOURCE_DIR}
            ${CMAKE_CURRENT_SOURCE_DIR}/f_${style}.f90 -o ${dir}/f_${style}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/f_${style}.f90 ${CMAKE_CURRENT_SOURCE_DIR}/f_collectives.inc
    WORKING_DIRECTORY ${dir}
    COMMENT "Building the Fortran test f_${style} with ${COLLC_MPIFORT}"
    VERBATIM)
  list(APPEND _collc_fortran_programs ${dir}/f_${style})

  collc_add_pmpi_test(pmpi_fortran_${style} RANKS 1 2 4 EXPECT ${COLLC_PMPI_ALL}
    COMMAND ${dir}/f_${style})
  collc_add_pmpi_test(pmpi_fortran_${style} RANKS 3 EXPECT ${COLLC_PMPI_ALL}
    CHECK --calls MPI_Allreduce=118 --calls MPI_Reduce=48 COMMAND ${dir}/f_${style})
endforeach()
add_custom_target(collc_pmpi_fortran_tests ALL DEPENDS ${_collc_fortran_programs})
