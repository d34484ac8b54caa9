#!/usr/bin/env bash
# A collc process that dies between creating a /dev/shm segment and removing
# its name (a rank killed during the first plan's setup) leaves the name
# behind; the next collc job of the user on the host removes it
# (segment_pool::sweep_stale_segments): a name of collc's pattern whose
# process is gone and which is older than 10 minutes. Names of live
# processes, recent names and other names stay.
#   stale_segments.sh COMMAND...   (COMMAND: mpiexec ... a program that builds a plan on 2+ ranks)
set -euo pipefail
dead=$(sh -c 'echo $$')  # a process that has exited
stale=/dev/shm/collc.$dead.5eed.0
recent=/dev/shm/collc.$dead.5eed.1
live=/dev/shm/collc.$$.5eed.2
other=/dev/shm/collc.$dead
trap 'rm -f "$stale" "$recent" "$live" "$other"' EXIT
for f in "$stale" "$recent" "$live" "$other"; do : > "$f"; done
touch -d '1 hour ago' "$stale" "$live" "$other"
"$@" > /dev/null
fail() { echo "stale_segments.sh: $*" >&2; exit 1; }
[[ ! -e $stale ]] || fail "$stale (process $dead gone, an hour old) was not removed"
[[ -e $recent ]] || fail "$recent (a minute old) was removed"
[[ -e $live ]] || fail "$live (process $$ alive) was removed"
[[ -e $other ]] || fail "$other (not collc's pattern) was removed"
echo "stale_segments.sh: removed the stale segment, kept the recent, live and foreign names"
