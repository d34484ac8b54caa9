# libcollc_mpi under programs nobody here wrote, run by compare.sh like the
# C test: a Python program (mpi4py) and a packaged Fortran application
# (MUMPS's examples). Both are Debian packages built against Open MPI, so the
# tests exist in Open MPI builds only, and only where the packages are
# installed (scripts/setup installs them): otherwise configure says so.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _collc_apps_mpiexec ERROR_QUIET)
if(NOT _collc_apps_mpiexec MATCHES "Open MPI|OpenRTE")
  message(STATUS "collc: not an Open MPI build; the mpi4py and MUMPS tests of libcollc_mpi are skipped")
  return()
endif()

# Python: the first python3 that imports mpi4py and numpy. The one on PATH
# may be a pyenv or virtualenv interpreter without Debian's packages, so the
# system one is tried too. (Importing mpi4py, not mpi4py.MPI, initialises
# nothing.)
set(COLLC_PMPI_PYTHON "" CACHE FILEPATH "python3 with mpi4py and numpy for the pmpi_python tests (searched when empty)")
set(_collc_python ${COLLC_PMPI_PYTHON})
if(NOT _collc_python)
  find_program(_collc_path_python python3 NO_CACHE)
  foreach(py IN ITEMS ${_collc_path_python} /usr/bin/python3)
    execute_process(COMMAND ${py} -c "import mpi4py, numpy" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      set(_collc_python ${py})
      break()
    endif()
  endforeach()
endif()
if(_collc_python)
  collc_add_pmpi_test(pmpi_python RANKS 1 2 4 EXPECT allreduce,bcast,reduce,allgather
    COMMAND ${_collc_python} ${CMAKE_CURRENT_SOURCE_DIR}/py_collectives.py)
else()
  message(STATUS "collc: no python3 with mpi4py and numpy (Debian: python3-mpi4py python3-numpy); the pmpi_python tests are skipped")
endif()

# MUMPS (Debian's mumps-test): the sparse direct solver's own example programs,
# Fortran through mpif.h, one per precision (real, double, complex, double
# complex), on the matrices the package ships. Each solve makes about 120
# MPI_Allreduce, 100 MPI_Bcast and 50 MPI_Reduce calls on MPI_INTEGER,
# MPI_DOUBLE_PRECISION, ... and its own communicators; the printed statistics
# and solution must match, with only the wall-clock times masked
# (mumps_simpletest.sh).
set(COLLC_PMPI_MUMPS_DIR /usr/lib/mumps CACHE PATH "where Debian's mumps-test puts its example programs")
if(NOT COLLC_PMPI_FORTRAN)
  message(STATUS "collc: libcollc_mpi built without Fortran entry points; the MUMPS tests are skipped")
elseif(NOT EXISTS ${COLLC_PMPI_MUMPS_DIR}/dsimpletest)
  message(STATUS "collc: no ${COLLC_PMPI_MUMPS_DIR}/dsimpletest (Debian: mumps-test); the pmpi_mumps tests are skipped")
else()
  foreach(p IN ITEMS s d c z)
    set(input ${COLLC_PMPI_MUMPS_DIR}/input_simpletest_real)
    if(p STREQUAL "c" OR p STREQUAL "z")
      set(input ${COLLC_PMPI_MUMPS_DIR}/input_simpletest_cmplx)
    endif()
    # Every precision at 2 ranks; double also at 4 (test time is CI's budget).
    set(ranks 2)
    if(p STREQUAL "d")
      set(ranks 2 4)
    endif()
    collc_add_pmpi_test(pmpi_mumps_${p} RANKS ${ranks} EXPECT allreduce,bcast,reduce
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mumps_simpletest.sh ${COLLC_PMPI_MUMPS_DIR}/${p}simpletest ${input})
  endforeach()
endif()
