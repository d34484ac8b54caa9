// Tests for include/collc/backend/mpi/calibrate.hpp at every rank count:
// the measured terms are finite, positive, within physically plausible
// bounds (wide: the CI machine runs more ranks than cores), identical on all
// ranks, and the report says which terms the communicator allowed to measure.
#include "support.hpp"

#include <collc/algo/cost.hpp>
#include <collc/algo/presets.hpp>
#include <collc/backend/mpi/calibrate.hpp>

#include <cmath>
#include <string>

using namespace collc_test;

namespace {

// Small sizes keep the test short; the defaults are for benchmarks.
const collc::mpi::calibration_options quick{.copy_bytes = std::size_t{4} << 20,
                                            .net_bytes = std::size_t{1} << 20,
                                            .latency_repetitions = 200,
                                            .bandwidth_repetitions = 5};

bool within(double v, double lo, double hi) { return std::isfinite(v) && v > lo && v < hi; }

bool same_on_all_ranks(double v) {
  double lo = 0, hi = 0;
  MPI_Allreduce(&v, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&v, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

}  // namespace

TEST_CASE("calibrate measures plausible, agreed values", "[backend][mpi][calibrate]") {
  const auto c = collc::mpi::calibrate_report(MPI_COMM_WORLD, quick);
  const auto& m = c.model;
  INFO("alpha_net " << m.alpha_net << " beta_net " << m.beta_net << " alpha_sync " << m.alpha_sync << " beta_copy "
                    << m.beta_copy << " gamma " << m.gamma << " shm_bandwidth " << m.shm_bandwidth);
  // Bounds: a flag handoff between 0.1 ns and an oversubscribed time slice;
  // bandwidths between 1 MB/s and 100 TB/s.
  CHECK(all_ranks(within(m.alpha_sync, 1e-10, 0.1)));
  // alpha_net is the small-message half round trip less 2 o_net, so at
  // least 0; the two together are that half round trip.
  CHECK(all_ranks(m.alpha_net >= 0 && m.alpha_net < 0.1));
  CHECK(all_ranks(within(m.alpha_net + 2 * m.o_net, 1e-10, 0.1)));
  if (c.net_measured) CHECK(all_ranks(within(m.o_net, 1e-12, 0.1)));
  CHECK(all_ranks(within(m.beta_net, 1e-14, 1e-6)));
  CHECK(all_ranks(within(m.beta_copy, 1e-14, 1e-6)));
  CHECK(all_ranks(within(m.gamma, 1e-14, 1e-6)));
  CHECK(all_ranks(within(m.shm_bandwidth, 1e6, 1e14)));
  CHECK_NOTHROW(m.validate());
  for (double v : {m.alpha_net, m.beta_net, m.o_net, m.alpha_sync, m.beta_copy, m.gamma, m.shm_bandwidth})
    CHECK(same_on_all_ranks(v));

  const int P = world_size();
  CHECK(c.net_measured == (P >= 2));
  CHECK(c.net_between_nodes == (P >= 2 && c.nodes >= 2));
  CHECK(c.sync_measured == (c.max_ranks_per_node >= 2));
  CHECK(c.shm_measured == c.sync_measured);
  if (!c.sync_measured) CHECK(m.alpha_sync == collc::ir::machine_model{}.alpha_sync);
  if (!c.net_measured) {
    CHECK(m.alpha_net == collc::ir::machine_model{}.alpha_net);
    CHECK(m.beta_net == collc::ir::machine_model{}.beta_net);
    CHECK(m.o_net == collc::ir::machine_model{}.o_net);
  }
  if (!c.shm_measured) CHECK(m.shm_bandwidth == Approx(1.0 / m.beta_copy));
}

TEST_CASE("a calibrated model drives the cost model", "[backend][mpi][calibrate]") {
  const auto m = collc::mpi::calibrate(MPI_COMM_WORLD, quick);
  const int P = world_size();
  const double t = collc::algo::predict(collc::algo::rabenseifner(std::max(P, 2)), collc::collective::allreduce,
                                        std::max(P, 2), 1 << 20, m, 0);
  CHECK(all_ranks(std::isfinite(t) && t > 0));
}

TEST_CASE("calibrate rejects empty buffers", "[backend][mpi][calibrate]") {
  CHECK_THROWS_WITH(collc::mpi::calibrate(MPI_COMM_WORLD, {.copy_bytes = 0}), Catch::Contains("copy_bytes (0)"));
}
