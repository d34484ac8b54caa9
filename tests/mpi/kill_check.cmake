# cmake -P script behind the kill test: snapshot /dev/shm, `ipcs -m` and the
# Open MPI session directories, run kill_helper (one rank SIGKILLs itself
# mid-collective), then check that nothing new is left behind.
# Inputs: -DMPIEXEC=... -DFLAGS=... (;-list) -DHELPER=... -DRANKS=... -DWORK=...
# ctest runs it alone (RUN_SERIAL); entries still in use by a live process
# (another job on a shared machine) are not counted as left behind.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
function(snapshot out)
  file(GLOB shm LIST_DIRECTORIES true /dev/shm/*)
  file(GLOB_RECURSE sess LIST_DIRECTORIES true /tmp/ompi.*/* /tmp/mpich*/*)
  execute_process(COMMAND ipcs -m OUTPUT_VARIABLE ipc ERROR_QUIET)
  # "key shmid owner perms bytes nattch": keep only unattached segments.
  string(REGEX MATCHALL "\n0x[0-9a-f]+ +[0-9]+ +[^ ]+ +[0-9]+ +[0-9]+ +0( |\n)" ids "${ipc}")
  set(${out} ${shm} ${sess} ${ids} PARENT_SCOPE)
endfunction()

snapshot(before)
file(REMOVE ${WORK}/kill_alive.txt)
execute_process(COMMAND ${MPIEXEC} -n ${RANKS} ${FLAGS} ${HELPER} ${WORK}/kill_alive.txt
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "helper exit: ${rc}\n${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "kill_helper exited normally; it should have been killed")
endif()
if(NOT out MATCHES "rank 1 will SIGKILL itself")
  message(FATAL_ERROR "kill_helper did not reach its loop:\n${out}\n${err}")
endif()
file(READ ${WORK}/kill_alive.txt alive)
message(STATUS "while alive:\n${alive}")
execute_process(COMMAND sleep 1)
snapshot(after)
set(left "")
foreach(x IN LISTS after)
  if(x IN_LIST before)
    continue()
  endif()
  # A file mapped by a live process, or a session directory of a live
  # mpiexec, belongs to a job still running.
  if(x MATCHES "^/")
    execute_process(COMMAND sh -c "grep -ls '${x}' /proc/[0-9]*/maps" OUTPUT_VARIABLE users ERROR_QUIET)
    if(users)
      continue()
    endif()
    if(x MATCHES "/pid\\.([0-9]+)" AND EXISTS /proc/${CMAKE_MATCH_1})
      continue()
    endif()
  endif()
  list(APPEND left "${x}")
endforeach()
if(left)
  message(FATAL_ERROR "left behind after the killed run: ${left}")
endif()
message(STATUS "nothing left behind in /dev/shm, ipcs -m or the MPI session directories")
