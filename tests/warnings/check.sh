#!/usr/bin/env bash
# Users build with -Wall -Werror: collc's headers must be warning-free.
# Compiles all_headers.cpp (header-only mode: every definition visible) with
# one compiler at one optimisation level, with -Wall -Wextra -Wpedantic
# -Werror. tests/CMakeLists.txt registers one test per compiler (g++,
# clang++) and level (-O2, -O3), so they run side by side and fail by name.
# usage: check.sh SOURCE INCLUDE_DIR "MPI_INCLUDE_DIRS" CXX OPT
set -uo pipefail
src=$1 inc=$2 mpi_inc=$3 cxx=$4 opt=$5
flags=(-std=c++20 -Wall -Wextra -Wpedantic -Werror)
incs=(-I"$inc")
for d in ${mpi_inc//;/ }; do incs+=(-isystem "$d"); done
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Compiled for real: -fsyntax-only misses the optimisers' warnings (-Wrestrict, -Wmaybe-uninitialized).
if ! "$cxx" "${flags[@]}" "$opt" "${incs[@]}" -c "$src" -o /dev/null 2> "$log"; then
  echo "warnings: $cxx $opt: collc's headers are not warning-free:"
  head -40 "$log"
  exit 1
fi
echo "warnings: $cxx $opt: clean"
