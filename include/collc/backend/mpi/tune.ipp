#pragma once
/// \file
/// Definitions of tune.hpp's functions that do not depend on T or Op:
/// included by it in header-only mode, compiled once by src/collc.cpp with
/// COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/tune.hpp>

#include <collc/algo/presets.hpp>
#if COLLC_HAS_HWLOC
#include <collc/backend/hwloc/topology.hpp>
#endif

#include <algorithm>
#include <cstdio>
#include <limits>

namespace collc {

namespace mpi {

COLLC_INLINE void tune_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw error(errc::mpi_error, std::string(call) + " failed");
}

COLLC_INLINE void complete_giving_turns(MPI_Request& req, MPI_Comm comm) {
  // A blocking MPI_Bcast here (the blocking API's wisdom lookup, for every
  // new signature) deadlocked with a peer that waited in a started plan for
  // this rank first, until that peer's plan timed out.
  (void)registry::wait_request(req, std::numeric_limits<double>::infinity(), [comm] {
    engine::give_turns(comm);
    return false;
  });
}

COLLC_INLINE void barrier(MPI_Comm comm) {
  MPI_Request req = MPI_REQUEST_NULL;
  tune_check(MPI_Ibarrier(comm, &req), "MPI_Ibarrier");
  complete_giving_turns(req, comm);
}

COLLC_INLINE void bcast_int(MPI_Comm comm, int& v) {
  MPI_Request req = MPI_REQUEST_NULL;
  tune_check(MPI_Ibcast(&v, 1, MPI_INT, 0, comm, &req), "MPI_Ibcast");
  complete_giving_turns(req, comm);
}

COLLC_INLINE std::string bcast_string(MPI_Comm comm, std::string s) {
  int n = static_cast<int>(s.size());
  bcast_int(comm, n);
  s.resize(static_cast<std::size_t>(n));
  if (n > 0) {
    MPI_Request req = MPI_REQUEST_NULL;
    tune_check(MPI_Ibcast(s.data(), n, MPI_CHAR, 0, comm, &req), "MPI_Ibcast");
    complete_giving_turns(req, comm);
  }
  return s;
}

COLLC_INLINE int comm_rank_of(MPI_Comm comm) {
  int r = 0;
  tune_check(MPI_Comm_rank(comm, &r), "MPI_Comm_rank");
  return r;
}

COLLC_INLINE void print_warnings(MPI_Comm comm, const std::vector<std::string>& warnings) {
  if (comm_rank_of(comm) != 0) return;
  for (const auto& w : warnings) std::fprintf(stderr, "collc: warning: %s\n", w.c_str());
}

}  // namespace mpi

COLLC_INLINE comm_layout describe_comm(MPI_Comm comm, bool order_sensitive, const plan_options& options) {
  comm_layout out;
  std::vector<int> node_of, comm_of;
  if (order_sensitive) {
    auto p = make_allreduce<char, mpi::placement_probe_op>(comm, 1, options);
    node_of = p.node_of_program();
    comm_of = p.comm_of_program();
  } else {
    auto p = make_allgather<char>(comm, 1, options);
    node_of = p.node_of_program();
    comm_of = p.comm_of_program();
  }
  out.size = static_cast<int>(node_of.size());
  int L = 0, N = 0;
  if (!node_of.empty() && algo::uniform_blocks(node_of, L, N)) {
    out.nodes = N;
    out.ranks_per_node = L;
  } else {
    out.nodes = node_of.empty() ? 1 : *std::max_element(node_of.begin(), node_of.end()) + 1;
    out.ranks_per_node = 0;
  }
  if (out.nodes > 1) out.node_of = node_of;
  // Rank 0's node: its program ranks, in program order.
  const int L0 = static_cast<int>(std::count(node_of.begin(), node_of.end(), node_of.empty() ? 0 : node_of.front()));
#if COLLC_HAS_HWLOC
  node_topology node;
  int mine[2] = {-1, 0};
  try {
    node = hwloc::read_node();
    const rank_binding b = node.locate(hwloc::bound_pus());
    mine[0] = b.level;
    mine[1] = b.object;
  } catch (const error&) {
    node = node_topology::flat(mpi::online_cores());
  }
  std::vector<int> all(2 * static_cast<std::size_t>(out.size));
  MPI_Request req = MPI_REQUEST_NULL;
  mpi::tune_check(MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm, &req), "MPI_Iallgather");
  mpi::complete_giving_turns(req, comm);
  for (int q = 0; q < L0 && q < out.size; ++q) {
    const auto c = static_cast<std::size_t>(comm_of[static_cast<std::size_t>(q)]);
    node.bindings.push_back({all[2 * c], all[2 * c + 1]});
  }
  out.node = node;
#else
  out.node = node_topology::flat(mpi::online_cores());
  out.node.bindings.assign(static_cast<std::size_t>(L0), rank_binding{});  // unknown: flat in rank order
#endif
  out.fingerprint = mpi::bcast_string(comm, out.node.fingerprint());
  return out;
}

namespace mpi {

COLLC_INLINE std::optional<algo::schedule> wisdom_lookup(MPI_Comm comm,
                                                         const std::optional<std::filesystem::path>& file,
                                                         const wisdom_key& key, std::size_t count) {
  std::string text;
  if (comm_rank_of(comm) == 0 && file) {
    std::vector<std::string> warnings;
    const wisdom w = wisdom::load(*file, key.fingerprint, &warnings);
    print_warnings(comm, warnings);
    if (auto e = w.find(key, count)) text = e->schedule;
  }
  text = bcast_string(comm, text);
  if (text.empty()) return std::nullopt;
  try {
    return algo::parse_schedule(text);  // load() checked it already; same text on every rank
  } catch (const error&) {
    return std::nullopt;
  }
}

COLLC_INLINE void wisdom_store(MPI_Comm comm, const std::optional<std::filesystem::path>& file, const wisdom_entry& e) {
  if (comm_rank_of(comm) != 0 || !file) return;
  std::vector<std::string> warnings;
  try {
    wisdom::update(*file, {e}, &warnings);
  } catch (const error& x) {
    warnings.push_back(x.what());  // what() is the bare message
  }
  print_warnings(comm, warnings);
}

COLLC_INLINE double max_over(MPI_Comm comm, double v) {
  double m = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  tune_check(MPI_Iallreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, comm, &req), "MPI_Iallreduce");
  complete_giving_turns(req, comm);
  return m;
}

COLLC_INLINE double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace mpi

}  // namespace collc
