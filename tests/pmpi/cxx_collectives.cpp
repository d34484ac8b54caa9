// libcollc_mpi under a C++ program: the MPI C API called the way C++ codes
// call it (std::vector buffers, std::complex with MPI_CXX_DOUBLE_COMPLEX,
// bool with MPI_CXX_BOOL, a non-commutative user operator on a struct type),
// built against the plain MPI library. tests/pmpi/compare.sh runs it with and without the library and
// compares the output: rank 0 prints every rank's results (MPI_Gather is not
// intercepted). Data are exact in any reduction order.
#include <mpi.h>

#include <complex>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int rank_ = 0, size_ = 1;
std::vector<std::string> lines;

template <class T>
void record(const std::string& name, const std::vector<T>& v) {
  std::string line = name + ":";
  for (const T& x : v) line += " " + std::to_string(x);
  lines.push_back(line);
}
void record(const std::string& name, const std::vector<std::complex<double>>& v) {
  std::string line = name + ":";
  for (const auto& z : v) line += " (" + std::to_string(z.real()) + "," + std::to_string(z.imag()) + ")";
  lines.push_back(line);
}

// A 2x2 integer matrix product mod 1009: associative, not commutative.
struct mat2 {
  std::int32_t a, b, c, d;
};
void mat_product(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* x = static_cast<const mat2*>(in);
  auto* y = static_cast<mat2*>(inout);
  for (int k = 0; k < *len; ++k) {
    const mat2 l = x[k], r = y[k];
    y[k] = {(l.a * r.a + l.b * r.c) % 1009, (l.a * r.b + l.b * r.d) % 1009, (l.c * r.a + l.d * r.c) % 1009,
            (l.c * r.b + l.d * r.d) % 1009};
  }
}

void run(MPI_Comm comm, const std::string& tag) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int rep = 0; rep < 3; ++rep) {
    const std::string at = tag + " rep " + std::to_string(rep) + " ";
    std::vector<double> x(513), y(513);
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<double>(rank * 3 + static_cast<int>(k % 11));
    MPI_Allreduce(x.data(), y.data(), static_cast<int>(x.size()), MPI_DOUBLE, MPI_SUM, comm);
    record(at + "allreduce vector<double> sum", y);
    std::vector<std::complex<double>> z{{1.0 * rank, 1.0}, {2.0, -1.0 * rank}};
    MPI_Allreduce(MPI_IN_PLACE, z.data(), 2, MPI_CXX_DOUBLE_COMPLEX, MPI_SUM, comm);
    record(at + "allreduce complex<double> in place", z);
    bool flags[2] = {rank == size - 1, rank >= 0};
    bool any[2];
    MPI_Allreduce(flags, any, 2, MPI_CXX_BOOL, MPI_LOR, comm);
    record(at + "allreduce bool lor", std::vector<int>{any[0], any[1]});
    std::vector<std::int64_t> big{std::int64_t{1} << 40, -rank};
    MPI_Allreduce(MPI_IN_PLACE, big.data(), 2, MPI_INT64_T, MPI_MAX, comm);
    record(at + "allreduce int64 max", big);
    MPI_Datatype mat_type;  // four int32 in a row: a contiguous derived type
    MPI_Type_contiguous(4, MPI_INT32_T, &mat_type);
    MPI_Type_commit(&mat_type);
    MPI_Op op;
    MPI_Op_create(mat_product, 0, &op);
    // Reductions on a derived type go to MPI; the same operator on MPI_2INT
    // pairs (a, b rows) would not be a matrix product, so keep the type.
    std::vector<mat2> m{{1 + rank, 1, 0, 1}, {1, rank % 2, 1, 1}}, r(2);
    MPI_Allreduce(m.data(), r.data(), 2, mat_type, op, comm);
    std::vector<int> flat;
    for (const auto& e : r) flat.insert(flat.end(), {e.a, e.b, e.c, e.d});
    record(at + "allreduce user op on a derived type (to MPI)", flat);
    MPI_Op_free(&op);
    MPI_Type_free(&mat_type);
    std::vector<int> mine(3, rank), all(3 * static_cast<std::size_t>(size));
    MPI_Allgather(mine.data(), 3, MPI_INT, all.data(), 3, MPI_INT, comm);
    record(at + "allgather vector<int>", all);
    std::vector<float> b(1000, rank == size - 1 ? 2.5f : 0.0f);
    MPI_Bcast(b.data(), 1000, MPI_FLOAT, size - 1, comm);
    record(at + "bcast vector<float> from the last rank", std::vector<float>(b.begin(), b.begin() + 3));
    std::vector<unsigned> u{static_cast<unsigned>(rank), 7u}, v(2, 0);
    MPI_Reduce(u.data(), rank == 0 ? v.data() : nullptr, 2, MPI_UNSIGNED, MPI_BXOR, 0, comm);
    record(at + "reduce unsigned bxor", v);
    std::vector<double> s(4 * static_cast<std::size_t>(size));
    for (std::size_t k = 0; k < s.size(); ++k) s[k] = static_cast<double>(k + static_cast<std::size_t>(rank));
    std::vector<double> part(4);
    MPI_Reduce_scatter_block(s.data(), part.data(), 4, MPI_DOUBLE, MPI_SUM, comm);
    record(at + "reduce_scatter_block", part);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  run(MPI_COMM_WORLD, "world");
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run(dup, "dup");
  MPI_Comm_free(&dup);
  // Every rank's lines to rank 0, in rank order.
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  int n = static_cast<int>(text.size());
  std::vector<int> sizes(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size_; ++r)
    offsets[static_cast<std::size_t>(r)] = total, total += sizes[static_cast<std::size_t>(r)];
  std::string all(rank_ == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  MPI_Gatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank_ == 0) std::fputs(all.c_str(), stdout);
  MPI_Finalize();
  return 0;
}
