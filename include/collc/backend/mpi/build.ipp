#pragma once
#include <collc/backend/mpi/build.hpp>

#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/algo/select.hpp>
#include <collc/error.hpp>
#include <collc/factors.hpp>
#include <collc/ir/sequence.hpp>

#include <span>

namespace collc::mpi {

COLLC_INLINE std::string schedule_request::text() const {
  switch (kind) {
    case by_default: return "default";
    case by_factors: return factor_set(std::span<const int>(factors)).to_string();
    case explicit_schedule: return sched.to_string();
  }
  return "?";
}

COLLC_INLINE algo::schedule default_for(collective coll, int P, std::size_t bytes, bool commutative,
                                        const std::vector<int>& node_of, int node_cores) {
  bool one_node = true;
  for (int n : node_of) one_node = one_node && n == node_of.front();
  // One node: the measured rule (fastest here and free to compute, so a later
  // plan sets up in microseconds). Across nodes: the cost-model selector,
  // which the simple rule cannot match at scale.
  // Read on one node too, where the rule does not use it: a model that does
  // not parse is an error wherever the job runs, not once it spans nodes.
  const std::optional<ir::machine_model> model = machine_model_from_env();
  if (one_node) return algo::default_schedule(coll, P, bytes, commutative, node_of, node_cores);
  algo::select_options opt;
  if (model) opt.model = *model;
  // The chunk a plan between nodes runs with by default (COLLC_CHUNK_BYTES
  // when set; plan_options::chunk_bytes is not seen here).
  const resolved_options env = resolve(plan_options{});
  opt.chunk_bytes = env.chunk_bytes_given ? env.chunk_bytes : default_net_chunk_bytes;
  return algo::select(coll, P, bytes, commutative, node_of, {}, opt);
}

COLLC_INLINE algo::schedule resolve_schedule(const schedule_request& req, collective coll, int P, std::size_t bytes,
                                             bool commutative, const std::vector<int>& node_of, int node_cores) {
  if (req.kind == schedule_request::explicit_schedule) {
    if (req.sched.fam == algo::family::cyclic_shift && !commutative && reduces(coll)) {
      std::string msg = "schedule ";
      msg += req.sched.to_string();
      msg += " is a cyclic shift, which needs a commutative operator";
      throw error(errc::not_commutative, msg);
    }
    return req.sched;
  }
  if (req.kind == schedule_request::by_default) {
    if (auto chosen = algo::override_from_env(coll, P, commutative)) return *chosen;
    return default_for(coll, P, bytes, commutative, node_of, node_cores);
  }
  // A factor set: recursive exchange if it fits P exactly, else cyclic shift.
  const factor_set fs(std::span<const int>(req.factors));
  const algo::schedule s = algo::schedule_of_factor_set(fs, P, coll);
  if (s.fam == algo::family::cyclic_shift && !commutative && reduces(coll)) {
    std::string msg = "factor set ";
    msg += fs.to_string();
    msg += " is a cyclic shift for ";
    msg += std::to_string(P);
    msg +=
        " ranks, which needs a commutative operator (this operator is not; declare is_commutative or use a "
        "factor set whose product is ";
    msg += std::to_string(P);
    msg += ")";
    throw error(errc::not_commutative, msg);
  }
  return s;
}

COLLC_INLINE built_plan build_plan(MPI_Comm comm, const plan_shape& shape, const plan_options& options,
                                   const schedule_request& request) {
  auto e = std::make_unique<engine>(comm, shape, resolve(options));
  // Resolution and lowering may throw (a factor set that does not fit P, an
  // override set on one rank only, ...): build() agrees on their outcome, so
  // every rank throws alike instead of leaving the others waiting.
  const auto& map = e->placement();
  const std::vector<int> node_of = map.nodes > 1 ? map.node_of : std::vector<int>{};
  const bool commutative = shape.commutative || !reduces(shape.coll);
  algo::schedule sched;
  e->build(
      [&] {
        sched = resolve_schedule(request, shape.coll, e->size(), shape.count * shape.elem_size, commutative, node_of,
                                 e->node_cores());
        return sched.to_string();
      },
      [&](const chunk_request& q) {
        algo::lower_request r;
        r.coll = shape.coll;
        r.ranks = q.ranks;
        r.count = q.count;
        r.root = q.root;
        r.granule = q.granule;
        r.block_stride = q.block_stride;
        r.node_of = q.node_of;
        // COLLC_ENABLE_CHECKS / options.checks: the engine proves the programs
        // it binds, in the order it runs them (engine::verify_runs).
        // Data goes straight to its destination, and large exchanges between
        // nodes are pipelined (ir::engine_form).
        return ir::engine_form(algo::lower(sched, r), ir::exchange_pieces_for(shape.elem_size));
      });
  return {std::move(e), std::move(sched)};
}

}  // namespace collc::mpi
