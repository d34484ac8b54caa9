// Uses the standard-library-only core: lower and verify a schedule.
#include <collc/algo/presets.hpp>
#include <collc/ir/verify.hpp>

#include <cstdio>

int main() {
  const auto prog = collc::algo::lower(collc::algo::schedule::recursive(collc::factors<-2, 2>{}),
                                       {.coll = collc::collective::allreduce, .ranks = 2, .count = 16});
  const auto verdict = collc::verify(prog);
  std::printf("consumer_core: %s\n", verdict.to_string().c_str());
  return verdict ? 0 : 1;
}
