// The interposition library's core (docs/pmpi.md): for each intercepted call,
// decide from values that are equal on every rank whether it runs on a collc
// plan or goes to the MPI library unchanged; keep the plans per communicator
// (an attribute, so MPI_Comm_free and MPI_Finalize from any language free
// them); count what happened for COLLC_PMPI_STATS; report collc's errors
// through the communicator's error handler.
#include "pmpi_names.hpp"

#include "interpose.hpp"
#include "measured.hpp"
#include "plans.hpp"

#include <collc/algo/select.hpp>
#include <collc/backend/mpi/engine.hpp>
#include <collc/backend/mpi/options.hpp>
#include <collc/backend/mpi/registry.hpp>
#include <collc/error.hpp>

#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace collc::pmpi {

const char* mpi_name(coll c) noexcept {
  switch (c) {
    case coll::allreduce: return "MPI_Allreduce";
    case coll::reduce_scatter_block: return "MPI_Reduce_scatter_block";
    case coll::reduce_scatter: return "MPI_Reduce_scatter";
    case coll::allgather: return "MPI_Allgather";
    case coll::bcast: return "MPI_Bcast";
    case coll::reduce: return "MPI_Reduce";
    case coll::count_: break;
  }
  return "MPI_?";
}

std::atomic<int>& requests_started() noexcept {
  static std::atomic<int> n{0};
  return n;
}

void give_turns(MPI_Comm comm) noexcept {
  try {
    collc::mpi::engine::give_turns(comm);
  } catch (...) {  // a turn's own errors are kept for its plan; this is the attribute lookup's
  }
}

int wait_giving_turns(MPI_Comm comm, MPI_Request* request, MPI_Status* status) {
  for (;;) {
    int done = 0;
    if (const int err = PMPI_Test(request, &done, status); err != MPI_SUCCESS || done != 0) return err;
    give_turns(comm);
    std::this_thread::yield();
  }
}

