#pragma once
/// \file
/// Reproducible sums and dot products over Kokkos::Views: a Kokkos reducer
/// for collc::exact_sum (so Kokkos::parallel_reduce accumulates a rank's part
/// exactly, for any number of threads and any split of the range among them),
/// local exact sums/dots that feed it whole blocks (the vectorised range add),
/// and one-call global versions over a collc::kokkos plan.
///
///   using exec = Kokkos::DefaultHostExecutionSpace;
///   collc::exact_sum<double> s;
///   Kokkos::parallel_reduce(Kokkos::RangePolicy<exec>(0, n),
///       KOKKOS_LAMBDA(int i, collc::exact_sum<double>& a) { a += x(i); },
///       collc::kokkos::exact_sum_reducer<double>(s));
///
///   auto p = collc::kokkos::make_reproducible_allreduce<exec, double>(comm);
///   double d = collc::kokkos::reproducible_dot(p, exec(), x, y);   // same bits at any P, any schedule
///
/// Host execution spaces only, as the rest of the Kokkos backend (exact_sum's
/// member functions are host functions).
#if !__has_include(<Kokkos_Core.hpp>)
#error "collc/backend/kokkos/reproducible.hpp needs Kokkos: link collc::kokkos (find_package(collc COMPONENTS kokkos))"
#endif

#include <Kokkos_Core.hpp>
#include <collc/backend/kokkos/plan.hpp>
#include <collc/error.hpp>
#include <collc/exact_sum.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

namespace collc::kokkos {

/// A Kokkos reducer whose value is a collc::exact_sum<F>: init is the exact
/// zero, join is the exact merge, so the reduction's result does not depend on
/// how Kokkos splits the range or orders the joins. Example above.
template <class F, class Space = Kokkos::HostSpace>
struct exact_sum_reducer {
  using reducer = exact_sum_reducer;
  using value_type = exact_sum<F>;
  using result_view_type = Kokkos::View<value_type, Space, Kokkos::MemoryUnmanaged>;

  KOKKOS_INLINE_FUNCTION exact_sum_reducer(value_type& v) : value_(&v), references_scalar_(true) {}
  KOKKOS_INLINE_FUNCTION exact_sum_reducer(const result_view_type& v) : value_(v), references_scalar_(false) {}

  KOKKOS_INLINE_FUNCTION void join(value_type& dest, const value_type& src) const { dest += src; }
  // Kokkos 3 joins through volatile references in some backends; the
  // accumulator is plain memory owned by the reduction, so it is read and
  // written as such.
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dest, const volatile value_type& src) const {
    const_cast<value_type&>(dest) += const_cast<const value_type&>(src);
  }
  KOKKOS_INLINE_FUNCTION void init(value_type& v) const { v = value_type{}; }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return *value_.data(); }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return value_; }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return references_scalar_; }

 private:
  result_view_type value_;
  bool references_scalar_;
};

namespace detail {
template <class View>
const auto* contiguous_data(const View& v, const char* who) {
  if (v.extent(0) > 1 && (!v.span_is_contiguous() || v.stride(0) != 1))
    throw error(errc::invalid_argument, std::string(who) + ": View \"" + v.label() +
                                            "\" is not contiguous; exact range adds need contiguous rank-1 Views");
  return v.data();
}
/// Values a block of the parallel_reduce hands to the vectorised range add.
inline constexpr std::size_t reduce_block = 4096;
}  // namespace detail

/// The exact sum of this rank's `x` (a contiguous rank-1 View of float or
/// double), as an accumulator: a parallel_reduce over blocks on `exec`, each
/// block added by exact_sum's vectorised range add.
template <class ExecSpace, class View>
exact_sum<std::remove_const_t<typename View::value_type>> local_sum(const ExecSpace& exec, const View& x) {
  using F = std::remove_const_t<typename View::value_type>;
  const F* p = detail::contiguous_data(x, "collc::kokkos::local_sum");
  const std::size_t n = x.extent(0), blocks = (n + detail::reduce_block - 1) / detail::reduce_block;
  exact_sum<F> s;
  Kokkos::parallel_reduce(
      "collc::exact_sum", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, blocks),
      [=](std::int64_t b, exact_sum<F>& a) {
        const std::size_t lo = static_cast<std::size_t>(b) * detail::reduce_block;
        a.add(p + lo, std::min(detail::reduce_block, n - lo));
      },
      exact_sum_reducer<F>(s));
  return s;
}

