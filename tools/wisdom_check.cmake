# Command-line check of `collc wisdom clear` file safety (registered in
# tools/CMakeLists.txt): it never removes a user's file, a directory or what a
# symlink points at unless it is a wisdom file, and says why, with a non-zero
# exit.
#   cmake -DTOOL=<collc> -DWORK=<scratch dir> -P wisdom_check.cmake
set(dir "${WORK}/wisdom_check")
file(REMOVE_RECURSE "${dir}")
file(MAKE_DIRECTORY "${dir}/empty_dir")
set(notes "${dir}/notes.txt")
file(WRITE "${notes}" "my notes\n")
file(CREATE_LINK "${notes}" "${dir}/link" SYMBOLIC)

# run(<name> <expected exit: zero|nonzero> <regex> [env var=value] -- args...)
function(run name want regex)
  cmake_parse_arguments(ARG "" "" "ENV;ARGS" ${ARGN})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${ARG_ENV} "${TOOL}" ${ARG_ARGS}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(all "${out}${err}")
  if((want STREQUAL "nonzero" AND rc EQUAL 0) OR (want STREQUAL "zero" AND NOT rc EQUAL 0))
    message(FATAL_ERROR "${name}: exit ${rc}, expected ${want}; output:\n${all}")
  endif()
  if(NOT all MATCHES "${regex}")
    message(FATAL_ERROR "${name}: output does not match '${regex}':\n${all}")
  endif()
  message(STATUS "${name}: ok (exit ${rc}): ${all}")
endfunction()

function(expect_notes name)
  if(NOT EXISTS "${notes}")
    message(FATAL_ERROR "${name}: ${notes} was removed")
  endif()
  file(READ "${notes}" now)
  if(NOT now STREQUAL "my notes\n")
    message(FATAL_ERROR "${name}: ${notes} was changed to '${now}'")
  endif()
endfunction()

run(clear_notes nonzero "refusing to remove .*notes\\.txt.*not a collc wisdom file.*untouched"
    ARGS wisdom clear --file "${notes}")
expect_notes(clear_notes)
run(clear_notes_env nonzero "refusing to remove .*notes\\.txt.*not a collc wisdom file"
    ENV "COLLC_WISDOM=${notes}" ARGS wisdom clear)
expect_notes(clear_notes_env)
run(clear_link_to_notes nonzero "refusing to remove .*link \\(symlink to .*notes\\.txt\\).*not a collc wisdom file"
    ARGS wisdom clear --file "${dir}/link")
expect_notes(clear_link_to_notes)
if(NOT IS_SYMLINK "${dir}/link")
  message(FATAL_ERROR "clear_link_to_notes: the link was replaced")
endif()
run(clear_dir nonzero "refusing to remove .*empty_dir: it is a directory" ARGS wisdom clear --file "${dir}/empty_dir")
if(NOT IS_DIRECTORY "${dir}/empty_dir")
  message(FATAL_ERROR "clear_dir: the directory was removed")
endif()
run(show_dir nonzero "empty_dir ignored: it is not a regular file" ARGS wisdom show --file "${dir}/empty_dir")
run(clear_missing zero "no file at .*missing" ARGS wisdom clear --file "${dir}/missing")
file(REMOVE_RECURSE "${dir}")
