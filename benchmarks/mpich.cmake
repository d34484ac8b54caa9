# Initial cache for a build against MPICH instead of the default Open MPI:
#   cmake -S . -B build-mpich -G Ninja -DCMAKE_BUILD_TYPE=Release -C benchmarks/mpich.cmake
# (Debian installs both; the mpicxx / mpiexec alternatives point at Open MPI.)
set(COLLC_MPI mpich CACHE STRING "")
set(MPI_CXX_COMPILER /usr/bin/mpicxx.mpich CACHE FILEPATH "")
set(MPI_C_COMPILER /usr/bin/mpicc.mpich CACHE FILEPATH "")
set(MPIEXEC_EXECUTABLE /usr/bin/mpiexec.mpich CACHE FILEPATH "")
