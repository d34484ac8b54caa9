#pragma once
/// \file
/// collc::plan_options: the knobs of an MPI plan, and how each falls back to
/// an environment variable when left unset. Resolution happens once, at plan
/// setup; the hot path reads only the resolved values.
#include <collc/config.hpp>
#include <collc/error.hpp>
#include <collc/ir/cost.hpp>

#include <cstddef>
#include <cstdint>
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
///   chunk_bytes     COLLC_CHUNK_BYTES     256 KiB (4 MiB with messages between nodes): bound on shm
///                                         and scratch per rank
///   timeout_s       COLLC_TIMEOUT         60 seconds (inf: never)
///   timeout_action  COLLC_ON_TIMEOUT      throw | abort
///   checks          COLLC_ENABLE_CHECKS   1|0, yes|no, true|false, on|off: verify the program at setup
/// and, for every plan on a communicator that spans nodes, COLLC_MACHINE_MODEL
/// (machine_model_from_env) for the default selection.
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

namespace collc::mpi {

inline constexpr std::size_t default_chunk_bytes = std::size_t{256} << 10;
/// The chunk of a plan with messages between nodes when neither
/// plan_options::chunk_bytes nor COLLC_CHUNK_BYTES sets one. A plan runs its
/// chunks one after another, and between nodes each step of a chunk is a
/// network round: with 256 KiB chunks a 1 MiB allreduce over TCP at P = 2
/// made 7 rounds of ~25 us and took 1.26x MPI_Allreduce's time, with 4 MiB
/// chunks 0.84x (docs/benchmarks.md, "Between nodes").
inline constexpr std::size_t default_net_chunk_bytes = std::size_t{4} << 20;
inline constexpr double default_timeout_s = 60.0;

/// plan_options with every field decided.
struct resolved_options {
  int ranks_per_node = 0;
  collc::placement place = collc::placement::block;
  std::size_t chunk_bytes = default_chunk_bytes;
  /// chunk_bytes came from plan_options or COLLC_CHUNK_BYTES (else the
  /// engine takes default_net_chunk_bytes for a plan between nodes).
  bool chunk_bytes_given = false;
  double timeout_s = default_timeout_s;
  on_timeout timeout_action = on_timeout::throw_error;
  bool checks = false;
};

/// The value of environment variable `name`; nullopt if unset or empty.
std::optional<std::string> env_value(const char* name);

/// `text` as a decimal integer in [0, max]: digits only (no sign, space,
/// base prefix or trailing text), and a value above `max` is an error rather
/// than wrapped or truncated.
std::uint64_t parse_env_integer(const char* name, const std::string& text, std::uint64_t max);

/// ASCII lower case, for keywords.
std::string lower_ascii(std::string_view s);

/// A boolean variable: 1/0, yes/no, true/false, on/off, in any case.
bool parse_env_bool(const char* name, const std::string& text);

/// A double as "%g" prints it ("nan", "-inf", "0.25"), for messages.
std::string format_seconds(double v);

/// The machine model of COLLC_MACHINE_MODEL (ir::parse_machine_model's
/// text, e.g. what `collc-bench --calibrate` prints), nullopt when unset.
/// Default selection across nodes (default_for) costs its candidates with
/// it. Throws collc::error(errc::invalid_argument) naming the variable and
/// the term for a value parse_machine_model refuses.
std::optional<ir::machine_model> machine_model_from_env();

/// Every field of `o` decided: the option, else its environment variable,
/// else the default (see plan_options). Throws collc::error(errc::invalid_argument)
/// for an option or variable out of range.
resolved_options resolve(const plan_options& o);

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/options.ipp>
#endif
