#pragma once
/// \file
/// collc::plan_options: the knobs of an MPI plan, and how each falls back to
/// an environment variable when left unset. Resolution happens once, at plan
/// setup; the hot path reads only the resolved values.
#include <collc/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace collc {

/// How pseudo-nodes (see plan_options::ranks_per_node) are carved out of a
/// communicator: `block` puts ranks 0..k-1 on node 0, `round_robin` puts rank r
/// on node r % n (n = ceil(P / k)), the placement of `mpiexec --map-by node`.
enum class placement : std::uint8_t { block, round_robin };

/// What a wait that exceeds the timeout does after reporting who waits for whom.
enum class on_timeout : std::uint8_t { throw_error, abort };

/// Options of a plan. Every unset field falls back to an environment variable,
/// then to a default:
///   ranks_per_node  COLLC_RANKS_PER_NODE  0 = physical nodes (MPI_COMM_TYPE_SHARED)
///   placement       COLLC_PLACEMENT       block | round_robin   (pseudo-nodes only)
///   chunk_bytes     COLLC_CHUNK_BYTES     256 KiB: bound on shm and scratch per rank
///   timeout_s       COLLC_TIMEOUT         60 seconds
///   timeout_action  COLLC_ON_TIMEOUT      throw | abort
///   checks          COLLC_ENABLE_CHECKS   0 | 1: verify the program at setup
/// Example:
///   collc::plan_options o;
///   o.ranks_per_node = 2;  // test the inter-node path on one machine
///   auto p = collc::make_allreduce<double>(MPI_COMM_WORLD, n, o);
struct plan_options {
  /// Split each physical node into pseudo-nodes of this many ranks that talk
  /// only through point-to-point messages (to exercise the inter-node path on
  /// one machine). 0: use the environment, else physical nodes.
  int ranks_per_node = 0;
  std::optional<collc::placement> pseudo_placement;
  /// Upper bound on the shared segment slot and the scratch memory of one rank,
  /// in bytes. Messages larger than that run as a pipeline of chunk executions.
  std::size_t chunk_bytes = 0;
  /// Seconds a wait may take before it is reported as a timeout. 0: environment.
  double timeout_s = 0;
  std::optional<on_timeout> timeout_action;
  std::optional<bool> checks;
};

}  // namespace collc

namespace collc::detail {

inline constexpr std::size_t default_chunk_bytes = std::size_t{256} << 10;
inline constexpr double default_timeout_s = 60.0;

/// plan_options with every field decided.
struct resolved_options {
  int ranks_per_node = 0;
  collc::placement place = collc::placement::block;
  std::size_t chunk_bytes = default_chunk_bytes;
  double timeout_s = default_timeout_s;
  on_timeout timeout_action = on_timeout::throw_error;
  bool checks = false;
};

inline std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

inline long long parse_env_integer(const char* name, const std::string& text) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 0)
    throw error(errc::invalid_argument, std::string(name) + "='" + text + "' is not a non-negative integer");
  return v;
}

inline resolved_options resolve(const plan_options& o) {
  resolved_options r;
  if (o.ranks_per_node < 0)
    throw error(errc::invalid_argument,
                "plan_options::ranks_per_node (" + std::to_string(o.ranks_per_node) + ") must be >= 0");
  r.ranks_per_node = o.ranks_per_node;
  if (r.ranks_per_node == 0)
    if (auto v = env_value("COLLC_RANKS_PER_NODE"))
      r.ranks_per_node = static_cast<int>(parse_env_integer("COLLC_RANKS_PER_NODE", *v));
  if (o.pseudo_placement) {
    r.place = *o.pseudo_placement;
  } else if (auto v = env_value("COLLC_PLACEMENT")) {
    if (*v == "block")
      r.place = collc::placement::block;
    else if (*v == "round_robin")
      r.place = collc::placement::round_robin;
    else
      throw error(errc::invalid_argument, "COLLC_PLACEMENT='" + *v + "' is neither 'block' nor 'round_robin'");
  }
  r.chunk_bytes = o.chunk_bytes;
  if (r.chunk_bytes == 0)
    if (auto v = env_value("COLLC_CHUNK_BYTES"))
      r.chunk_bytes = static_cast<std::size_t>(parse_env_integer("COLLC_CHUNK_BYTES", *v));
  if (r.chunk_bytes == 0) r.chunk_bytes = default_chunk_bytes;
  if (o.timeout_s < 0)
    throw error(errc::invalid_argument, "plan_options::timeout_s (" + std::to_string(o.timeout_s) + ") must be >= 0");
  r.timeout_s = o.timeout_s;
  if (r.timeout_s == 0) {
    if (auto v = env_value("COLLC_TIMEOUT")) {
      std::size_t used = 0;
      double t = -1;
      try {
        t = std::stod(*v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v->size() || !(t > 0))
        throw error(errc::invalid_argument, "COLLC_TIMEOUT='" + *v + "' is not a positive number of seconds");
      r.timeout_s = t;
    }
  }
  if (r.timeout_s == 0) r.timeout_s = default_timeout_s;
  if (o.timeout_action) {
    r.timeout_action = *o.timeout_action;
  } else if (auto v = env_value("COLLC_ON_TIMEOUT")) {
    if (*v == "throw")
      r.timeout_action = on_timeout::throw_error;
    else if (*v == "abort")
      r.timeout_action = on_timeout::abort;
    else
      throw error(errc::invalid_argument, "COLLC_ON_TIMEOUT='" + *v + "' is neither 'throw' nor 'abort'");
  }
  if (o.checks)
    r.checks = *o.checks;
  else if (auto v = env_value("COLLC_ENABLE_CHECKS"))
    r.checks = *v != "0";
  return r;
}

}  // namespace collc::detail
