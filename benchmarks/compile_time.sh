#!/usr/bin/env bash
# Compile time of a user's translation unit that includes <collc/collc.hpp>
# and builds one allreduce plan, at -O2, header-only and compiled mode
# (COLLC_SEPARATE_COMPILATION, what the collc::compiled target defines):
# min of N runs (default 3), and the object's code size. A benchmark, not a
# test: the machine's load changes the figures, the ratio is what matters.
#   benchmarks/compile_time.sh [-n RUNS] [-c CXX]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3 cxx=mpicxx
while getopts "n:c:" o; do
  case $o in
    n) runs=$OPTARG ;;
    c) cxx=$OPTARG ;;
    *) echo "usage: $0 [-n RUNS] [-c CXX]" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "compile_time.sh: -n expects a positive integer, got '$runs'" >&2; exit 2; }
command -v "$cxx" >/dev/null || { echo "compile_time.sh: compiler '$cxx' not found (install MPI: scripts/setup)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/tu.cpp" <<'CPP'
#include <collc/collc.hpp>
#include <vector>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    auto plan = collc::make_allreduce<double>(MPI_COMM_WORLD, 1024);
    std::vector<double> in(1024, 1.0), out(1024);
    plan(in.data(), out.data());
  }
  MPI_Finalize();
}
CPP
measure() {  # measure <label> <extra flags...>: prints the min seconds and the text size
  local label=$1; shift
  local best=""
  for ((i = 0; i < runs; ++i)); do
    local t0 t1
    t0=$(date +%s.%N)
    "$cxx" -std=c++20 -O2 -Iinclude "$@" -c "$work/tu.cpp" -o "$work/tu.o"
    t1=$(date +%s.%N)
    best=$(awk -v a="$best" -v b="$(awk -v x="$t0" -v y="$t1" 'BEGIN{print y-x}')" 'BEGIN{print (a=="" || b<a) ? b : a}')
  done
  local text
  text=$(size "$work/tu.o" | awk 'NR==2{print $1}')
  printf "%-12s %6.2f s   object code %7.1f KB\n" "$label" "$best" "$(awk -v t="$text" 'BEGIN{print t/1024}')"
}
echo "collc compile time: one allreduce plan, -O2, min of $runs ($cxx, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
measure header-only
measure compiled -DCOLLC_SEPARATE_COMPILATION
# The floor: what any MPI C++ program pays for <mpi.h> and the standard headers collc uses.
cat > "$work/tu.cpp" <<'CPP'
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <string>
#include <vector>
#include <memory>
#include <functional>
#include <optional>
int main(int argc, char** argv) { MPI_Init(&argc, &argv); std::vector<double> v(4); MPI_Finalize(); return v.size() == 4 ? 0 : 1; }
CPP
measure "floor (mpi.h + std)"
