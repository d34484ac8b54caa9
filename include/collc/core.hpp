#pragma once
/// \file
/// The core below every layer: the names every part of collc shares and
/// nothing else (standard library only). `ir/`, `algo/`, the factor-set rules
/// (factors.hpp) and the backends all include this; it includes no collc file.
#include <cstdint>
#include <string_view>

namespace collc {

/// The collectives collc lowers. Counts follow MPI (see program::send_count):
/// allreduce/reduce/bcast: `count` elements per rank; reduce_scatter (block)
/// and allgather: `count` elements per block, P blocks in the larger buffer.
enum class collective : std::uint8_t { allreduce, reduce_scatter, allgather, reduce, bcast };

constexpr std::string_view to_string(collective c) noexcept {
  switch (c) {
    case collective::allreduce: return "allreduce";
    case collective::reduce_scatter: return "reduce_scatter";
    case collective::allgather: return "allgather";
    case collective::reduce: return "reduce";
    case collective::bcast: return "bcast";
  }
  return "?";
}

/// False for a value outside the enumeration (a cast from an integer, e.g.
/// one read from a file or a command line).
constexpr bool is_known(collective c) noexcept { return to_string(c) != "?"; }

/// True for collectives whose result combines contributions with an operator.
constexpr bool reduces(collective c) noexcept {
  return c == collective::allreduce || c == collective::reduce_scatter || c == collective::reduce;
}

/// Tag for in-place execution: `p(collc::in_place, buf)` (MPI_IN_PLACE).
struct in_place_t {
  explicit in_place_t() = default;
};
inline constexpr in_place_t in_place{};

}  // namespace collc
