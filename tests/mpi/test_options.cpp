// Tests for include/collc/backend/mpi/options.hpp: option > environment >
// default, and environment values that are refused with their name and value:
// strictly parsed (no wrap-around, no trailing garbage, no silent "on" for
// "no"), and option values that could never fire (NaN timeouts) refused.
#include "support.hpp"

#include <collc/backend/mpi/build.hpp>
#include <collc/backend/mpi/options.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

using collc::mpi::resolve;

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
  CHECK(r.chunk_bytes == collc::mpi::default_chunk_bytes);
  CHECK_FALSE(r.chunk_bytes_given);
  collc::plan_options chosen;
  chosen.chunk_bytes = 4096;
  CHECK(resolve(chosen).chunk_bytes_given);
  CHECK(r.timeout_s == collc::mpi::default_timeout_s);
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

namespace {
/// The error message of resolve() with `name`=`value` set (or "no error"), checking its code.
std::string env_error(const char* name, const char* value) {
  env_guard g(name, value);
  try {
    (void)resolve({});
  } catch (const collc::error& e) {
    CHECK(e.code() == collc::errc::invalid_argument);
    return std::string(e.what());
  }
  return "no error";
}
}  // namespace

TEST_CASE("integer variables are parsed strictly, without wrap-around", "[backend][mpi][options]") {
  // 4294967298 = 2^32 + 2 used to wrap to 2; 2^31 used to go negative.
  for (const char* v : {"4294967298", "2147483648", "99999999999999999999999"}) {
    INFO(v);
    CHECK_THAT(env_error("COLLC_RANKS_PER_NODE", v), Catch::Contains(std::string("COLLC_RANKS_PER_NODE='") + v + "'") &&
                                                         Catch::Contains("out of range") &&
                                                         Catch::Contains("2147483647"));
  }
  {
    env_guard g("COLLC_RANKS_PER_NODE", "2147483647");
    CHECK(resolve({}).ranks_per_node == 2147483647);
  }
  for (const char* v : {"3x", " 3", "3 ", "+3", "0x10", "3.0", "1e3", "-0", "-"}) {
    INFO("'" << v << "'");
    CHECK_THAT(env_error("COLLC_RANKS_PER_NODE", v),
               Catch::Contains(std::string("COLLC_RANKS_PER_NODE='") + v + "'") && Catch::Contains("non-negative"));
    CHECK_THAT(env_error("COLLC_CHUNK_BYTES", v), Catch::Contains(std::string("COLLC_CHUNK_BYTES='") + v + "'"));
  }
  CHECK_THAT(env_error("COLLC_CHUNK_BYTES", "18446744073709551616"),
             Catch::Contains("COLLC_CHUNK_BYTES='18446744073709551616'") && Catch::Contains("out of range"));
  CHECK_THAT(env_error("COLLC_CHUNK_BYTES", "-4096"), Catch::Contains("COLLC_CHUNK_BYTES='-4096'"));
}

TEST_CASE("COLLC_ENABLE_CHECKS is a boolean: 1/0, yes/no, true/false, on/off", "[backend][mpi][options]") {
  for (const char* v : {"0", "no", "NO", "No", "false", "False", "off", "OFF"}) {
    INFO(v);
    env_guard g("COLLC_ENABLE_CHECKS", v);
    CHECK_FALSE(resolve({}).checks);
  }
  for (const char* v : {"1", "yes", "YES", "true", "TRUE", "on", "On"}) {
    INFO(v);
    env_guard g("COLLC_ENABLE_CHECKS", v);
    CHECK(resolve({}).checks);
  }
  for (const char* v : {"2", "maybe", "yes please", " 1", "enable", "n"}) {
    INFO(v);
    CHECK_THAT(env_error("COLLC_ENABLE_CHECKS", v),
               Catch::Contains(std::string("COLLC_ENABLE_CHECKS='") + v + "'") && Catch::Contains("yes/no"));
  }
  // An option given in the code is used as is: the variable is not even read.
  env_guard g("COLLC_ENABLE_CHECKS", "maybe");
  collc::plan_options o;
  o.checks = true;
  CHECK(resolve(o).checks);
}

