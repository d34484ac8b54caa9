// Cyclic shift over 7 ranks: {2,2,4} has a last radix of 4 where 2 suffices.
// expect: collc::static_validate: cyclic shift needs the last radix to be minimal
#include <collc/factors.hpp>

static_assert(
    collc::static_validate<7, collc::collective::allreduce, collc::schedule_kind::cyclic, collc::factors<2, 2, 4>>());

int main() { return 0; }
