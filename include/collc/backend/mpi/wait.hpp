#pragma once
/// \file
/// How every wait of a plan waits (a signal, a message, a send's completion):
/// spin with the CPU's pause hint for `spin` polls, since with a core per rank
/// the peer's answer is a cache-line transfer away; then yield the core
/// between polls, since on an oversubscribed node the peer needs this core to
/// make progress, and once the wait has lasted `idle_after` call `idle`
/// every `idle_after` between polls (the engine turns the MPI library's
/// progress engine there: engine::progress_mpi); and about every millisecond
/// hand the time waited so far to `slow`, which looks for failed or
/// mismatched peers and the timeout (and may throw). Nothing here knows
/// about plans.
#include <chrono>
#include <thread>

namespace collc::mpi {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// How long a wait goes before it calls `idle`, and then how often: longer
/// than a call that is merely in flight takes (an 8-byte message between
/// nodes ~5 us), so a wait that ends soon never pays for it, and rare enough
/// that a rank yielding to a descheduled peer on an oversubscribed node
/// spends its turns yielding, not in `idle`.
inline constexpr std::chrono::microseconds idle_after{20};

template <class Ready, class Slow, class Idle>
void wait_until(unsigned spin, Ready ready, Slow slow, Idle idle) {
  for (unsigned i = 0; i < spin; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto last = t0, last_idle = t0;
  while (!ready()) {
    std::this_thread::yield();
    const auto now = clock::now();
    if (now - last_idle >= idle_after) {
      idle();
      last_idle = now;
    }
    if (now - last < std::chrono::milliseconds(1) || ready()) continue;
    last = now;
    slow(std::chrono::duration<double>(now - t0).count());
  }
}

}  // namespace collc::mpi
