#pragma once
/// \file
/// collc::plan_options: the knobs of an MPI plan, and how each falls back to
/// an environment variable when left unset. Resolution happens once, at plan
/// setup; the hot path reads only the resolved values.
#include <collc/error.hpp>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

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
///   timeout_s       COLLC_TIMEOUT         60 seconds (inf: never)
///   timeout_action  COLLC_ON_TIMEOUT      throw | abort
///   checks          COLLC_ENABLE_CHECKS   1|0, yes|no, true|false, on|off: verify the program at setup
/// Variables are parsed strictly, and a value that is not exactly one of
/// these (trailing text, a sign, out of range, another word) is refused with
/// collc::error(errc::invalid_argument) naming the variable and its value,
/// never read as something else; keywords ignore case. An empty variable is
/// unset.
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
  /// Seconds a wait may take before it is reported as a timeout. 0: environment;
  /// infinity: never. NaN and negative values are refused (errc::invalid_argument).
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

/// `text` as a decimal integer in [0, max]: digits only (no sign, space,
/// base prefix or trailing text), and a value above `max` is an error rather
/// than wrapped or truncated.
inline std::uint64_t parse_env_integer(const char* name, const std::string& text, std::uint64_t max) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (!digits || (ec != std::errc{} && ec != std::errc::result_out_of_range) || ptr != end)
    throw error(errc::invalid_argument, std::string(name) + "='" + text + "' is not a non-negative integer");
  if (ec == std::errc::result_out_of_range || v > max)
    throw error(errc::invalid_argument,
                std::string(name) + "='" + text + "' is out of range (at most " + std::to_string(max) + ")");
  return v;
}

/// ASCII lower case, for keywords.
inline std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// A boolean variable: 1/0, yes/no, true/false, on/off, in any case.
inline bool parse_env_bool(const char* name, const std::string& text) {
  const std::string v = lower_ascii(text);
  if (v == "1" || v == "yes" || v == "true" || v == "on") return true;
  if (v == "0" || v == "no" || v == "false" || v == "off") return false;
  throw error(errc::invalid_argument,
              std::string(name) + "='" + text + "' is not a boolean (use 1/0, yes/no, true/false or on/off)");
}

/// A double as "%g" prints it ("nan", "-inf", "0.25"), for messages.
inline std::string format_seconds(double v) {
  if (std::isnan(v)) return "nan";  // the sign of a NaN means nothing to a user
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

inline resolved_options resolve(const plan_options& o) {
  resolved_options r;
  if (o.ranks_per_node < 0)
    throw error(errc::invalid_argument,
                "plan_options::ranks_per_node (" + std::to_string(o.ranks_per_node) + ") must be >= 0");
  r.ranks_per_node = o.ranks_per_node;
  if (r.ranks_per_node == 0)
    if (auto v = env_value("COLLC_RANKS_PER_NODE"))
      r.ranks_per_node = static_cast<int>(
          parse_env_integer("COLLC_RANKS_PER_NODE", *v, static_cast<std::uint64_t>(std::numeric_limits<int>::max())));
  if (o.pseudo_placement) {
    r.place = *o.pseudo_placement;
  } else if (auto v = env_value("COLLC_PLACEMENT")) {
    const std::string k = lower_ascii(*v);
    if (k == "block")
      r.place = collc::placement::block;
    else if (k == "round_robin")
      r.place = collc::placement::round_robin;
    else
      throw error(errc::invalid_argument, "COLLC_PLACEMENT='" + *v + "' is neither 'block' nor 'round_robin'");
  }
  r.chunk_bytes = o.chunk_bytes;
  if (r.chunk_bytes == 0)
    if (auto v = env_value("COLLC_CHUNK_BYTES"))
      r.chunk_bytes = static_cast<std::size_t>(parse_env_integer(
          "COLLC_CHUNK_BYTES", *v, static_cast<std::uint64_t>(std::numeric_limits<std::size_t>::max())));
  if (r.chunk_bytes == 0) r.chunk_bytes = default_chunk_bytes;
  // A NaN timeout compares false with every wait, so it would never fire.
  if (!(o.timeout_s >= 0))
    throw error(errc::invalid_argument, "plan_options::timeout_s (" + format_seconds(o.timeout_s) +
                                            ") must be a positive number of seconds, inf (never) or 0 (COLLC_TIMEOUT, "
                                            "else 60)");
  r.timeout_s = o.timeout_s;
  if (r.timeout_s == 0) {
    if (auto v = env_value("COLLC_TIMEOUT")) {
      // from_chars: no locale, no leading space, no hex; "inf" parses (never).
      double t = -1;
      const char* end = v->data() + v->size();
      const auto [ptr, ec] = std::from_chars(v->data(), end, t);
      if (ec != std::errc{} || ptr != end || !(t > 0))
        throw error(errc::invalid_argument,
                    "COLLC_TIMEOUT='" + *v + "' is not a positive number of seconds (or inf: never)");
      r.timeout_s = t;
    }
  }
  if (r.timeout_s == 0) r.timeout_s = default_timeout_s;
  if (o.timeout_action) {
    r.timeout_action = *o.timeout_action;
  } else if (auto v = env_value("COLLC_ON_TIMEOUT")) {
    const std::string k = lower_ascii(*v);
    if (k == "throw")
      r.timeout_action = on_timeout::throw_error;
    else if (k == "abort")
      r.timeout_action = on_timeout::abort;
    else
      throw error(errc::invalid_argument, "COLLC_ON_TIMEOUT='" + *v + "' is neither 'throw' nor 'abort'");
  }
  if (o.checks)
    r.checks = *o.checks;
  else if (auto v = env_value("COLLC_ENABLE_CHECKS"))
    r.checks = parse_env_bool("COLLC_ENABLE_CHECKS", *v);
  return r;
}

}  // namespace collc::detail