/// The exact sum of fl(x(i) * y(i)) over this rank's Views (equal extents), as an accumulator.
template <class ExecSpace, class XView, class YView>
exact_sum<std::remove_const_t<typename XView::value_type>> local_dot(const ExecSpace& exec, const XView& x,
                                                                     const YView& y) {
  using F = std::remove_const_t<typename XView::value_type>;
  static_assert(std::is_same_v<F, std::remove_const_t<typename YView::value_type>>,
                "collc::kokkos::local_dot: x and y must hold the same floating-point type");
  if (x.extent(0) != y.extent(0))
    throw error(errc::invalid_argument, "collc::kokkos::local_dot: x has " + std::to_string(x.extent(0)) +
                                            " elements, y has " + std::to_string(y.extent(0)));
  const F* px = detail::contiguous_data(x, "collc::kokkos::local_dot");
  const F* py = detail::contiguous_data(y, "collc::kokkos::local_dot");
  const std::size_t n = x.extent(0), blocks = (n + detail::reduce_block - 1) / detail::reduce_block;
  exact_sum<F> s;
  Kokkos::parallel_reduce(
      "collc::exact_dot", Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, blocks),
      [=](std::int64_t b, exact_sum<F>& a) {
        const std::size_t lo = static_cast<std::size_t>(b) * detail::reduce_block;
        a.add_products(px + lo, py + lo, std::min(detail::reduce_block, n - lo));
      },
      exact_sum_reducer<F>(s));
  return s;
}

/// An allreduce plan of one exact_sum<F> over Views on `ExecSpace` (the
/// default operator; trailing arguments as for make_allreduce). Collective.
template <class ExecSpace, class F, class... A>
plan<ExecSpace, exact_sum<F>> make_reproducible_allreduce(MPI_Comm comm, A&&... args) {
  return kokkos::make_allreduce<ExecSpace, exact_sum<F>>(comm, 1, std::forward<A>(args)...);  // qualified: ADL finds collc::make_allreduce too
}

/// Sums a local accumulator over the plan's ranks and rounds once: the
/// correctly rounded global sum, the same bits on every rank.
template <class ExecSpace, class F>
F reproducible_allreduce(plan<ExecSpace, exact_sum<F>>& p, const ExecSpace& exec, exact_sum<F> local) {
  if (p.kind() != collective::allreduce || p.count() != 1)
    throw error(errc::invalid_argument,
                "collc::kokkos::reproducible_*: the plan must be an allreduce of one "
                "accumulator (make_reproducible_allreduce), got " +
                    p.name());
  exact_sum<F> global;
  using view = Kokkos::View<exact_sum<F>*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  p(exec, view(&local, 1), view(&global, 1));
  return global.round();
}

/// The correctly rounded global sum of every rank's `x`; collective.
template <class ExecSpace, class F, class View>
F reproducible_sum(plan<ExecSpace, exact_sum<F>>& p, const ExecSpace& exec, const View& x) {
  return reproducible_allreduce(p, exec, mpi::call_or_refuse(p, [&] { return local_sum(exec, x); }));
}

/// The correctly rounded global sum of fl(x(i) * y(i)) over every rank's Views; collective.
template <class ExecSpace, class F, class XView, class YView>
F reproducible_dot(plan<ExecSpace, exact_sum<F>>& p, const ExecSpace& exec, const XView& x, const YView& y) {
  return reproducible_allreduce(p, exec, mpi::call_or_refuse(p, [&] { return local_dot(exec, x, y); }));
}

}  // namespace collc::kokkos
