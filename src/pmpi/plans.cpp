// Typed plans, integers (plans_build.hpp), and the one entry make_typed_plan.
#include "plans_build.hpp"

#include <cstdint>

namespace collc::pmpi {
namespace {

/// Sum, product, bit and logical operators: the unsigned type of the width.
template <class U>
std::unique_ptr<typed_plan> unsigned_ops(opk o, const plan_request& r) {
  switch (o) {
    case opk::sum: return build<U, plus>(r.c, r.comm, r.count, r.root);
    case opk::prod: return build<U, prod>(r.c, r.comm, r.count, r.root);
    case opk::band: return build<U, bit_and>(r.c, r.comm, r.count, r.root);
    case opk::bor: return build<U, bit_or>(r.c, r.comm, r.count, r.root);
    case opk::bxor: return build<U, bit_xor>(r.c, r.comm, r.count, r.root);
    case opk::land: return build<U, logical_and>(r.c, r.comm, r.count, r.root);
    case opk::lor: return build<U, logical_or>(r.c, r.comm, r.count, r.root);
    case opk::lxor: return build<U, logical_xor>(r.c, r.comm, r.count, r.root);
    case opk::min: return build<U, collc::min>(r.c, r.comm, r.count, r.root);
    case opk::max: return build<U, collc::max>(r.c, r.comm, r.count, r.root);
    default: return nullptr;
  }
}

/// Min and max depend on the sign.
template <class S>
std::unique_ptr<typed_plan> signed_ops(opk o, const plan_request& r) {
  switch (o) {
    case opk::min: return build<S, collc::min>(r.c, r.comm, r.count, r.root);
    case opk::max: return build<S, collc::max>(r.c, r.comm, r.count, r.root);
    default: return nullptr;
  }
}

}  // namespace

std::unique_ptr<typed_plan> make_integer_plan(elem e, opk o, const plan_request& r) {
  switch (e) {
    case elem::u8: return unsigned_ops<std::uint8_t>(o, r);
    case elem::u16: return unsigned_ops<std::uint16_t>(o, r);
    case elem::u32: return unsigned_ops<std::uint32_t>(o, r);
    case elem::u64: return unsigned_ops<std::uint64_t>(o, r);
    case elem::i8: return signed_ops<std::int8_t>(o, r);
    case elem::i16: return signed_ops<std::int16_t>(o, r);
    case elem::i32: return signed_ops<std::int32_t>(o, r);
    case elem::i64: return signed_ops<std::int64_t>(o, r);
    default: return nullptr;
  }
}

std::unique_ptr<typed_plan> make_typed_plan(coll c, elem e, opk o, const user_function& user, MPI_Comm comm,
                                            std::size_t count, int root) {
  const plan_request r{c, comm, count, root};
  if (auto p = make_integer_plan(e, o, r)) return p;
  if (auto p = make_float_plan(e, o, r)) return p;
  return make_other_plan(e, o, user, r);
}

}  // namespace collc::pmpi
