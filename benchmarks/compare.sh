#!/usr/bin/env bash
# Runs collc-bench against Open MPI and against MPICH, alternating the two
# libraries round by round, then merges the CSVs so that collc is compared
# with the better library at each size (benchmarks/plot.py merge), prints the
# ratio tables and the bars, and draws the PNGs.
#
#   benchmarks/compare.sh -p "2 4" -r 2 -o results -- --coll allreduce --max-bytes 64M
#
# Options (before --; everything after -- goes to collc-bench):
#   -p "P..."   rank counts (default "2 4")
#   -r N        rounds; each round runs Open MPI, then MPICH (default 1)
#   -o DIR      output directory (default bench-results)
#   -b          bind ranks to cores (Open MPI --bind-to core, MPICH -bind-to core)
#               for runs with P <= cores; default: no binding
#   -n N        run the benchmarks under `nice -n N` (negative N needs root)
#   -q S        before each run wait up to S seconds for a quiet machine (less than
#               25 % of the CPUs busy over 2 s), for shared machines; default 0
#   -s          skip the runs, only merge / tabulate / plot what DIR holds
#   -t L        between nodes over TCP: Open MPI forced onto TCP (--mca btl self,tcp)
#               and collc's pseudo-nodes of L ranks (COLLC_RANKS_PER_NODE=L; 1: every
#               rank its own node), so both sides pay the same network stack
#               between (pseudo-)nodes; Open MPI only (MPICH is skipped)
# Binaries (defaults: build/benchmarks/collc-bench and build-mpich/benchmarks/collc-bench):
#   OPENMPI_BENCH, MPICH_BENCH   paths to collc-bench built against each library
#   OPENMPI_EXEC, MPICH_EXEC     mpiexec of each (default mpiexec.openmpi, mpiexec.mpich)
#   PYTHON                       a python3 with matplotlib (default /usr/bin/python3)
# Either library may be left out by setting its *_BENCH to "none".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"

ranks="2 4"
rounds=1
out=bench-results
bind=0
nice_level=""
skip=0
quiet=0
tcp_ranks_per_node=""
while getopts "p:r:o:bn:q:st:h" opt; do
  case "$opt" in
    p) ranks="$OPTARG" ;;
    r) rounds="$OPTARG" ;;
    o) out="$OPTARG" ;;
    b) bind=1 ;;
    n) nice_level="$OPTARG" ;;
    q) quiet="$OPTARG" ;;
    s) skip=1 ;;
    t) tcp_ranks_per_node="$OPTARG" ;;
    h) sed -n '2,27p' "$0"; exit 0 ;;
    *) sed -n '2,27p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
bench_args=("$@")
if [ -n "$tcp_ranks_per_node" ]; then
  if ! [[ "$tcp_ranks_per_node" =~ ^[1-9][0-9]*$ ]]; then
    echo "compare.sh: -t expects ranks per pseudo-node (a positive integer), got '$tcp_ranks_per_node'" >&2
    exit 2
  fi
  if [ "${MPICH_BENCH:-}" != none ]; then
    echo "compare.sh: -t runs Open MPI only (MPICH cannot be forced onto TCP the same way); MPICH skipped" >&2
  fi
  MPICH_BENCH=none
fi

openmpi_bench="${OPENMPI_BENCH:-$root/build/benchmarks/collc-bench}"
mpich_bench="${MPICH_BENCH:-$root/build-mpich/benchmarks/collc-bench}"
openmpi_exec="${OPENMPI_EXEC:-mpiexec.openmpi}"
mpich_exec="${MPICH_EXEC:-mpiexec.mpich}"
python="${PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python=python3
mkdir -p "$out"

libs=()
for lib in openmpi mpich; do
  var="${lib}_bench"
  bin="${!var}"
  if [ "$bin" = "none" ]; then continue; fi
  if [ ! -x "$bin" ]; then
    echo "compare.sh: no collc-bench for $lib at $bin (build it, or set ${lib^^}_BENCH=none)" >&2
    exit 2
  fi
  libs+=("$lib")
done

busy_percent() {  # share of all CPUs busy over the next 2 s, from /proc/stat
  local a b
  read -r -a a < <(grep '^cpu ' /proc/stat)
  sleep 2
  read -r -a b < <(grep '^cpu ' /proc/stat)
  local total=0 idle i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(((total - idle) * 100 / (total > 0 ? total : 1)))
}

wait_quiet() {
  [ "$quiet" -gt 0 ] || return 0
  local waited=0 busy
  while busy=$(busy_percent) && [ "$busy" -ge 25 ] && [ "$waited" -lt "$quiet" ]; do waited=$((waited + 2)); done
  echo "(machine ${busy}% busy after waiting ${waited} s)"
}

run() {  # run LIB P ROUND
  local lib=$1 P=$2 r=$3 csv="$out/${1}_p${2}_r${3}.csv" cmd=()
  [ -n "$nice_level" ] && cmd+=(nice -n "$nice_level")
  if [ "$lib" = openmpi ]; then
    cmd+=("$openmpi_exec" -n "$P" --oversubscribe --allow-run-as-root)
    if [ "$bind" = 1 ]; then cmd+=(--bind-to core); else cmd+=(--bind-to none); fi
    if [ -n "$tcp_ranks_per_node" ]; then
      cmd+=(--mca btl self,tcp -x "COLLC_RANKS_PER_NODE=$tcp_ranks_per_node")
    fi
    cmd+=("$openmpi_bench")
  else
    cmd+=("$mpich_exec" -n "$P")
    [ "$bind" = 1 ] && cmd+=(-bind-to core)
    cmd+=("$mpich_bench")
  fi
  wait_quiet
  echo "== $lib P=$P round $r (load $(cut -d' ' -f1-3 /proc/loadavg)): ${cmd[*]} ${bench_args[*]}"
  "${cmd[@]}" "${bench_args[@]}" --csv "$csv" | tee "$out/${lib}_p${P}_r${r}.txt"
}

status=0
if [ "$skip" = 0 ]; then
  for ((r = 1; r <= rounds; r++)); do
    for P in $ranks; do
      for lib in "${libs[@]}"; do
        run "$lib" "$P" "$r" || status=1
      done
    done
  done
fi

shopt -s nullglob
csvs=("$out"/*_p*_r*.csv)
if [ ${#csvs[@]} -eq 0 ]; then
  echo "compare.sh: no CSV in $out" >&2
  exit 2
fi
"$python" "$here/plot.py" merge "${csvs[@]}" -o "$out/merged.csv"
for coll in $(tail -n +2 "$out/merged.csv" | cut -d, -f1 | sort -u); do
  for rot in $(tail -n +2 "$out/merged.csv" | awk -F, -v c="$coll" '$1 == c {print $4}' | sort -u); do
    echo
    echo "## $coll, rotate=$rot: collc / better library (paired median; o = Open MPI, m = MPICH was better)"
    "$python" "$here/plot.py" table "${csvs[@]}" --coll "$coll" --rotate "$rot"
  done
done | tee "$out/tables.md"
echo
"$python" "$here/plot.py" bars "${csvs[@]}" | tee "$out/bars.txt" || true
"$python" "$here/plot.py" plot "${csvs[@]}" -o "$out/img" >/dev/null && echo "plots in $out/img"
exit $status
