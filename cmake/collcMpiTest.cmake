# collc_add_mpi_test(<name> <target> [RANKS k...] [ENV var=value...])
# Registers <name>_np<k> running <target> under mpiexec with k ranks. This
# machine has fewer cores than the larger k, so oversubscription is allowed;
# CI runs as root, which Open MPI refuses without an explicit flag.
set(COLLC_TEST_RANKS 1 2 3 4 5 7 8 CACHE STRING "Rank counts for MPI tests")
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _collc_mpiexec_version ERROR_QUIET)
if(_collc_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(COLLC_MPI_IS_OPEN_MPI TRUE)
  set(COLLC_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root --bind-to none --mca btl_vader_single_copy_mechanism none)
else()
  set(COLLC_MPI_IS_OPEN_MPI FALSE)
  set(COLLC_MPIEXEC_FLAGS "")  # MPICH (Hydra) oversubscribes and runs as root by default
endif()

function(collc_add_mpi_test name target)
  cmake_parse_arguments(ARG "" "" "RANKS;ENV;ARGS" ${ARGN})
  if(NOT ARG_RANKS)
    set(ARG_RANKS ${COLLC_TEST_RANKS})
  endif()
  foreach(k IN LISTS ARG_RANKS)
    add_test(NAME ${name}_np${k}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${k} ${COLLC_MPIEXEC_FLAGS}
              $<TARGET_FILE:${target}> ${ARG_ARGS})
    set_tests_properties(${name}_np${k} PROPERTIES TIMEOUT 300 PROCESSORS 2
      ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1;${ARG_ENV}")
  endforeach()
endfunction()
