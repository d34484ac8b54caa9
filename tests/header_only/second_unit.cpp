// Unit 2 of the header-only link check (two_units.hpp): an allgather, a
// reduce with max and a bcast of 64-bit integers, the blocking allreduce, and
// (with the Kokkos component) a Kokkos plan.
#include "two_units.hpp"

#include <collc/collc.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace two_units {

std::string check_second_unit(MPI_Comm comm) {
  int me = 0, P = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  const auto p = static_cast<std::size_t>(P);
  auto gather = collc::make_allgather<std::int64_t>(comm, 2);
  const std::int64_t pair[2] = {me, 10 * me};
  std::vector<std::int64_t> all(2 * p, -1);
  gather(pair, all.data());
  for (std::size_t r = 0; r < p; ++r)
    if (all[2 * r] != static_cast<std::int64_t>(r) || all[2 * r + 1] != 10 * static_cast<std::int64_t>(r))
      return "allgather: block " + std::to_string(r) + " is wrong";

  const int root = P - 1;
  auto top = collc::make_reduce<std::int64_t, collc::max>(comm, 4, root);
  std::vector<std::int64_t> v(4, me), best(4, -1);
  top(v.data(), best.data());
  if (me == root)
    for (auto b : best)
      if (b != P - 1) return "reduce max at root: " + std::to_string(b);

  auto share = collc::make_bcast<std::int64_t>(comm, 5, 0);
  std::vector<std::int64_t> b(5, me == 0 ? 42 : -1);
  share(collc::in_place, b.data());
  for (auto e : b)
    if (e != 42) return "bcast: " + std::to_string(e);

  std::int64_t one = 1, count = 0;
  collc::allreduce(comm, &one, &count, 1);
  if (count != P) return "blocking allreduce: " + std::to_string(count);

#if COLLC_HAS_KOKKOS
  Kokkos::initialize();
  std::string why;
  {
    using exec_space = Kokkos::DefaultHostExecutionSpace;
    auto k = collc::kokkos::make_allreduce<exec_space, double>(comm, 3);
    Kokkos::View<double*, exec_space> in("in", 3), out("out", 3);
    for (int i = 0; i < 3; ++i) in(i) = me + i;
    k(exec_space{}, in, out);
    for (int i = 0; i < 3; ++i) {
      const double want = static_cast<double>(P) * (P - 1) / 2 + static_cast<double>(P) * i;
      if (out(i) != want) why = "kokkos allreduce: element " + std::to_string(i) + " is " + std::to_string(out(i));
    }
  }
  Kokkos::finalize();
  if (!why.empty()) return why;
#endif
  return {};
}

}  // namespace two_units
