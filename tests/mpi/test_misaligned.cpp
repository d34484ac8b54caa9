// User buffers at every kind of offset within a cache line. A malloc'd buffer
// of more than 128 KiB starts 16 bytes past a page, a char buffer anywhere;
// the engine copies such buffers into shm with streaming stores when source
// and destination sit at different offsets within a line
// (backend/mpi/shm_copy.hpp), in a head, whole lines and a tail, and fences
// them before the signal that tells peers to read. This test runs every
// collective on send and recv buffers at independent offsets (in place too),
// at sizes below and above the streaming threshold and over several chunks,
// several calls per plan with a skewed rank, and checks every element of
// every call and that nothing before or after recv (or send) was written.
#include "support.hpp"

#include <collc/backend/mpi/shm_copy.hpp>
#include <collc/plan.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

using collc::collective;
using namespace collc_test;

namespace {

constexpr std::size_t guard = 256;  // bytes checked on each side of a buffer
constexpr unsigned char guard_byte = 0xC3;

/// `count` elements of T starting `offset` bytes past a 64-byte line, with
/// guard bytes before and after.
template <class T>
struct placed_buffer {
  std::size_t count, offset, span;
  std::byte* raw;
  placed_buffer(std::size_t n, std::size_t off)
      : count(n), offset(off), span(n * sizeof(T) + 2 * guard + 64),
        raw(static_cast<std::byte*>(::operator new(span, std::align_val_t{64}))) {
    std::memset(raw, guard_byte, span);
  }
  ~placed_buffer() { ::operator delete(raw, std::align_val_t{64}); }
  placed_buffer(const placed_buffer&) = delete;
  placed_buffer& operator=(const placed_buffer&) = delete;

