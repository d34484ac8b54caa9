# Runs the compiler on SRC and passes only if compilation fails with a
# diagnostic containing the text after "// expect: " in SRC.
file(STRINGS ${SRC} _expect REGEX "^// expect: ")
string(REGEX REPLACE "^// expect: " "" _expect "${_expect}")
if(_expect STREQUAL "")
  message(FATAL_ERROR "${SRC} has no '// expect: ' line")
endif()
execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${SRC}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but it must fail with: ${_expect}")
endif()
string(FIND "${_err}" "${_expect}" _pos)
if(_pos EQUAL -1)
  message(FATAL_ERROR "${SRC} failed to compile, but without '${_expect}':\n${_err}")
endif()
message(STATUS "failed as expected: ${_expect}")
