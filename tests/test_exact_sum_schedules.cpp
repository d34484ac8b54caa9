// collc::exact_sum<double> as the element of collc programs, run by the local
// executor (include/collc/backend/local): for every schedule of
// collc::algo::all_schedules (recursive exchange, cyclic shift, ring, trees,
// copy-in) of allreduce, reduce and reduce_scatter at P = 1..16, with the
// default operator (collc::plus), the same summands split over the ranks by a
// random partition in a random local order give bit for bit the same
// accumulator and the same rounded double on every rank that receives it, equal
// to the sequential exact sum of all summands (P-independent), itself checked
// against a naive double sum that is off (the summands cancel hugely). The
// test also counts how many schedules a plain double sum of the same
// partition gets a different result on, and requires that to be some (the
// problem the type solves is there in the data).
#include <catch2/catch.hpp>
#include <collc/algo/lower.hpp>
#include <collc/algo/presets.hpp>
#include <collc/backend/local/executor.hpp>
#include <collc/exact_sum.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

using namespace collc;
using acc = exact_sum<double>;

namespace {

/// Summands with huge cancellation, subnormals and tiny values, whose naive sum depends on the order.
std::vector<double> summands(std::mt19937_64& g, std::size_t n) {
  std::uniform_real_distribution<double> u(0.5, 1);
  std::vector<double> v;
  while (v.size() < n) {
    const double big = std::ldexp(u(g), 900 + static_cast<int>(g() % 100));
    v.push_back(big);
    v.push_back(-big);
    v.push_back(std::ldexp(u(g), static_cast<int>(g() % 120) - 60) * ((g() & 1) ? 1 : -1));
    v.push_back(std::numeric_limits<double>::denorm_min() * static_cast<double>(g() % 100));
    v.push_back(1e-300 * u(g));
  }
  v.resize(n);
  std::shuffle(v.begin(), v.end(), g);
  return v;
}

/// parts[r] = rank r's share of v (random partition, random order; some ranks may get nothing).
std::vector<std::vector<double>> partition(const std::vector<double>& v, int P, std::mt19937_64& g) {
  std::vector<std::vector<double>> parts(static_cast<std::size_t>(P));
  for (double x : v) parts[g() % parts.size()].push_back(x);
  for (auto& p : parts) std::shuffle(p.begin(), p.end(), g);
  return parts;
}

struct outcome {
  std::vector<acc> exact;     // per rank, per element
  std::vector<double> plain;  // the same with doubles
};

bool bitwise_equal(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

}  // namespace

TEST_CASE("every schedule, P = 1..16: bitwise-identical exact sums for any partition", "[exact_sum][backend][local]") {
  std::mt19937_64 g(31337);
  constexpr std::size_t per_element = 240;  // summands behind each output element
  constexpr collective colls[] = {collective::allreduce, collective::reduce, collective::reduce_scatter};
  // Elements of the result: allreduce / reduce: 2; reduce_scatter: 1 per block.
  std::vector<std::vector<double>> data;  // data[e]: the summands of output element e (shared by all P)
  for (int e = 0; e < 32; ++e) data.push_back(summands(g, per_element));
  std::vector<acc> want;
  for (const auto& d : data) {
    acc s;
    for (double x : d) s += x;
    want.push_back(s);
  }
  // The naive left-to-right sum of element 0 differs from the exact result: the data makes the point.
  double naive = 0;
  for (double x : data[0]) naive += x;
  REQUIRE(!bitwise_equal(naive, want[0].round()));

  std::size_t cases = 0, plain_differs = 0;
  for (int P = 1; P <= 16; ++P)
    for (collective coll : colls) {
      const std::size_t count = coll == collective::reduce_scatter ? 1 : 2;
      const std::size_t outputs = coll == collective::reduce_scatter ? static_cast<std::size_t>(P) : count;
      for (const auto& sched : algo::all_schedules(coll, P, true)) {
        const int root = P / 2;
        INFO(to_string(coll) << " P=" << P << " schedule " << sched.to_string());
        const auto prog = algo::lower(sched, {.coll = coll, .ranks = P, .count = count, .root = root});
        // send[r][j]: rank r's accumulator of its share of output element j.
        std::vector<std::vector<acc>> send(static_cast<std::size_t>(P), std::vector<acc>(prog.send_count()));
        std::vector<std::vector<double>> send_plain(static_cast<std::size_t>(P),
                                                    std::vector<double>(prog.send_count(), 0.0));
        for (std::size_t j = 0; j < outputs; ++j) {
          const auto parts = partition(data[(j + static_cast<std::size_t>(P)) % data.size()], P, g);
          for (std::size_t r = 0; r < parts.size(); ++r) {
            acc s;
            if (g() & 1)
              s.add(parts[r].data(), parts[r].size());
            else
              for (double x : parts[r]) s += x;
            send[r][j] = s;
            double p = 0;
            for (double x : parts[r]) p += x;
            send_plain[r][j] = p;
          }
        }
        std::vector<std::vector<acc>> recv(static_cast<std::size_t>(P), std::vector<acc>(prog.recv_count()));
        std::vector<std::vector<double>> recv_plain(static_cast<std::size_t>(P),
                                                    std::vector<double>(prog.recv_count(), 0.0));
        local::execute(prog, send, recv, plus{});
        local::execute(prog, send_plain, recv_plain, plus{});
        ++cases;
        bool plain_same = true;
        for (int r = 0; r < P; ++r) {
          if (coll == collective::reduce && r != root) continue;
          for (std::size_t k = 0; k < prog.recv_count(); ++k) {
            const std::size_t j = coll == collective::reduce_scatter ? static_cast<std::size_t>(r) : k;
            const acc& expect = want[(j + static_cast<std::size_t>(P)) % want.size()];
            const acc& got = recv[static_cast<std::size_t>(r)][k];
            REQUIRE(std::memcmp(&got, &expect, sizeof(acc)) == 0);
            REQUIRE(bitwise_equal(got.round(), expect.round()));
            plain_same = plain_same && bitwise_equal(recv_plain[static_cast<std::size_t>(r)][k], expect.round());
          }
        }
        if (!plain_same) ++plain_differs;
      }
    }
  INFO(cases << " cases; a plain double sum missed the exact result in " << plain_differs);
  CHECK(cases > 500);
  CHECK(plain_differs > cases / 2);
  WARN("exact_sum: " << cases
                     << " (collective, P, schedule) cases bitwise identical; plain double sums differed from "
                        "the correctly rounded result in "
                     << plain_differs);
}