namespace {

constexpr int n_colls = static_cast<int>(coll::count_);

/// The knob names COLLC_PMPI_COLLECTIVES accepts, in coll order.
constexpr const char* knob_names[n_colls] = {
    "allreduce", "reduce_scatter_block", "reduce_scatter", "allgather", "bcast", "reduce"};

// --- knobs (read once, agreed by all ranks at MPI_Init) -------------------------

/// The environment, read once. Every value is a plain number so the ranks can
/// compare them with one MIN/MAX reduction (settings_agree).
struct settings {
  bool enabled = true;                         // COLLC_PMPI
  unsigned collectives = (1u << n_colls) - 1;  // COLLC_PMPI_COLLECTIVES (bit per coll)
  // COLLC_PMPI_FROM_CALL: a signature's first call on collc. A plan costs
  // 23 us (new signature) to 130-180 us (first on a new communicator) at
  // P = 2 and 165-820 us at P = 4, and saves 0.05-0.2 us (P = 2) to 5 us
  // (P = 4, oversubscribed) per 8 B call (docs/pmpi.md, pmpi_bench --setup):
  // break-even after 30 to several hundred calls. Switching at 64 keeps a
  // one-off signature on MPI and costs a repeated one at most a few times
  // the plan's setup (the ski-rental argument).
  std::uint64_t from_call = 64;
  std::uint64_t cache_entries = 64;  // COLLC_PMPI_CACHE: plans kept per communicator
  std::uint64_t cache_mib = 256;     // COLLC_PMPI_CACHE_MB: message bytes of those plans
  bool all_sizes = false;            // COLLC_PMPI_SIZES=all: ignore the measured table
  bool stats = false;                // COLLC_PMPI_STATS
};

/// The settings, or the reason a variable was refused.
struct settings_read {
  settings s;
  std::string refused;
};

settings_read read_settings() {
  settings_read r;
  auto& s = r.s;
  try {
    if (auto v = mpi::env_value("COLLC_PMPI")) s.enabled = mpi::parse_env_bool("COLLC_PMPI", *v);
    if (auto v = mpi::env_value("COLLC_PMPI_STATS")) s.stats = mpi::parse_env_bool("COLLC_PMPI_STATS", *v);
    if (auto v = mpi::env_value("COLLC_PMPI_FROM_CALL")) {
      s.from_call = mpi::parse_env_integer("COLLC_PMPI_FROM_CALL", *v, std::uint64_t{1} << 40);
      if (s.from_call == 0)
        throw error(errc::invalid_argument, "COLLC_PMPI_FROM_CALL='0': the first call is call 1 (use 1 or more)");
    }
    if (auto v = mpi::env_value("COLLC_PMPI_CACHE")) {
      s.cache_entries = mpi::parse_env_integer("COLLC_PMPI_CACHE", *v, 1u << 20);
      if (s.cache_entries == 0)
        throw error(errc::invalid_argument,
                    "COLLC_PMPI_CACHE='0': at least one plan per communicator (or COLLC_PMPI=0)");
    }
    if (auto v = mpi::env_value("COLLC_PMPI_CACHE_MB"))
      s.cache_mib = mpi::parse_env_integer("COLLC_PMPI_CACHE_MB", *v, 1u << 30);
    if (auto v = mpi::env_value("COLLC_PMPI_SIZES")) {
      const std::string w = mpi::lower_ascii(*v);
      if (w == "all")
        s.all_sizes = true;
      else if (w == "measured")
        s.all_sizes = false;
      else
        throw error(errc::invalid_argument, "COLLC_PMPI_SIZES='" + *v + "': expected 'measured' or 'all'");
    }
    if (auto v = mpi::env_value("COLLC_PMPI_COLLECTIVES")) {
      const std::string w = mpi::lower_ascii(*v);
      s.collectives = 0;
      std::size_t at = 0;
      while (at <= w.size()) {
        const std::size_t end = std::min(w.find(',', at), w.size());
        const std::string_view name = std::string_view(w).substr(at, end - at);
        bool known = false;
        if (name == "all") {
          s.collectives = (1u << n_colls) - 1;
          known = true;
        }
        for (int c = 0; c < n_colls && !known; ++c)
          if (name == knob_names[c]) {
            s.collectives |= 1u << c;
            known = true;
          }
        if (name == "none") known = true;
        if (!known)
          throw error(errc::invalid_argument,
                      "COLLC_PMPI_COLLECTIVES='" + *v + "': '" + std::string(name) +
                          "' is not one of all, none, allreduce, reduce_scatter_block, reduce_scatter, "
                          "allgather, bcast, reduce");
        at = end + 1;
      }
    }
    // The plans' own variables (COLLC_ENABLE_CHECKS, COLLC_CHUNK_BYTES,
    // COLLC_RANKS_PER_NODE, COLLC_PLACEMENT, COLLC_TIMEOUT, COLLC_ON_TIMEOUT,
    // COLLC_MACHINE_MODEL, and the syntax of COLLC_ALGO / COLLC_FACTORS): a
    // value that does not parse would refuse every plan at setup, and every
    // call would go to MPI without a word. Read them here, so that such a
    // value stops the program at MPI_Init like the variables above. (A
    // schedule override names a schedule for one communicator size: a plan it
    // does not fit is refused, and the statistics say why.)
    (void)mpi::resolve(plan_options{});
    (void)mpi::machine_model_from_env();
    algo::check_override_from_env();
  } catch (const error& e) {
    r.refused = e.what();
  }
  return r;
}

const settings_read& knobs() {
  static const settings_read r = read_settings();
  return r;
}

/// The settings in force; a refused variable turns collc off on this rank
/// (settings_agree, at MPI_Init, stops the program with the reason).
const settings& config() { return knobs().s; }

// --- statistics -------------------------------------------------------------------

/// Why a call went to the MPI library (the statistics' reasons).
enum class why : int {
  off,             // COLLC_PMPI=0 or COLLC_PMPI_COLLECTIVES
  intercomm,       // an intercommunicator
  null_comm,       // MPI_COMM_NULL: the MPI library reports the error
  derived_type,    // not a predefined datatype (or not contiguous)
  type_op,         // a predefined type collc does not reduce with this op
  op,              // an operator collc does not know (MPI_REPLACE, a user op created before collc saw it)
  bottom,          // MPI_BOTTOM or a null buffer
  unequal_counts,  // MPI_Reduce_scatter with different counts
  empty,           // count 0
  first_calls,     // before the signature's COLLC_PMPI_FROM_CALL-th call
  mpi_faster,      // the measured table hands this size to MPI
  refused,         // collc refused the plan at setup (then always MPI for it)
  pending_idup,    // the program's MPI_Comm_idup of the communicator came before collc's first plan on it
  count_
};
constexpr int n_whys = static_cast<int>(why::count_);

const char* describe(why w) {
  switch (w) {
    case why::off: return "switched off (COLLC_PMPI / COLLC_PMPI_COLLECTIVES)";
    case why::intercomm: return "intercommunicator";
    case why::null_comm: return "MPI_COMM_NULL (an error MPI reports)";
    case why::derived_type: return "derived or non-contiguous datatype";
    case why::type_op: return "datatype not reduced by collc with this op";
    case why::op: return "operator unknown to collc";
    case why::bottom: return "MPI_BOTTOM or null buffer";
    case why::unequal_counts: return "unequal reduce-scatter counts";
    case why::empty: return "count 0";
    case why::first_calls: return "first calls of a signature (COLLC_PMPI_FROM_CALL)";
    case why::mpi_faster: return "size the MPI library does faster here (COLLC_PMPI_SIZES)";
    case why::refused: return "plan refused by collc at setup";
    case why::pending_idup: return "MPI_Comm_idup of the communicator before its first plan";
    case why::count_: break;
  }
  return "?";
}

struct coll_stats {
  std::atomic<std::uint64_t> by_collc{0}, local_copies{0}, by_mpi{0}, plans_built{0};
  std::atomic<std::uint64_t> collc_ns{0}, mpi_ns{0};
  std::atomic<std::uint64_t> reasons[n_whys] = {};
};
coll_stats g_stats[n_colls];

/// The first reason collc refused a plan at setup, per collective: the
/// statistics' "plan refused by collc at setup" alone does not say which
/// variable or limit to change.
struct refusal_log {
  std::mutex m;
  std::string first[n_colls];
  void note(coll c, std::string_view reason) {
    const std::lock_guard<std::mutex> lock(m);
    std::string& f = first[static_cast<int>(c)];
    if (f.empty()) f = reason;
  }
  std::string of(int c) {
    const std::lock_guard<std::mutex> lock(m);
    return first[c];
  }
};
refusal_log g_refusals;
constexpr std::string_view no_plan_here = "this library builds no plan for this datatype and operator";

std::uint64_t ns_between(double t0, double t1) { return static_cast<std::uint64_t>((t1 - t0) * 1e9); }

// --- datatypes and operators ---------------------------------------------------------

/// What collc knows of a predefined datatype.
enum class type_class : std::uint8_t { c_integer, f_integer, floating, complex, logical, byte, pair, other };

struct type_info {
  elem for_ops = elem::none;      // the element type of the arithmetic operators
  elem for_min_max = elem::none;  // differs from for_ops for signed integers
  elem blob = elem::none;         // a user operator's view of it
  type_class cls = type_class::other;
  std::size_t extent = 0;  // bytes per element
  bool dense = false;      // size == extent: bcast/allgather may move it as bytes
};

elem blob_of(std::size_t extent) {
  switch (extent) {
    case 1: return elem::blob1;
    case 2: return elem::blob2;
    case 4: return elem::blob4;
    case 8: return elem::blob8;
    case 16: return elem::blob16;
    case 32: return elem::blob32;
    default: return elem::none;
  }
}

elem unsigned_of(std::size_t bytes) {
  switch (bytes) {
    case 1: return elem::u8;
    case 2: return elem::u16;
    case 4: return elem::u32;
    case 8: return elem::u64;
    default: return elem::none;
  }
}
elem signed_of(std::size_t bytes) {
  switch (bytes) {
    case 1: return elem::i8;
    case 2: return elem::i16;
    case 4: return elem::i32;
    case 8: return elem::i64;
    default: return elem::none;
  }
}

template <class H>
std::uintptr_t handle_id(H h) {
  if constexpr (std::is_pointer_v<H>)
    return reinterpret_cast<std::uintptr_t>(h);
  else
    return static_cast<std::uintptr_t>(h);
}

/// The predefined datatypes, by handle. Built at the first call (handles of
/// some MPIs are addresses, known only at run time); a type whose size or
/// extent is not what collc's element type has is left out (it then goes to
/// the MPI library).
class type_table {
 public:
  type_table() {
    add_integer(MPI_SIGNED_CHAR, true, 1, type_class::c_integer);
    add_integer(MPI_UNSIGNED_CHAR, false, 1, type_class::c_integer);
    add_integer(MPI_SHORT, true, sizeof(short), type_class::c_integer);
    add_integer(MPI_UNSIGNED_SHORT, false, sizeof(short), type_class::c_integer);
    add_integer(MPI_INT, true, sizeof(int), type_class::c_integer);
    add_integer(MPI_UNSIGNED, false, sizeof(int), type_class::c_integer);
    add_integer(MPI_LONG, true, sizeof(long), type_class::c_integer);
    add_integer(MPI_UNSIGNED_LONG, false, sizeof(long), type_class::c_integer);
    add_integer(MPI_LONG_LONG, true, sizeof(long long), type_class::c_integer);
    add_integer(MPI_UNSIGNED_LONG_LONG, false, sizeof(long long), type_class::c_integer);
    add_integer(MPI_INT8_T, true, 1, type_class::c_integer);
    add_integer(MPI_INT16_T, true, 2, type_class::c_integer);
    add_integer(MPI_INT32_T, true, 4, type_class::c_integer);
    add_integer(MPI_INT64_T, true, 8, type_class::c_integer);
    add_integer(MPI_UINT8_T, false, 1, type_class::c_integer);
    add_integer(MPI_UINT16_T, false, 2, type_class::c_integer);
    add_integer(MPI_UINT32_T, false, 4, type_class::c_integer);
    add_integer(MPI_UINT64_T, false, 8, type_class::c_integer);
    add_integer(MPI_AINT, true, sizeof(MPI_Aint), type_class::c_integer);
    add_integer(MPI_OFFSET, true, sizeof(MPI_Offset), type_class::c_integer);
    add_integer(MPI_COUNT, true, sizeof(MPI_Count), type_class::c_integer);
    add_integer(MPI_INTEGER, true, 0, type_class::f_integer);
    add_integer(MPI_INTEGER1, true, 1, type_class::f_integer);
    add_integer(MPI_INTEGER2, true, 2, type_class::f_integer);
    add_integer(MPI_INTEGER4, true, 4, type_class::f_integer);
    add_integer(MPI_INTEGER8, true, 8, type_class::f_integer);
    add_bytes_only(MPI_BYTE, type_class::byte);
    add_bytes_only(MPI_CHAR, type_class::other);
    add_bytes_only(MPI_WCHAR, type_class::other);
    add_bytes_only(MPI_CHARACTER, type_class::other);
    add_bytes_only(MPI_PACKED, type_class::other);
    add_logical(MPI_C_BOOL);
    add_logical(MPI_CXX_BOOL);
    add_logical(MPI_LOGICAL);
    add(MPI_FLOAT, elem::f32, elem::f32, type_class::floating, sizeof(float));
    add(MPI_DOUBLE, elem::f64, elem::f64, type_class::floating, sizeof(double));
    add(MPI_LONG_DOUBLE, elem::f80, elem::f80, type_class::floating, sizeof(long double));
    add(MPI_REAL, elem::f32, elem::f32, type_class::floating, sizeof(float));
    add(MPI_DOUBLE_PRECISION, elem::f64, elem::f64, type_class::floating, sizeof(double));
    add(MPI_REAL4, elem::f32, elem::f32, type_class::floating, sizeof(float));
    add(MPI_REAL8, elem::f64, elem::f64, type_class::floating, sizeof(double));
    add(MPI_C_FLOAT_COMPLEX, elem::c32, elem::none, type_class::complex, 2 * sizeof(float));
    add(MPI_C_DOUBLE_COMPLEX, elem::c64, elem::none, type_class::complex, 2 * sizeof(double));
    add(MPI_C_LONG_DOUBLE_COMPLEX, elem::c80, elem::none, type_class::complex, 2 * sizeof(long double));
    add(MPI_CXX_FLOAT_COMPLEX, elem::c32, elem::none, type_class::complex, 2 * sizeof(float));
    add(MPI_CXX_DOUBLE_COMPLEX, elem::c64, elem::none, type_class::complex, 2 * sizeof(double));
    add(MPI_CXX_LONG_DOUBLE_COMPLEX, elem::c80, elem::none, type_class::complex, 2 * sizeof(long double));
    add(MPI_COMPLEX, elem::c32, elem::none, type_class::complex, 2 * sizeof(float));
    add(MPI_DOUBLE_COMPLEX, elem::c64, elem::none, type_class::complex, 2 * sizeof(double));
    add(MPI_COMPLEX8, elem::c32, elem::none, type_class::complex, 2 * sizeof(float));
    add(MPI_COMPLEX16, elem::c64, elem::none, type_class::complex, 2 * sizeof(double));
    add_pair(MPI_FLOAT_INT, elem::float_int, 8);
    add_pair(MPI_DOUBLE_INT, elem::double_int, 16);
    add_pair(MPI_LONG_INT, elem::long_int, 16);
    add_pair(MPI_2INT, elem::int_int, 8);
    add_pair(MPI_SHORT_INT, elem::short_int, 8);
    add_pair(MPI_LONG_DOUBLE_INT, elem::ldouble_int, 32);
    add_pair(MPI_2REAL, elem::real_real, 8);
    add_pair(MPI_2DOUBLE_PRECISION, elem::double_double, 16);
    add_pair(MPI_2INTEGER, elem::int_int, 8);
  }

