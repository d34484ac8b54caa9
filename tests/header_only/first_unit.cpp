// Unit 1 of the header-only link check (two_units.hpp): main, an allreduce
// (in place and not) and a reduce_scatter of doubles.
#include "two_units.hpp"

#include <collc/collc.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace two_units {

std::string check_first_unit(MPI_Comm comm) {
  int me = 0, P = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  const std::size_t n = 1000;
  auto sum = collc::make_allreduce<double>(comm, n);
  std::vector<double> x(n), y(n, -1.0);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(me + 1) * static_cast<double>(i % 7);
  sum(x.data(), y.data());
  const double ranks = static_cast<double>(P) * (P + 1) / 2;  // 1 + 2 + ... + P, exact in double
  for (std::size_t i = 0; i < n; ++i)
    if (y[i] != ranks * static_cast<double>(i % 7))
      return "allreduce: element " + std::to_string(i) + " is " + std::to_string(y[i]);
  sum(collc::in_place, x.data());
  if (x != y) return "allreduce in place differs from the out-of-place result";

  auto scatter = collc::make_reduce_scatter<double>(comm, 3);
  std::vector<double> blocks(3 * static_cast<std::size_t>(P)), mine(3, -1.0);
  for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<double>(i);
  scatter(blocks.data(), mine.data());
  for (std::size_t i = 0; i < 3; ++i) {
    const double want = static_cast<double>(P) * static_cast<double>(3 * static_cast<std::size_t>(me) + i);
    if (mine[i] != want) return "reduce_scatter: element " + std::to_string(i) + " is " + std::to_string(mine[i]);
  }
  return {};
}

}  // namespace two_units

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::string why;
  try {
    why = two_units::check_first_unit(MPI_COMM_WORLD);
    const std::string second = two_units::check_second_unit(MPI_COMM_WORLD);
    if (why.empty()) why = second;
  } catch (const std::exception& e) {
    why = std::string("threw: ") + e.what();
  }
  int bad = why.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) std::printf("rank %d: FAIL: %s\n", me, why.c_str());
  if (me == 0 && !any) std::printf("two units, header-only: every result right; PASS\n");
  MPI_Finalize();
  return any;
}
