// Typed plans: MPI's pair types with MINLOC/MAXLOC, user operators on their
// datatype's bytes, and plain bytes for allgather and bcast (plans_build.hpp).
#include "plans_build.hpp"

namespace collc::pmpi {
namespace {

template <class P>
std::unique_ptr<typed_plan> loc_ops(opk o, const plan_request& r) {
  switch (o) {
    case opk::minloc: return build<P, minloc>(r.c, r.comm, r.count, r.root);
    case opk::maxloc: return build<P, maxloc>(r.c, r.comm, r.count, r.root);
    default: return nullptr;
  }
}

template <std::size_t N>
std::unique_ptr<typed_plan> user_ops(const user_function& u, const plan_request& r) {
  if (u.fn == nullptr) return nullptr;
  MPI_Fint ftype = u.lang == op_language::fortran ? PMPI_Type_c2f(u.type) : 0;
  if (u.commute) return build<blob<N>, user_op<true>>(r.c, r.comm, r.count, r.root, user_op<true>{u, ftype, N});
  return build<blob<N>, user_op<false>>(r.c, r.comm, r.count, r.root, user_op<false>{u, ftype, N});
}

}  // namespace

std::unique_ptr<typed_plan> make_other_plan(elem e, opk o, const user_function& u, const plan_request& r) {
  if (o == opk::user) {
    switch (e) {
      case elem::blob1: return user_ops<1>(u, r);
      case elem::blob2: return user_ops<2>(u, r);
      case elem::blob4: return user_ops<4>(u, r);
      case elem::blob8: return user_ops<8>(u, r);
      case elem::blob16: return user_ops<16>(u, r);
      case elem::blob32: return user_ops<32>(u, r);
      default: return nullptr;
    }
  }
  switch (e) {
    case elem::float_int: return loc_ops<loc<float, int>>(o, r);
    case elem::double_int: return loc_ops<loc<double, int>>(o, r);
    case elem::long_int: return loc_ops<loc<long, int>>(o, r);
    case elem::int_int: return loc_ops<loc<int, int>>(o, r);
    case elem::short_int: return loc_ops<loc<short, int>>(o, r);
    case elem::ldouble_int: return loc_ops<loc<long double, int>>(o, r);
    case elem::real_real: return loc_ops<loc<float, float>>(o, r);
    case elem::double_double: return loc_ops<loc<double, double>>(o, r);
    case elem::bytes: return o == opk::none ? build<unsigned char, plus>(r.c, r.comm, r.count, r.root) : nullptr;
    default: return nullptr;
  }
}

}  // namespace collc::pmpi
