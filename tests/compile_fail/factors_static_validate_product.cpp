// Recursive exchange over 8 ranks needs the phase to multiply to 8; {-4,4} gives 4.
// expect: collc::static_validate: recursive exchange needs the product of the phase's radices to equal the number of
// ranks
#include <collc/factors.hpp>

static_assert(
    collc::static_validate<8, collc::collective::allreduce, collc::schedule_kind::recursive, collc::factors<-4, 4>>());

int main() { return 0; }
