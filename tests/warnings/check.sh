#!/usr/bin/env bash
# Users build with -Wall -Werror: collc's headers must be warning-free.
# Compiles all_headers.cpp (header-only mode: every definition visible) with
# each compiler given, at -O2 and -O3, with -Wall -Wextra -Wpedantic -Werror.
# usage: check.sh SOURCE INCLUDE_DIR "MPI_INCLUDE_DIRS" CXX...
set -uo pipefail
src=$1 inc=$2 mpi_inc=$3; shift 3
flags=(-std=c++20 -Wall -Wextra -Wpedantic -Werror)
incs=(-I"$inc")
for d in ${mpi_inc//;/ }; do incs+=(-isystem "$d"); done
fail=0
for cxx in "$@"; do
  command -v "$cxx" >/dev/null || { echo "warnings: $cxx not found, skipped"; continue; }
  for opt in -O2 -O3; do
    # Compiled for real: -fsyntax-only misses the optimisers' warnings (-Wrestrict, -Wmaybe-uninitialized).
    if ! "$cxx" "${flags[@]}" "$opt" "${incs[@]}" -c "$src" -o /dev/null 2> warnings.log; then
      echo "warnings: $cxx $opt: collc's headers are not warning-free:"; head -40 warnings.log; fail=1
    else
      echo "warnings: $cxx $opt: clean"
    fi
  done
done
exit $fail
