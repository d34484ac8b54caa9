#pragma once
/// \file
/// The alpha-beta-gamma cost of an L2 program (design brief, "cost"): a
/// discrete-event evaluation of all P rank programs for one execution.
///
///   collc::ir::machine_model m;                       // defaults: x86 node, 100 Gb/s network
///   auto prog = collc::algo::lower(collc::algo::schedule::ring(), {.ranks = 8, .count = 1 << 20});
///   double seconds = collc::ir::predict(prog, m, sizeof(double));
///
/// Each rank has a clock; the rank with the smallest clock runs next, so
/// resources shared by several ranks are handed out in time order.
///  - copy / reduce of b bytes advance the clock by b * beta_copy / b * gamma,
///    or by the node's share when c ranks of the node move memory at once:
///    b * max(beta_copy, c / shm_bandwidth) and b * max(gamma, 1.5 c / shm_bandwidth)
///    (a reduce streams three operands where a copy streams two).
///  - signal stamps the clock on the flag (k-th signal, k-th stamp).
///  - wait (value >= 1): clock = max(clock, stamp of that signal + alpha_sync);
///    a wait with value <= 0 names an earlier execution: satisfied (one execution).
///  - send: the message queues for b * beta_net on the sender's node port
///    (out) and on the receiver's node port (in), and arrives alpha_net after
///    both have carried it (a node's ranks share one port each way); the
///    sender's clock does not move (sends are nonblocking).
///  - send also takes o_net of the sender's clock (before it is posted),
///    and recv o_net of the receiver's after the arrival (LogP's o);
///    recv: clock = max(clock, arrival of the matching send) + o_net;
///    fence: clock = max(clock, end of injection of the rank's sends).
/// The prediction is the latest finishing rank. Cost: O(I log P) for I
/// instructions in total, plus O(messages) memory.
///
/// Known limits (docs/cost_model.md): no cache effects (a copy from a peer's
/// shm costs the same as a local one), no overlap of a rank's own memory work
/// with its incoming messages beyond what the program order allows, no
/// network topology beyond one port per node, one execution (no pipelining of
/// consecutive calls, no chunking by the MPI backend).
#include <collc/config.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace collc::ir {

/// Machine parameters of the alpha-beta-gamma model, in seconds and bytes.
/// Defaults: a two-socket x86 node (DDR5) and a 100 Gb/s network; replace
/// them with collc::mpi::calibrate(comm) measurements for predictions that
/// mean something on a given machine.
///
///   collc::ir::machine_model m{.alpha_net = 2e-6, .beta_net = 1 / 10e9};
struct machine_model {
  double alpha_net = 1.5e-6;       ///< s per message between nodes (latency of a small MPI message)
  double beta_net = 1.0 / 12.0e9;  ///< s per byte between nodes (100 Gb/s is 12.5 GB/s)
  /// s of the sender's and of the receiver's processor per message between
  /// nodes (LogP's overhead o, Culler et al. 1993): ~0 where the network
  /// card moves the data (RDMA), microseconds where the host's network stack
  /// does (TCP). ir::predict charges it; the selector's closed forms do not.
  double o_net = 0;
  double alpha_sync = 2.0e-7;       ///< s for one signal -> wait handoff between cores of a node
  double beta_copy = 1.0 / 10.0e9;  ///< s per byte copied by one core (out of cache)
  double gamma = 1.0 / 8.0e9;       ///< s per byte reduced by one core (dst = a op b, out of cache)
  double shm_bandwidth = 100.0e9;   ///< bytes/s of copy payload a node sustains, shared by its ranks
                                    ///< (infinity: no contention)

  friend bool operator==(const machine_model&, const machine_model&) = default;

  /// Throws collc::error(errc::invalid_argument) naming the first parameter
  /// that is negative, NaN, or (shm_bandwidth) not positive.
  void validate() const;

  /// Seconds per byte of a copy while `concurrent` ranks of the node move memory.
  [[nodiscard]] constexpr double copy_per_byte(int concurrent) const {
    return std::max(beta_copy, static_cast<double>(concurrent) / shm_bandwidth);
  }
  /// Seconds per byte of a reduce while `concurrent` ranks of the node move memory.
  [[nodiscard]] constexpr double reduce_per_byte(int concurrent) const {
    return std::max(gamma, 1.5 * static_cast<double>(concurrent) / shm_bandwidth);
  }
};

/// The model as text, every term as `name=value` (%.6g), space-separated:
/// "alpha_net=1.5e-06 beta_net=8.33333e-11 alpha_sync=2e-07 ...". What
/// parse_machine_model reads and COLLC_MACHINE_MODEL holds.
std::string to_string(const machine_model& m);

/// A model from `name=value` pairs separated by spaces or commas; terms not
/// named keep the defaults, so "alpha_net=5e-6 beta_net=1e-10" describes a
/// network and nothing else. Throws collc::error(errc::invalid_argument)
/// naming the pair for an unknown name, a value that is not a whole number
/// (trailing text, empty), a repeated name, or a value validate() refuses.
///
///   auto m = collc::ir::parse_machine_model("alpha_net=4.6e-6, beta_net=1.06e-10");
machine_model parse_machine_model(std::string_view text);

/// Finishing time of every rank for one execution of `p` with elements of
/// `elem_bytes` bytes (see the file comment for the rules). Throws
/// collc::error(errc::invalid_argument) for a bad model or a program that
/// deadlocks.
///
///   auto t = collc::ir::predict_ranks(prog, {}, 8);  // t[r]: seconds until rank r is done
std::vector<double> predict_ranks(const program& p, const machine_model& m, std::size_t elem_bytes);

/// Predicted seconds for one execution of `p`: the latest rank's finish.
///
///   double t = collc::ir::predict(prog, collc::ir::machine_model{}, sizeof(double));
double predict(const program& p, const machine_model& m, std::size_t elem_bytes);

}  // namespace collc::ir

#if COLLC_HEADER_ONLY
#include <collc/ir/cost.ipp>
#endif
