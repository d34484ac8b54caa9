#pragma once
/// \file
/// The copy into shared memory that the engine runs for a program's `copy`
/// to an shm buffer (host_kernels::copy_to_shm, engine.hpp).
///
/// Why not memcpy alone: a copy into shm overwrites lines that peers on other
/// cores read in the previous call, so a store that writes part of a line
/// first fetches it from the peer's cache (a read for ownership) before
/// writing it. glibc's memcpy of a few KiB and more is `rep movsb` on CPUs
/// with ERMS/FSRM; when source and destination start at the same offset
/// within a 64-byte line it writes whole lines and skips those fetches, and
/// when they do not (a malloc'd buffer of more than 128 KiB starts 16 bytes
/// past a page: glibc's mmap chunk header) it does not. Measured on the
/// 2-core AMD EPYC development VM, allreduce {2} at P = 2 with buffers 16
/// bytes past a page (collc-bench --offset 16): 64 KiB 17.1 us against 7.9 us
/// page-aligned, 256 KiB 63 against 28 us, 4 MiB 981 against 338 us, collc
/// slower than Open MPI from 256 KiB on. Non-temporal (streaming) stores,
/// issued a whole aligned line at a time, write lines without fetching them
/// whatever the source's offset; the peer then reads the data from memory
/// rather than from this core's cache, which measured as fast as the aligned
/// memcpy (docs/benchmarks.md, "Misaligned user buffers").
///
/// So: a copy of at least shm_stream_min_bytes whose source and destination
/// sit at different offsets within a line streams the destination's whole
/// lines (memcpy for the partial lines at either end) and ends with a store
/// fence, which orders the streaming stores before the release store of the
/// signal that follows (x86 orders ordinary stores, not streaming ones).
/// Every other copy, and any copy on a CPU without SSE2, is memcpy.
#include <collc/config.hpp>

#include <cstddef>

namespace collc::mpi {

/// Copies below this many bytes are memcpy whatever their alignment: in L1
/// and L2 the fetches cost little, and streaming stores would push data the
/// peer reads at once out to memory (measured: no difference up to 32 KiB).
inline constexpr std::size_t shm_stream_min_bytes = std::size_t{32} << 10;

/// Copies `bytes` bytes from `src` to `dst`, a buffer in a node segment that
/// peers read next (see the file comment). The ranges must not overlap.
void copy_into_shm(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/shm_copy.ipp>
#endif
