#pragma once
/// \file
/// Definitions of calibrate.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/calibrate.hpp>
#include <collc/backend/mpi/options.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace collc::mpi {

namespace calibrate_detail {

COLLC_INLINE void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  std::string m = "calibrate: ";
  m += what;
  m += " failed";
  throw error(errc::mpi_error, m);
}

COLLC_INLINE double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// A barrier that sleeps while it waits, so idle ranks of an oversubscribed
/// node do not take cycles from the ranks being measured.
COLLC_INLINE void quiet_barrier(MPI_Comm comm) {
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm, &req), "MPI_Ibarrier");
  for (int done = 0;;) {
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

COLLC_INLINE double now() { return MPI_Wtime(); }

/// Seconds per byte of memcpy (median over repetitions).
COLLC_INLINE double time_copy(std::size_t bytes, int reps) {
  std::vector<unsigned char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    src[static_cast<std::size_t>(i) % bytes] = static_cast<unsigned char>(i);
    const double t0 = now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double t1 = now();
    if (i > 0) t.push_back(t1 - t0);  // the first run faults the pages in
  }
  volatile unsigned char sink = dst[bytes / 2];
  (void)sink;
  return median(t) / static_cast<double>(bytes);
}

/// Seconds per output byte of c = a + b over doubles.
COLLC_INLINE double time_add(std::size_t bytes, int reps) {
  const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(double));
  std::vector<double> a(n, 1.0), b(n, 2.0), c(n, 0.0);
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    a[static_cast<std::size_t>(i) % n] = i;
    const double t0 = now();
    const double* pa = a.data();
    const double* pb = b.data();
    double* pc = c.data();
    for (std::size_t k = 0; k < n; ++k) pc[k] = pa[k] + pb[k];
    const double t1 = now();
    if (i > 0) t.push_back(t1 - t0);
  }
  volatile double sink = c[n / 2];
  (void)sink;
  return median(t) / static_cast<double>(n * sizeof(double));
}

/// Half the median round trip of a flag between node ranks 0 and 1.
COLLC_INLINE double time_flag_handoff(MPI_Comm node, int reps) {
  int me = 0;
  MPI_Comm_rank(node, &me);
  constexpr MPI_Aint line = 64;  // each rank's flag on its own cache line
  void* base = nullptr;
  MPI_Win win = MPI_WIN_NULL;
  check(MPI_Win_allocate_shared(me < 2 ? line : 0, 1, MPI_INFO_NULL, node, &base, &win), "MPI_Win_allocate_shared");
  std::uint64_t* flag[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; ++r) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    check(MPI_Win_shared_query(win, r, &size, &disp, &p), "MPI_Win_shared_query");
    flag[r] = static_cast<std::uint64_t*>(p);
  }
  if (me < 2) std::atomic_ref<std::uint64_t>(*flag[me]).store(0, std::memory_order_release);
  MPI_Barrier(node);
  std::vector<double> t;
  if (me < 2) {
    std::atomic_ref<std::uint64_t> mine(*flag[me]), peer(*flag[1 - me]);
    auto await = [&](std::uint64_t v) {
      // Spin, then yield: on an oversubscribed node the peer needs the core.
      for (int spins = 0; peer.load(std::memory_order_acquire) < v; ++spins)
        if (spins > 1000) std::this_thread::yield();
    };
    const int warm = std::max(1, reps / 10);
    for (int i = 1; i <= warm + reps; ++i) {
      const auto v = static_cast<std::uint64_t>(i);
      const double t0 = now();
      if (me == 0) {
        mine.store(v, std::memory_order_release);
        await(v);
      } else {
        await(v);
        mine.store(v, std::memory_order_release);
      }
      if (i > warm) t.push_back(now() - t0);
    }
  }
  quiet_barrier(node);
  MPI_Win_free(&win);
  return median(t) / 2;
}

