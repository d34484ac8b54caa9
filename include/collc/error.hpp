#pragma once
/// \file
/// collc::error: the one exception type collc throws. It carries a machine
/// readable code and a message that names the offending value, e.g.
///   collc::error{errc::invalid_factor_set,
///                "factor set {-4,2}: product of the reduce-scatter phase (4) must equal the number of ranks (8)"}
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace collc {

enum class errc {
  invalid_argument,     ///< a parameter is out of range or malformed
  invalid_factor_set,   ///< a factor set breaks a rule for this rank count / collective
  overflow,             ///< a count or product does not fit in 64 bits
  not_commutative,      ///< an algorithm needs a commutative operator
  verification_failed,  ///< a program failed collc::verify
  parse_error,          ///< text form could not be parsed
  mismatch,             ///< ranks disagree (different plans, counts, or call order)
  timeout,              ///< a wait exceeded COLLC_TIMEOUT
  unsupported,          ///< valid request that this build cannot serve
  mpi_error,            ///< the MPI library reported an error
  io_error,             ///< a file could not be read or written
};

constexpr std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::invalid_factor_set: return "invalid_factor_set";
    case errc::overflow: return "overflow";
    case errc::not_commutative: return "not_commutative";
    case errc::verification_failed: return "verification_failed";
    case errc::parse_error: return "parse_error";
    case errc::mismatch: return "mismatch";
    case errc::timeout: return "timeout";
    case errc::unsupported: return "unsupported";
    case errc::mpi_error: return "mpi_error";
    case errc::io_error: return "io_error";
  }
  return "unknown";
}

class error : public std::runtime_error {
 public:
  /// what() is `message` as given: callers add their own prefix
  /// (the CLI prints "collc <command>: <message>").
  error(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] errc code() const noexcept { return code_; }

 private:
  errc code_;
};

namespace detail {

/// One message from its parts, appended into one string: strings, characters
/// and integers (written as std::to_string does).
///
///   detail::cat("rank ", r, " has no peer ", peer)  // "rank 3 has no peer 9"
///
/// A chain `"rank " + std::to_string(r) + ...` would do the same, but g++ 12
/// at -O3 reports false -Wrestrict warnings for `literal + std::string&&`
/// once the function is inlined.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  const auto append = [&s]<class Part>(const Part& part) {
    if constexpr (std::is_same_v<Part, char>) {
      s += part;
    } else if constexpr (std::is_integral_v<Part>) {
      static_assert(!std::is_same_v<Part, bool>, "collc::detail::cat: write a bool as text");
      s += std::to_string(part);
    } else {
      static_assert(std::is_convertible_v<const Part&, std::string_view>,
                    "collc::detail::cat: parts are strings, characters or integers");
      s += std::string_view(part);
    }
  };
  (append(parts), ...);
  return s;
}

}  // namespace detail

}  // namespace collc
