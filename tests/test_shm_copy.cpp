// include/collc/backend/mpi/shm_copy.hpp without MPI: copy_into_shm copies
// exactly the bytes asked for, at every source and destination offset within
// a cache line, below and above the size where it streams whole lines
// (shm_stream_min_bytes), and writes nothing before or after the destination
// range. The streamed path splits the copy into a head up to the
// destination's next line, whole lines, and a tail: every offset pair puts
// those splits at a different place. streams_into_shm says which copies take
// the streamed path; the third case checks that they do.
#include <catch2/catch.hpp>
#include <collc/backend/mpi/shm_copy.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

using collc::mpi::copy_into_shm;
using collc::mpi::shm_stream_min_bytes;

namespace {

constexpr std::size_t guard = 128;  // bytes checked on each side of the destination
constexpr unsigned char untouched = 0x5A;

/// A 64-byte-aligned byte buffer (the offsets below are relative to a line).
struct line_buffer {
  std::byte* p;
  explicit line_buffer(std::size_t n) : p(static_cast<std::byte*>(::operator new(n, std::align_val_t{64}))) {}
  ~line_buffer() { ::operator delete(p, std::align_val_t{64}); }
  line_buffer(const line_buffer&) = delete;
  line_buffer& operator=(const line_buffer&) = delete;
};

unsigned char pattern(std::size_t i) { return static_cast<unsigned char>((i * 131u + (i >> 8) * 7u + 1u) & 0xFFu); }

/// Copies `bytes` from source offset `so` to destination offset `dof`; returns
/// the number of wrong bytes in the copy and in the guards around it.
std::size_t wrong_bytes(std::size_t bytes, std::size_t so, std::size_t dof, std::size_t& first_wrong) {
  const std::size_t span = bytes + 2 * guard + 64;
  line_buffer src(span), dst(span);
  auto* s = reinterpret_cast<unsigned char*>(src.p) + guard + so;
  auto* d = reinterpret_cast<unsigned char*>(dst.p);
  for (std::size_t i = 0; i < bytes; ++i) s[i] = pattern(i);
  for (std::size_t i = 0; i < span; ++i) d[i] = untouched;
  copy_into_shm(d + guard + dof, s, bytes);
  std::size_t wrong = 0;
  first_wrong = span;
  for (std::size_t i = 0; i < span; ++i) {
    const bool inside = i >= guard + dof && i < guard + dof + bytes;
    const unsigned char want = inside ? pattern(i - guard - dof) : untouched;
    if (d[i] != want && wrong++ == 0) first_wrong = i;
  }
  return wrong;
}

}  // namespace

TEST_CASE("copy_into_shm copies exactly its bytes at every line offset", "[shm_copy]") {
  const std::size_t m = shm_stream_min_bytes;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{4099},
                            m - 1, m, m + 1, m + 63, m + 64, 3 * m + 17}) {
    std::size_t bad_pairs = 0;
    for (std::size_t so = 0; so < 64; ++so)
      for (std::size_t dof = 0; dof < 64; ++dof) {
        std::size_t first = 0;
        const std::size_t wrong = wrong_bytes(bytes, so, dof, first);
        if (wrong != 0 && bad_pairs++ < 3) {
          INFO("bytes " << bytes << ", source offset " << so << ", destination offset " << dof << ": " << wrong
                        << " wrong bytes, first at " << first << " (the copy starts at " << guard + dof << ")");
          CHECK(wrong == 0);
        }
      }
    INFO("bytes " << bytes);
    CHECK(bad_pairs == 0);
  }
}

TEST_CASE("copy_into_shm streams exactly the large copies that disagree within a line", "[shm_copy]") {
  // The test above passes with plain memcpy too; this one fails if the
  // streamed path stopped being taken (x86-64 always has SSE2).
  line_buffer a(2 * shm_stream_min_bytes), b(2 * shm_stream_min_bytes);
  const std::size_t m = shm_stream_min_bytes;
  CHECK_FALSE(collc::mpi::streams_into_shm(b.p, a.p, m));           // same offset in a line
  CHECK_FALSE(collc::mpi::streams_into_shm(b.p + 16, a.p + 16, m));  // likewise
  CHECK_FALSE(collc::mpi::streams_into_shm(b.p, a.p + 16, m - 1));  // below the threshold
#if defined(__x86_64__)
  CHECK(collc::mpi::streams_into_shm(b.p, a.p + 16, m));
  CHECK(collc::mpi::streams_into_shm(b.p + 1, a.p, m));
#endif
}

TEST_CASE("copy_into_shm of a buffer onto itself leaves it as it is", "[shm_copy]") {
  std::vector<unsigned char> v(shm_stream_min_bytes + 100);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern(i);
  copy_into_shm(v.data(), v.data(), v.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < v.size(); ++i) wrong += v[i] != pattern(i);
  CHECK(wrong == 0);
}
