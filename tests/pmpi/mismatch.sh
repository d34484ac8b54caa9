#!/usr/bin/env bash
# Runs c_mismatch with libcollc_mpi preloaded and checks the diagnosis:
#   mismatch.sh MPIEXEC NP LIB PROGRAM fatal|return|cached|routed|root
# fatal: the job must fail (MPI_ERRORS_ARE_FATAL) within the time limit, with
# collc's diagnosis naming the call and the disagreement on stderr; return:
# the program must finish, every rank having seen the error code; cached: as
# return, for a mismatch between a new plan on one rank and a cached one on
# the others, found without waiting for COLLC_TIMEOUT; root (np 4, pseudo-
# routed: as fatal, for a mismatch between a call one rank leaves to MPI (a
# signature's first call) and a cached plan on the others, found without
# waiting for COLLC_TIMEOUT; root (np 4, pseudo-nodes of 2): bcast roots differ, then allreduces on new communicators must
# be right.
set -uo pipefail
mpiexec=$1 np=$2 lib=$3 prog=$4 mode=$5
flags=() envs=()
extra=()
[[ $mode != root ]] || extra=(COLLC_RANKS_PER_NODE=2)  # messages between pseudo-nodes
from_call=1
[[ $mode != routed ]] || from_call=2  # rank 0's new count goes to MPI, the others' cached one to collc
for e in "LD_PRELOAD=$lib" COLLC_PMPI_FROM_CALL=$from_call COLLC_TIMEOUT=20 "${extra[@]}"; do
  if "$mpiexec" --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then envs+=(-x "$e"); else envs+=(-genv "${e%%=*}" "${e#*=}"); fi
done
"$mpiexec" --version 2>&1 | grep -q "Open MPI\|OpenRTE" && flags=(--oversubscribe --allow-run-as-root --bind-to none)
out=$(timeout 120 "$mpiexec" -n "$np" "${flags[@]}" "${envs[@]}" "$prog" "$mode" 2>&1)
rc=$?
echo "$out" | head -40
[[ $rc -ne 124 ]] || { echo "mismatch.sh: the run hung (killed after 120 s)"; exit 1; }
if [[ $mode == root ]]; then
  echo "$out" | grep -q "collc pmpi: MPI_Bcast on rank .*root=" || { echo "mismatch.sh: no diagnosis naming MPI_Bcast and the roots"; exit 1; }
  [[ $rc -eq 0 ]] && echo "$out" | grep -q "then calls on new communicators: 0 wrong" ||
    { echo "mismatch.sh: wrong results (or exit code $rc) on new communicators after the mismatch"; exit 1; }
  echo "mismatch.sh: diagnosed ($mode)"; exit 0
fi
echo "$out" | grep -q "collc pmpi: MPI_Allreduce on rank .*count" || { echo "mismatch.sh: no diagnosis naming MPI_Allreduce and the counts"; exit 1; }
# cached, routed: the disagreement must be found as one, not by COLLC_TIMEOUT.
if [[ $mode == cached || $mode == routed ]] && echo "$out" | grep -q "timeout after"; then
  echo "mismatch.sh: the ranks waited for each other until COLLC_TIMEOUT instead of finding the mismatch"; exit 1
fi
# routed: the rank that printed first (the job then ends) saw rank 0's call
# left to MPI, or a peer's mark of that mismatch.
if [[ $mode == routed ]] && ! echo "$out" | grep -q "left to the MPI library\|after an error (mismatch)\|found call #[0-9]* mismatched"; then
  echo "mismatch.sh: no diagnosis of the mismatch with the call left to the MPI library"; exit 1
fi
if [[ $mode == fatal || $mode == routed ]]; then
  [[ $rc -ne 0 ]] || { echo "mismatch.sh: the job succeeded although the error handler is MPI_ERRORS_ARE_FATAL"; exit 1; }
else
  [[ $rc -eq 0 ]] || { echo "mismatch.sh: exit code $rc with MPI_ERRORS_RETURN"; exit 1; }
  echo "$out" | grep -q "reported on every rank: yes; then $np ranks summed" || { echo "mismatch.sh: the program did not see the error on every rank and go on"; exit 1; }
fi
echo "mismatch.sh: diagnosed ($mode)"
