// Tests for include/collc/backend/mpi/options.hpp: option > environment >
// default, and environment values that are refused with their name and value.
#include "support.hpp"

#include <collc/backend/mpi/options.hpp>

#include <cstdlib>

using collc::detail::resolve;

namespace {
struct env_guard {  // sets a variable for one scope
  const char* name;
  env_guard(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~env_guard() { unsetenv(name); }
};
}  // namespace

TEST_CASE("defaults", "[backend][mpi][options]") {
  for (const char* v : {"COLLC_RANKS_PER_NODE", "COLLC_PLACEMENT", "COLLC_CHUNK_BYTES", "COLLC_TIMEOUT",
                        "COLLC_ON_TIMEOUT", "COLLC_ENABLE_CHECKS"})
    unsetenv(v);
  const auto r = resolve({});
  CHECK(r.ranks_per_node == 0);
  CHECK(r.place == collc::placement::block);
  CHECK(r.chunk_bytes == collc::detail::default_chunk_bytes);
  CHECK(r.timeout_s == collc::detail::default_timeout_s);
  CHECK(r.timeout_action == collc::on_timeout::throw_error);
  CHECK_FALSE(r.checks);
}

TEST_CASE("the environment fills unset options", "[backend][mpi][options]") {
  env_guard a("COLLC_RANKS_PER_NODE", "3"), b("COLLC_PLACEMENT", "round_robin"), c("COLLC_CHUNK_BYTES", "4096"),
      d("COLLC_TIMEOUT", "2.5"), e("COLLC_ON_TIMEOUT", "abort"), f("COLLC_ENABLE_CHECKS", "1");
  auto r = resolve({});
  CHECK(r.ranks_per_node == 3);
  CHECK(r.place == collc::placement::round_robin);
  CHECK(r.chunk_bytes == 4096);
  CHECK(r.timeout_s == 2.5);
  CHECK(r.timeout_action == collc::on_timeout::abort);
  CHECK(r.checks);
  collc::plan_options o;
  o.ranks_per_node = 5;
  o.pseudo_placement = collc::placement::block;
  o.chunk_bytes = 1 << 20;
  o.timeout_s = 7;
  o.timeout_action = collc::on_timeout::throw_error;
  o.checks = false;
  r = resolve(o);
  CHECK(r.ranks_per_node == 5);
  CHECK(r.place == collc::placement::block);
  CHECK(r.chunk_bytes == (1u << 20));
  CHECK(r.timeout_s == 7);
  CHECK(r.timeout_action == collc::on_timeout::throw_error);
  CHECK_FALSE(r.checks);
}

TEST_CASE("bad environment values name the variable", "[backend][mpi][options]") {
  auto message = [](const char* name, const char* value) {
    env_guard g(name, value);
    try {
      (void)resolve({});
    } catch (const collc::error& e) {
      CHECK(e.code() == collc::errc::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message("COLLC_RANKS_PER_NODE", "two"), Catch::Contains("COLLC_RANKS_PER_NODE='two'"));
  CHECK_THAT(message("COLLC_RANKS_PER_NODE", "-1"), Catch::Contains("non-negative"));
  CHECK_THAT(message("COLLC_PLACEMENT", "scatter"), Catch::Contains("COLLC_PLACEMENT='scatter'"));
  CHECK_THAT(message("COLLC_TIMEOUT", "0"), Catch::Contains("COLLC_TIMEOUT='0'"));
  CHECK_THAT(message("COLLC_TIMEOUT", "5s"), Catch::Contains("positive number of seconds"));
  CHECK_THAT(message("COLLC_ON_TIMEOUT", "exit"), Catch::Contains("COLLC_ON_TIMEOUT='exit'"));
  CHECK_THAT(message("COLLC_CHUNK_BYTES", "1M"), Catch::Contains("COLLC_CHUNK_BYTES='1M'"));
}
