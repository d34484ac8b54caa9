#pragma once
/// \file
/// Reproducible global sums and dot products on MPI communicators, in one
/// call: each rank accumulates its part exactly (collc::exact_sum), one
/// allreduce of one accumulator combines them (exact, so any schedule, rank
/// count and partition gives the same bits), and the result is rounded once.
///
///   auto p = collc::make_reproducible_allreduce<double>(comm);     // a plan, built once
///   double s = collc::reproducible_sum(p, x);                      // x: this rank's part
///   double d = collc::reproducible_dot(p, x, y);
///   double t = collc::reproducible_sum(comm, x);                   // or with a cached plan
///
/// Guarantee (docs/reproducible.md): the result is the correctly rounded
/// (nearest, ties to even) sum of all ranks' values (of all products
/// fl(x_i * y_i) for the dot), the same bits on every rank, whatever the number
/// of ranks, the schedule (COLLC_ALGO, factor sets, default selection), how the
/// values are split over the ranks and in which order each rank holds them.
#include <collc/backend/mpi/blocking.hpp>
#include <collc/backend/mpi/plan.hpp>
#include <collc/error.hpp>
#include <collc/exact_sum.hpp>

#include <mpi.h>

#include <cstddef>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

namespace collc {

/// Contiguous ranges of float or double (std::vector, std::span, arrays).
template <class R>
concept reproducible_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    (std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, double> ||
     std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, float>);

template <reproducible_range R>
using reproducible_value_t = std::remove_cv_t<std::ranges::range_value_t<R>>;

/// The plan the helpers take: an allreduce of one exact_sum<F> with the
/// default operator. Trailing arguments as for make_allreduce (a schedule,
/// plan_options). Collective over `comm`. Example:
///   auto p = collc::make_reproducible_allreduce<double>(MPI_COMM_WORLD);
template <class F, class... A>
plan<exact_sum<F>> make_reproducible_allreduce(MPI_Comm comm, A&&... args) {
  return make_allreduce<exact_sum<F>>(comm, 1, std::forward<A>(args)...);
}

namespace mpi {
/// A range whose data() is null but size() is not (e.g. std::span(nullptr, n)) is an error, not a crash.
template <class R>
void check_range_data(const R& x, const char* who, const char* name) {
  if (std::ranges::data(x) == nullptr && std::ranges::size(x) != 0)
    throw error(errc::invalid_argument, std::string(who) + ": " + name + " has " +
                                            std::to_string(std::ranges::size(x)) + " elements but a null data pointer");
}
template <class F>
void check_reproducible_plan(const plan<exact_sum<F>>& p, const char* who) {
  if (p.kind() != collective::allreduce || p.count() != 1)
    throw error(errc::invalid_argument, std::string(who) +
                                            ": the plan must be an allreduce of one accumulator "
                                            "(collc::make_reproducible_allreduce), got " +
                                            p.name());
}
/// This rank's exact sum of x, and of fl(x_i * y_i): the local parts of
/// every reproducible_sum / reproducible_dot, checked (null data with n > 0,
/// unequal sizes) before anything is read.
template <reproducible_range R, class F = reproducible_value_t<R>>
exact_sum<F> local_sum(const R& x) {
  check_range_data(x, "collc::reproducible_sum", "x");
  exact_sum<F> s;
  s.add(std::ranges::data(x), std::ranges::size(x));
  return s;
}
template <reproducible_range R, reproducible_range S, class F = reproducible_value_t<R>>
exact_sum<F> local_dot(const R& x, const S& y) {
  if (std::ranges::size(x) != std::ranges::size(y))
    throw error(errc::invalid_argument, "collc::reproducible_dot: x has " + std::to_string(std::ranges::size(x)) +
                                            " elements, y has " + std::to_string(std::ranges::size(y)));
  check_range_data(x, "collc::reproducible_dot", "x");
  check_range_data(y, "collc::reproducible_dot", "y");
  exact_sum<F> s;
  s.add_products(std::ranges::data(x), std::ranges::data(y), std::ranges::size(x));
  return s;
}
template <class F>
F finish(plan<exact_sum<F>>& p, exact_sum<F> local) {
  exact_sum<F> global;
  p(&local, &global);
  return global.round();
}
}  // namespace mpi

/// The correctly rounded sum over all ranks of every rank's `x`; collective over the plan's communicator.
template <reproducible_range R, class F = reproducible_value_t<R>>
F reproducible_sum(plan<exact_sum<F>>& p, const R& x) {
  mpi::check_reproducible_plan(p, "collc::reproducible_sum");
  // A local error refuses the call: the peers are in it already.
  return mpi::finish(p, mpi::call_or_refuse(p, [&] { return mpi::local_sum(x); }));
}

/// The correctly rounded sum over all ranks of fl(x_i * y_i) for this rank's
/// x and y (equal sizes: errc::invalid_argument otherwise); collective.
template <reproducible_range R, reproducible_range S, class F = reproducible_value_t<R>>
requires std::is_same_v<F, reproducible_value_t<S>> F reproducible_dot(plan<exact_sum<F>>& p, const R& x, const S& y) {
  mpi::check_reproducible_plan(p, "collc::reproducible_dot");
  // A local error refuses the call: the peers are in it already.
  return mpi::finish(p, mpi::call_or_refuse(p, [&] { return mpi::local_dot(x, y); }));
}

/// As above with the plan built on first use and cached per communicator
/// (collc/blocking.hpp: COLLC_ALGO / wisdom apply as for collc::allreduce).
/// A local error (null data, unequal sizes) refuses the cached plan's call,
/// as with a plan of one's own: the peers fail at once naming this rank, and
/// the cached plan is unusable afterwards, on every rank.
template <reproducible_range R, class F = reproducible_value_t<R>>
F reproducible_sum(MPI_Comm comm, const R& x) {
  auto& p = mpi::blocking_plan<exact_sum<F>, plus>(collective::allreduce, comm, 1, 0, plus{});
  return mpi::finish(p, mpi::call_or_refuse(p, [&] { return mpi::local_sum(x); }));
}
template <reproducible_range R, reproducible_range S, class F = reproducible_value_t<R>>
requires std::is_same_v<F, reproducible_value_t<S>> F reproducible_dot(MPI_Comm comm, const R& x, const S& y) {
  auto& p = mpi::blocking_plan<exact_sum<F>, plus>(collective::allreduce, comm, 1, 0, plus{});
  return mpi::finish(p, mpi::call_or_refuse(p, [&] { return mpi::local_dot(x, y); }));
}

}  // namespace collc
