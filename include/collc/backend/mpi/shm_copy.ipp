#pragma once
#include <collc/backend/mpi/shm_copy.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace collc::mpi {

COLLC_INLINE void stream_into_shm(void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__SSE2__)
  constexpr std::size_t line = 64;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (line - reinterpret_cast<std::uintptr_t>(d) % line) % line;
  if (head >= bytes) {  // no whole line to stream
    std::memcpy(d, s, bytes);
    return;
  }
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
  _mm_sfence();  // before the signal that follows (shm_copy.hpp)
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace collc::mpi
