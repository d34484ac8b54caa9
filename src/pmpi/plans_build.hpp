#pragma once
// What the typed-plan translation units share: collc::plan<T, Op> behind
// typed_plan, the operators MPI names that collc's ops.hpp lacks (MINLOC,
// MAXLOC, user functions), and the element types of MPI's pair types. The
// instantiations are spread over plans.cpp, plans_float.cpp and
// plans_other.cpp so they compile in parallel.
#include "pmpi_names.hpp"  // first: collc's MPI calls on their PMPI_* names

#include "plans.hpp"

#include <collc/backend/mpi/plan.hpp>
#include <collc/ops.hpp>

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>

namespace collc::pmpi {

/// MPI's pair types (MPI_DOUBLE_INT, MPI_2INT, MPI_2DOUBLE_PRECISION, ...):
/// a value and an index, laid out as the C struct MPI describes (core.cpp
/// checks each type's extent against sizeof before it uses one).
template <class V, class I>
struct loc {
  V v;
  I i;
};

/// MPI_MINLOC / MPI_MAXLOC (MPI 4.0, section 6.9.4): the smaller (larger)
/// value, and on a tie the smaller index.
template <bool Max>
struct loc_op {
  static constexpr bool is_commutative = true;
  template <class V, class I>
  loc<V, I> operator()(const loc<V, I>& a, const loc<V, I>& b) const {
    const bool a_wins = Max ? b.v < a.v : a.v < b.v;
    const bool b_wins = Max ? a.v < b.v : b.v < a.v;
    if (a_wins) return a;
    if (b_wins) return b;
    return loc<V, I>{a.v, b.i < a.i ? b.i : a.i};
  }
};
using minloc = loc_op<false>;
using maxloc = loc_op<true>;

/// N bytes that only a user operator interprets (its datatype's extent).
/// Alignment 1: the user's buffer need not be aligned for more, and collc
/// only copies these; the operator hands the function aligned copies.
template <std::size_t N>
struct blob {
  unsigned char b[N];
};

/// A user operator from MPI_Op_create, called through its function pointer as
/// MPI calls it: f(invec, inoutvec, &len, &datatype) computes
/// inoutvec[i] = invec[i] op inoutvec[i], invec from the lower rank (collc's
/// `a`). Commute = false keeps rank order: only order-preserving schedules are
/// chosen and the verifier proves the order.
template <bool Commute>
struct user_op {
  static constexpr bool is_commutative = Commute;
  user_function u;
  MPI_Fint fortran_type = 0;
  std::size_t extent = 0;  // bytes per element (the datatype's extent)

  void call(void* in, void* inout, std::size_t n) const {
    while (n > 0) {
      // MPI's length is an int: a range above INT_MAX elements goes in pieces.
      int len = static_cast<int>(std::min<std::size_t>(n, INT_MAX));
      if (u.lang == op_language::c) {
        MPI_Datatype t = u.type;
        reinterpret_cast<void (*)(void*, void*, int*, MPI_Datatype*)>(u.fn)(in, inout, &len, &t);
      } else {
        MPI_Fint t = fortran_type;
        reinterpret_cast<void (*)(void*, void*, MPI_Fint*, MPI_Fint*)>(u.fn)(in, inout, &len, &t);
      }
      n -= static_cast<std::size_t>(len);
      in = static_cast<char*>(in) + static_cast<std::size_t>(len) * extent;
      inout = static_cast<char*>(inout) + static_cast<std::size_t>(len) * extent;
    }
  }

  /// One element (the local executor's and Kokkos' way): through aligned copies.
  template <std::size_t N>
  blob<N> operator()(const blob<N>& a, const blob<N>& b) const {
    alignas(16) unsigned char in[N];
    alignas(16) unsigned char io[N];
    std::memcpy(in, a.b, N);
    std::memcpy(io, b.b, N);
    call(in, io, 1);
    blob<N> r;
    std::memcpy(r.b, io, N);
    return r;
  }

  /// dst = a op b over n elements with one call per piece (ops.hpp's range
  /// hook): dst may equal a or b. When dst is a, a is first saved in a
  /// bounded buffer, since the function overwrites its second argument.
  template <std::size_t N>
  void reduce_range(blob<N>* dst, const blob<N>* a, const blob<N>* b, std::size_t n) const {
    if (dst != a) {
      if (dst != b) std::memcpy(dst, b, n * N);
      call(const_cast<blob<N>*>(a), dst, n);
      return;
    }
    constexpr std::size_t piece = 4096 / N > 0 ? 4096 / N : 1;
    alignas(16) unsigned char saved[piece * N];
    for (std::size_t i = 0; i < n; i += piece) {
      const std::size_t k = std::min(piece, n - i);
      std::memcpy(saved, dst + i, k * N);
      if (b != dst) std::memcpy(dst + i, b + i, k * N);
      call(saved, dst + i, k);
    }
  }
};

/// collc::plan<T, Op> behind typed_plan.
template <class T, class Op>
class typed final : public typed_plan {
 public:
  typed(plan<T, Op> p, coll c) : p_(std::move(p)), c_(c) {}
  void start(const void* send, void* recv) override {
    T* r = static_cast<T*>(recv);
    if (c_ == coll::bcast || send == MPI_IN_PLACE)
      p_.start(in_place, r);
    else
      p_.start(static_cast<const T*>(send), r);
  }
  bool test() override { return p_.test(); }
  void wait() override { p_.wait(); }

 private:
  plan<T, Op> p_;
  coll c_;
};

inline collective to_collective(coll c) {
  switch (c) {
    case coll::allreduce: return collective::allreduce;
    case coll::reduce_scatter_block:
    case coll::reduce_scatter: return collective::reduce_scatter;
    case coll::allgather: return collective::allgather;
    case coll::bcast: return collective::bcast;
    case coll::reduce: return collective::reduce;
    case coll::count_: break;
  }
  return collective::allreduce;
}

/// The options of every plan the library builds: no time limit on waits
/// unless COLLC_TIMEOUT says otherwise. An MPI collective waits as long as a
/// peer takes to arrive (a rank may compute for minutes first); a plan's
/// default limit of 60 s would turn a slow but correct program into an error.
inline plan_options interposed_options() {
  plan_options o;
  if (!mpi::env_value("COLLC_TIMEOUT")) o.timeout_s = std::numeric_limits<double>::infinity();
  return o;
}

/// The plan (collective over comm; collc::error on failure).
template <class T, class Op>
std::unique_ptr<typed_plan> build(coll c, MPI_Comm comm, std::size_t count, int root, Op op = {}) {
  return std::make_unique<typed<T, Op>>(
      mpi::make_plan<T, Op>(to_collective(c), comm, count, root, op, interposed_options()), c);
}

/// The arguments every maker passes on.
struct plan_request {
  coll c;
  MPI_Comm comm;
  std::size_t count;
  int root;
};

// One per translation unit (nullptr: not a pair this library instantiates).
std::unique_ptr<typed_plan> make_integer_plan(elem e, opk o, const plan_request& r);
std::unique_ptr<typed_plan> make_float_plan(elem e, opk o, const plan_request& r);
std::unique_ptr<typed_plan> make_other_plan(elem e, opk o, const user_function& u, const plan_request& r);

}  // namespace collc::pmpi
