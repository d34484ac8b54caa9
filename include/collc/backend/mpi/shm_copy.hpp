#pragma once
/// \file
/// The copy into shared memory that the engine runs for a program's `copy`
/// to an shm buffer (host_kernels::copy_to_shm, engine.hpp).
///
/// Why not memcpy alone: a copy into shm overwrites lines that peers on other
/// cores read in the previous call, so a store that writes part of a line
/// first fetches it from the peer's cache (a read for ownership). For copies
/// from a few KiB up to about the L2 size (every chunk of the default 256
/// KiB), glibc 2.36's memcpy is `rep movsb` on CPUs with ERMS/FSRM; when
/// source and destination start at the same offset within a 64-byte line it
/// writes whole lines and skips those fetches, and when they do not it does
/// not. A malloc'd buffer that glibc maps on its own (from 128 KiB while the
/// mmap threshold is at its default) starts 16 bytes past a page, its chunk
/// header; a heap buffer at any multiple of 16; shm blocks of count / P
/// elements at any element offset. Measured on the 2-core AMD EPYC
/// development VM, allreduce {2} at P = 2 with buffers 16 bytes past a page
/// (collc-bench --offset 16): 64 KiB 14.6 us against 7.9 us page-aligned,
/// 256 KiB 58 against 28 us, 4 MiB 888 against 338-436 us, collc slower than
/// Open MPI from 256 KiB on. Non-temporal (streaming) stores, issued a whole
/// aligned line at a time, write lines without fetching them whatever the
/// source's offset; the peer then reads the data from memory rather than
/// from this core's cache, which measured as fast as the aligned memcpy
/// (docs/benchmarks.md, "Misaligned user buffers").
///
/// So: where the compiler targets SSE2 (every x86-64 build), a copy of at
/// least shm_stream_min_bytes whose source and destination sit at different
/// offsets within a line streams the destination's whole lines (memcpy for
/// the partial lines at either end) and ends with a store fence. The fence
/// orders the streaming stores before the release store of the signal that
/// follows (x86 orders ordinary stores, not streaming ones), and it must stay
/// here rather than move to the signal: the interpreter may stop at a wait
/// between the copy and the signal, and the call may resume on another
/// thread, whose fence would not cover this thread's streaming stores.
/// Every other copy is memcpy.
#include <collc/config.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace collc::mpi {

/// Copies below this many bytes are memcpy whatever their alignment: in L1
/// and L2 the fetches cost little, and streaming stores would push data the
/// peer reads at once out to memory (measured: no difference up to 32 KiB).
inline constexpr std::size_t shm_stream_min_bytes = std::size_t{32} << 10;

/// Whether copy_into_shm streams this copy (see the file comment).
inline bool streams_into_shm(const void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__SSE2__)
  return bytes >= shm_stream_min_bytes &&
         ((reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src)) & 63) != 0;
#else
  (void)dst, (void)src, (void)bytes;
  return false;
#endif
}

/// The streamed copy: `bytes` from `src` to `dst`, the destination's whole
/// lines by streaming stores, then a store fence. The ranges must not overlap.
void stream_into_shm(void* dst, const void* src, std::size_t bytes) noexcept;

/// Copies `bytes` bytes from `src` to `dst`, a buffer in a node segment that
/// peers read next. The ranges must be the same (nothing happens) or not
/// overlap. Inline, so that the small copies of the hot path stay a memcpy.
inline void copy_into_shm(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes == 0 || dst == src) return;
  if (streams_into_shm(dst, src, bytes))
    stream_into_shm(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/shm_copy.ipp>
#endif