  /// nullptr for a datatype that is not predefined (or not one collc takes).
  const type_info* find(MPI_Datatype t) const {
    auto it = types_.find(handle_id(t));
    return it == types_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<std::uintptr_t, type_info> types_;

  /// size and extent of `t`, if it is a usable handle.
  static std::optional<std::pair<std::size_t, std::size_t>> measure(MPI_Datatype t) {
    if (t == MPI_DATATYPE_NULL) return std::nullopt;
    int size = 0;
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_size(t, &size) != MPI_SUCCESS || PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS)
      return std::nullopt;
    if (size <= 0 || lb != 0) return std::nullopt;
    return std::pair{static_cast<std::size_t>(size), static_cast<std::size_t>(extent)};
  }

  void add(MPI_Datatype t, elem ops, elem minmax, type_class cls, std::size_t want) {
    const auto m = measure(t);
    if (!m || m->first != want || m->second != want) return;
    types_[handle_id(t)] = type_info{ops, minmax, blob_of(want), cls, want, true};
  }
  void add_integer(MPI_Datatype t, bool is_signed, std::size_t want, type_class cls) {
    const auto m = measure(t);
    if (!m || m->first != m->second || (want != 0 && m->first != want)) return;
    const std::size_t n = m->first;
    const elem u = unsigned_of(n);
    if (u == elem::none) return;
    types_[handle_id(t)] = type_info{u, is_signed ? signed_of(n) : u, blob_of(n), cls, n, true};
  }
  void add_logical(MPI_Datatype t) {
    const auto m = measure(t);
    if (!m || m->first != m->second || unsigned_of(m->first) == elem::none) return;
    types_[handle_id(t)] =
        type_info{unsigned_of(m->first), elem::none, blob_of(m->first), type_class::logical, m->first, true};
  }
  void add_bytes_only(MPI_Datatype t, type_class cls) {
    const auto m = measure(t);
    if (!m || m->first != m->second) return;
    const elem u = m->first == 1 ? elem::u8 : elem::none;  // MPI_BYTE's bit operators
    types_[handle_id(t)] = type_info{u, elem::none, blob_of(m->first), cls, m->first, true};
  }
  void add_pair(MPI_Datatype t, elem e, std::size_t want_extent) {
    const auto m = measure(t);
    if (!m || m->second != want_extent) return;
    types_[handle_id(t)] =
        type_info{e, elem::none, blob_of(want_extent), type_class::pair, want_extent, m->first == m->second};
  }
};

const type_table& types() {
  static const type_table t;
  return t;
}

/// types().find, remembered per thread for the last handle (no invalidation
/// needed: predefined types are never freed, and every other handle is "not
/// predefined" whatever it names).
const type_info* find_type(MPI_Datatype t) {
  thread_local MPI_Datatype last = MPI_DATATYPE_NULL;
  thread_local const type_info* found = nullptr;
  if (t != last || t == MPI_DATATYPE_NULL) {
    found = types().find(t);
    last = t;
  }
  return found;
}

/// A predefined operator's kind, or opk::user / opk::none.
opk predefined_op(MPI_Op op) {
  if (op == MPI_SUM) return opk::sum;
  if (op == MPI_PROD) return opk::prod;
  if (op == MPI_MIN) return opk::min;
  if (op == MPI_MAX) return opk::max;
  if (op == MPI_BAND) return opk::band;
  if (op == MPI_BOR) return opk::bor;
  if (op == MPI_BXOR) return opk::bxor;
  if (op == MPI_LAND) return opk::land;
  if (op == MPI_LOR) return opk::lor;
  if (op == MPI_LXOR) return opk::lxor;
  if (op == MPI_MINLOC) return opk::minloc;
  if (op == MPI_MAXLOC) return opk::maxloc;
  return opk::user;
}

/// The element type a plan of (type, op) runs on, or elem::none when collc
/// does not reduce that pair (MPI 4.0, section 6.9.2 lists which are valid).
elem element_for(const type_info& t, opk o) {
  switch (o) {
    case opk::sum:
    case opk::prod:
      return t.cls == type_class::c_integer || t.cls == type_class::f_integer || t.cls == type_class::floating ||
                     t.cls == type_class::complex
                 ? t.for_ops
                 : elem::none;
    case opk::min:
    case opk::max:
      return t.cls == type_class::c_integer || t.cls == type_class::f_integer || t.cls == type_class::floating
                 ? t.for_min_max
                 : elem::none;
    case opk::band:
    case opk::bor:
    case opk::bxor:
      return t.cls == type_class::c_integer || t.cls == type_class::f_integer || t.cls == type_class::byte ? t.for_ops
                                                                                                           : elem::none;
    case opk::land:
    case opk::lor:
    case opk::lxor: return t.cls == type_class::c_integer || t.cls == type_class::logical ? t.for_ops : elem::none;
    case opk::minloc:
    case opk::maxloc: return t.cls == type_class::pair ? t.for_ops : elem::none;
    case opk::user: return t.blob;
    case opk::none: return elem::bytes;
  }
  return elem::none;
}

/// User operators by handle (op_created), under a lock: MPI_Op_create may run
/// on any thread.
struct user_ops {
  std::mutex m;
  std::unordered_map<std::uintptr_t, user_function> by_handle;
};
user_ops& user_op_table() {
  static user_ops t;
  return t;
}

std::optional<user_function> user_op_of(MPI_Op op) {
  auto& t = user_op_table();
  const std::lock_guard<std::mutex> lock(t.m);
  auto it = t.by_handle.find(handle_id(op));
  if (it == t.by_handle.end()) return std::nullopt;
  return it->second;
}

// --- per-communicator state -----------------------------------------------------------

/// What makes two calls the same plan. Every field is equal on every rank for
/// the same call (MPI requires matching counts, types, ops and roots), except
/// handles' numeric values, which only need to be consistent within a rank.
/// User operators are keyed by their function, not their handle: programs
/// create a new handle for each call. They are also keyed by the datatype,
/// which the function receives and may branch on: MPI_INT and MPI_FLOAT are
/// both 4-byte blobs to collc, but a plan built for one must not hand the
/// function the other's handle. Only predefined types reach a plan, and a
/// predefined type is the same type on every rank (MPI's type-signature rule).
struct signature {
  coll c = coll::allreduce;
  elem e = elem::none;
  opk o = opk::none;
  std::uint64_t count = 0;
  std::uintptr_t op_id = 0;    // the user function, else 0
  std::uintptr_t type_id = 0;  // a user operator's datatype, else 0
  int root = 0;
  bool commute = true;
  op_language lang = op_language::c;
  bool operator==(const signature&) const = default;
};
struct signature_hash {
  std::size_t operator()(const signature& s) const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<std::uint64_t>(s.c));
    mix(static_cast<std::uint64_t>(s.e));
    mix(static_cast<std::uint64_t>(s.o));
    mix(s.count);
    mix(s.op_id);
    mix(s.type_id);
    mix(static_cast<std::uint64_t>(s.root));
    mix(s.commute);
    return static_cast<std::size_t>(h);
  }
};

/// The plans and call counts of one communicator. Used by one thread at a
/// time (MPI forbids concurrent collectives on one communicator), so the hot
/// path takes no lock.
struct comm_state {
  std::uint64_t seq = 0;  // creation order, for freeing in the same order on every rank
  int size = 1;
  int rank = 0;
  bool null_comm = false;  // the state of MPI_COMM_NULL (state_of)
  // The measured table's byte ranges for this communicator's size, per
  // collective (most have none): a call checks these, not the whole table.
  struct byte_range {
    std::size_t lo, hi;
  };
  std::vector<byte_range> mpi_faster[static_cast<int>(coll::count_)];

  [[nodiscard]] bool mpi_is_faster(coll c, std::size_t bytes) const {
    for (const byte_range& r : mpi_faster[static_cast<int>(c)])
      if (bytes >= r.lo && bytes <= r.hi) return true;
    return false;
  }
  bool inter = false;
  // The program called MPI_Comm_idup on this communicator before collc's
  // first plan on it (comm_idup_called): every later call goes to MPI. A
  // first plan's round (MPI_Iallgather, MPI_Comm_idup on this communicator)
  // while the program's duplication may still be pending breaks in Open MPI
  // 4.1: the duplication's context-id allreduces are issued from the progress
  // engine at times that differ between ranks, so the allgather took one's
  // libnbc tag on some ranks (MPI_ERR_TRUNCATE), and a second duplication
  // waited before the first hangs. Whether the program's request completed
  // is a rank's own knowledge, so no later point is the same on every rank;
  // the call that sets this is collective, so every rank sets it alike.
  bool program_idup = false;
  struct cached {
    std::unique_ptr<typed_plan> plan;
    std::list<signature>::iterator lru;
    std::uint64_t bytes = 0;
  };
  std::unordered_map<signature, std::uint64_t, signature_hash> calls;
  std::unordered_map<signature, cached, signature_hash> plans;
  std::list<signature> lru;  // most recently used first
  std::uint64_t plan_bytes = 0;
  std::unordered_set<signature, signature_hash> refused;
  // The plan of the last call, if still cached: a program repeats one call
  // in its loop, and the comparison costs less than the hash lookup.
  signature last_sig;
  cached* last_hit = nullptr;
  // The communicator's registry (its duplicate, node communicator and shared
  // windows), kept from the first plan until the communicator is freed: a
  // plan built after the cache evicted every other one then costs a new
  // signature's setup, not a new communicator's. Destroyed after the plans
  // (members go after the destructor's body).
  std::shared_ptr<mpi::registry> registry;

