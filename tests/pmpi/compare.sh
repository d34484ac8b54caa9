#!/usr/bin/env bash
# Runs an MPI program twice, as built against the plain MPI library and with
# libcollc_mpi preloaded, and checks that (1) both runs succeed, (2) their
# standard output is identical (the programs print every result, or a digest
# of it, from rank 0), and (3) with COLLC_PMPI_STATS=1 the preloaded run's
# statistics show collc handled calls of each collective named by --expect.
#   compare.sh --mpiexec M --np N --lib L [--expect allreduce,bcast,...]
#              [--calls MPI_Name=N]... [--mpi-faster bcast,...|none] [--env VAR=VALUE]... -- program args...
# --calls: rank 0's statistics must count exactly N calls of MPI_Name (by
# collc and by MPI together): a call caught twice (a Fortran binding that
# calls the C name under a Fortran wrapper) or not at all shows here.
# --mpi-faster LIST: the statistics must show calls of each collective in
# LIST handed to MPI by the measured table (src/pmpi/measured.hpp); "none":
# no call of any collective was.
# The preloaded run forces collc onto every call it can take
# (COLLC_PMPI_FROM_CALL=1, COLLC_PMPI_SIZES=all) unless --env says otherwise.
set -euo pipefail
mpiexec="" np="" lib="" expect="" faster="" envs=() calls=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --mpiexec) mpiexec=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --calls) calls+=("$2"); shift 2 ;;
    --mpi-faster) faster=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ -n "$mpiexec" && -n "$np" && -f "$lib" && $# -gt 0 ]] || { echo "compare.sh: need --mpiexec, --np, --lib (an existing file) and a program" >&2; exit 2; }
flags=()
if "$mpiexec" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  flags=(--oversubscribe --allow-run-as-root --bind-to none --mca btl_vader_single_copy_mechanism none)
  envflag() { echo "-x" "$1"; }
else
  envflag() { echo "-genv" "${1%%=*}" "${1#*=}"; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pre_env=(COLLC_PMPI_STATS=1 COLLC_PMPI_FROM_CALL=1 COLLC_PMPI_SIZES=all "${envs[@]}" "LD_PRELOAD=$lib")
pre_flags=()
for e in "${pre_env[@]}"; do
  # shellcheck disable=SC2207
  pre_flags+=($(envflag "$e"))
done
if ! "$mpiexec" -n "$np" "${flags[@]}" "$@" >"$work/plain.out" 2>"$work/plain.err"; then
  echo "compare.sh: the plain run failed:"; cat "$work/plain.out" "$work/plain.err"; exit 1
fi
if ! "$mpiexec" -n "$np" "${flags[@]}" "${pre_flags[@]}" "$@" >"$work/pre.out" 2>"$work/pre.err"; then
  echo "compare.sh: the preloaded run failed:"; cat "$work/pre.out" "$work/pre.err"; exit 1
fi
if ! diff "$work/plain.out" "$work/pre.out" >"$work/diff"; then
  echo "compare.sh: results differ between the plain run (<) and the preloaded run (>):"
  head -50 "$work/diff"; exit 1
fi
lines=$(wc -l <"$work/plain.out")
[[ $lines -gt 0 ]] || { echo "compare.sh: the program printed nothing to compare"; exit 1; }
cat "$work/pre.err"
mpi_name() {
  case $1 in
    reduce_scatter_block) echo MPI_Reduce_scatter_block ;;
    reduce_scatter) echo MPI_Reduce_scatter ;;
    *) echo "MPI_${1^}" ;;
  esac
}
IFS=, read -r -a want <<<"$expect"
for c in "${want[@]}"; do
  [[ -n "$c" ]] || continue
  name=$(mpi_name "$c")
  if ! grep -Eq "^collc pmpi: $name: [1-9][0-9,]* calls by collc" "$work/pre.err"; then
    echo "compare.sh: the statistics do not show $name calls handled by collc"; exit 1
  fi
done
faster_reason="to MPI: size the MPI library does faster here"
if [[ $faster == none ]]; then
  if grep -E "^collc pmpi: +MPI_[A-Za-z_]+: [0-9,]+ $faster_reason" "$work/pre.err"; then
    echo "compare.sh: the measured table handed the calls above to MPI; expected none (another library's rows?)"; exit 1
  fi
elif [[ -n $faster ]]; then
  IFS=, read -r -a fast <<<"$faster"
  for c in "${fast[@]}"; do
    name=$(mpi_name "$c")
    if ! grep -Eq "^collc pmpi: +$name: [1-9][0-9,]* $faster_reason" "$work/pre.err"; then
      echo "compare.sh: the statistics do not show $name calls handed to MPI by the measured table"; exit 1
    fi
  done
fi
for c in "${calls[@]}"; do
  name=${c%%=*} want=${c#*=}
  line=$(grep -E "^collc pmpi: $name: " "$work/pre.err" || true)
  got=$(echo "$line" | sed -E 's/^collc pmpi: [A-Za-z_]+: ([0-9,]+) calls by collc .*, ([0-9,]+) to MPI .*/\1 \2/' | tr -d , |
        awk '{print $1 + $2}')
  [[ "$got" == "$want" ]] || { echo "compare.sh: $name counted ${got:-no} calls, expected $want (caught twice, or missed?)"; exit 1; }
done
echo "compare.sh: $lines lines of results identical with and without the preload (np $np)"