  T* data() { return reinterpret_cast<T*>(raw + guard + offset); }
  void fill(const std::vector<T>& v) { std::memcpy(data(), v.data(), v.size() * sizeof(T)); }
  std::vector<T> values() {
    std::vector<T> v(count);
    std::memcpy(v.data(), data(), count * sizeof(T));
    return v;
  }
  /// Bytes outside [data, data + count) that are no longer guard bytes.
  std::size_t guards_written() const {
    std::size_t bad = 0;
    const std::size_t lo = guard + offset, hi = lo + count * sizeof(T);
    for (std::size_t i = 0; i < span; ++i)
      if ((i < lo || i >= hi) && raw[i] != std::byte{guard_byte}) ++bad;
    return bad;
  }
};

/// Sleeps or yields on one rank per call, chosen by the call number, so the
/// ranks enter and leave calls at different times.
void skew(int call) {
  const int P = world_size();
  if (P < 2 || world_rank() != call % P) return;
  if (call % 2 == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  else
    std::this_thread::yield();
}

struct case_result {
  std::size_t wrong = 0, guards = 0;
  std::string what;
};

/// `calls` calls of one plan of collective c with send at byte offset `so`
/// and recv at `ro` (in_place: recv only), each call with new inputs.
template <class T, class Op>
case_result run_case(collective c, std::size_t n, std::size_t so, std::size_t ro, bool in_place, int calls) {
  const int P = world_size(), me = world_rank();
  const int root = P - 1;
  const std::size_t send_n = c == collective::reduce_scatter ? n * static_cast<std::size_t>(P) : n;
  const std::size_t recv_n = c == collective::allgather ? n * static_cast<std::size_t>(P) : n;
  case_result res;
  res.what = std::string(collc::to_string(c)) + "<" + (sizeof(T) == 1 ? "char" : "int64") + "> count " +
             std::to_string(n) + ", send at line offset " + std::to_string(so) + ", recv at " + std::to_string(ro) +
             (in_place ? " (in place)" : "");
  placed_buffer<T> send(in_place ? 0 : send_n, so), recv(recv_n, ro);
  // The buffers outlive the plan (declared first): ~plan may complete a call into them.
  collc::plan<T, Op> plan = collc::mpi::make_plan<T, Op>(c, MPI_COMM_WORLD, n, root);
  const std::vector<T> sentinel(recv_n, input<T>(P + 5, 0, 0));
  for (int call = 0; call < calls; ++call) {
    const std::vector<T> in = send_data<T>(c, c == collective::bcast ? root : me, P, n, call);
    if (c == collective::bcast) {
      recv.fill(me == root ? in : sentinel);
    } else if (in_place) {
      recv.fill(in);  // allreduce in place: recv holds the input
    } else {
      send.fill(in);
      recv.fill(sentinel);
    }
    skew(call);
    if (c == collective::bcast || in_place)
      plan(collc::in_place, recv.data());
    else
      plan(static_cast<const T*>(send.data()), recv.data());
    std::vector<T> want = expected<T, Op>(c, me, P, n, root, call);
    if (c == collective::reduce && me != root) want = sentinel;  // off the root recv is untouched
    std::size_t first = 0;
    const std::size_t bad = mismatches(recv.values(), want, &first);
    if (bad != 0 && res.wrong == 0)
      std::fprintf(stderr, "[misaligned rank %d] %s, call %d: %zu of %zu elements wrong, first at %zu\n", me,
                   res.what.c_str(), call, bad, want.size(), first);
    res.wrong += bad;
    if (!in_place && send.guards_written() + (send.values() == in ? 0 : 1) != 0) ++res.guards;  // send is read only
  }
  res.guards += recv.guards_written();
  if (res.guards != 0)
    std::fprintf(stderr, "[misaligned rank %d] %s: bytes outside the buffers written\n", me, res.what.c_str());
  return res;
}

/// Element counts: below the streaming threshold, just above it, and over
/// several default chunks with a tail (for reduce_scatter and allgather
/// these are per block).
template <class T>
std::vector<std::size_t> counts() {
  const std::size_t m = collc::mpi::shm_stream_min_bytes / sizeof(T);
  return {m / 2 + 3, m + 5, 9 * m + 7};
}

}  // namespace

TEST_CASE("reductions over int64 buffers at independent line offsets", "[misaligned]") {
  // int64 elements sit at multiples of 8; pairs of offsets that agree and
  // disagree within a line (the streamed copies are the disagreeing ones).
  const std::size_t pairs[][2] = {{16, 16}, {16, 0}, {8, 40}, {56, 24}};
  for (collective c : {collective::allreduce, collective::reduce_scatter, collective::reduce})
    for (std::size_t n : counts<std::int64_t>())
      for (const auto& pr : pairs) {
        const case_result r = run_case<std::int64_t, collc::plus>(c, n, pr[0], pr[1], false, 3);
        INFO(r.what);
        CHECK(all_ranks(r.wrong == 0 && r.guards == 0));
      }
  for (std::size_t n : counts<std::int64_t>())
    for (std::size_t off : {std::size_t{16}, std::size_t{40}}) {
      const case_result r = run_case<std::int64_t, collc::plus>(collective::allreduce, n, 0, off, true, 3);
      INFO(r.what);
      CHECK(all_ranks(r.wrong == 0 && r.guards == 0));
    }
}

TEST_CASE("allgather and bcast of char buffers at any byte offset", "[misaligned]") {
  const std::size_t pairs[][2] = {{1, 0}, {0, 63}, {17, 33}, {16, 16}};
  for (std::size_t n : counts<char>())
    for (const auto& pr : pairs) {
      const case_result ag = run_case<char, collc::plus>(collective::allgather, n, pr[0], pr[1], false, 3);
      INFO(ag.what);
      CHECK(all_ranks(ag.wrong == 0 && ag.guards == 0));
      const case_result bc = run_case<char, collc::plus>(collective::bcast, n, 0, pr[0] + pr[1], true, 3);
      INFO(bc.what);
      CHECK(all_ranks(bc.wrong == 0 && bc.guards == 0));
    }
}
