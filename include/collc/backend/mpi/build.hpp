#pragma once
/// \file
/// From a request to a built engine: which schedule (the one default rule,
/// overrides, factor sets), lowering it in chunks, and the engine's setup.
/// Type-independent: typed plans (plan_core.hpp) call build_plan() with the
/// shape of their T and Op; the definitions (build.ipp) are compiled once in
/// compiled mode, which is what keeps lowering, verification and selection
/// out of every translation unit that makes a plan.
///
/// How a plan's schedule is chosen (the one rule, documented in
/// docs/selection.md "Default"):
///  1. an explicit schedule or factor set given to the factory;
///  2. the expert overrides COLLC_ALGO / COLLC_FACTORS (set alike on every
///     rank, like MPICH's CVARs; a rank that differs gets errc::mismatch);
///  3. default_for(): on one node the measured rule algo::default_schedule
///     (oversubscription-aware through the node's cores), across nodes the
///     cost-model selector algo::select.
/// The blocking API (blocking.hpp) adds what only it can afford at a first
/// call, COLLC_TUNE and the wisdom file, before falling back to default_for().
#include <collc/algo/schedule.hpp>
#include <collc/backend/mpi/engine.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/config.hpp>
#include <collc/core.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace collc::mpi {

/// The schedule a factory was asked for, before the communicator is known.
struct schedule_request {
  enum kind_t : std::uint8_t { by_default, by_factors, explicit_schedule } kind = by_default;
  std::vector<int> factors;
  algo::schedule sched;

  /// "default", "{-2,2}" or the schedule's name.
  [[nodiscard]] std::string text() const;
};

/// An engine set up and built, with the schedule it runs.
struct built_plan {
  std::unique_ptr<engine> e;
  algo::schedule sched;
};

/// The default schedule (rule 3 above) for `coll` on P program ranks of
/// `node_of` (empty: one node), `bytes` per rank, `node_cores` cores on the node.
[[nodiscard]] algo::schedule default_for(collective coll, int P, std::size_t bytes, bool commutative,
                                         const std::vector<int>& node_of, int node_cores);

/// The schedule for `req` on `P` program ranks (rules 1-3): validated, the
/// family decided. Throws collc::error naming the schedule when it cannot run.
[[nodiscard]] algo::schedule resolve_schedule(const schedule_request& req, collective coll, int P, std::size_t bytes,
                                              bool commutative, const std::vector<int>& node_of, int node_cores = 0);

/// Sets up and builds the engine of a plan with `shape` on `comm` (collective
/// over `comm`): resolves the schedule, lowers it in chunks, verifies where
/// checks are on, agrees with every rank and binds. Every rank throws alike on
/// an error (engine::build).
[[nodiscard]] built_plan build_plan(MPI_Comm comm, const plan_shape& shape, const plan_options& options,
                                    const schedule_request& request);

}  // namespace collc::mpi

#if COLLC_HEADER_ONLY
#include <collc/backend/mpi/build.ipp>
#endif
