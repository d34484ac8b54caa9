#!/usr/bin/env bash
# Runs c_mismatch with libcollc_mpi preloaded and checks the diagnosis:
#   mismatch.sh MPIEXEC NP LIB PROGRAM fatal|return
# fatal: the job must fail (MPI_ERRORS_ARE_FATAL) within the time limit, with
# collc's diagnosis naming the call and the disagreement on stderr; return:
# the program must finish, every rank having seen the error code.
set -uo pipefail
mpiexec=$1 np=$2 lib=$3 prog=$4 mode=$5
flags=() envs=()
for e in "LD_PRELOAD=$lib" COLLC_PMPI_FROM_CALL=1 COLLC_TIMEOUT=20; do
  if "$mpiexec" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then envs+=(-x "$e"); else envs+=(-genv "${e%%=*}" "${e#*=}"); fi
done
"$mpiexec" --version 2>&1 | grep -q "Open MPI\|OpenRTE" && flags=(--oversubscribe --allow-run-as-root --bind-to none)
out=$(timeout 120 "$mpiexec" -n "$np" "${flags[@]}" "${envs[@]}" "$prog" "$mode" 2>&1)
rc=$?
echo "$out" | head -40
[[ $rc -ne 124 ]] || { echo "mismatch.sh: the run hung (killed after 120 s)"; exit 1; }
echo "$out" | grep -q "collc pmpi: MPI_Allreduce on rank .*count" || { echo "mismatch.sh: no diagnosis naming MPI_Allreduce and the counts"; exit 1; }
if [[ $mode == fatal ]]; then
  [[ $rc -ne 0 ]] || { echo "mismatch.sh: the job succeeded although the error handler is MPI_ERRORS_ARE_FATAL"; exit 1; }
else
  [[ $rc -eq 0 ]] || { echo "mismatch.sh: exit code $rc with MPI_ERRORS_RETURN"; exit 1; }
  echo "$out" | grep -q "reported on every rank: yes; then $np ranks summed" || { echo "mismatch.sh: the program did not see the error on every rank and go on"; exit 1; }
fi
echo "mismatch.sh: diagnosed ($mode)"
