"""The collectives libcollc_mpi intercepts, as a Python program calls them
through mpi4py (which initialises MPI with MPI_THREAD_MULTIPLE), built
against nothing of collc: tests/pmpi/compare.sh runs it with and without the
library preloaded and compares the output.

Upper-case methods (comm.Allreduce, ...) pass numpy buffers straight to the
C functions, so these are the calls collc takes. Every rank's results go to
rank 0 through the lower-case, pickle-based comm.gather (MPI_Gather and
MPI_Gatherv, which libcollc_mpi leaves to MPI), and rank 0 prints one line
per check and rank: a digest of the whole array and its first values. The
data are small integers, so every reduction is exact in any order and the
MPI library's results and collc's must be the same bits.
  py_collectives.py [reps]   (each call repeated reps times, default 3, so
                              cached plans run again)"""
import hashlib
import sys

import numpy as np
from mpi4py import MPI

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
# 1 element, an odd count, and counts past a few chunks of a plan.
COUNTS = (1, 7, 1000, 40000)


def data(dtype, n, rank, salt):
    # Small integers of both signs: sums over 8 ranks stay exact in float64.
    i = np.arange(n, dtype=np.int64)
    return (((i * 7 + rank * 13 + salt) % 41) - 20).astype(dtype)


def digest(a):
    head = " ".join(str(x) for x in a[:4].tolist())
    return f"{hashlib.sha256(a.tobytes()).hexdigest()[:16]} [{head}]"


def checks(comm, tag):
    """Yields (name, array) for every call on comm, each repeated REPS times."""
    rank, size = comm.Get_rank(), comm.Get_size()
    for rep in range(REPS):
        for n in COUNTS:
            for dtype in (np.float64, np.int64):
                dt = np.dtype(dtype).name
                for opname, op in (("sum", MPI.SUM), ("max", MPI.MAX)):
                    send = data(dtype, n, rank, rep)
                    recv = np.empty_like(send)
                    comm.Allreduce(send, recv, op=op)
                    yield f"{tag} allreduce {dt} {opname} n={n}", recv
                buf = data(dtype, n, rank, rep + 1)
                comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
                yield f"{tag} allreduce in_place {dt} sum n={n}", buf
                for root in sorted({0, size - 1}):
                    buf = data(dtype, n, rank, rep + 2) if rank == root else np.zeros(n, dtype)
                    comm.Bcast(buf, root=root)
                    yield f"{tag} bcast {dt} root={root} n={n}", buf
                    send = data(dtype, n, rank, rep + 3)
                    recv = np.zeros(n, dtype)  # significant at the root only
                    comm.Reduce(send, recv if rank == root else None, op=MPI.SUM, root=root)
                    yield f"{tag} reduce {dt} sum root={root} n={n}", recv
                send = data(dtype, n, rank, rep + 4)
                recv = np.empty(n * size, dtype)
                comm.Allgather(send, recv)
                yield f"{tag} allgather {dt} n={n}", recv


def main():
    world = MPI.COMM_WORLD
    dup = world.Dup()
    lines = []
    for comm, tag in ((world, "world"), (dup, "dup")):
        lines += [f"{name}: {digest(a)}" for name, a in checks(comm, tag)]
    dup.Free()
    everyone = world.gather(lines, root=0)
    if world.Get_rank() == 0:
        print(f"py_collectives: {world.Get_size()} ranks, thread level {MPI.Query_thread()}, "
              f"{len(lines)} checks per rank")
        for rank, rank_lines in enumerate(everyone):
            for line in rank_lines:
                print(f"rank {rank} {line}")


if __name__ == "__main__":
    main()