TEST_CASE("timeouts: NaN and negative values are refused, infinity means never", "[backend][mpi][options]") {
  auto option_error = [](double t) {
    collc::plan_options o;
    o.timeout_s = t;
    try {
      (void)resolve(o);
    } catch (const collc::error& e) {
      CHECK(e.code() == collc::errc::invalid_argument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THAT(option_error(std::nan("")), Catch::Contains("plan_options::timeout_s (nan)"));
  CHECK_THAT(option_error(-std::nan("")), Catch::Contains("plan_options::timeout_s (nan)"));
  CHECK_THAT(option_error(-1), Catch::Contains("plan_options::timeout_s (-1)"));
  CHECK_THAT(option_error(-0.25), Catch::Contains("(-0.25)"));
  CHECK_THAT(option_error(-inf), Catch::Contains("(-inf)"));
  collc::plan_options o;
  o.timeout_s = inf;
  CHECK(resolve(o).timeout_s == inf);
  o.timeout_s = 1e-3;
  CHECK(resolve(o).timeout_s == 1e-3);
  for (const char* v : {"nan", "NaN", "-1", "-inf", "1e999", " 5", "5 ", "0x10", "", "inf s"}) {
    INFO("'" << v << "'");
    if (*v == '\0') continue;  // empty: unset
    CHECK_THAT(env_error("COLLC_TIMEOUT", v), Catch::Contains(std::string("COLLC_TIMEOUT='") + v + "'"));
  }
  for (const char* v : {"inf", "infinity", "INF"}) {
    INFO(v);
    env_guard g("COLLC_TIMEOUT", v);
    CHECK(resolve({}).timeout_s == inf);
  }
  env_guard g("COLLC_TIMEOUT", "0.5");
  CHECK(resolve({}).timeout_s == 0.5);
}

TEST_CASE("keyword variables ignore case, and refuse anything else", "[backend][mpi][options]") {
  {
    env_guard g("COLLC_PLACEMENT", "Round_Robin");
    CHECK(resolve({}).place == collc::placement::round_robin);
  }
  {
    env_guard g("COLLC_ON_TIMEOUT", "ABORT");
    CHECK(resolve({}).timeout_action == collc::on_timeout::abort);
  }
  CHECK_THAT(env_error("COLLC_PLACEMENT", "block "), Catch::Contains("COLLC_PLACEMENT='block '"));
  CHECK_THAT(env_error("COLLC_ON_TIMEOUT", "throw!"), Catch::Contains("COLLC_ON_TIMEOUT='throw!'"));
}

TEST_CASE("COLLC_MACHINE_MODEL: the model of the default selection across nodes", "[backend][mpi][options]") {
  unsetenv("COLLC_MACHINE_MODEL");
  CHECK_FALSE(collc::mpi::machine_model_from_env().has_value());
  // Four nodes of one rank, 4 KiB: with the default model (a fast network,
  // no per-message overhead) the selector takes copy-in (six messages per
  // rank at once); with TCP's measured terms, where each message costs the
  // processors microseconds, two recursive-doubling steps (four messages).
  const std::vector<int> nodes{0, 1, 2, 3};
  const auto pick = [&] {
    return collc::mpi::default_for(collc::collective::allreduce, 4, 4096, true, nodes, 2).to_string();
  };
  CHECK(pick() == "copyin");
  {
    env_guard e("COLLC_MACHINE_MODEL", "alpha_net=6.5e-6 beta_net=1.78e-10 o_net=10e-6");
    REQUIRE(collc::mpi::machine_model_from_env().has_value());
    CHECK(collc::mpi::machine_model_from_env()->o_net == 10e-6);
    CHECK(pick() == "recexch{2,2}");
  }
  {
    env_guard e("COLLC_MACHINE_MODEL", "alpha_net=6.5e-6 latency=1");
    CHECK_THROWS_WITH(collc::mpi::machine_model_from_env(),
                      Catch::Contains("COLLC_MACHINE_MODEL='alpha_net=6.5e-6 latency=1': machine model: unknown term "
                                      "'latency'"));
    CHECK_THROWS_WITH(pick(), Catch::Contains("COLLC_MACHINE_MODEL="));
  }
  // One node: the measured rule, whatever the model says.
  const auto one_node = collc::mpi::default_for(collc::collective::allreduce, 4, 4096, true, {}, 2).to_string();
  {
    env_guard e("COLLC_MACHINE_MODEL", "o_net=1");
    CHECK(collc::mpi::default_for(collc::collective::allreduce, 4, 4096, true, {}, 2).to_string() == one_node);
  }
  // ... but a model that does not parse is an error on one node too (it
  // was ignored there, and only failed once the job spanned nodes).
  env_guard e("COLLC_MACHINE_MODEL", "bogus");
  CHECK_THROWS_WITH(collc::mpi::default_for(collc::collective::allreduce, 4, 4096, true, {}, 2),
                    Catch::Contains("COLLC_MACHINE_MODEL='bogus'"));
}
