# Extra registrations of the MPI backend's tests (included by tests/CMakeLists.txt).

# The inter-node path on one machine: pseudo-nodes of 1 (every rank its own
# node: the programs ir::engine_form shortens most), 2 and 3 ranks from the
# environment, in blocks and round robin (ranks renumbered into blocks).
collc_add_mpi_test(mpi_test_plan_pseudo1 mpi_test_plan RANKS 2 4 ENV COLLC_RANKS_PER_NODE=1)
collc_add_mpi_test(mpi_test_plan_pseudo2 mpi_test_plan RANKS 2 4 5 ENV COLLC_RANKS_PER_NODE=2)
collc_add_mpi_test(mpi_test_plan_pseudo3 mpi_test_plan RANKS 3 7 8 ENV COLLC_RANKS_PER_NODE=3)
collc_add_mpi_test(mpi_test_plan_round_robin mpi_test_plan RANKS 4 7
                   ENV COLLC_RANKS_PER_NODE=2 COLLC_PLACEMENT=round_robin)
# Large sends started before a signal wait complete (test_plan.cpp, "[.progress]").
collc_add_mpi_test(mpi_test_plan_progress mpi_test_plan RANKS 7 8 ENV COLLC_RANKS_PER_NODE=3 ARGS "[progress]")
collc_add_mpi_test(mpi_test_plan_errors_pseudo2 mpi_test_plan_errors RANKS 4 ENV COLLC_RANKS_PER_NODE=2)

# A rank SIGKILLed mid-collective leaves no shared memory behind.
add_executable(mpi_kill_helper ${CMAKE_CURRENT_LIST_DIR}/kill_helper.cpp)
target_link_libraries(mpi_kill_helper PRIVATE collc_project_mpi collc_warnings)
add_test(NAME mpi_kill_leaves_nothing
  COMMAND ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE} "-DFLAGS=${COLLC_MPIEXEC_FLAGS}"
          -DHELPER=$<TARGET_FILE:mpi_kill_helper> -DRANKS=4 -DWORK=${CMAKE_CURRENT_BINARY_DIR}
          -P ${CMAKE_CURRENT_LIST_DIR}/kill_check.cmake)
