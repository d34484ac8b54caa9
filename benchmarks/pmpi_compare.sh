#!/usr/bin/env bash
# libcollc_mpi under an unmodified program: benchmarks/pmpi_bench (built
# against the plain MPI library) run with and without the library preloaded,
# alternating in one session, R rounds; per size the median over rounds of
# each side's time per call (itself the median of 5 timed loops, slowest rank)
# and the ratio preloaded / plain. A benchmark, not a test (docs/pmpi.md).
#   benchmarks/pmpi_compare.sh -b BUILD [-p "2 4 8"] [-c "allreduce bcast ..."] [-r ROUNDS]
#                              [-m MAX_BYTES] [-e VAR=VALUE]...
# -b: a build directory with src/pmpi/libcollc_mpi.so (Open MPI build);
# -e: extra environment for the preloaded runs (e.g. COLLC_PMPI_FROM_CALL=1).
set -euo pipefail
cd "$(dirname "$0")/.."
build="" ranks="2" colls="allreduce" rounds=3 max=$((64 << 20)) extra=()
usage() { sed -n '2,12p' "$0" >&2; exit 2; }
while getopts "b:p:c:r:m:e:h" o; do
  case $o in
    b) build=$OPTARG ;; p) ranks=$OPTARG ;; c) colls=$OPTARG ;; r) rounds=$OPTARG ;;
    m) max=$OPTARG ;; e) extra+=(-x "$OPTARG") ;; *) usage ;;
  esac
done
lib=$build/src/pmpi/libcollc_mpi.so
[[ -f "$lib" ]] || { echo "pmpi_compare.sh: no $lib (build the target collc_pmpi in the -b directory)" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "pmpi_compare.sh: -r expects a positive integer, got '$rounds'" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/pmpi_bench" benchmarks/pmpi_bench.c
flags=(--oversubscribe --allow-run-as-root --bind-to none --mca btl_vader_single_copy_mechanism none)
echo "libcollc_mpi against plain $(mpiexec --version 2>&1 | head -1), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $rounds rounds; extra: ${extra[*]:-none}"
for p in $ranks; do
  for c in $colls; do
    for ((r = 0; r < rounds; ++r)); do
      mpiexec -n "$p" "${flags[@]}" "$work/pmpi_bench" --coll "$c" --max "$max" >"$work/plain.$r"
      mpiexec -n "$p" "${flags[@]}" -x "LD_PRELOAD=$lib" "${extra[@]}" "$work/pmpi_bench" --coll "$c" --max "$max" >"$work/pre.$r"
    done
    echo
    echo "P = $p, $c (double sum), us per call: plain | preloaded | ratio"
    echo "| bytes | plain MPI | with libcollc_mpi | ratio |"
    echo "|---:|---:|---:|---:|"
    python3 - "$work" "$rounds" <<'PY'
import statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def load(kind):
    runs = [dict(line.split() for line in open(f"{work}/{kind}.{r}")) for r in range(rounds)]
    return {int(b): statistics.median(float(run[b]) for run in runs) for b in runs[0]}
plain, pre = load("plain"), load("pre")
for b in sorted(plain):
    size = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"
    print(f"| {size} | {plain[b]:.2f} | {pre[b]:.2f} | {pre[b] / plain[b]:.2f} |")
PY
  done
done