  /// Frees the plan of `sig`, if cached.
  void drop(signature sig) {
    auto it = plans.find(sig);
    if (it == plans.end()) return;
    if (last_hit == &it->second) last_hit = nullptr;
    plan_bytes -= it->second.bytes;
    lru.erase(it->second.lru);
    plans.erase(it);
  }

  ~comm_state() {
    // Least recently used first: the same order on every rank (plans free
    // shared windows collectively).
    while (!lru.empty()) {
      plans.erase(lru.back());
      lru.pop_back();
    }
  }
};

/// What each thread remembers of its last call (state_of, classify), in one
/// thread-local block. initial-exec: the library is loaded at program start
/// (LD_PRELOAD or -lcollc_mpi), so its thread-local storage is static and
/// reached without a __tls_get_addr call.
/// What collc makes of a reduction's datatype and operator.
struct classified {
  std::optional<why> unfit;  // why collc does not take it, if so
  elem e = elem::none;
  opk o = opk::none;
  user_function user;
  std::size_t extent = 0;  // bytes per element
};

struct thread_memory {
  std::tuple<MPI_Comm, comm_state*, std::uint64_t> last_state{MPI_COMM_NULL, nullptr, 0};
  std::tuple<MPI_Datatype, MPI_Op, std::uint64_t, classified> last_class{
      MPI_DATATYPE_NULL, MPI_OP_NULL, ~std::uint64_t{0}, {}};
};
thread_memory& tls() {
  static thread_local thread_memory m __attribute__((tls_model("initial-exec")));
  return m;
}

/// Set by at_finalize once every state is freed: MPI_COMM_SELF's other delete
/// callbacks (the program's, run after ours in MPI_Finalize) may still call
/// collectives, and the communicators' attributes still name the freed
/// states. From then on every call goes to the MPI library.
std::atomic<bool> g_states_gone{false};

/// Bumped whenever a state is freed, so no thread's last-state cache
/// (state_of) can name a freed state or a reused communicator handle.
std::atomic<std::uint64_t> g_states_freed{0};

/// Every live comm_state by creation sequence, so MPI_Finalize frees them all
/// (MPI_COMM_WORLD's attributes need not be deleted at finalize). The
/// communicator's attribute holds the state's address, so a call finds its
/// state without taking this lock.
struct state_registry {
  std::mutex m;
  std::map<std::uint64_t, std::unique_ptr<comm_state>> states;
  std::uint64_t next = 1;
};
state_registry& registry() {
  static state_registry r;
  return r;
}

void print_stats();

int delete_state(MPI_Comm, int, void* value, void*) {
  std::unique_ptr<comm_state> gone;
  {
    auto& r = registry();
    const std::lock_guard<std::mutex> lock(r.m);
    // Not found: MPI_Finalize already freed it (at_finalize).
    for (auto it = r.states.begin(); it != r.states.end(); ++it)
      if (it->second.get() == value) {
        gone = std::move(it->second);
        r.states.erase(it);
        break;
      }
  }
  g_states_freed.fetch_add(1, std::memory_order_release);
  return MPI_SUCCESS;  // `gone` frees the plans here, inside MPI_Comm_free
}

/// MPI_COMM_SELF's attributes are deleted first thing in MPI_Finalize, while
/// MPI still works (MPI 4.0, section 11.2.4): the one hook every language's
/// MPI_Finalize reaches (Open MPI's Fortran mpi_finalize calls PMPI_Finalize).
int at_finalize(MPI_Comm, int, void*, void*) {
  print_stats();
  auto& r = registry();
  std::map<std::uint64_t, std::unique_ptr<comm_state>> all;
  {
    const std::lock_guard<std::mutex> lock(r.m);
    all.swap(r.states);
  }
  g_states_gone.store(true, std::memory_order_release);
  g_states_freed.fetch_add(1, std::memory_order_release);
  while (!all.empty()) all.erase(std::prev(all.end()));  // newest first
  return MPI_SUCCESS;
}

/// The keyval of the communicator states, created once (with the finalize hook).
int state_keyval() {
  static const int kv = [] {
    int k = MPI_KEYVAL_INVALID;
    // Not copied to duplicates: a duplicate's calls and plans are its own.
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &k, nullptr);
    int self_kv = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, at_finalize, &self_kv, nullptr);
    PMPI_Comm_set_attr(MPI_COMM_SELF, self_kv, nullptr);
    return k;
  }();
  return kv;
}

// --- the measured table -------------------------------------------------------------

/// The library under this process (its rows of measured.hpp apply), from the
/// version string: "Open MPI v4.1.4, ..." or "MPICH Version: 4.0.2 ...";
/// any other library is `other`, for which no row was measured. Read once
/// (MPI allows the call before MPI_Init).
library running_library() {
  static const library lib = [] {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    if (PMPI_Get_library_version(text, &len) != MPI_SUCCESS) return library::other;
    const std::string v(text, static_cast<std::size_t>(len > 0 ? len : 0));
    if (v.find("Open MPI") != std::string::npos) return library::open_mpi;
    if (v.find("MPICH") != std::string::npos) return library::mpich;
    return library::other;
  }();
  return lib;
}

/// A state that sends every call to the MPI library: MPI_COMM_NULL's (it has
/// no attributes; MPI reports the erroneous call through its own handler)
/// and every communicator's once at_finalize has freed the states. Never
/// destroyed: calls may come until the process exits.
comm_state& to_mpi_state() {
  static comm_state* const s = [] {
    auto* state = new comm_state;
    state->null_comm = true;
    return state;
  }();
  return *s;
}

/// The state of `comm`, created at its first intercepted call. The last
/// communicator a thread called on is remembered (programs call many
/// collectives in a row on one communicator), which saves the attribute
/// lookup: a call that goes to the MPI library pays a few nanoseconds here.
comm_state& state_of(MPI_Comm comm) {
  // MPI_COMM_NULL has no attributes: a state that sends every call to the
  // MPI library, which reports the erroneous call through its own handler.
  if (comm == MPI_COMM_NULL) return to_mpi_state();
  auto& [last_comm, last_state, last_freed] = tls().last_state;
  const std::uint64_t freed = g_states_freed.load(std::memory_order_acquire);
  if (last_state != nullptr && last_comm == comm && last_freed == freed) return *last_state;
  // After at_finalize (which bumped g_states_freed after setting this, so no
  // cached state got past the line above): the attribute would name a freed
  // state; the same state as MPI_COMM_NULL's sends the call to MPI.
  if (g_states_gone.load(std::memory_order_acquire)) return to_mpi_state();
  const int kv = state_keyval();
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, kv, &value, &found);
  if (found) {
    last_comm = comm, last_state = static_cast<comm_state*>(value), last_freed = freed;
    return *last_state;
  }
  auto s = std::make_unique<comm_state>();
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  s->inter = inter != 0;
  if (!s->inter) {
    PMPI_Comm_size(comm, &s->size);
    PMPI_Comm_rank(comm, &s->rank);
    const library lib = running_library();
    for (const mpi_faster_row& row : mpi_faster_rows)
      if (row.lib == lib && row.ranks == s->size)
        s->mpi_faster[static_cast<int>(row.c)].push_back({row.min_bytes, row.max_bytes});
  }
  comm_state* raw = s.get();
  {
    auto& r = registry();
    const std::lock_guard<std::mutex> lock(r.m);
    s->seq = r.next++;
    r.states.emplace(s->seq, std::move(s));
  }
  PMPI_Comm_set_attr(comm, kv, raw);
  last_comm = comm, last_state = raw, last_freed = freed;
  return *raw;
}

// --- errors ---------------------------------------------------------------------------

/// A collc error inside an intercepted call: the diagnosis on stderr, then
/// what MPI would do: the communicator's error handler decides
/// (MPI_ERRORS_ARE_FATAL aborts, MPI_ERRORS_RETURN returns the code).
int report(MPI_Comm comm, coll c, const char* what) {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "collc pmpi: %s on rank %d (of MPI_COMM_WORLD): %s\n", mpi_name(c), rank, what);
  std::fflush(stderr);
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// --- the decision and the call -------------------------------------------------------

/// A call as the core sees it once the buffers are known.
struct call {
  coll c;
  MPI_Comm comm;
  const void* send;
  void* recv;
  std::size_t count;  // elements of the plan (bytes for allgather and bcast)
  std::size_t bytes;  // message bytes per rank, for the table and the cache bound
  elem e;
  opk o;
  int root;
  user_function user;
  /// Bcast and allgather move bytes. Where this rank's buffer is not those
  /// bytes as they lie (a derived type with gaps, a pair type's padding,
  /// MPI_BOTTOM with absolute displacements), the call runs on a packed copy
  /// of the side (stage_and_run). MPI's type-signature rule makes the bytes
  /// the same on every rank, but not the layout: deciding by layout would
  /// send one rank to MPI and its peers to collc, and they would never meet.
  struct layout {
    MPI_Datatype type = MPI_DATATYPE_NULL;  // MPI_DATATYPE_NULL: this side is not staged
    std::size_t count = 0;
  };
  layout send_packed = {};  // packed before the call
  layout recv_packed = {};  // packed before the call if recv_in, unpacked after it if recv_out
  bool recv_in = false, recv_out = false;
  [[nodiscard]] bool staged() const {
    return send_packed.type != MPI_DATATYPE_NULL || recv_packed.type != MPI_DATATYPE_NULL;
  }
};

