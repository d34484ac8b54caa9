#pragma once
// The typed side of libcollc_mpi: one collc::plan<T, Op> per cached call,
// behind a small type-erased handle, for every (element type, operator) pair
// MPI can name with predefined handles, and for user operators
// (MPI_Op_create) through their function pointer. Included after
// pmpi_names.hpp.
#include "interpose.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace collc::pmpi {

/// The C++ element type a plan runs on. Integer operators that do not depend
/// on signedness (sum, product, bit and logical operators) run on the
/// unsigned type of the width: the same bits as two's complement, without
/// signed overflow. `blobN` is N bytes that only a user operator interprets.
enum class elem : std::uint8_t {
  u8,
  u16,
  u32,
  u64,
  i8,
  i16,
  i32,
  i64,
  f32,
  f64,
  f80,
  c32,
  c64,
  c80,
  float_int,
  double_int,
  long_int,
  int_int,
  short_int,
  ldouble_int,
  real_real,
  double_double,
  bytes,
  blob1,
  blob2,
  blob4,
  blob8,
  blob16,
  blob32,
  none,
};

/// The operator a plan applies.
enum class opk : std::uint8_t { sum, prod, min, max, band, bor, bxor, land, lor, lxor, minloc, maxloc, user, none };

/// A user operator as MPI_Op_create recorded it (interpose.hpp: op_created).
struct user_function {
  void (*fn)() = nullptr;
  bool commute = false;
  op_language lang = op_language::c;
  MPI_Datatype type = MPI_DATATYPE_NULL;  // handed to the function, as MPI does
};

/// One cached plan, type-erased. Buffers as MPI has them: `send` may be
/// MPI_IN_PLACE; bcast works on `recv` alone; a reduce's non-root ranks pass
/// recv == nullptr.
class typed_plan {
 public:
  virtual ~typed_plan() = default;
  virtual void start(const void* send, void* recv) = 0;
  /// true once the started call is complete (then ended, as plan::test does).
  virtual bool test() = 0;
  virtual void wait() = 0;
};

/// A plan for `count` elements of `e` (bytes for allgather and bcast) with
/// operator `o` on `comm` (collective over comm; throws collc::error).
/// nullptr if (e, o) is not a pair this library instantiates.
std::unique_ptr<typed_plan> make_typed_plan(coll c, elem e, opk o, const user_function& user, MPI_Comm comm,
                                            std::size_t count, int root);

}  // namespace collc::pmpi
