#!/usr/bin/env bash
# One rank of a MUMPS example program from Debian's mumps-test package (an
# unmodified Fortran MPI application: MUMPS's collectives go through Open
# MPI's mpif.h bindings), run by compare.sh on every rank:
#   mumps_simpletest.sh /usr/lib/mumps/dsimpletest /usr/lib/mumps/input_simpletest_real
# The program reads its matrix from standard input on the host rank, which
# mpiexec would have to forward; each rank reads the file itself instead.
# MUMPS prints wall-clock times ("Elapsed time in solve driver=  0.0004",
# "Time to build/scatter RHS  =  0.000052", ...): only the number after '=' on
# exactly those lines is masked, so every other line (the statistics of each
# phase, the solution to 17 digits) must match bit for bit.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: mumps_simpletest.sh program input" >&2; exit 2; }
"$1" <"$2" | sed -E 's/^( *(\.\. )?(Elapsed time|Time) [^=]*=) *[0-9.]+$/\1 (time)/'
