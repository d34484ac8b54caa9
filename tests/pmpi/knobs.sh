#!/usr/bin/env bash
# libcollc_mpi's environment knobs, under Open MPI (its MPMD syntax gives the
# ranks different environments):
#   knobs.sh MPIEXEC LIB PROGRAM
# 1. A value that does not parse stops the program at MPI_Init with the
#    variable's name and value.
# 2. Ranks with different values stop it with the variable's name and both values.
# 3. COLLC_PMPI=0: the statistics show every call went to MPI, switched off.
# 4. A plan variable that does not parse (COLLC_ENABLE_CHECKS=maybe) stops the
#    program at MPI_Init too, instead of refusing every plan in silence.
# 5. A schedule that does not fit (COLLC_FACTORS=-3,3 at 2 ranks): the
#    statistics say why the plans went to MPI, naming the variable.
# 6. A schedule override that does not parse (COLLC_ALGO=rign) stops the
#    program at MPI_Init, whatever the communicators' sizes.
set -uo pipefail
mpiexec=$1 lib=$2 prog=$3
flags=(--oversubscribe --allow-run-as-root --bind-to none)
fail() { echo "knobs.sh: $*"; exit 1; }
# refused N VAR=VALUE TEXT: the program, run with VAR=VALUE, stops at
# MPI_Init (not a timeout) and its output holds TEXT (a grep pattern).
refused() {
  local n=$1 setting=$2 text=$3 out rc
  out=$(timeout 60 "$mpiexec" -n 2 "${flags[@]}" -x "LD_PRELOAD=$lib" -x "$setting" "$prog" 1 2>&1)
  rc=$?
  [[ $rc -ne 0 && $rc -ne 124 ]] || fail "$setting did not stop the program (rc $rc)"
  echo "$out" | grep -q "$text" || fail "no message naming $setting: $out"
  echo "$n. refused: $(echo "$out" | grep -m1 "$text")"
}

refused 1 COLLC_PMPI_FROM_CALL=ten "COLLC_PMPI_FROM_CALL.*ten"

out=$(timeout 60 "$mpiexec" "${flags[@]}" -n 1 -x "LD_PRELOAD=$lib" -x COLLC_PMPI_CACHE=8 "$prog" 1 : \
      -n 1 -x "LD_PRELOAD=$lib" -x COLLC_PMPI_CACHE=9 "$prog" 1 2>&1)
rc=$?
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "ranks with different COLLC_PMPI_CACHE did not stop the program (rc $rc)"
echo "$out" | grep -q "COLLC_PMPI_CACHE differs between ranks (from 8 to 9)" || fail "no message naming the difference: $out"
echo "2. refused: $(echo "$out" | grep -m1 'differs between ranks')"

out=$(timeout 120 "$mpiexec" -n 2 "${flags[@]}" -x "LD_PRELOAD=$lib" -x COLLC_PMPI=0 -x COLLC_PMPI_STATS=1 "$prog" 1 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 0 ]] || fail "COLLC_PMPI=0 run failed (rc $rc): $out"
echo "$out" | grep -q "MPI_Allreduce: 0 calls by collc" || fail "COLLC_PMPI=0 but collc took calls: $out"
echo "$out" | grep -q "MPI_Allreduce: [0-9,]* to MPI: switched off" || fail "no 'switched off' reason: $out"
echo "3. off: $(echo "$out" | grep -m1 'switched off')"

refused 4 COLLC_ENABLE_CHECKS=maybe "COLLC_ENABLE_CHECKS='maybe' is not a boolean"

out=$(timeout 120 "$mpiexec" -n 2 "${flags[@]}" -x "LD_PRELOAD=$lib" -x COLLC_FACTORS=-3,3 -x COLLC_PMPI_STATS=1 \
      -x COLLC_PMPI_FROM_CALL=1 "$prog" 1 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 0 ]] || fail "COLLC_FACTORS=-3,3 run failed (rc $rc): $out"
echo "$out" | grep -q "MPI_Allreduce: [0-9,]* to MPI: plan refused by collc at setup (the first: COLLC_FACTORS='-3,3': " ||
  fail "no reason naming COLLC_FACTORS for the refused plans: $out"
echo "5. reason: $(echo "$out" | grep -m1 'MPI_Allreduce: [0-9,]* to MPI: plan refused' | cut -c1-160)..."

refused 6 COLLC_ALGO=rign "COLLC_ALGO='rign': schedule 'rign': unknown schedule"
