#!/usr/bin/env bash
# The one-way layers of docs/architecture.md, checked on the includes:
#  - ir/ includes only the standard library and the core (core, config, error) and ir/;
#  - algo/ additionally the factor-set rules (factors, enumerate, topology, ops) and ir/, algo/;
#  - only backend/ includes <mpi.h>, <Kokkos_Core.hpp> or <hwloc.h> (the top-level
#    plan/tune/blocking/reproducible headers are one-line forwarders into backend/mpi/);
#  - backend/kokkos includes nothing from the top level but the core (it is the MPI engine plus a kernel policy).
set -uo pipefail
inc=${1:?usage: layers.sh INCLUDE_DIR}
fail=0
check() {  # check <files glob> <allowed collc include regex> <layer>
  local layer=$1 allowed=$2; shift 2
  for f in "$@"; do
    [ -e "$f" ] || continue
    while IFS= read -r line; do
      hdr=$(sed -E 's/^#include <([^>]+)>.*/\1/' <<<"$line")
      case "$hdr" in
        collc/*) [[ "$hdr" =~ ^($allowed)$ ]] || { echo "layers: $layer: ${f#$inc/} includes <$hdr>"; fail=1; } ;;
        mpi.h|Kokkos_Core.hpp|hwloc.h) echo "layers: $layer: ${f#$inc/} includes <$hdr>"; fail=1 ;;
      esac
    done < <(grep -E '^#include <' "$f")
  done
}
core='collc/core\.hpp|collc/config\.hpp|collc/error\.hpp'
check "ir" "$core|collc/ir/([a-z_]+/)?[a-z_]+\.(hpp|ipp)" "$inc"/collc/ir/*.hpp "$inc"/collc/ir/*.ipp "$inc"/collc/ir/*/*
check "algo" "$core|collc/(factors|enumerate|topology|ops)\.(hpp|ipp)|collc/(ir|algo)/([a-z_]+/)?[a-z_]+\.(hpp|ipp)" \
  "$inc"/collc/algo/*.hpp "$inc"/collc/algo/*.ipp
check "core" "$core|collc/(factors|enumerate|topology|ops|exact_sum)\.(hpp|ipp)" \
  "$inc"/collc/core.hpp "$inc"/collc/config.hpp "$inc"/collc/error.hpp "$inc"/collc/factors.hpp \
  "$inc"/collc/enumerate.hpp "$inc"/collc/topology.hpp "$inc"/collc/ops.hpp "$inc"/collc/exact_sum.hpp
# backend/kokkos: the core, ir, algo and the MPI backend; nothing from the top-level MPI forwarders.
for f in "$inc"/collc/backend/kokkos/*; do
  if grep -nE '^#include <collc/(plan|tune|blocking|reproducible)\.hpp>' "$f"; then
    echo "layers: backend/kokkos: ${f#$inc/} includes a top-level MPI header (include backend/mpi/ instead)"; fail=1
  fi
done
[ $fail -eq 0 ] && echo "layers: ir/, algo/, core and backend/kokkos include only what their layer allows"
exit $fail