/// Where a call goes.
struct verdict {
  bool collc = false;
  why reason = why::off;
};

verdict refuse(why w) { return {false, w}; }

/// Bumped by op_created / op_freed: a handle may name another operator later.
std::atomic<std::uint64_t> g_ops_changed{0};

classified classify_uncached(MPI_Datatype type, MPI_Op op) {
  classified r;
  const type_info* t = find_type(type);
  if (t == nullptr) {
    r.unfit = why::derived_type;
    return r;
  }
  r.extent = t->extent;
  r.o = predefined_op(op);
  if (r.o == opk::user) {
    auto f = user_op_of(op);
    if (!f) {
      r.unfit = why::op;
      return r;
    }
    r.user = *f;
    r.user.type = type;
  }
  r.e = element_for(*t, r.o);
  if (r.e == elem::none) r.unfit = r.o == opk::user ? why::derived_type : why::type_op;
  return r;
}

/// classify_uncached, remembered per thread for the last (type, op): programs
/// repeat the same pair, and the lookups cost as much as a small plan's call.
/// Datatype handles need no invalidation: predefined types are never freed,
/// and any other handle classifies as a derived type whatever it names.
const classified& classify(MPI_Datatype type, MPI_Op op) {
  auto& [last_type, last_op, last_ops_changed, last] = tls().last_class;
  const std::uint64_t changed = g_ops_changed.load(std::memory_order_acquire);
  if (type != last_type || op != last_op || changed != last_ops_changed) {
    last = classify_uncached(type, op);
    last_type = type, last_op = op, last_ops_changed = changed;
  }
  return last;
}

/// The element and operator of a reduction, or why collc does not take it.
std::optional<why> classify_reduction(MPI_Datatype type, MPI_Op op, elem& e, opk& o, user_function& u,
                                      std::size_t& extent) {
  const classified& c = classify(type, op);
  e = c.e, o = c.o, u = c.user, extent = c.extent;
  return c.unfit;
}

constexpr std::size_t max_counted_signatures = 1 << 16;

/// Whether MPI_Pack writes a type's data as its bytes, nothing added (what
/// every homogeneous MPI does, and what staging needs: a packed rank and a
/// rank whose buffer is already dense must move the same bytes). Checked
/// once with a strided vector; the same library answers alike on every rank.
bool pack_is_plain() {
  static const bool plain = [] {
    MPI_Datatype every_other;
    if (PMPI_Type_vector(2, 1, 2, MPI_INT, &every_other) != MPI_SUCCESS) return false;
    PMPI_Type_commit(&every_other);
    const int in[4] = {11, 22, 33, 44};
    int out[2] = {0, 0}, position = 0;
    const bool ok = PMPI_Pack(in, 1, every_other, out, sizeof out, &position, MPI_COMM_SELF) == MPI_SUCCESS &&
                    position == static_cast<int>(sizeof out) && out[0] == 11 && out[1] == 33;
    PMPI_Type_free(&every_other);
    return ok;
  }();
  return plain;
}

/// How `count` elements of `type` at `buf` map to the bytes collc moves.
struct byte_view {
  bool known = false;     // a type whose size MPI states
  std::size_t bytes = 0;  // count x size: the same on every rank of a correct call
  bool direct = false;    // the bytes are the buffer itself, from `buf` on
};

/// Whether `t`'s bytes in memory come in its type signature's order: a
/// predefined type, or contiguous copies (or a dup) of one. A struct or
/// indexed type can lie dense yet list its blocks out of address order (an
/// int at 4, then one at 0); MPI moves those in signature order, so they
/// are packed, as is every other constructor.
bool in_signature_order(MPI_Datatype t, int depth = 0) {
  if (find_type(t) != nullptr) return true;
  int ints = 0, addresses = 0, types = 0, combiner = 0;
  if (depth > 8 || PMPI_Type_get_envelope(t, &ints, &addresses, &types, &combiner) != MPI_SUCCESS) return false;
  if ((combiner != MPI_COMBINER_CONTIGUOUS && combiner != MPI_COMBINER_DUP) || ints > 1 || addresses != 0 || types != 1)
    return false;
  int count[1] = {0};
  MPI_Aint none[1] = {0};
  MPI_Datatype base = MPI_DATATYPE_NULL;
  if (PMPI_Type_get_contents(t, ints, addresses, types, count, none, &base) != MPI_SUCCESS) return false;
  const bool ordered = in_signature_order(base, depth + 1);
  int base_combiner = 0;
  if (PMPI_Type_get_envelope(base, &ints, &addresses, &types, &base_combiner) == MPI_SUCCESS &&
      base_combiner != MPI_COMBINER_NAMED)
    PMPI_Type_free(&base);  // get_contents returns a new handle of a derived type
  return ordered;
}

byte_view view_of(const void* buf, std::size_t count, MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return {};
  if (const type_info* t = find_type(type); t != nullptr && t->dense)
    return {true, count * t->extent, buf != MPI_BOTTOM && buf != nullptr};
  // MPI_Type_size_x: a type of more than INT_MAX bytes (which MPI_Type_size
  // calls MPI_UNDEFINED) may match a signature another rank writes with a
  // smaller type, so its size must be known too.
  MPI_Count size = 0;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size == MPI_UNDEFINED || size < 0 ||
      PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
      PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
    return {};
  const auto n = static_cast<MPI_Aint>(size);
  // Dense: the data fills [0, size) of each element in signature order, and
  // elements follow each other.
  const bool dense = size > 0 && lb == 0 && true_lb == 0 && true_extent == n && (count <= 1 || extent == n) &&
                     in_signature_order(type);
  return {true, count * static_cast<std::size_t>(size), dense && buf != MPI_BOTTOM && buf != nullptr};
}

/// Packs (or, with `unpack`, unpacks) `l.count` elements of `l.type` at
/// `user` to or from `bytes`, in pieces whose byte counts fit MPI's int.
/// Returns an MPI error code.
int move_packed(const call::layout& l, const void* user, unsigned char* bytes, bool unpack, MPI_Comm comm) {
  MPI_Count size_x = 0;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_size_x(l.type, &size_x);
  PMPI_Type_get_extent(l.type, &lb, &extent);
  if (size_x <= 0) return MPI_SUCCESS;
  // MPI_Pack counts bytes in an int: one element of more cannot be packed.
  if (size_x > INT_MAX) return MPI_ERR_TYPE;
  const int size = static_cast<int>(size_x);
  // MPI_BOTTOM (absolute displacements): MPICH refuses a null buffer in
  // MPI_Pack, so the data are addressed from a real pointer, `bytes`, through
  // a type shifted back by that pointer's address.
  MPI_Datatype type = l.type, shifted = MPI_DATATYPE_NULL;
  if (user == MPI_BOTTOM || user == nullptr) {
    MPI_Aint anchor = 0;
    PMPI_Get_address(bytes, &anchor);
    const int one = 1;
    const MPI_Aint back = MPI_Aint{0} - anchor;
    if (const int err = PMPI_Type_create_hindexed(1, &one, &back, l.type, &shifted); err != MPI_SUCCESS) return err;
    PMPI_Type_commit(&shifted);
    type = shifted;
    user = bytes;
  }
  const std::size_t per = std::max<std::size_t>(1, (std::size_t{1} << 30) / static_cast<std::size_t>(size));
  // Element i lives at user + i * extent.
  const auto base = reinterpret_cast<std::uintptr_t>(user);
  int err = MPI_SUCCESS;
  for (std::size_t i = 0; i < l.count && err == MPI_SUCCESS; i += per) {
    const int n = static_cast<int>(std::min(per, l.count - i));
    const int span = n * size;
    void* at = reinterpret_cast<void*>(base + i * static_cast<std::size_t>(extent));
    unsigned char* packed = bytes + i * static_cast<std::size_t>(size);
    int position = 0;
    err = unpack ? PMPI_Unpack(packed, span, &position, at, n, type, comm)
                 : PMPI_Pack(at, n, type, packed, span, &position, comm);
  }
  if (shifted != MPI_DATATYPE_NULL) PMPI_Type_free(&shifted);
  return err;
}

