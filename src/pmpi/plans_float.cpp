// Typed plans, floating point and complex (plans_build.hpp).
#include "plans_build.hpp"

#include <complex>

namespace collc::pmpi {
namespace {

template <class F>
std::unique_ptr<typed_plan> real_ops(opk o, const plan_request& r) {
  switch (o) {
    case opk::sum: return build<F, plus>(r.c, r.comm, r.count, r.root);
    case opk::prod: return build<F, prod>(r.c, r.comm, r.count, r.root);
    case opk::min: return build<F, collc::min>(r.c, r.comm, r.count, r.root);
    case opk::max: return build<F, collc::max>(r.c, r.comm, r.count, r.root);
    default: return nullptr;
  }
}

template <class C>
std::unique_ptr<typed_plan> complex_ops(opk o, const plan_request& r) {
  switch (o) {
    case opk::sum: return build<C, plus>(r.c, r.comm, r.count, r.root);
    case opk::prod: return build<C, prod>(r.c, r.comm, r.count, r.root);
    default: return nullptr;
  }
}

}  // namespace

std::unique_ptr<typed_plan> make_float_plan(elem e, opk o, const plan_request& r) {
  switch (e) {
    case elem::f32: return real_ops<float>(o, r);
    case elem::f64: return real_ops<double>(o, r);
    case elem::f80: return real_ops<long double>(o, r);
    case elem::c32: return complex_ops<std::complex<float>>(o, r);
    case elem::c64: return complex_ops<std::complex<double>>(o, r);
    case elem::c80: return complex_ops<std::complex<long double>>(o, r);
    default: return nullptr;
  }
}

}  // namespace collc::pmpi
