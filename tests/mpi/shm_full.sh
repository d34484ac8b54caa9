#!/usr/bin/env bash
# collc under a nearly full /dev/shm (a container's default is 64 MiB): the
# command runs in a private mount namespace whose /dev/shm is a tmpfs of a
# few MiB, with Open MPI's own shared-memory files moved to /tmp so that
# only collc's segments compete for it. Plans whose segment does not fit
# must take the MPI window fallback; before segment_pool::prepare reserved
# its pages (posix_fallocate), ranks died with SIGBUS inside a call.
# Skips (exit 77) where a mount namespace cannot be made (not root).
#   shm_full.sh SIZE COMMAND...
set -euo pipefail
size=$1
shift
if ! unshare -m true 2> /dev/null; then
  echo "shm_full.sh: cannot make a mount namespace here (needs root); skipped"
  exit 77
fi
export OMPI_MCA_btl_vader_backing_directory=/tmp OMPI_MCA_osc_sm_backing_directory=/tmp
exec unshare -m sh -c 'mount -t tmpfs -o size="$0" collc-test-shm /dev/shm && exec "$@"' "$size" "$@"