/// Half the median round trip of `bytes` between comm ranks a and b.
COLLC_INLINE double time_ping_pong(MPI_Comm comm, int a, int b, std::size_t bytes, int reps) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  std::vector<double> t;
  if (me == a || me == b) {
    std::vector<char> buf(std::max<std::size_t>(bytes, 1), 0);
    const int peer = me == a ? b : a;
    const int count = static_cast<int>(bytes);
    const int warm = std::max(1, reps / 10);
    for (int i = 0; i < warm + reps; ++i) {
      const double t0 = now();
      if (me == a) {
        check(MPI_Send(buf.data(), count, MPI_BYTE, peer, 17, comm), "MPI_Send");
        check(MPI_Recv(buf.data(), count, MPI_BYTE, peer, 17, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      } else {
        check(MPI_Recv(buf.data(), count, MPI_BYTE, peer, 17, comm, MPI_STATUS_IGNORE), "MPI_Recv");
        check(MPI_Send(buf.data(), count, MPI_BYTE, peer, 17, comm), "MPI_Send");
      }
      if (i >= warm) t.push_back(now() - t0);
    }
  }
  quiet_barrier(comm);
  return median(t) / 2;
}

/// The sender's processor time per small message (LogP's o): rank a times
/// `burst` back-to-back 8-byte MPI_Isend + MPI_Waitall to b, which posted its
/// receives before it let a start; median over `reps`, per message.
COLLC_INLINE double time_overhead(MPI_Comm comm, int a, int b, int reps) {
  constexpr int burst = 32;
  int me = 0;
  MPI_Comm_rank(comm, &me);
  std::vector<double> t;
  if (me == a || me == b) {
    std::vector<double> buf(burst, 0.0);
    MPI_Request req[burst];
    const int peer = me == a ? b : a;
    const int warm = std::max(1, reps / 10);
    for (int i = 0; i < warm + reps; ++i) {
      char go = 0;
      if (me == b) {
        for (int k = 0; k < burst; ++k)
          check(MPI_Irecv(&buf[static_cast<std::size_t>(k)], 1, MPI_DOUBLE, peer, 18, comm, &req[k]), "MPI_Irecv");
        check(MPI_Send(&go, 1, MPI_CHAR, peer, 19, comm), "MPI_Send");
        check(MPI_Waitall(burst, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
      } else {
        check(MPI_Recv(&go, 1, MPI_CHAR, peer, 19, comm, MPI_STATUS_IGNORE), "MPI_Recv");
        const double t0 = now();
        for (int k = 0; k < burst; ++k)
          check(MPI_Isend(&buf[static_cast<std::size_t>(k)], 1, MPI_DOUBLE, peer, 18, comm, &req[k]), "MPI_Isend");
        check(MPI_Waitall(burst, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
        if (i >= warm) t.push_back((now() - t0) / burst);
      }
    }
  }
  quiet_barrier(comm);
  return median(t);
}

}  // namespace calibrate_detail

COLLC_INLINE calibration calibrate_report(MPI_Comm comm, const calibration_options& opt) {
  using namespace calibrate_detail;
  if (opt.copy_bytes == 0 || opt.latency_repetitions < 1 || opt.bandwidth_repetitions < 1 ||
      opt.net_bytes > static_cast<std::size_t>(1) << 30) {
    std::string m = "calibrate: copy_bytes (";
    m += std::to_string(opt.copy_bytes);
    m += ") and repetitions must be positive, net_bytes (";
    m += std::to_string(opt.net_bytes);
    m += ") at most 1 GiB";
    throw error(errc::invalid_argument, m);
  }
  int me = 0, size = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &size);
  // Nodes as plans see them: pseudo-nodes of L consecutive ranks when
  // ranks_per_node (else COLLC_RANKS_PER_NODE) asks for them.
  plan_options as_plans;
  as_plans.ranks_per_node = opt.ranks_per_node;
  const int pseudo = resolve(as_plans).ranks_per_node;
  MPI_Comm node = MPI_COMM_NULL;
  if (pseudo > 0)
    check(MPI_Comm_split(comm, me / pseudo, me, &node), "MPI_Comm_split");
  else
    check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int node_rank = 0, node_size = 1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  // Node leaders, numbered by their comm rank: leader k is the first rank of node k.
  std::vector<int> leader_flag(static_cast<std::size_t>(size), 0);
  const int mine = node_rank == 0 ? 1 : 0;
  check(MPI_Allgather(&mine, 1, MPI_INT, leader_flag.data(), 1, MPI_INT, comm), "MPI_Allgather");
  std::vector<int> leaders;
  for (int r = 0; r < size; ++r)
    if (leader_flag[static_cast<std::size_t>(r)]) leaders.push_back(r);

  calibration out;
  out.nodes = static_cast<int>(leaders.size());
  check(MPI_Allreduce(&node_size, &out.max_ranks_per_node, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  // Values measured by one rank reach all through a max (unmeasured: -1).
  enum { sync, copy, add, shm, alpha, beta, overhead, terms };
  double v[terms];
  std::fill(v, v + terms, -1.0);

  // Single core: the leader of node 0 alone.
  if (me == leaders[0]) {
    v[copy] = time_copy(opt.copy_bytes, opt.bandwidth_repetitions);
    v[add] = time_add(opt.copy_bytes, opt.bandwidth_repetitions);
  }
  quiet_barrier(comm);
  // Node measurements run on the node of comm rank 0.
  int has_zero = me == 0 ? 1 : 0, on_zero_node = 0;
  check(MPI_Allreduce(&has_zero, &on_zero_node, 1, MPI_INT, MPI_MAX, node), "MPI_Allreduce");
  if (on_zero_node && node_size >= 2) {  // every rank of the node copies at once
    std::vector<unsigned char> src(opt.copy_bytes, 1), dst(opt.copy_bytes, 0);
    std::memcpy(dst.data(), src.data(), opt.copy_bytes);  // fault the pages in
    std::vector<double> t;
    for (int i = 0; i < opt.bandwidth_repetitions; ++i) {
      check(MPI_Barrier(node), "MPI_Barrier");
      const double t0 = now();
      std::memcpy(dst.data(), src.data(), opt.copy_bytes);
      double dt = now() - t0, slowest = 0;
      check(MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, node), "MPI_Allreduce");
      t.push_back(slowest);
    }
    // Qualified: collc::mpi::median (tune.hpp) is also visible here.
    if (node_rank == 0)
      v[shm] = static_cast<double>(node_size) * static_cast<double>(opt.copy_bytes) / calibrate_detail::median(t);
  }
  quiet_barrier(comm);
  if (on_zero_node && node_size >= 2) {  // flag handoff between its first two ranks
    const double a = time_flag_handoff(node, opt.latency_repetitions);
    if (node_rank == 0) v[sync] = a;
  }
  quiet_barrier(comm);
  // Network: leaders of the first two nodes, else two ranks of the one node.
  if (size >= 2) {
    const int a = leaders[0];
    const int b = leaders.size() >= 2 ? leaders[1] : (a == 0 ? 1 : 0);
    const double small = time_ping_pong(comm, a, b, 8, opt.latency_repetitions);
    const double large = time_ping_pong(comm, a, b, opt.net_bytes, opt.bandwidth_repetitions);
    const double o = time_overhead(comm, a, b, std::max(1, opt.latency_repetitions / 10));
    if (me == a) {
      v[overhead] = std::max(o, 1e-12);  // measured, even if below the clock's resolution
      v[alpha] = small;
      // The large message pays alpha once too; guard against timer noise.
      v[beta] = std::max(large - small, large / 2) / static_cast<double>(std::max<std::size_t>(opt.net_bytes, 1));
    }
  }
  double all[terms];
  check(MPI_Allreduce(v, all, terms, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
  MPI_Comm_free(&node);

  ir::machine_model& m = out.model;
  if (all[copy] > 0) m.beta_copy = all[copy];
  if (all[add] > 0) m.gamma = all[add];
  out.shm_measured = all[shm] > 0;
  m.shm_bandwidth = out.shm_measured ? all[shm] : 1.0 / m.beta_copy;
  out.sync_measured = all[sync] > 0;
  if (out.sync_measured) m.alpha_sync = all[sync];
  out.net_measured = all[alpha] > 0;
  out.net_between_nodes = out.net_measured && out.nodes >= 2;
  if (out.net_measured) {
    // A ping-pong's half round trip is o + alpha + o in the model (LogP):
    // the latency is what the two overheads leave of it.
    m.o_net = all[overhead];
    m.alpha_net = std::max(all[alpha] - 2 * m.o_net, 0.0);
    m.beta_net = all[beta];
  }
  return out;
}

COLLC_INLINE ir::machine_model calibrate(MPI_Comm comm, const calibration_options& opt) {
  return calibrate_report(comm, opt).model;
}

}  // namespace collc::mpi
