# Persistent collectives (MPI 4.0, section 6.13; Open MPI 4.1's MPIX_*_init):
# each request started and completed many times by every completion function,
# alone and in arrays mixed with point-to-point requests. Included by
# tests/pmpi/CMakeLists.txt, which defines collc_add_pmpi_test.
add_executable(pmpi_c_persistent c_persistent.c)
target_link_libraries(pmpi_c_persistent PRIVATE MPI::MPI_C)
collc_add_pmpi_test(pmpi_persistent RANKS 1 2 3 4 EXPECT allreduce,bcast,reduce,allgather,reduce_scatter_block
  COMMAND $<TARGET_FILE:pmpi_c_persistent>)
# Persistent collectives collc takes, freed, then ones it leaves to the MPI
# library (derived type with a user operator, a one-rank padded pair, count 0):
# MPICH 4.0.2 never completed the library's request when it reused the object
# of one of collc's freed stand-ins (it hung in MPI_Wait).
add_executable(pmpi_c_persistent_reuse c_persistent_reuse.c)
target_link_libraries(pmpi_c_persistent_reuse PRIVATE MPI::MPI_C)
collc_add_pmpi_test(pmpi_persistent_reuse RANKS 1 2 3 EXPECT allreduce
  COMMAND $<TARGET_FILE:pmpi_c_persistent_reuse>)
