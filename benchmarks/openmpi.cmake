# Initial cache for a build against Open MPI named explicitly (the default
# when the mpicxx / mpiexec alternatives point at it, as scripts/setup leaves them):
#   cmake -S . -B build-openmpi -G Ninja -DCMAKE_BUILD_TYPE=Release -C benchmarks/openmpi.cmake
set(COLLC_MPI openmpi CACHE STRING "")
set(MPI_CXX_COMPILER /usr/bin/mpicxx.openmpi CACHE FILEPATH "")
set(MPI_C_COMPILER /usr/bin/mpicc.openmpi CACHE FILEPATH "")
set(MPIEXEC_EXECUTABLE /usr/bin/mpiexec.openmpi CACHE FILEPATH "")
