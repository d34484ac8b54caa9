# Extra registrations of the MPI backend's tests (included by tests/CMakeLists.txt).

# The inter-node path on one machine: pseudo-nodes of 2 and 3 ranks from the
# environment, in blocks and round robin (ranks renumbered into blocks).
collc_add_mpi_test(mpi_test_plan_pseudo2 mpi_test_plan RANKS 2 4 5 ENV COLLC_RANKS_PER_NODE=2)
collc_add_mpi_test(mpi_test_plan_pseudo3 mpi_test_plan RANKS 3 7 8 ENV COLLC_RANKS_PER_NODE=3)
collc_add_mpi_test(mpi_test_plan_round_robin mpi_test_plan RANKS 4 7
                   ENV COLLC_RANKS_PER_NODE=2 COLLC_PLACEMENT=round_robin)
collc_add_mpi_test(mpi_test_plan_errors_pseudo2 mpi_test_plan_errors RANKS 4 ENV COLLC_RANKS_PER_NODE=2)

# A rank SIGKILLed mid-collective leaves no shared memory behind.
add_executable(mpi_kill_helper ${CMAKE_CURRENT_LIST_DIR}/kill_helper.cpp)
target_link_libraries(mpi_kill_helper PRIVATE collc::mpi collc_warnings)
add_test(NAME mpi_kill_leaves_nothing
  COMMAND ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE} "-DFLAGS=${COLLC_MPIEXEC_FLAGS}"
          -DHELPER=$<TARGET_FILE:mpi_kill_helper> -DRANKS=4 -DWORK=${CMAKE_CURRENT_BINARY_DIR}
          -P ${CMAKE_CURRENT_LIST_DIR}/kill_check.cmake)
# Alone: other tests create and remove segments of their own meanwhile.
set_tests_properties(mpi_kill_leaves_nothing PROPERTIES RUN_SERIAL TRUE TIMEOUT 300
  ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")

# COLLC_ON_TIMEOUT=abort: the report, then MPI_Abort.
add_executable(mpi_timeout_helper ${CMAKE_CURRENT_LIST_DIR}/timeout_helper.cpp)
target_link_libraries(mpi_timeout_helper PRIVATE collc::mpi collc_warnings)
collc_add_mpi_test(mpi_timeout_abort mpi_timeout_helper RANKS 2 4 ENV COLLC_TIMEOUT=0.5 COLLC_ON_TIMEOUT=abort)
foreach(k 2 4)
  set_tests_properties(mpi_timeout_abort_np${k} PROPERTIES
    PASS_REGULAR_EXPRESSION "collc: timeout after [0-9.]+ s: rank 0 waits for .* from rank [0-9]+ at instruction [0-9]+.*aborting"
    FAIL_REGULAR_EXPRESSION "not aborted")
endforeach()
