#pragma once
// Element groups: proving a program whose every offset and count is a
// multiple of g on the program divided by g (verify.hpp, "Element groups").
#include <collc/ir/program.hpp>

#include <collc/config.hpp>

#include <cstddef>
#include <numeric>
#include <variant>
#include <vector>

namespace collc::ir::detail::verification {

/// The largest g dividing every element offset and count of `programs`: each
/// ref's offset and each instruction's count, and each program's count and
/// block stride. 0 when all are 0. Capacities (shm_count, scratch_count) do
/// not enter: an access ending at a multiple m of g fits a capacity c iff
/// m / g fits c / g rounded down.
COLLC_INLINE std::size_t element_group(const std::vector<const program*>& programs) {
  std::size_t g = 0;
  const auto fold = [&g](std::size_t v) { g = std::gcd(g, v); };
  for (const program* p : programs) {
    fold(p->count);
    fold(p->block_stride);
    for (const rank_program& code : p->code)
      for (const instruction& ins : code) {
        if (const auto* c = std::get_if<copy>(&ins)) {
          fold(c->dst.offset), fold(c->src.offset), fold(c->count);
        } else if (const auto* d = std::get_if<reduce>(&ins)) {
          fold(d->dst.offset), fold(d->a.offset), fold(d->b.offset), fold(d->count);
        } else if (const auto* s = std::get_if<send>(&ins)) {
          fold(s->src.offset), fold(s->count);
        } else if (const auto* v = std::get_if<recv>(&ins)) {
          fold(v->dst.offset), fold(v->count);
        }
      }
  }
  return g;
}

/// `p` with every offset and count divided by `g` (which divides them all,
/// element_group) and its capacities divided rounding down.
COLLC_INLINE program divided(const program& p, std::size_t g) {
  program q = p;
  q.count /= g;
  q.block_stride /= g;
  q.shm_count /= g;
  q.scratch_count /= g;
  for (rank_program& code : q.code)
    for (instruction& ins : code) {
      if (auto* c = std::get_if<copy>(&ins)) {
        c->dst.offset /= g, c->src.offset /= g, c->count /= g;
      } else if (auto* d = std::get_if<reduce>(&ins)) {
        d->dst.offset /= g, d->a.offset /= g, d->b.offset /= g, d->count /= g;
      } else if (auto* s = std::get_if<send>(&ins)) {
        s->src.offset /= g, s->count /= g;
      } else if (auto* v = std::get_if<recv>(&ins)) {
        v->dst.offset /= g, v->count /= g;
      }
    }
  return q;
}

/// The programs verify runs for `programs` under `o`: divided by their
/// element group when o.element_groups and the group is larger than one
/// element, else none (`group` is then 1 and the caller keeps its own).
struct grouped_programs {
  std::size_t group = 1;
  std::vector<program> divided;
  [[nodiscard]] std::vector<const program*> pointers() const {
    std::vector<const program*> ps;
    for (const program& q : divided) ps.push_back(&q);
    return ps;
  }
};

COLLC_INLINE grouped_programs group_elements(const std::vector<const program*>& programs, bool enabled) {
  grouped_programs out;
  if (!enabled) return out;
  const std::size_t g = element_group(programs);
  if (g <= 1) return out;
  out.group = g;
  for (const program* p : programs) out.divided.push_back(divided(*p, g));
  return out;
}

}  // namespace collc::ir::detail::verification