/// The packed copies of a staged call's sides (call::layout).
/// The bytes of the send buffer if it overlaps the receive buffer without
/// MPI_IN_PLACE, else 0. MPI forbids such aliasing, yet Open MPI computes
/// `MPI_Allreduce(x, x, ...)` as if in place, and old codes rely on it; a plan
/// refuses overlapping buffers (collc::plan's check), so the call runs on a
/// copy of the send buffer: the result of the same call without the overlap.
/// Each rank decides for its own buffers, which changes nothing its peers see.
std::size_t aliased_send_bytes(const call& c, int size) {
  if (c.c == coll::bcast || c.send == MPI_IN_PLACE || c.send == nullptr || c.recv == nullptr) return 0;
  if (c.send_packed.type != MPI_DATATYPE_NULL || c.recv_packed.type != MPI_DATATYPE_NULL) return 0;  // copies already
  const auto ranks = static_cast<std::size_t>(size);
  const std::size_t send_bytes =
      c.c == coll::reduce_scatter_block || c.c == coll::reduce_scatter ? c.bytes * ranks : c.bytes;
  const std::size_t recv_bytes = c.c == coll::allgather ? c.bytes * ranks : c.bytes;
  const auto* s = static_cast<const unsigned char*>(c.send);
  const auto* r = static_cast<const unsigned char*>(c.recv);
  return send_bytes != 0 && recv_bytes != 0 && s < r + recv_bytes && r < s + send_bytes ? send_bytes : 0;
}

struct staging {
  std::vector<unsigned char> send_copy, recv_copy;

  /// Before the call, for a send buffer that overlaps the receive buffer
  /// (aliased_send_bytes): points `send` at a copy of its `bytes`.
  void copy_send(const void*& send, std::size_t bytes) {
    send_copy.resize(bytes);
    std::memcpy(send_copy.data(), send, bytes);
    send = send_copy.data();
  }

  static std::size_t bytes_of(const call::layout& l) {
    MPI_Count size = 0;
    PMPI_Type_size_x(l.type, &size);
    return l.count * static_cast<std::size_t>(std::max<MPI_Count>(size, 0));
  }

  /// Before the call: packs what the call reads, and points `send` / `recv`
  /// (the user's buffers on entry) at the copies of the staged sides.
  /// Returns an MPI error code.
  int in(const call& c, const void*& send, void*& recv) {
    int err = MPI_SUCCESS;
    if (c.send_packed.type != MPI_DATATYPE_NULL) {
      send_copy.resize(bytes_of(c.send_packed));
      if ((err = move_packed(c.send_packed, c.send, send_copy.data(), false, c.comm)) != MPI_SUCCESS) return err;
      send = send_copy.data();
    }
    if (c.recv_packed.type != MPI_DATATYPE_NULL) {
      recv_copy.resize(bytes_of(c.recv_packed));
      if (c.recv_in && (err = move_packed(c.recv_packed, c.recv, recv_copy.data(), false, c.comm)) != MPI_SUCCESS)
        return err;
      recv = recv_copy.data();
    }
    return err;
  }

  /// After the call: unpacks the result into the user's receive buffer.
  int out(const call& c) {
    if (c.recv_packed.type == MPI_DATATYPE_NULL || !c.recv_out) return MPI_SUCCESS;
    return move_packed(c.recv_packed, c.recv, recv_copy.data(), true, c.comm);
  }
};

/// Starts and waits for `c` on `plan`, through packed copies of its staged
/// sides; a thread's copies grow to its largest staged call. Returns an MPI
/// error code; collc's errors are thrown.
int stage_and_run(typed_plan& plan, const call& c, int size) {
  const void* send = c.send;
  void* recv = c.recv;
  thread_local staging copies;
  if (c.staged()) {
    if (const int err = copies.in(c, send, recv); err != MPI_SUCCESS) return err;
  } else if (const std::size_t aliased = aliased_send_bytes(c, size); aliased != 0) {
    copies.copy_send(send, aliased);
  }
  plan.start(send, recv);
  plan.wait();
  return c.staged() ? copies.out(c) : MPI_SUCCESS;
}

/// Runs `c` on the communicator's plan for `sig` (built at first use), or says
/// why it goes to MPI. Returns an MPI error code in `*err` when collc ran it.
verdict run_on_collc(comm_state& st, const settings& s, const call& c, const signature& sig, int* err) {
  comm_state::cached* hit = st.last_hit != nullptr && st.last_sig == sig ? st.last_hit : nullptr;
  if (hit == nullptr) {
    if (auto it = st.plans.find(sig); it != st.plans.end()) {
      hit = &it->second;
      if (hit->lru != st.lru.begin()) st.lru.splice(st.lru.begin(), st.lru, hit->lru);
    } else {
      if (st.refused.count(sig) != 0) return refuse(why::refused);
      // Call counts are kept for every signature seen (not only cached ones); a
      // program with endless distinct signatures starts counting afresh, on
      // every rank at the same call.
      if (st.calls.size() >= max_counted_signatures && st.calls.find(sig) == st.calls.end()) st.calls.clear();
      if (++st.calls[sig] < s.from_call) return refuse(why::first_calls);
    }
  }
  try {
    if (hit == nullptr) {
      // Bound the cache first (the same evictions on every rank: the same calls, the same bytes).
      const std::uint64_t cost = c.bytes;
      while (!st.lru.empty() && (st.plans.size() >= s.cache_entries || st.plan_bytes + cost > (s.cache_mib << 20)))
        st.drop(st.lru.back());  // by value: drop erases the list node
      std::unique_ptr<typed_plan> p;
      try {
        p = make_typed_plan(c.c, c.e, c.o, c.user, c.comm, c.count, c.root);
      } catch (const error& e) {
        // A plan collc cannot build here (the same on every rank: setup
        // agrees first): the MPI library takes this signature from now on.
        // Disagreements and timeouts are real errors.
        if (e.code() == errc::mismatch || e.code() == errc::timeout || e.code() == errc::mpi_error) throw;
        st.refused.insert(sig);
        g_refusals.note(c.c, e.what());
        return refuse(why::refused);
      }
      if (!p) {
        st.refused.insert(sig);
        g_refusals.note(c.c, no_plan_here);
        return refuse(why::refused);
      }
      g_stats[static_cast<int>(c.c)].plans_built.fetch_add(1, std::memory_order_relaxed);
      if (!st.registry) st.registry = mpi::registry_for(c.comm);  // the plan's own: no MPI call
      st.lru.push_front(sig);
      hit = &st.plans.emplace(sig, comm_state::cached{std::move(p), st.lru.begin(), cost}).first->second;
      st.plan_bytes += cost;
    }
    st.last_sig = sig, st.last_hit = hit;
    // A packed copy MPI cannot make (an element of more than INT_MAX bytes
    // with gaps) goes through the error handler: the peers are in the plan.
    if (const int code = stage_and_run(*hit->plan, c, st.size); code != MPI_SUCCESS)
      *err = report(c.comm, c.c,
                    ("MPI_Pack / MPI_Unpack of a staged buffer failed with MPI error " + std::to_string(code)).c_str());
    else
      *err = MPI_SUCCESS;
  } catch (const std::exception& e) {
    // The plan that failed is dropped: the next call of the signature builds a new one.
    st.drop(sig);
    *err = report(c.comm, c.c, e.what());
  }
  return {true, why::off};
}

/// One rank: the copy MPI would make, without shared memory or messages.
void local_copy(const call& c) {
  if (c.c == coll::bcast || c.send == MPI_IN_PLACE || c.recv == nullptr) return;
  std::memmove(c.recv, c.send, c.bytes);  // the buffers may overlap (aliased_send_bytes)
}

/// Decides and runs; `to_mpi` is the unchanged call to the MPI library.
template <class ToMpi>
int dispatch(const call& c, std::optional<why> unfit, ToMpi&& to_mpi) {
  const settings& s = config();
  coll_stats& stats = g_stats[static_cast<int>(c.c)];
  if (s.stats) state_keyval();  // the finalize hook prints the statistics, even with collc switched off
  const double t0 = s.stats ? PMPI_Wtime() : 0.0;
  verdict v = refuse(why::off);
  int err = MPI_SUCCESS;
  bool local = false;
  comm_state* state = nullptr;
  if (s.enabled && (s.collectives >> static_cast<int>(c.c) & 1u)) {
    comm_state& st = state_of(c.comm);
    state = &st;
    if (st.null_comm)
      v = refuse(why::null_comm);
    else if (st.inter)
      v = refuse(why::intercomm);
    else if (st.program_idup)
      v = refuse(why::pending_idup);
    else if (unfit)
      v = refuse(*unfit);
    else if (c.count == 0)
      v = refuse(why::empty);
    else if (st.size == 1 && c.staged())
      v = refuse(why::derived_type);  // one rank: MPI's own copy through the datatypes
    else if (st.size == 1) {
      local_copy(c);
      v.collc = local = true;
    } else if (!s.all_sizes && st.mpi_is_faster(c.c, c.bytes)) {
      v = refuse(why::mpi_faster);
    } else {
      const signature sig{c.c,
                          c.e,
                          c.o,
                          c.count,
                          c.o == opk::user ? reinterpret_cast<std::uintptr_t>(c.user.fn) : 0,
                          c.o == opk::user ? handle_id(c.user.type) : 0,
                          c.root,
                          c.o != opk::user || c.user.commute,
                          c.user.lang};
      v = run_on_collc(st, s, c, sig, &err);
    }
  }
  if (!v.collc) {
    // A call left to MPI takes its call number on the communicator's plans,
    // so that peers whose cached plan runs this call (rank 0 passed another
    // count) see a mismatch, not a rank that is late: each side waited for
    // the other for good (test pmpi_mismatch_routed). Under
    // MPI_ERRORS_ARE_FATAL the peers' error ends the job; with
    // MPI_ERRORS_RETURN this rank still waits in MPI (docs/pmpi.md).
    if (state && state->registry) state->registry->stamp_library_call();
    err = to_mpi();
  }
  if (s.stats) {
    const std::uint64_t ns = ns_between(t0, PMPI_Wtime());
    if (v.collc) {
      stats.by_collc.fetch_add(1, std::memory_order_relaxed);
      if (local) stats.local_copies.fetch_add(1, std::memory_order_relaxed);
      stats.collc_ns.fetch_add(ns, std::memory_order_relaxed);
    } else {
      stats.by_mpi.fetch_add(1, std::memory_order_relaxed);
      stats.mpi_ns.fetch_add(ns, std::memory_order_relaxed);
      stats.reasons[static_cast<int>(v.reason)].fetch_add(1, std::memory_order_relaxed);
    }
  }
  return err;
}