# Alone: other tests create and remove segments of their own meanwhile.
set_tests_properties(mpi_kill_leaves_nothing PROPERTIES RUN_SERIAL TRUE TIMEOUT 300
  ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")

# COLLC_ON_TIMEOUT=abort: the report, then MPI_Abort.
add_executable(mpi_timeout_helper ${CMAKE_CURRENT_LIST_DIR}/timeout_helper.cpp)
target_link_libraries(mpi_timeout_helper PRIVATE collc_project_mpi collc_warnings)
collc_add_mpi_test(mpi_timeout_abort mpi_timeout_helper RANKS 2 4 ENV COLLC_TIMEOUT=0.5 COLLC_ON_TIMEOUT=abort)
foreach(k 2 4)
  set_tests_properties(mpi_timeout_abort_np${k} PROPERTIES
    PASS_REGULAR_EXPRESSION "collc: timeout after [0-9.]+ s: rank 0 waits for .* from rank [0-9]+ at instruction [0-9]+.*aborting"
    FAIL_REGULAR_EXPRESSION "not aborted")
endforeach()
# ... and in setup (it threw there before, whatever COLLC_ON_TIMEOUT said).
collc_add_mpi_test(mpi_timeout_abort_setup mpi_timeout_helper RANKS 2 ENV COLLC_TIMEOUT=0.5 COLLC_ON_TIMEOUT=abort
                   ARGS setup)
set_tests_properties(mpi_timeout_abort_setup_np2 PROPERTIES
  PASS_REGULAR_EXPRESSION "collc: timeout after [0-9.]+ s in the setup of allreduce count=200 .* rank 1 did not arrive.*aborting"
  FAIL_REGULAR_EXPRESSION "not aborted")
# A first round left pending by a timeout (1e-9 s: every rank times out) and
# MPI_Finalize: Open MPI crashed tearing down the half-made duplicate (exit
# status 139 in 2 of 3 runs before registry::settle_abandoned).
collc_add_mpi_test(mpi_timeout_first_round mpi_timeout_helper RANKS 2 3 ENV COLLC_TIMEOUT=1e-9 ARGS first-round)
set_tests_properties(mpi_timeout_first_round_np2 mpi_timeout_first_round_np3 PROPERTIES
  FAIL_REGULAR_EXPRESSION "helper: built|Segmentation fault")

# Issue 11: the stress test (test_stress.cpp, registered by the glob at
# COLLC_TEST_RANKS) also at P = 6 (the issue's make_reduce<double>(56176)
# case) and on pseudo-nodes; the safety tests (test_plan_safety.cpp) on
# pseudo-nodes too. Their waits are bounded by small plan timeouts; ctest's
# limit is a backstop.
collc_add_mpi_test(mpi_test_stress_p6 mpi_test_stress RANKS 6)
collc_add_mpi_test(mpi_test_stress_pseudo1 mpi_test_stress RANKS 4 ENV COLLC_RANKS_PER_NODE=1)
collc_add_mpi_test(mpi_test_stress_pseudo2 mpi_test_stress RANKS 4 ENV COLLC_RANKS_PER_NODE=2)
collc_add_mpi_test(mpi_test_stress_pseudo3 mpi_test_stress RANKS 7 ENV COLLC_RANKS_PER_NODE=3)
collc_add_mpi_test(mpi_test_plan_safety_pseudo2 mpi_test_plan_safety RANKS 4 ENV COLLC_RANKS_PER_NODE=2)
# The randomized plans (test_random.cpp) draw pseudo-nodes per plan too; here
# every plan of the run is between pseudo-nodes, as on a cluster, except plans
# on the 2-rank halves of the parity split (one pseudo-node each).
collc_add_mpi_test(mpi_test_random_pseudo2 mpi_test_random RANKS 4 ENV COLLC_RANKS_PER_NODE=2)
# Misaligned user buffers (test_misaligned.cpp) between pseudo-nodes: copies
# into shm streamed, then sent from shm by MPI, with the network's 4 MiB chunk.
collc_add_mpi_test(mpi_test_misaligned_pseudo2 mpi_test_misaligned RANKS 4 ENV COLLC_RANKS_PER_NODE=2)
foreach(k IN LISTS COLLC_TEST_RANKS)
  set_tests_properties(mpi_test_stress_np${k} mpi_test_plan_safety_np${k} mpi_test_plan_moved_np${k}
                       PROPERTIES TIMEOUT 180)
endforeach()
# More ranks than cores: mpi_test_stress_pseudo2_np4 takes 14 s alone and took
# 177 s in a loaded CI-like run beside other tests.
set_tests_properties(mpi_test_stress_p6_np6 mpi_test_stress_pseudo1_np4 mpi_test_stress_pseudo2_np4 mpi_test_stress_pseudo3_np7
                     mpi_test_plan_safety_pseudo2_np4 PROPERTIES TIMEOUT 360)

# A plan called after MPI_Finalize throws a collc::error saying so, and is
# destroyed afterwards without crashing (every rank prints its PASS line).
add_executable(mpi_finalize_helper ${CMAKE_CURRENT_LIST_DIR}/finalize_helper.cpp)
target_link_libraries(mpi_finalize_helper PRIVATE collc_project_mpi collc_warnings)
collc_add_mpi_test(mpi_finalize_after mpi_finalize_helper RANKS 2)
set_tests_properties(mpi_finalize_after_np2 PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "rank 0: plans destroyed after MPI_Finalize without crashing; PASS"
  FAIL_REGULAR_EXPRESSION "FAIL|exited on signal|Segmentation fault|signal [0-9]+|core dumped")

# Thread safety: two threads, each with its own communicator and plans,
# concurrently under MPI_THREAD_MULTIPLE (skips itself without it).
add_executable(mpi_thread_safety ${CMAKE_CURRENT_LIST_DIR}/thread_safety.cpp)
target_link_libraries(mpi_thread_safety PRIVATE collc_project_mpi collc_warnings)
find_package(Threads REQUIRED)
target_link_libraries(mpi_thread_safety PRIVATE Threads::Threads)
collc_add_mpi_test(mpi_thread_safety mpi_thread_safety RANKS 2 4)
set_tests_properties(mpi_thread_safety_np2 mpi_thread_safety_np4 PROPERTIES TIMEOUT 120
  FAIL_REGULAR_EXPRESSION "FAIL")

# COLLC_ENABLE_CHECKS=1: every plan proves, at setup, the programs it binds in
# the order it runs them (engine::verify_runs), on one node and pseudo-nodes.
collc_add_mpi_test(mpi_test_plan_checked mpi_test_plan RANKS 3 ENV COLLC_ENABLE_CHECKS=1)
# Between pseudo-nodes the large-message case also runs in 64 KiB chunks
# (many chunks and a tail, proven as the engine runs them). In nodes of 1 the
# whole file runs with the default 4 MiB network chunk too: the verifier
# proves those plans in element groups (verify.hpp) in seconds. In nodes of
# 2 the 8 and 16 MiB allreduce's chunk and tail programs cut the shm and the
# buffers too finely to group, so it is proven element by element, tens of
# seconds per oversubscribed rank (55 s of this 2-core machine at 4 ranks):
# there the large-message case runs only in 64 KiB chunks.
function(collc_add_checked_pseudo per_node ranks filter)
  collc_add_mpi_test(mpi_test_plan_checked_pseudo${per_node} mpi_test_plan RANKS ${ranks}
                     ENV COLLC_ENABLE_CHECKS=1 COLLC_RANKS_PER_NODE=${per_node}
                     ARGS ${filter})
  collc_add_mpi_test(mpi_test_plan_checked_chunks_pseudo${per_node} mpi_test_plan RANKS ${ranks}
                     ENV COLLC_ENABLE_CHECKS=1 COLLC_RANKS_PER_NODE=${per_node} COLLC_CHUNK_BYTES=65536
                     ARGS "large messages run in bounded chunks")
endfunction()
# A plan that checks cannot prove within verify's memory is refused at setup,
# by name (the case needs 6 ranks in nodes of 3).
collc_add_mpi_test(mpi_test_plan_errors_checks_limit mpi_test_plan_errors RANKS 6 ARGS "[.checks_limit]")
collc_add_checked_pseudo(1 3 "[plan]")
collc_add_checked_pseudo(2 4 "[plan]~large messages run in bounded chunks")

# The next job removes /dev/shm segments a dead collc process left behind,
# and nothing else (tests/mpi/stale_segments.sh). Alone: the kill test
# compares /dev/shm before and after.
add_test(NAME mpi_stale_segments_swept
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/stale_segments.sh ${MPIEXEC_EXECUTABLE} -n 2 ${COLLC_MPIEXEC_FLAGS}
          $<TARGET_FILE:mpi_test_plan_moved>)
set_tests_properties(mpi_stale_segments_swept PROPERTIES RUN_SERIAL TRUE TIMEOUT 120
  ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1")

# A /dev/shm too small for the plans' segments (tests/mpi/shm_full.sh: a
# private tmpfs of 3 MiB): the window fallback, not SIGBUS inside a call.
# Open MPI only (its MCA variables move its own files out of the way).
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _collc_shm_mpiexec ERROR_QUIET)
if(_collc_shm_mpiexec MATCHES "Open MPI|OpenRTE")
  add_executable(mpi_shm_full_helper ${CMAKE_CURRENT_LIST_DIR}/shm_full_helper.cpp)
  target_link_libraries(mpi_shm_full_helper PRIVATE collc_project_mpi collc_warnings)
  add_test(NAME mpi_shm_full
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/shm_full.sh 3m ${MPIEXEC_EXECUTABLE} -n 2 ${COLLC_MPIEXEC_FLAGS}
            $<TARGET_FILE:mpi_shm_full_helper>)
  set_tests_properties(mpi_shm_full PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "16 plans alive, 0 wrong elements: PASS"
    FAIL_REGULAR_EXPRESSION "Bus error|signal 7|FAIL")
endif()

# Ranks on hosts of their own (COLLC_TEST_HOST_RANKS, test_plan_errors.cpp):
# a failed peer's registry line is not visible, as between machines.
collc_add_mpi_test(mpi_test_plan_errors_hosts mpi_test_plan_errors RANKS 3 4 ENV COLLC_TEST_HOST_RANKS=1 ARGS "[hosts]")
