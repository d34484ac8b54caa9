// reduce_scatter takes negative radices only.
// expect: collc::static_validate: reduce_scatter takes negative radices only
#include <collc/factors.hpp>

static_assert(collc::static_validate<8, collc::collective::reduce_scatter, collc::schedule_kind::recursive,
                                     collc::factors<2, 4>>());

int main() { return 0; }
