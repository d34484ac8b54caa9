#pragma once
#include <collc/backend/mpi/shm_copy.hpp>

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace collc::mpi {

COLLC_INLINE void copy_into_shm(void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes == 0 || dst == src) return;
#if defined(__SSE2__)
  constexpr std::uintptr_t line = 64;
  const auto d_addr = reinterpret_cast<std::uintptr_t>(dst);
  if (bytes >= shm_stream_min_bytes && ((d_addr ^ reinterpret_cast<std::uintptr_t>(src)) & (line - 1)) != 0) {
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    const std::size_t head = static_cast<std::size_t>((line - (d_addr & (line - 1))) & (line - 1));
    std::memcpy(d, s, head);
    std::size_t i = head;
    for (; i + line <= bytes; i += line) {
      const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i x2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i x3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), x0);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), x1);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), x2);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), x3);
    }
    std::memcpy(d + i, s + i, bytes - i);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace collc::mpi
