#pragma once
/// \file
/// Definitions of options.hpp: included by it in header-only mode, compiled
/// once by src/collc.cpp with COLLC_SEPARATE_COMPILATION (collc/config.hpp).
#include <collc/backend/mpi/options.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <system_error>

namespace collc::mpi {

namespace options_detail {

/// "NAME='text'", the start of every message about a variable.
COLLC_INLINE std::string variable_is(const char* name, const std::string& text) {
  std::string m(name);
  m += "='";
  m += text;
  m += '\'';
  return m;
}

}  // namespace options_detail

COLLC_INLINE std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

COLLC_INLINE std::uint64_t parse_env_integer(const char* name, const std::string& text, std::uint64_t max) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (!digits || (ec != std::errc{} && ec != std::errc::result_out_of_range) || ptr != end) {
    std::string m = options_detail::variable_is(name, text);
    m += " is not a non-negative integer";
    throw error(errc::invalid_argument, m);
  }
  if (ec == std::errc::result_out_of_range || v > max) {
    std::string m = options_detail::variable_is(name, text);
    m += " is out of range (at most ";
    m += std::to_string(max);
    m += ')';
    throw error(errc::invalid_argument, m);
  }
  return v;
}

COLLC_INLINE std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

COLLC_INLINE bool parse_env_bool(const char* name, const std::string& text) {
  const std::string v = lower_ascii(text);
  if (v == "1" || v == "yes" || v == "true" || v == "on") return true;
  if (v == "0" || v == "no" || v == "false" || v == "off") return false;
  std::string m = options_detail::variable_is(name, text);
  m += " is not a boolean (use 1/0, yes/no, true/false or on/off)";
  throw error(errc::invalid_argument, m);
}

COLLC_INLINE std::string format_seconds(double v) {
  if (std::isnan(v)) return "nan";  // the sign of a NaN means nothing to a user
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

COLLC_INLINE std::optional<ir::machine_model> machine_model_from_env() {
  const auto v = env_value("COLLC_MACHINE_MODEL");
  if (!v) return std::nullopt;
  try {
    return ir::parse_machine_model(*v);
  } catch (const error& e) {
    std::string m = options_detail::variable_is("COLLC_MACHINE_MODEL", *v);
    m += ": ";
    m += e.what();
    throw error(errc::invalid_argument, m);
  }
}

COLLC_INLINE resolved_options resolve(const plan_options& o) {
  resolved_options r;
  if (o.ranks_per_node < 0) {
    std::string m = "plan_options::ranks_per_node (";
    m += std::to_string(o.ranks_per_node);
    m += ") must be >= 0";
    throw error(errc::invalid_argument, m);
  }
  r.ranks_per_node = o.ranks_per_node;
  if (r.ranks_per_node == 0)
    if (auto v = env_value("COLLC_RANKS_PER_NODE"))
      r.ranks_per_node = static_cast<int>(
          parse_env_integer("COLLC_RANKS_PER_NODE", *v, static_cast<std::uint64_t>(std::numeric_limits<int>::max())));
  if (o.pseudo_placement) {
    r.place = *o.pseudo_placement;
  } else if (auto v = env_value("COLLC_PLACEMENT")) {
    const std::string k = lower_ascii(*v);
    if (k == "block") {
      r.place = collc::placement::block;
    } else if (k == "round_robin") {
      r.place = collc::placement::round_robin;
    } else {
      std::string m = options_detail::variable_is("COLLC_PLACEMENT", *v);
      m += " is neither 'block' nor 'round_robin'";
      throw error(errc::invalid_argument, m);
    }
  }
  r.chunk_bytes = o.chunk_bytes;
  if (r.chunk_bytes == 0)
    if (auto v = env_value("COLLC_CHUNK_BYTES"))
      r.chunk_bytes = static_cast<std::size_t>(parse_env_integer(
          "COLLC_CHUNK_BYTES", *v, static_cast<std::uint64_t>(std::numeric_limits<std::size_t>::max())));
  r.chunk_bytes_given = r.chunk_bytes != 0;
  if (r.chunk_bytes == 0) r.chunk_bytes = default_chunk_bytes;
  // A NaN timeout compares false with every wait, so it would never fire.
  if (!(o.timeout_s >= 0)) {
    std::string m = "plan_options::timeout_s (";
    m += format_seconds(o.timeout_s);
    m += ") must be a positive number of seconds, inf (never) or 0 (COLLC_TIMEOUT, else 60)";
    throw error(errc::invalid_argument, m);
  }
  r.timeout_s = o.timeout_s;
  if (r.timeout_s == 0) {
    if (auto v = env_value("COLLC_TIMEOUT")) {
      // from_chars: no locale, no leading space, no hex; "inf" parses (never).
      double t = -1;
      const char* end = v->data() + v->size();
      const auto [ptr, ec] = std::from_chars(v->data(), end, t);
      if (ec != std::errc{} || ptr != end || !(t > 0)) {
        std::string m = options_detail::variable_is("COLLC_TIMEOUT", *v);
        m += " is not a positive number of seconds (or inf: never)";
        throw error(errc::invalid_argument, m);
      }
      r.timeout_s = t;
    }
  }
  if (r.timeout_s == 0) r.timeout_s = default_timeout_s;
  if (o.timeout_action) {
    r.timeout_action = *o.timeout_action;
  } else if (auto v = env_value("COLLC_ON_TIMEOUT")) {
    const std::string k = lower_ascii(*v);
    if (k == "throw") {
      r.timeout_action = on_timeout::throw_error;
    } else if (k == "abort") {
      r.timeout_action = on_timeout::abort;
    } else {
      std::string m = options_detail::variable_is("COLLC_ON_TIMEOUT", *v);
      m += " is neither 'throw' nor 'abort'";
      throw error(errc::invalid_argument, m);
    }
  }
  if (o.checks)
    r.checks = *o.checks;
  else if (auto v = env_value("COLLC_ENABLE_CHECKS"))
    r.checks = parse_env_bool("COLLC_ENABLE_CHECKS", *v);
  return r;
}

}  // namespace collc::mpi