bool is_bottom(const void* p) { return p == MPI_BOTTOM || p == nullptr; }

std::string grouped(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

void print_stats() {
  if (!config().stats) return;
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) return;
  std::string out = "collc pmpi: statistics of rank 0 (of " + std::to_string(size) +
                    "), COLLC_PMPI_FROM_CALL=" + std::to_string(config().from_call) + "\n";
  for (int i = 0; i < n_colls; ++i) {
    const coll_stats& st = g_stats[i];
    const std::uint64_t by_collc = st.by_collc.load(), by_mpi = st.by_mpi.load();
    if (by_collc + by_mpi == 0) continue;
    char line[256];
    std::snprintf(line, sizeof line,
                  "collc pmpi: %s: %s calls by collc (%.6f s, %s plans built, %s local copies), %s to MPI (%.6f s)\n",
                  mpi_name(static_cast<coll>(i)), grouped(by_collc).c_str(), st.collc_ns.load() * 1e-9,
                  grouped(st.plans_built.load()).c_str(), grouped(st.local_copies.load()).c_str(),
                  grouped(by_mpi).c_str(), st.mpi_ns.load() * 1e-9);
    out += line;
    for (int w = 0; w < n_whys; ++w)
      if (const std::uint64_t k = st.reasons[w].load(); k > 0) {
        out += "collc pmpi:   " + std::string(mpi_name(static_cast<coll>(i))) + ": " + grouped(k) +
               " to MPI: " + describe(static_cast<why>(w));
        if (static_cast<why>(w) == why::refused)
          if (const std::string first = g_refusals.of(i); !first.empty()) out += " (the first: " + first + ")";
        out += "\n";
      }
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

// --- the collectives ------------------------------------------------------------------

/// A call described for the core, and why collc cannot take it (if so).
struct prepared {
  call c;
  std::optional<why> unfit;
};

/// Element count and bytes of a reduction of `count` elements of `extent` bytes.
void size_reduction(prepared& p, int count, std::size_t extent) {
  if (p.unfit) return;
  p.c.count = static_cast<std::size_t>(count);
  p.c.bytes = p.c.count * extent;
}

/// Allreduce, reduce_scatter_block and reduce_scatter with equal counts.
prepared prepare_reduction(coll k, const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                           MPI_Comm comm) {
  prepared p{call{k, comm, send, recv, 0, 0, elem::none, opk::none, 0, {}}, std::nullopt};
  std::size_t extent = 0;
  if (count < 0 || is_bottom(recv) || (send != MPI_IN_PLACE && is_bottom(send)))
    p.unfit = why::bottom;
  else
    p.unfit = classify_reduction(type, op, p.c.e, p.c.o, p.c.user, extent);
  size_reduction(p, count, extent);
  return p;
}

prepared prepare_allgather(const void* send, int sendcount, MPI_Datatype sendtype, void* recv, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
  prepared p{call{coll::allgather, comm, send, recv, 0, 0, elem::bytes, opk::none, 0, {}}, std::nullopt};
  const bool in_place = send == MPI_IN_PLACE;
  if (recvcount < 0 || (!in_place && sendcount < 0)) {
    p.unfit = why::bottom;  // an error MPI reports
    return p;
  }
  const comm_state& st = state_of(comm);
  const auto ranks = static_cast<std::size_t>(st.inter ? 1 : st.size);
  const byte_view block = view_of(recv, static_cast<std::size_t>(recvcount), recvtype);
  const byte_view all = view_of(recv, static_cast<std::size_t>(recvcount) * ranks, recvtype);
  const byte_view mine = in_place ? block : view_of(send, static_cast<std::size_t>(sendcount), sendtype);
  // Only what is the same on every rank decides (see call::layout): bytes
  // and the library. A send side of other bytes than a block is a type
  // signature mismatch, which MPI reports.
  if (!block.known || !mine.known || mine.bytes != block.bytes || !pack_is_plain()) {
    p.unfit = why::derived_type;
    return p;
  }
  if (!in_place && !mine.direct) p.c.send_packed = {sendtype, static_cast<std::size_t>(sendcount)};
  if (!all.direct) {
    p.c.recv_packed = {recvtype, static_cast<std::size_t>(recvcount) * ranks};
    p.c.recv_in = in_place;  // the rank's own block is input
    p.c.recv_out = true;
  }
  p.c.bytes = p.c.count = block.bytes;
  return p;
}

prepared prepare_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  prepared p{call{coll::bcast, comm, buf, buf, 0, 0, elem::bytes, opk::none, root, {}}, std::nullopt};
  if (count < 0) {
    p.unfit = why::bottom;  // an error MPI reports
    return p;
  }
  const byte_view v = view_of(buf, static_cast<std::size_t>(count), type);
  if (!v.known || !pack_is_plain()) {
    p.unfit = why::derived_type;
    return p;
  }
  if (!v.direct) {
    const comm_state& st = state_of(comm);
    const bool at_root = !st.inter && st.rank == root;
    p.c.recv_packed = {type, static_cast<std::size_t>(count)};
    p.c.recv_in = at_root;
    p.c.recv_out = !at_root;
  }
  p.c.bytes = p.c.count = v.bytes;
  return p;
}

prepared prepare_reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
                        MPI_Comm comm) {
  const comm_state& st = state_of(comm);
  const bool at_root = !st.inter && st.rank == root;
  // Only the root's recv is significant: other ranks' may be anything.
  prepared p{call{coll::reduce, comm, send, at_root ? recv : nullptr, 0, 0, elem::none, opk::none, root, {}},
             std::nullopt};
  std::size_t extent = 0;
  if (count < 0 || (at_root && is_bottom(recv)) || (send != MPI_IN_PLACE && is_bottom(send)))
    p.unfit = why::bottom;
  else
    p.unfit = classify_reduction(type, op, p.c.e, p.c.o, p.c.user, extent);
  size_reduction(p, count, extent);
  return p;
}

/// MPI_Reduce_scatter: collc takes it when every count is the same.
prepared prepare_reduce_scatter(const void* send, void* recv, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                                MPI_Comm comm) {
  const comm_state& st = state_of(comm);
  const int size = st.inter ? 0 : st.size;
  // recvcounts is the same array on every rank (MPI requires it), so equal
  // counts are decided alike everywhere.
  bool equal = true;
  for (int i = 1; i < size; ++i) equal = equal && recvcounts[i] == recvcounts[0];
  prepared p = prepare_reduction(coll::reduce_scatter, send, recv, size > 0 ? recvcounts[0] : 0, type, op, comm);
  if (!equal) p.unfit = why::unequal_counts;
  return p;
}

}  // namespace

int allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  const prepared p = prepare_reduction(coll::allreduce, send, recv, count, type, op, comm);
  return dispatch(p.c, p.unfit, [&] { return PMPI_Allreduce(send, recv, count, type, op, comm); });
}

int reduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  const prepared p = prepare_reduction(coll::reduce_scatter_block, send, recv, count, type, op, comm);
  return dispatch(p.c, p.unfit, [&] { return PMPI_Reduce_scatter_block(send, recv, count, type, op, comm); });
}

int reduce_scatter(const void* send, void* recv, const int recvcounts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  const prepared p = prepare_reduce_scatter(send, recv, recvcounts, type, op, comm);
  return dispatch(p.c, p.unfit, [&] { return PMPI_Reduce_scatter(send, recv, recvcounts, type, op, comm); });
}

int allgather(const void* send, int sendcount, MPI_Datatype sendtype, void* recv, int recvcount, MPI_Datatype recvtype,
              MPI_Comm comm) {
  const prepared p = prepare_allgather(send, sendcount, sendtype, recv, recvcount, recvtype, comm);
  return dispatch(p.c, p.unfit,
                  [&] { return PMPI_Allgather(send, sendcount, sendtype, recv, recvcount, recvtype, comm); });
}

int bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  const prepared p = prepare_bcast(buf, count, type, root, comm);
  return dispatch(p.c, p.unfit, [&] { return PMPI_Bcast(buf, count, type, root, comm); });
}

int reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  const prepared p = prepare_reduce(send, recv, count, type, op, root, comm);
  return dispatch(p.c, p.unfit, [&] { return PMPI_Reduce(send, recv, count, type, op, root, comm); });
}

// --- persistent collectives ------------------------------------------------------------

namespace {

/// A persistent collective on its own plan (not in the cache: the request
/// owns it until MPI_Request_free).
class plan_call final : public persistent_call {
 public:
  plan_call(std::unique_ptr<typed_plan> plan, const call& c, int size)
      : plan_(std::move(plan)), c_(c), aliased_(aliased_send_bytes(c, size)) {
    // The request packs with its datatypes at every start, and a program may
    // free them right after MPI_*_init: the request keeps its own duplicates.
    for (call::layout* l : {&c_.send_packed, &c_.recv_packed})
      if (l->type != MPI_DATATYPE_NULL) PMPI_Type_dup(l->type, &l->type);
  }
  plan_call(const plan_call&) = delete;
  plan_call& operator=(const plan_call&) = delete;
  ~plan_call() override {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (finalized) return;
    for (call::layout* l : {&c_.send_packed, &c_.recv_packed})
      if (l->type != MPI_DATATYPE_NULL) PMPI_Type_free(&l->type);
  }
  int start() override {
    if (active_) return report(c_.comm, c_.c, "MPI_Start on a persistent collective request that is still active");
    const settings& s = config();
    const double t0 = s.stats ? PMPI_Wtime() : 0.0;
    int err = MPI_SUCCESS;
    if (plan_) {
      try {
        const void* send = c_.send;
        void* recv = c_.recv;
        if (c_.staged())
          err = copies_.in(c_, send, recv);
        else if (aliased_ != 0)
          copies_.copy_send(send, aliased_);  // at every start: the program may change the buffer between starts
        if (err == MPI_SUCCESS) {
          plan_->start(send, recv);
          active_ = true;
        }
      } catch (const std::exception& e) {
        err = report(c_.comm, c_.c, e.what());
      }
    } else {
      local_copy(c_);  // one rank
      active_ = true;
    }
    count(t0);
    return err;
  }
  bool test(int* err) override {
    *err = MPI_SUCCESS;
    if (!active_) return true;
    const settings& s = config();
    const double t0 = s.stats ? PMPI_Wtime() : 0.0;
    bool done = true;
    if (plan_) {
      try {
        done = plan_->test();
      } catch (const std::exception& e) {
        *err = report(c_.comm, c_.c, e.what());
      }
    }
    if (done) {
      active_ = false;
      if (plan_ && c_.staged() && *err == MPI_SUCCESS) *err = copies_.out(c_);
    }
    if (s.stats) g_stats[static_cast<int>(c_.c)].collc_ns.fetch_add(ns_between(t0, PMPI_Wtime()));
    return done;
  }
  [[nodiscard]] bool active() const override { return active_; }

 private:
  std::unique_ptr<typed_plan> plan_;  // null on a communicator of one rank
  call c_;
  std::size_t aliased_ = 0;  // aliased_send_bytes at creation: the buffers are the request's
  bool active_ = false;
  staging copies_;  // the request's own: other calls may run while it is active

  void count(double t0) const {
    if (!config().stats) return;
    coll_stats& st = g_stats[static_cast<int>(c_.c)];
    st.by_collc.fetch_add(1, std::memory_order_relaxed);
    if (!plan_) st.local_copies.fetch_add(1, std::memory_order_relaxed);
    st.collc_ns.fetch_add(ns_between(t0, PMPI_Wtime()), std::memory_order_relaxed);
  }
};

}  // namespace

std::unique_ptr<persistent_call> make_persistent(coll c, const void* send, void* recv, int count, MPI_Datatype type,
                                                 MPI_Op op, int root, MPI_Comm comm, int send_count,
                                                 MPI_Datatype send_type) {
  const settings& s = config();
  // A persistent request is made to be started many times: no Nth-call rule,
  // but the same switches, fallbacks and table as the blocking call.
  if (!s.enabled || !(s.collectives >> static_cast<int>(c) & 1u)) return nullptr;
  comm_state& st = state_of(comm);
  if (st.inter || st.null_comm || st.program_idup) return nullptr;
  prepared p;
  switch (c) {
    case coll::allreduce:
    case coll::reduce_scatter_block:
    case coll::reduce_scatter: p = prepare_reduction(c, send, recv, count, type, op, comm); break;
    case coll::allgather: p = prepare_allgather(send, send_count, send_type, recv, count, type, comm); break;
    case coll::bcast: p = prepare_bcast(recv, count, type, root, comm); break;
    case coll::reduce: p = prepare_reduce(send, recv, count, type, op, root, comm); break;
    case coll::count_: return nullptr;
  }
  // Creation is collective, so the ranks agree here on what each found: a
  // reason to decline can be one rank's own (a user operator on a derived
  // type there, a predefined type elsewhere), and one rank on MPI's request
  // with its peers on a plan would never meet.
  int fits = p.unfit || p.c.count == 0 || (st.size == 1 && p.c.staged()) ? 0 : 1, all_fit = 0;
  if (st.size > 1) {
    if (const int err = PMPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, comm); err != MPI_SUCCESS) return nullptr;
    fits = all_fit;
  }
  if (fits == 0) return nullptr;
  if (!s.all_sizes && st.mpi_is_faster(c, p.c.bytes)) return nullptr;
  if (st.size == 1) return std::make_unique<plan_call>(nullptr, p.c, 1);
  std::unique_ptr<typed_plan> plan;
  try {
    plan = make_typed_plan(p.c.c, p.c.e, p.c.o, p.c.user, comm, p.c.count, p.c.root);
  } catch (const error& e) {
    if (e.code() == errc::mismatch || e.code() == errc::timeout || e.code() == errc::mpi_error) {
      report(comm, c, e.what());
      return nullptr;
    }
    g_refusals.note(c, e.what());
    return nullptr;  // refused alike on every rank: MPI's own persistent request
  }
  if (!plan) {
    g_refusals.note(c, no_plan_here);
    return nullptr;
  }
  g_stats[static_cast<int>(c)].plans_built.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<plan_call>(std::move(plan), p.c, st.size);
}

// --- user operators ---------------------------------------------------------------------

void op_created(MPI_Op op, void (*fn)(), bool commute, op_language lang) {
  auto& t = user_op_table();
  const std::lock_guard<std::mutex> lock(t.m);
  t.by_handle[handle_id(op)] = user_function{fn, commute, lang, MPI_DATATYPE_NULL};
  g_ops_changed.fetch_add(1, std::memory_order_release);
}

void comm_idup_called(MPI_Comm comm) noexcept {
  // A communicator whose first plan was built keeps its registry (collc's own
  // duplicate) until it is freed, and collc issues nothing on it afterwards.
  if (comm == MPI_COMM_NULL || !config().enabled) return;
  try {
    comm_state& st = state_of(comm);
    if (!st.null_comm && !st.inter && !st.registry) st.program_idup = true;
  } catch (...) {  // the MPI library reports a bad communicator in its MPI_Comm_idup
  }
}

void op_freed(MPI_Op op) {
  auto& t = user_op_table();
  const std::lock_guard<std::mutex> lock(t.m);
  t.by_handle.erase(handle_id(op));
  g_ops_changed.fetch_add(1, std::memory_order_release);
}

// --- knobs agreed at MPI_Init ---------------------------------------------------------------

/// Called right after the MPI library's MPI_Init / MPI_Init_thread: every rank
/// must run with the same knobs (or the ranks would take different paths for
/// the same call and hang); a refused or differing variable stops the program
/// with the reason.
int settings_agree() {
  const settings_read& k = knobs();
  const settings& s = k.s;
  long long mine[8] = {s.enabled,
                       static_cast<long long>(s.collectives),
                       static_cast<long long>(s.from_call),
                       static_cast<long long>(s.cache_entries),
                       static_cast<long long>(s.cache_mib),
                       s.all_sizes,
                       k.refused.empty() ? 0 : 1,
                       0};
  long long lo[8], hi[8];
  PMPI_Allreduce(mine, lo, 8, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(mine, hi, 8, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  static const char* names[8] = {
      "COLLC_PMPI",          "COLLC_PMPI_COLLECTIVES", "COLLC_PMPI_FROM_CALL", "COLLC_PMPI_CACHE",
      "COLLC_PMPI_CACHE_MB", "COLLC_PMPI_SIZES",       "(a refused variable)", ""};
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!k.refused.empty()) {
    std::fprintf(stderr, "collc pmpi: rank %d: %s\n", rank, k.refused.c_str());
    std::fflush(stderr);
  }
  for (int i = 0; i < 7; ++i)
    if (lo[i] != hi[i] || hi[6] != 0) {
      if (rank == 0 && i < 6 && lo[i] != hi[i])
        std::fprintf(stderr, "collc pmpi: %s differs between ranks (from %lld to %lld): set it alike on every rank\n",
                     names[i], lo[i], hi[i]);
      std::fflush(stderr);
      PMPI_Abort(MPI_COMM_WORLD, 1);
      return MPI_ERR_OTHER;
    }
  return MPI_SUCCESS;
}

}  // namespace collc::pmpi
