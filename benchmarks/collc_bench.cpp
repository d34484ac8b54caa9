// collc-bench: an OSU-style sweep of message sizes that times collc's
// persistent plans and the MPI library's own collectives side by side, in
// alternation, on the same buffers, and checks every size's results first.
//
//   mpiexec -n 2 build/benchmarks/collc-bench --coll allreduce --max-bytes 64M --csv ar.csv
//
// Method (docs/benchmarks.md has the column-by-column description):
//  - per size: build the plan (timed: max over ranks), check collc's result,
//    MPI's blocking result and (where the library has them) MPI's persistent
//    result against a reference the harness computes itself; a wrong answer is
//    reported as WRONG and that size is not timed;
//  - timing: `warmup` untimed, then `reps` timed repetitions; one repetition
//    times `iters` back-to-back calls of each side, sides in alternation
//    (A B C, then C B A, ...), a yielding barrier before each side's batch; the time of
//    a repetition is the maximum over ranks (MPI_Reduce MAX);
//  - summary: min / median / max per side and the median of the per-repetition
//    ratio collc / MPI (pairs from the same repetition, so load changes on the
//    machine hit both sides of a pair alike);
//  - after timing, collc runs once more and is checked again (a plan must
//    stay right after many executions, not only on its first).
//
// With --describe the sweep's plans are only built and printed (the bound
// plan, plan::describe: placement, layout, chunking, transfers), rank 0's or
// with --describe=all every rank's, and nothing is timed.
#include <collc/algo/presets.hpp>
#include <collc/backend/mpi/calibrate.hpp>
#include <collc/ir/cost.hpp>
#include <collc/ir/text.hpp>
#include <collc/plan.hpp>

#include <mpi.h>
#if MPI_VERSION < 4 && defined(OPEN_MPI) && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI 4.1: MPIX_*_init (extension "pcollreq")
#endif

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

// Persistent collectives: standard from MPI 4.0 (MPICH 4), an MPIX_
// extension in Open MPI 4.1. Used only where the headers declare them.
#if MPI_VERSION >= 4
#define COLLC_BENCH_PERSISTENT 1
#define COLLC_BENCH_PCOLL(name) MPI_##name##_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define COLLC_BENCH_PERSISTENT 1
#define COLLC_BENCH_PCOLL(name) MPIX_##name##_init
#else
#define COLLC_BENCH_PERSISTENT 0
#endif

namespace {

using collc::collective;

std::string name_of(collective c) { return std::string(collc::to_string(c)); }

constexpr collective all_collectives[] = {collective::allreduce, collective::reduce_scatter, collective::allgather,
                                          collective::bcast, collective::reduce};

// --- command line -------------------------------------------------------------

/// The schedule to force: none (the plan's default), a factor set (the plan
/// decides recursive exchange or cyclic shift), or an explicit schedule.
using schedule_choice = std::variant<std::monostate, collc::factor_set, collc::algo::schedule>;

struct bench_options {
  std::vector<collective> colls = {collective::allreduce};
  std::string type = "double";
  std::string op = "sum";
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t step = 2;
  std::vector<std::size_t> sizes;  // explicit list, overrides min/max/step
  std::string schedule_text = "default";
  std::size_t chunk_bytes = 0;
  int reps = 11;
  int warmup = 2;
  std::size_t iters = 0;  // 0: auto
  double batch_s = 0.02;  // auto iters: a batch of the slowest side takes about this long
  bool rotate = false;
  std::size_t llc_bytes = 0;  // 0: from sysfs
  std::size_t offset = 0;     // bytes past a page boundary where every buffer starts
  bool persistent = true;
  int root = 0;
  std::string csv;
  bool corrupt = false;       // test hook: damage collc's result before the check
  bool show = false;          // print the lowered programs (diagnosis)
  bool calibrate = false;     // calibrate the cost model first; report its error per size
  bool describe = false;      // print rank 0's bound plans instead of timing (diagnosis)
  bool describe_all = false;  // --describe=all: every rank's, in rank order
  int only = -1;              // time only this side (0 collc, 1 MPI, 2 MPI persistent; diagnosis, e.g. under perf)
};

constexpr const char* usage_text =
    "usage: collc-bench [options]   (run under mpiexec)\n"
    "  --coll LIST        allreduce,reduce_scatter,allgather,bcast,reduce or all (default allreduce)\n"
    "  --type T           double | float | int32 | int64 (default double)\n"
    "  --op OP            sum | prod | min | max (default sum)\n"
    "  --min-bytes N      smallest message (default 8); suffixes K, M, G (binary)\n"
    "  --max-bytes N      largest message (default 64M)\n"
    "  --step F           size multiplier between sizes (default 2; OSU uses 2, 8 is a quick sweep)\n"
    "  --sizes LIST       explicit sizes, e.g. 8,4K,1M (overrides min/max/step)\n"
    "  --schedule S       default | a factor set (-2,2) | recexch{-2,2}[+fold] | cyclic{2,2} | ring |\n"
    "                     tree:K[xR] | tree:binomial | copyin | rabenseifner | recursive_doubling\n"
    "  --chunk-bytes N    collc::plan_options::chunk_bytes (default: the plan's)\n"
    "  --reps N           timed repetitions per side (default 11)\n"
    "  --warmup N         untimed repetitions before them (default 2)\n"
    "  --iters N          calls per repetition (default: 8 MiB / bytes within [2, 1000], and\n"
    "                     at most what the slowest side does in --batch-ms, default 20)\n"
    "  --rotate           rotate over a buffer pool of 2x the last-level cache\n"
    "  --llc-bytes N      last-level cache size (default: sysfs, else 32M)\n"
    "  --offset N         start every send and recv buffer N bytes past a page boundary (a\n"
    "                     multiple of 8 below 4096; default 0). malloc'd buffers of more than\n"
    "                     128 KiB start 16 bytes past one (glibc's mmap chunk header)\n"
    "  --no-persistent    skip MPI's persistent collectives\n"
    "  --root R           root of reduce and bcast (default 0)\n"
    "  --csv FILE         also write the results as CSV (an existing FILE is replaced only if\n"
    "                     collc-bench wrote it)\n"
    "  --show-programs    print each size's lowered programs (collc's text form) on stderr\n"
    "  --describe[=all]   print rank 0's bound plan (plan::describe: placement, layout, chunking,\n"
    "                     transfers) of each collective and size, with =all every rank's in rank\n"
    "                     order, and exit without timing\n"
    "  --only SIDE        time only collc, mpi or mpip (for profiling one side; no ratios)\n"
    "  --calibrate        measure the cost model first (collc::mpi::calibrate_report, nodes as\n"
    "                     plans see them: COLLC_RANKS_PER_NODE), print it as COLLC_MACHINE_MODEL,\n"
    "                     and after each collective the model's prediction of every size's plan\n"
    "                     (ir::predict of its programs, every execution) against the measurement\n";

struct usage_error {
  std::string message;
};

/// "4096", "4K", "4KiB", "64M", "1G" (binary multiples).
std::size_t parse_bytes(std::string_view text) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (ec != std::errc{} || end == text.data())
    throw usage_error{"cannot read a byte count from '" + std::string(text) + "'"};
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.remove_suffix(1);
  if (unit.size() == 2 && unit[1] == 'i') unit.remove_suffix(1);
  int shift = 0;
  if (unit == "K" || unit == "k")
    shift = 10;
  else if (unit == "M" || unit == "m")
    shift = 20;
  else if (unit == "G" || unit == "g")
    shift = 30;
  else if (!unit.empty())
    throw usage_error{"unknown unit in byte count '" + std::string(text) + "'"};
  return v << shift;
}

int parse_int(std::string_view text, const char* what, int lo) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < lo)
    throw usage_error{std::string(what) + " expects an integer >= " + std::to_string(lo) + ", got '" +
                      std::string(text) + "'"};
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const auto at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

collective parse_collective(std::string_view s) {
  for (collective c : all_collectives)
    if (s == collc::to_string(c)) return c;
  if (s == "reduce_scatter_block") return collective::reduce_scatter;
  throw usage_error{"unknown collective '" + std::string(s) +
                    "' (allreduce, reduce_scatter, allgather, bcast, reduce, all)"};
}

/// The schedule texts of collc::algo::schedule::to_string(), read back, plus
/// the presets that depend on P. collc has no schedule parser yet.
schedule_choice parse_schedule(std::string_view s, int P) {
  using collc::algo::schedule;
  const auto braces = [&](std::string_view prefix) -> std::optional<collc::factor_set> {
    if (!s.starts_with(prefix)) return std::nullopt;
    std::string_view rest = s.substr(prefix.size());
    if (rest.starts_with(":")) rest.remove_prefix(1);
    if (rest.ends_with("+fold")) rest.remove_suffix(5);
    return collc::factor_set::parse(rest);
  };
  if (s.empty() || s == "default") return std::monostate{};
  if (s == "ring") return schedule::ring();
  if (s == "copyin" || s == "copy_in") return schedule::copy_in();
  if (s == "rabenseifner") return collc::algo::rabenseifner(P);
  if (s == "recursive_doubling") return collc::algo::recursive_doubling(P);
  if (s.starts_with("tree:")) {
    const std::string_view arg = s.substr(5);
    const auto x = arg.find('x');
    const std::string_view k = arg.substr(0, x);
    const int arity = k == "binomial" ? 0 : parse_int(k, "--schedule tree:K", 0);
    const int roots = x == std::string_view::npos ? 1 : parse_int(arg.substr(x + 1), "--schedule tree:KxR", 1);
    return schedule::tree(arity, roots);
  }
  if (auto f = braces("recexch")) return schedule::recursive(*f, s.ends_with("+fold"));
  if (auto f = braces("cyclic")) return schedule::cyclic(*f);
  return collc::factor_set::parse(s);  // the plan picks the family
}

bench_options parse_args(int argc, char** argv) {
  bench_options o;
  for (int i = 1; i < argc; ++i) {
    // "--name value" or "--name=value" (the latter for values that start with '-').
    std::string_view a = argv[i];
    std::optional<std::string_view> inline_value;
    if (const auto eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    const auto value = [&]() -> std::string_view {
      if (inline_value) return *std::exchange(inline_value, std::nullopt);
      if (i + 1 >= argc) throw usage_error{std::string(a) + " needs a value"};
      return argv[++i];
    };
    if (a == "--coll") {
      const std::string_view v = value();
      o.colls.clear();
      if (v == "all")
        o.colls.assign(std::begin(all_collectives), std::end(all_collectives));
      else
        for (auto s : split(v, ',')) o.colls.push_back(parse_collective(s));
    } else if (a == "--type") {
      o.type = value();
    } else if (a == "--op") {
      o.op = value();
    } else if (a == "--min-bytes") {
      o.min_bytes = parse_bytes(value());
    } else if (a == "--max-bytes") {
      o.max_bytes = parse_bytes(value());
    } else if (a == "--step") {
      o.step = static_cast<std::size_t>(parse_int(value(), "--step", 2));
    } else if (a == "--sizes") {
      for (auto s : split(value(), ',')) o.sizes.push_back(parse_bytes(s));
    } else if (a == "--schedule") {
      o.schedule_text = value();
    } else if (a == "--chunk-bytes") {
      o.chunk_bytes = parse_bytes(value());
    } else if (a == "--reps") {
      o.reps = parse_int(value(), "--reps", 1);
    } else if (a == "--warmup") {
      o.warmup = parse_int(value(), "--warmup", 0);
    } else if (a == "--iters") {
      o.iters = static_cast<std::size_t>(parse_int(value(), "--iters", 1));
    } else if (a == "--batch-ms") {
      o.batch_s = parse_int(value(), "--batch-ms", 1) / 1000.0;
    } else if (a == "--rotate") {
      o.rotate = true;
    } else if (a == "--llc-bytes") {
      o.llc_bytes = parse_bytes(value());
    } else if (a == "--offset") {
      const std::string_view v = value();
      const int off = parse_int(v, "--offset", 0);
      if (off % 8 != 0 || off >= 4096)
        throw usage_error{"--offset expects a multiple of 8 below 4096 (bytes past a page boundary), got '" +
                          std::string(v) + "'"};
      o.offset = static_cast<std::size_t>(off);
    } else if (a == "--no-persistent") {
      o.persistent = false;
    } else if (a == "--root") {
      o.root = parse_int(value(), "--root", 0);
    } else if (a == "--csv") {
      o.csv = value();
    } else if (a == "--only") {
      const std::string_view v = value();
      o.only = v == "collc" ? 0 : v == "mpi" ? 1 : v == "mpip" ? 2 : -2;
      if (o.only == -2) throw usage_error{"--only expects collc, mpi or mpip, got '" + std::string(v) + "'"};
    } else if (a == "--show-programs") {
      o.show = true;
    } else if (a == "--calibrate") {
      o.calibrate = true;
    } else if (a == "--describe") {
      // The value is optional, so it is only read after '=': "--describe all"
      // would be the option and then an unknown argument.
      o.describe = true;
      if (inline_value) {
        const std::string_view v = *std::exchange(inline_value, std::nullopt);
        if (v != "all") throw usage_error{"--describe expects no value or 'all', got '" + std::string(v) + "'"};
        o.describe_all = true;
      }
    } else if (a == "--corrupt-for-test") {
      o.corrupt = true;
    } else if (a == "--help" || a == "-h") {
      throw usage_error{""};
    } else {
      throw usage_error{"unknown option '" + std::string(a) + "'"};
    }
    if (inline_value) throw usage_error{std::string(a) + " takes no value"};
  }
  if (o.type != "double" && o.type != "float" && o.type != "int32" && o.type != "int64")
    throw usage_error{"unknown --type '" + o.type + "' (double, float, int32, int64)"};
  if (o.op != "sum" && o.op != "prod" && o.op != "min" && o.op != "max")
    throw usage_error{"unknown --op '" + o.op + "' (sum, prod, min, max)"};
  if (o.sizes.empty()) {
    if (o.min_bytes == 0 || o.min_bytes > o.max_bytes)
      throw usage_error{"need 0 < --min-bytes (" + std::to_string(o.min_bytes) + ") <= --max-bytes (" +
                        std::to_string(o.max_bytes) + ")"};
    for (std::size_t b = o.min_bytes; b <= o.max_bytes; b *= o.step) o.sizes.push_back(b);
  }
  return o;
}

// --- machine facts ------------------------------------------------------------

/// Size of the highest-level cache of cpu0 from sysfs; 32 MiB if unreadable.
std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  int best_level = -1;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_in(dir + "level"), size_in(dir + "size"), type_in(dir + "type");
    int level = 0;
    std::string size, type;
    if (!(level_in >> level) || !(size_in >> size)) continue;
    type_in >> type;
    if (type == "Instruction") continue;
    std::size_t bytes = 0;
    try {
      bytes = parse_bytes(size);
    } catch (const usage_error&) {
      continue;
    }
    if (level > best_level || (level == best_level && bytes > best)) best = bytes, best_level = level;
  }
  return best > 0 ? best : std::size_t{32} << 20;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

std::string library_name() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<std::size_t>(len));
  s = s.substr(0, s.find_first_of("\n,"));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  if (s.starts_with("MPICH Version:")) s = "MPICH " + s.substr(s.find_first_not_of(" \t", 14));
  return s;
}

/// Page-aligned memory, first touched by the rank that owns it.
struct aligned_free {
  void operator()(std::byte* p) const { ::operator delete (p, std::align_val_t{4096}); }
};
using byte_buffer = std::unique_ptr<std::byte, aligned_free>;
byte_buffer allocate(std::size_t n) {
  return byte_buffer(static_cast<std::byte*>(::operator new (std::max<std::size_t>(n, 64), std::align_val_t{4096})));
}

/// Single-core memcpy bandwidth (bytes copied per second) of a copy larger
/// than the last-level cache, measured by rank 0 while the others sleep, so
/// that on an oversubscribed node no spinning rank shares its core.
double memcpy_bandwidth(MPI_Comm comm, std::size_t llc) {
  int me = 0;
  MPI_Comm_rank(comm, &me);
  double bw = 0;
  MPI_Barrier(comm);
  if (me == 0) {
    const std::size_t n = std::max(std::size_t{64} << 20, 2 * llc);
    byte_buffer a = allocate(n), b = allocate(n);
    std::memset(a.get(), 1, n);
    std::memset(b.get(), 2, n);
    double best = 1e30;
    for (int r = 0; r < 6; ++r) {
      const double t0 = MPI_Wtime();
      std::memcpy(b.get(), a.get(), n);
      best = std::min(best, MPI_Wtime() - t0);
      a.swap(b);
    }
    bw = static_cast<double>(n) / best;
    int size = 1;
    MPI_Comm_size(comm, &size);
    for (int r = 1; r < size; ++r) MPI_Send(&bw, 1, MPI_DOUBLE, r, 0, comm);
  } else {
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Irecv(&bw, 1, MPI_DOUBLE, 0, 0, comm, &rq);
    for (int done = 0; !done;) {
      MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return bw;
}

/// A barrier that yields the core while it waits. MPICH polls without
/// yielding, so on an oversubscribed node a rank spinning in MPI_Barrier
/// holds its core for a whole scheduler tick while a rank sharing that core
/// still has to finish its batch: every timed batch would then end with a
/// tick (milliseconds) that neither side's own calls cause.
void yielding_barrier(MPI_Comm comm) {
  MPI_Request rq = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm, &rq);
  for (int done = 0;;) {
    MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::yield();
  }
}

// --- types, operators, reference values ------------------------------------

template <class T>
MPI_Datatype mpi_type() {
  if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return MPI_INT32_T;
  else
    return MPI_INT64_T;
}

template <class Op>
MPI_Op mpi_op() {
  if constexpr (std::is_same_v<Op, collc::prod>)
    return MPI_PROD;
  else if constexpr (std::is_same_v<Op, collc::min>)
    return MPI_MIN;
  else if constexpr (std::is_same_v<Op, collc::max>)
    return MPI_MAX;
  else
    return MPI_SUM;
}

/// Input element `i` of rank `r`: small integers, so that every partial
/// result is exact in every type and MPI, collc and the reference must
/// agree bitwise whatever their association order. Products use +-1 and 2
/// (at most about P/5 factors of 2); min / max spread over [-50, 50].
template <class T, class Op>
T input(int r, std::size_t i) {
  if constexpr (std::is_same_v<Op, collc::prod>) {
    const std::size_t k = (static_cast<std::size_t>(r) + i) % 5;
    return static_cast<T>(k == 0 ? 2 : k == 1 ? -1 : 1);
  } else if constexpr (std::is_same_v<Op, collc::min> || std::is_same_v<Op, collc::max>) {
    return static_cast<T>(static_cast<long>((static_cast<std::size_t>(r) * 37 + i * 11) % 101) - 50);
  } else {
    return static_cast<T>(r % 5 + 1 + static_cast<int>(i % 7));
  }
}

/// The reduction of element `i` over ranks 0..P-1, computed here directly.
template <class T, class Op>
T reduced(int P, std::size_t i) {
  T acc = input<T, Op>(0, i);
  for (int r = 1; r < P; ++r) {
    const T v = input<T, Op>(r, i);
    if constexpr (std::is_same_v<Op, collc::prod>)
      acc = static_cast<T>(acc * v);
    else if constexpr (std::is_same_v<Op, collc::min>)
      acc = v < acc ? v : acc;
    else if constexpr (std::is_same_v<Op, collc::max>)
      acc = acc < v ? v : acc;
    else
      acc = static_cast<T>(acc + v);
  }
  return acc;
}

/// Element counts of one call: `count` in MPI's meaning (per rank, or per
/// block for reduce_scatter_block / allgather), and of each buffer.
struct layout {
  std::size_t count = 0, send = 0, recv = 0, bytes = 0;
};

/// `bytes` is the message size: per rank for allreduce, reduce and bcast; all
/// P blocks for reduce_scatter (send) and allgather (recv), as nccl-tests
/// count them, so that memory per rank stays about `bytes` at any P (rounded
/// down to whole blocks, and up to one element per block; l.bytes is exact).
layout layout_for(collective c, std::size_t bytes, std::size_t elem, int P) {
  layout l;
  const auto P_ = static_cast<std::size_t>(P);
  switch (c) {
    case collective::reduce_scatter:
      l.count = std::max<std::size_t>(1, bytes / elem / P_);  // at least one element per block
      l.send = l.count * P_;
      l.recv = l.count;
      l.bytes = l.send * elem;
      break;
    case collective::allgather:
      l.count = std::max<std::size_t>(1, bytes / elem / P_);
      l.send = l.count;
      l.recv = l.count * P_;
      l.bytes = l.recv * elem;
      break;
    case collective::bcast:
      l.count = bytes / elem;
      l.recv = l.count;
      l.bytes = l.count * elem;
      break;
    default:
      l.count = bytes / elem;
      l.send = l.recv = l.count;
      l.bytes = l.count * elem;
      break;
  }
  return l;
}

/// Bus bandwidth factor (nccl-tests): bytes each rank must move per byte of
/// message for a bandwidth-optimal algorithm.
double bus_factor(collective c, int P) {
  const double p = P;
  switch (c) {
    case collective::allreduce: return 2 * (p - 1) / p;
    case collective::reduce_scatter:
    case collective::allgather: return (p - 1) / p;
    default: return 1;
  }
}

// --- buffers ----------------------------------------------------------------------

/// `slots` buffers of `elems` elements each, every one on its own cache lines,
/// starting `offset` bytes past a page boundary (--offset: a user's malloc'd
/// buffer is rarely page-aligned, and copies into shared memory are sensitive
/// to the source's offset within a cache line).
template <class T>
struct buffer_pool {
  std::size_t elems = 0, stride = 0, slots = 0, offset = 0;
  byte_buffer mem;

  /// Bytes from one buffer to the next: whole lines, or whole pages with an offset.
  static std::size_t stride_for(std::size_t n, std::size_t off) {
    const std::size_t unit = off == 0 ? 64 : 4096;
    return (n * sizeof(T) + off + unit - 1) / unit * unit;
  }
  buffer_pool(std::size_t n, std::size_t k, std::size_t off)
      : elems(n), stride(stride_for(n, off)), slots(k), offset(off) {
    mem = allocate(std::max<std::size_t>(stride * slots, 64));
  }
  T* at(std::size_t slot) {
    return elems == 0 ? nullptr : reinterpret_cast<T*>(mem.get() + stride * slot + offset);
  }
};

// --- one row of results -------------------------------------------------------------

struct summary {
  double min = NAN, med = NAN, max = NAN;
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

summary summarize(const std::vector<double>& v) {
  if (v.empty()) return {};
  return {*std::min_element(v.begin(), v.end()), median(v), *std::max_element(v.begin(), v.end())};
}

struct row {
  collective coll = collective::allreduce;
  layout lay;
  std::size_t iters = 0, slots = 1;
  std::string schedule = "-";
  std::string check = "ok";
  summary collc_t, mpi_t, mpip_t;  // seconds per call
  double ratio = NAN, ratio_p = NAN, ratio_best = NAN;
  double setup_s = NAN;
  double predicted_s = NAN;  // --calibrate: the model's time of the plan's programs
  std::size_t shm = 0, scratch = 0, stage = 0;
  double load = NAN;
};

// --- the sweep ------------------------------------------------------------------------

/// Builds the plan of collective `c` with the chosen schedule and options.
template <class T, class Op>
collc::plan<T, Op> build_plan(collective c, MPI_Comm comm, std::size_t count, int root, const schedule_choice& s,
                              const collc::plan_options& po) {
  return std::visit(
      [&](const auto& sched) -> collc::plan<T, Op> {
        const auto make = [&](auto&&... extra) -> collc::plan<T, Op> {
          switch (c) {
            case collective::allreduce: return collc::make_allreduce<T, Op>(comm, count, po, extra...);
            case collective::reduce_scatter: return collc::make_reduce_scatter<T, Op>(comm, count, po, extra...);
            case collective::reduce: return collc::make_reduce<T, Op>(comm, count, root, po, extra...);
            case collective::allgather:
              if constexpr (std::is_same_v<Op, collc::plus>) return collc::make_allgather<T>(comm, count, po, extra...);
              break;
            case collective::bcast:
              if constexpr (std::is_same_v<Op, collc::plus>)
                return collc::make_bcast<T>(comm, count, root, po, extra...);
              break;
          }
          throw collc::error(collc::errc::invalid_argument, "collc-bench: " + name_of(c) + " plans carry no operator");
        };
        if constexpr (std::is_same_v<std::decay_t<decltype(sched)>, std::monostate>)
          return make();
        else
          return make(sched);
      },
      s);
}

struct context {
  MPI_Comm comm = MPI_COMM_NULL;
  int me = 0, P = 1;
  bench_options opt;
  schedule_choice sched;
  std::size_t llc = 0;
  bool persistent = false;
  std::optional<collc::ir::machine_model> model;  // --calibrate
  std::FILE* csv = nullptr;                       // --csv, rank 0's (open_csv)
};

/// The model's seconds for one call of `p`: every execution's program.
template <class T, class Op>
double predicted_call(const collc::plan<T, Op>& p, const collc::ir::machine_model& m) {
  const auto& progs = p.programs();
  if (progs.empty()) return 0;
  const std::size_t execs = p.executions_per_call();
  const double chunk = collc::ir::predict(progs.front(), m, sizeof(T));
  // [0] every full chunk, [1] the tail when there is one (engine.hpp).
  if (progs.size() == 1) return static_cast<double>(execs) * chunk;
  return static_cast<double>(execs - 1) * chunk + collc::ir::predict(progs.back(), m, sizeof(T));
}

/// Message of the first difference on this rank, or "".
template <class T>
std::string first_difference(const char* who, const T* got, const std::vector<T>& want, int me) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return std::string(who) + " rank " + std::to_string(me) + " element " + std::to_string(i) + ": got " +
             std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
  return "";
}

template <class T, class Op>
row run_size(const context& cx, collective c, std::size_t bytes) {
  row out;
  out.coll = c;
  out.lay = layout_for(c, bytes, sizeof(T), cx.P);
  const layout& L = out.lay;
  const int root = cx.opt.root;
  if (L.count == 0) {
    out.check = "skipped (count 0)";
    return out;
  }
  if (cx.me == 0) out.load = load_average();

  // Setup, timed; every rank builds the same plans in the same order.
  collc::plan_options po;
  po.chunk_bytes = cx.opt.chunk_bytes;
  std::optional<collc::plan<T, Op>> plan;
  MPI_Barrier(cx.comm);
  double t0 = MPI_Wtime();
  try {
    plan.emplace(build_plan<T, Op>(c, cx.comm, L.count, root, cx.sched, po));
  } catch (const collc::error& e) {
    // Plan errors are agreed on: every rank throws the same one.
    out.check = std::string("setup error: ") + e.what();
    return out;
  }
  double setup = MPI_Wtime() - t0;
  MPI_Reduce(&setup, &out.setup_s, 1, MPI_DOUBLE, MPI_MAX, 0, cx.comm);
  out.schedule = plan->schedule_name();
  if (cx.model) out.predicted_s = predicted_call(*plan, *cx.model);
  out.shm = plan->shm_bytes_per_rank();
  out.scratch = plan->scratch_bytes_per_rank();
  out.stage = plan->stage_bytes_per_rank();
  if (cx.opt.show && cx.me == 0)
    for (const auto& prog : plan->programs())
      std::fprintf(stderr, "# %s %zu B: chunk of %zu elements, %zu executions per call\n%s\n", name_of(c).c_str(),
                   L.bytes, plan->chunk_elements(), plan->executions_per_call(), collc::ir::to_text(prog).c_str());

  // Buffers: one pair, or with --rotate enough pairs to cover 2x the LLC.
  const std::size_t pair_bytes =
      buffer_pool<T>::stride_for(L.send, cx.opt.offset) + buffer_pool<T>::stride_for(L.recv, cx.opt.offset);
  std::size_t slots = 1;
  if (cx.opt.rotate) slots = std::max<std::size_t>(2, (2 * cx.llc + pair_bytes - 1) / pair_bytes);
  out.slots = slots;
  buffer_pool<T> send(L.send, slots, cx.opt.offset), recv(L.recv, slots, cx.opt.offset);
  const bool bcast = c == collective::bcast;
  for (std::size_t s = 0; s < slots; ++s) {
    T* in = bcast ? recv.at(s) : send.at(s);
    const std::size_t n = bcast ? L.recv : L.send;
    for (std::size_t i = 0; i < n; ++i) {
      // reduce_scatter: block b of rank r holds the elements b*count.. of r.
      in[i] = input<T, Op>(bcast ? root : cx.me, i);
    }
    if (!bcast) std::fill_n(recv.at(s), L.recv, T(0));
  }

  // Reference for this rank.
  std::vector<T> want(L.recv);
  const bool significant = c != collective::reduce || cx.me == root;
  for (std::size_t i = 0; i < L.recv; ++i) {
    switch (c) {
      case collective::allreduce:
      case collective::reduce: want[i] = reduced<T, Op>(cx.P, i); break;
      case collective::reduce_scatter:
        want[i] = reduced<T, Op>(cx.P, static_cast<std::size_t>(cx.me) * L.count + i);
        break;
      case collective::allgather: want[i] = input<T, Op>(static_cast<int>(i / L.count), i % L.count); break;
      case collective::bcast: want[i] = input<T, Op>(root, i); break;
    }
  }
  const T sentinel = static_cast<T>(-7777);
  const auto reset_recv = [&](std::size_t s) {
    if (!bcast || cx.me != root) std::fill_n(recv.at(s), L.recv, sentinel);
  };

  // The sides.
  const MPI_Datatype dt = mpi_type<T>();
  const MPI_Op mop = mpi_op<Op>();
  const int n = static_cast<int>(L.count);
  const auto run_collc = [&](std::size_t s) {
    if (bcast)
      (*plan)(collc::in_place, recv.at(s));
    else
      (*plan)(send.at(s), recv.at(s));
  };
  const auto run_mpi = [&](std::size_t s) {
    switch (c) {
      case collective::allreduce: MPI_Allreduce(send.at(s), recv.at(s), n, dt, mop, cx.comm); break;
      case collective::reduce_scatter: MPI_Reduce_scatter_block(send.at(s), recv.at(s), n, dt, mop, cx.comm); break;
      case collective::allgather: MPI_Allgather(send.at(s), n, dt, recv.at(s), n, dt, cx.comm); break;
      case collective::bcast: MPI_Bcast(recv.at(s), n, dt, root, cx.comm); break;
      case collective::reduce: MPI_Reduce(send.at(s), recv.at(s), n, dt, mop, root, cx.comm); break;
    }
  };
  // Persistent requests are bound to buffers: one per slot, so only for
  // pools of moderate size (with --rotate and small messages, none).
  std::vector<MPI_Request> preq;
#if COLLC_BENCH_PERSISTENT
  if (cx.persistent && slots <= 1024) {
    preq.assign(slots, MPI_REQUEST_NULL);
    for (std::size_t s = 0; s < slots; ++s) {
      MPI_Request* rq = &preq[s];
      switch (c) {
        case collective::allreduce:
          COLLC_BENCH_PCOLL(Allreduce)(send.at(s), recv.at(s), n, dt, mop, cx.comm, MPI_INFO_NULL, rq);
          break;
        case collective::reduce_scatter:
          COLLC_BENCH_PCOLL(Reduce_scatter_block)(send.at(s), recv.at(s), n, dt, mop, cx.comm, MPI_INFO_NULL, rq);
          break;
        case collective::allgather:
          COLLC_BENCH_PCOLL(Allgather)(send.at(s), n, dt, recv.at(s), n, dt, cx.comm, MPI_INFO_NULL, rq);
          break;
        case collective::bcast: COLLC_BENCH_PCOLL(Bcast)(recv.at(s), n, dt, root, cx.comm, MPI_INFO_NULL, rq); break;
        case collective::reduce:
          COLLC_BENCH_PCOLL(Reduce)(send.at(s), recv.at(s), n, dt, mop, root, cx.comm, MPI_INFO_NULL, rq);
          break;
      }
    }
  }
#endif
  const bool with_p = !preq.empty();
  const auto run_mpip = [&](std::size_t s) {
    MPI_Start(&preq[s]);
    MPI_Wait(&preq[s], MPI_STATUS_IGNORE);
  };

  // Check every side on slot 0 against the reference, and agree on the verdict.
  std::string diff[3];
  reset_recv(0);
  run_collc(0);
  if (cx.opt.corrupt && L.recv > 0 && significant)
    recv.at(0)[L.recv - 1] = static_cast<T>(recv.at(0)[L.recv - 1] + T(1));
  if (significant) diff[0] = first_difference("collc", recv.at(0), want, cx.me);
  reset_recv(0);
  run_mpi(0);
  if (significant) diff[1] = first_difference("MPI", recv.at(0), want, cx.me);
  if (with_p) {
    reset_recv(0);
    run_mpip(0);
    if (significant) diff[2] = first_difference("MPI persistent", recv.at(0), want, cx.me);
  }
  int ok[3] = {diff[0].empty(), diff[1].empty(), diff[2].empty()};
  MPI_Allreduce(MPI_IN_PLACE, ok, 3, MPI_INT, MPI_MIN, cx.comm);
  for (const auto& d : diff)
    if (!d.empty()) std::fprintf(stderr, "collc-bench: %s %zu B: %s\n", name_of(c).c_str(), L.bytes, d.c_str());
  if (!ok[0])
    out.check = "WRONG";
  else if (!ok[1] || !ok[2])
    out.check = std::string(!ok[1] ? "MPI" : "MPI persistent") + " wrong (size not timed)";

  const auto free_requests = [&] {
    for (auto& rq : preq) MPI_Request_free(&rq);
  };
  if (!ok[0] || !ok[1] || !ok[2]) {  // a wrong answer is never timed
    free_requests();
    return out;
  }

  // Timing, in alternation.
  const int sides = with_p ? 3 : 2;
  const auto run_side = [&](int side, std::size_t s) {
    if (side == 0)
      run_collc(s);
    else if (side == 1)
      run_mpi(s);
    else
      run_mpip(s);
  };
  std::size_t iters = cx.opt.iters;
  if (iters == 0) {
    // As many calls as 8 MiB of messages, at most 1000, and at most what the
    // slowest side does in --batch-ms (oversubscribed runs can take
    // milliseconds per call when a library polls without yielding).
    iters = std::clamp<std::size_t>((std::size_t{8} << 20) / std::max<std::size_t>(L.bytes, 1), 2, 1000);
    double slowest = 0;
    for (int side = 0; side < sides; ++side) {
      if (cx.opt.only >= 0 && side != cx.opt.only) continue;
      double best = 1e30;
      for (int k = 0; k < 2; ++k) {
        yielding_barrier(cx.comm);
        const double start = MPI_Wtime();
        run_side(side, 0);
        best = std::min(best, MPI_Wtime() - start);
      }
      slowest = std::max(slowest, best);
    }
    MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, cx.comm);
    const double fit = cx.opt.batch_s / std::max(slowest, 1e-9);
    iters = std::clamp<std::size_t>(static_cast<std::size_t>(fit), 1, iters);
  }
  out.iters = iters;
  const int reps = cx.opt.reps, total = cx.opt.warmup + cx.opt.reps;
  std::vector<double> t(static_cast<std::size_t>(3 * reps), 0.0);  // [side * reps + rep]
  std::size_t next = 0;                                            // the rotation continues across sides
  for (int rep = 0; rep < total; ++rep) {
    for (int k = 0; k < sides; ++k) {
      const int side = rep % 2 == 0 ? k : sides - 1 - k;  // A B C, then C B A
      if (cx.opt.only >= 0 && side != cx.opt.only) continue;
      yielding_barrier(cx.comm);
      const double start = MPI_Wtime();
      for (std::size_t it = 0; it < iters; ++it) run_side(side, next++ % slots);
      const double per_call = (MPI_Wtime() - start) / static_cast<double>(iters);
      if (rep >= cx.opt.warmup) t[static_cast<std::size_t>(side * reps + rep - cx.opt.warmup)] = per_call;
    }
  }
  std::vector<double> tmax(t.size());
  MPI_Reduce(t.data(), tmax.data(), static_cast<int>(t.size()), MPI_DOUBLE, MPI_MAX, 0, cx.comm);

  // Still right after many executions? Every side: a persistent request that
  // stopped moving data after its first start would otherwise be timed.
  const char* who[3] = {"collc", "MPI", "MPI persistent"};
  int again[3] = {1, 1, 1};
  for (int side = 0; side < sides; ++side) {
    reset_recv(0);
    run_side(side, 0);
    if (significant) {
      const std::string d = first_difference(who[side], recv.at(0), want, cx.me);
      if (!d.empty())
        std::fprintf(stderr, "collc-bench: %s %zu B after timing: %s\n", name_of(c).c_str(), L.bytes, d.c_str());
      again[side] = d.empty();
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, again, 3, MPI_INT, MPI_MIN, cx.comm);
  if (!again[0])
    out.check = "WRONG after timing";
  else if (!again[1] || !again[2])
    out.check = std::string(who[again[1] ? 2 : 1]) + " wrong after timing (its times are not reported)";
  free_requests();

  if (cx.me == 0) {
    const auto side_of = [&](int s) {
      return std::vector<double>(tmax.begin() + s * reps, tmax.begin() + (s + 1) * reps);
    };
    const auto a = side_of(0), b = side_of(1), p = side_of(2);
    // A side whose result went wrong is not timed as a success.
    const auto timed = [&](int s) { return (cx.opt.only < 0 || cx.opt.only == s) && again[s] && s < sides; };
    const bool ta = timed(0), tb = timed(1), tp = timed(2);
    if (ta) out.collc_t = summarize(a);
    if (tb) out.mpi_t = summarize(b);
    if (tp) out.mpip_t = summarize(p);
    std::vector<double> r, rp, rb;
    for (int i = 0; i < reps && ta; ++i) {
      if (tb) r.push_back(a[i] / b[i]);
      if (tp) rp.push_back(a[i] / p[i]);
      if (tb || tp) rb.push_back(a[i] / std::min(tb ? b[i] : INFINITY, tp ? p[i] : INFINITY));
    }
    out.ratio = median(r);
    out.ratio_p = median(rp);
    out.ratio_best = median(rb);
  }
  return out;
}

// --- output ---------------------------------------------------------------------------

std::string human_bytes(std::size_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 3 && std::fmod(v, 1024) == 0) v /= 1024, ++u;
  char s[32];
  std::snprintf(s, sizeof(s), "%g %s", v, unit[u]);
  return s;
}

struct run_facts {
  std::string library;
  int P = 1;
  std::size_t llc = 0;
  double memcpy_bw = 0;
  double setup_first = NAN, setup_second = NAN;
  std::string type, op;
  bool rotate = false;
  std::size_t offset = 0;
};

void print_header(const run_facts& f, collective c, bool with_p) {
  std::printf("\n# %s  %s %s  P=%d  %s  rotate=%s  offset %zu  LLC %s  memcpy %.2f GB/s  load %.2f\n",
              name_of(c).c_str(), f.type.c_str(), f.op.c_str(), f.P, f.library.c_str(), f.rotate ? "on" : "off",
              f.offset, human_bytes(f.llc).c_str(), f.memcpy_bw / 1e9, load_average());
  std::printf("%10s %5s | %9s %9s %9s | %9s %9s %9s |%s %6s %6s | %7s %7s | %8s %8s | %-16s %s\n", "bytes", "iters",
              "collc_us", "min", "max", "mpi_us", "min", "max", with_p ? "  mpip_us" : "", "ratio", "best", "bus_c",
              "bus_m", "setup_us", "mem_KiB", "schedule", "check");
}

void print_row(const row& r, int P, bool with_p) {
  const double f = bus_factor(r.coll, P) * static_cast<double>(r.lay.bytes) / 1e9;
  std::printf("%10zu %5zu | %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f |", r.lay.bytes, r.iters, r.collc_t.med * 1e6,
              r.collc_t.min * 1e6, r.collc_t.max * 1e6, r.mpi_t.med * 1e6, r.mpi_t.min * 1e6, r.mpi_t.max * 1e6);
  if (with_p) std::printf(" %8.2f", r.mpip_t.med * 1e6);
  std::printf(" %6.3f %6.3f | %7.2f %7.2f | %8.1f %8.1f | %-16s %s\n", r.ratio, r.ratio_best, f / r.collc_t.med,
              f / r.mpi_t.med, r.setup_s * 1e6, static_cast<double>(r.shm + r.scratch + r.stage) / 1024.0,
              r.schedule.c_str(), r.check.c_str());
  std::fflush(stdout);
}

constexpr const char* csv_header =
    "library,P,coll,type,op,rotate,schedule_req,schedule,bytes,count,iters,reps,slots,"
    "collc_min_us,collc_med_us,collc_max_us,mpi_min_us,mpi_med_us,mpi_max_us,mpip_min_us,mpip_med_us,mpip_max_us,"
    "ratio_med,ratio_p_med,ratio_best_med,collc_busbw_GBs,mpi_busbw_GBs,memcpy_GBs,setup_us,setup_first_us,"
    "setup_second_us,shm_bytes,scratch_bytes,stage_bytes,load1,check,offset\n";

void write_csv_row(std::FILE* out, const run_facts& f, const bench_options& o, const row& r) {
  const double bus = bus_factor(r.coll, f.P) * static_cast<double>(r.lay.bytes) / 1e9;
  std::string check = r.check;
  std::replace(check.begin(), check.end(), ',', ';');
  std::replace(check.begin(), check.end(), '"', '\'');
  std::fprintf(out,
               "\"%s\",%d,%s,%s,%s,%d,\"%s\",\"%s\",%zu,%zu,%zu,%d,%zu,"
               "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,"
               "%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.1f,%.1f,%.1f,%zu,%zu,%zu,%.2f,\"%s\",%zu\n",
               f.library.c_str(), f.P, name_of(r.coll).c_str(), f.type.c_str(), f.op.c_str(), f.rotate ? 1 : 0,
               o.schedule_text.c_str(), r.schedule.c_str(), r.lay.bytes, r.lay.count, r.iters, o.reps, r.slots,
               r.collc_t.min * 1e6, r.collc_t.med * 1e6, r.collc_t.max * 1e6, r.mpi_t.min * 1e6, r.mpi_t.med * 1e6,
               r.mpi_t.max * 1e6, r.mpip_t.min * 1e6, r.mpip_t.med * 1e6, r.mpip_t.max * 1e6, r.ratio, r.ratio_p,
               r.ratio_best, bus / r.collc_t.med, bus / r.mpi_t.med, f.memcpy_bw / 1e9, r.setup_s * 1e6,
               f.setup_first * 1e6, f.setup_second * 1e6, r.shm, r.scratch, r.stage, r.load, check.c_str(), f.offset);
  std::fflush(out);
}

/// Setup time (max over ranks) of the first plan on a fresh communicator
/// (median over 9 communicators, duplicated and split in turn) and of the
/// plans of the same shape built while it lives (median of 5 on each).
template <class T, class Op>
void setup_times(const context& cx, run_facts& f) {
  collc::plan_options po;
  po.chunk_bytes = cx.opt.chunk_bytes;
  const std::size_t count = std::max<std::size_t>(1, cx.opt.sizes.front() / sizeof(T));
  std::vector<double> first, later;
  for (int c = 0; c < 9; ++c) {
    MPI_Comm fresh = MPI_COMM_NULL;
    if (c % 2 == 0)
      MPI_Comm_dup(cx.comm, &fresh);
    else
      MPI_Comm_split(cx.comm, 0, cx.me, &fresh);
    {
      // Kept alive together: a communicator's shared state lives as long as
      // some plan on it does, so only the first of these pays for creating it.
      std::vector<collc::plan<T, Op>> plans;
      for (int k = 0; k < 6; ++k) {
        MPI_Barrier(fresh);
        const double t0 = MPI_Wtime();
        plans.push_back(collc::make_allreduce<T, Op>(fresh, count, po));
        double dt = MPI_Wtime() - t0, mx = 0;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, fresh);
        (k == 0 ? first : later).push_back(mx);
      }
    }
    MPI_Comm_free(&fresh);
  }
  f.setup_first = median(first);
  f.setup_second = median(later);
}

/// Every rank's `text` on rank 0, in rank order (nothing on the others).
std::vector<std::string> gather_texts(MPI_Comm comm, const std::string& text) {
  int me = 0, P = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &P);
  const int n = static_cast<int>(text.size());
  std::vector<int> sizes(me == 0 ? static_cast<std::size_t>(P) : 0), at(sizes.size());
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm);
  std::string all;
  if (me == 0) {
    int total = 0;
    for (int r = 0; r < P; ++r) {
      at[static_cast<std::size_t>(r)] = total;
      total += sizes[static_cast<std::size_t>(r)];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), at.data(), MPI_CHAR, 0, comm);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    out.push_back(all.substr(static_cast<std::size_t>(at[r]), static_cast<std::size_t>(sizes[r])));
  return out;
}

/// --describe: the bound plan of every collective and size of the sweep,
/// built as run_size() builds it, printed by rank 0 (rank 0's, or every
/// rank's in rank order); nothing is timed. Fails if a plan cannot be built.
template <class T, class Op>
int describe_plans(const context& cx) {
  collc::plan_options po;
  po.chunk_bytes = cx.opt.chunk_bytes;
  int failures = 0;
  for (collective c : cx.opt.colls) {
    for (std::size_t bytes : cx.opt.sizes) {
      const layout L = layout_for(c, bytes, sizeof(T), cx.P);
      if (cx.me == 0) std::printf("# %s %zu B (count %zu)\n", name_of(c).c_str(), L.bytes, L.count);
      if (L.count == 0) {
        if (cx.me == 0) std::printf("skipped (count 0)\n");
        continue;
      }
      std::string text;
      try {
        // Plan errors are agreed on: every rank skips the gather alike.
        text = (c == collective::allgather || c == collective::bcast)
                   ? build_plan<T, collc::plus>(c, cx.comm, L.count, cx.opt.root, cx.sched, po).describe()
                   : build_plan<T, Op>(c, cx.comm, L.count, cx.opt.root, cx.sched, po).describe();
      } catch (const collc::error& e) {
        if (cx.me == 0) std::printf("setup error: %s\n", e.what());  // as the sweep's check column
        ++failures;
        continue;
      }
      if (cx.opt.describe_all) {
        for (const auto& t : gather_texts(cx.comm, text)) std::printf("%s\n", t.c_str());
      } else if (cx.me == 0) {
        std::printf("%s\n", text.c_str());
      }
      std::fflush(stdout);
    }
  }
  return failures == 0 ? 0 : 1;
}

/// --calibrate: the model's prediction of each size against collc's median.
void print_model_error(collective c, const std::vector<row>& rows) {
  std::printf("\n# model error, %s (predicted: ir::predict of the plan's programs with the calibrated model)\n",
              std::string(collc::to_string(c)).c_str());
  std::printf("%10s | %-20s | %10s %10s | %7s\n", "bytes", "schedule", "collc_us", "model_us", "model/m");
  for (const row& r : rows)
    if (std::isfinite(r.predicted_s) && std::isfinite(r.collc_t.med))
      std::printf("%10zu | %-20s | %10.2f %10.2f | %7.2f\n", r.lay.bytes, r.schedule.c_str(), r.collc_t.med * 1e6,
                  r.predicted_s * 1e6, r.predicted_s / r.collc_t.med);
  std::fflush(stdout);
}

/// Opens `path` for the results and writes the header: "" or why not. A file
/// already there is replaced only if collc-bench wrote it (its first line is
/// the header): a mistyped --csv must not destroy a user's file.
std::string open_csv(const std::string& path, std::FILE*& out) {
  if (std::ifstream old(path); old) {
    std::string first;
    std::getline(old, first);
    if (first + "\n" != csv_header)
      return "the file exists and is not a CSV file collc-bench wrote (its first line is not collc-bench's "
             "header); give another name, or remove it first";
  }
  out = std::fopen(path.c_str(), "w");
  if (!out) return std::string("cannot write it: ") + std::strerror(errno);
  std::fputs(csv_header, out);
  return "";
}

template <class T, class Op>
int run_all(context& cx, run_facts& f) {
  if (cx.opt.describe) return describe_plans<T, Op>(cx);
  std::FILE* const csv = cx.csv;
  try {
    setup_times<T, Op>(cx, f);
  } catch (const collc::error& e) {
    if (cx.me == 0) std::fprintf(stderr, "collc-bench: plan setup failed: %s\n", e.what());
    return 1;
  }
  // After the setup timings, not before: 8 ranks on 2 cores that had napped
  // through the probe (all but rank 0, in 1 ms sleeps) set plans up 1.7-2x
  // slower for the next ~0.2 s (the first two of four repeated setup_times
  // runs: 751-810 us against 404-461 us after and 432-448 us with no probe
  // before; docs/benchmarks.md, "Plan setup and memory").
  f.memcpy_bw = memcpy_bandwidth(cx.comm, cx.llc);
  if (cx.me == 0)
    std::printf(
        "# plan setup (allreduce, %zu B): first plan on a new communicator %.1f us (median of 9, dup and split), "
        "later plans %.1f us (median)\n",
        cx.opt.sizes.front(), f.setup_first * 1e6, f.setup_second * 1e6);
  // Keeps the communicator's shared state alive across the sweep, so that
  // each size's setup time is that of a later plan, as in an application.
  std::optional<collc::plan<T, Op>> keeper;
  keeper.emplace(collc::make_allreduce<T, Op>(cx.comm, 1));
  int failures = 0;
  for (collective c : cx.opt.colls) {
    const bool with_p = cx.persistent;
    if (cx.me == 0) print_header(f, c, with_p);
    std::vector<row> rows;
    for (std::size_t bytes : cx.opt.sizes) {
      row r = (c == collective::allgather || c == collective::bcast) ? run_size<T, collc::plus>(cx, c, bytes)
                                                                     : run_size<T, Op>(cx, c, bytes);
      // Only collc's failures fail the run; an MPI side that goes wrong is reported.
      if (r.check.starts_with("WRONG") || r.check.starts_with("setup error")) ++failures;
      if (cx.me != 0) continue;
      if (r.check != "ok" && !std::isfinite(r.collc_t.med)) {
        std::printf("%10zu %5s | %s\n", r.lay.bytes, "-", r.check.c_str());
        std::fflush(stdout);
      } else {
        print_row(r, cx.P, with_p);
      }
      if (csv) write_csv_row(csv, f, cx.opt, r);
      rows.push_back(r);
    }
    if (cx.model && cx.me == 0) print_model_error(c, rows);
  }
  if (csv) std::fclose(csv);
  cx.csv = nullptr;
  return failures == 0 ? 0 : 1;
}

template <class T>
int dispatch_op(context& cx, run_facts& f) {
  if (cx.opt.op == "prod") return run_all<T, collc::prod>(cx, f);
  if (cx.opt.op == "min") return run_all<T, collc::min>(cx, f);
  if (cx.opt.op == "max") return run_all<T, collc::max>(cx, f);
  return run_all<T, collc::plus>(cx, f);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  context cx;
  cx.comm = MPI_COMM_WORLD;
  MPI_Comm_rank(cx.comm, &cx.me);
  MPI_Comm_size(cx.comm, &cx.P);
  int rc = 0;
  try {
    cx.opt = parse_args(argc, argv);
    if (cx.opt.root >= cx.P) throw usage_error{"--root " + std::to_string(cx.opt.root) + " is not a rank"};
    cx.sched = parse_schedule(cx.opt.schedule_text, cx.P);
  } catch (const usage_error& e) {
    if (cx.me == 0)
      std::fprintf(e.message.empty() ? stdout : stderr, "%s%s%s", e.message.c_str(), e.message.empty() ? "" : "\n",
                   usage_text);
    MPI_Finalize();
    return e.message.empty() ? 0 : 2;
  } catch (const collc::error& e) {
    if (cx.me == 0) std::fprintf(stderr, "collc-bench: --schedule: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  // Before any measurement, on rank 0, and every rank stops alike: a --csv
  // that cannot be written was reported only after the whole run.
  int csv_ok = 1;
  if (cx.me == 0 && !cx.opt.csv.empty() && !cx.opt.describe)
    if (const std::string why = open_csv(cx.opt.csv, cx.csv); !why.empty()) {
      std::fprintf(stderr, "collc-bench: --csv %s: %s\n", cx.opt.csv.c_str(), why.c_str());
      csv_ok = 0;
    }
  MPI_Bcast(&csv_ok, 1, MPI_INT, 0, cx.comm);
  if (!csv_ok) {
    MPI_Finalize();
    return 2;
  }
  cx.llc = cx.opt.llc_bytes ? cx.opt.llc_bytes : last_level_cache_bytes();
  cx.persistent = COLLC_BENCH_PERSISTENT && cx.opt.persistent;

  run_facts f;
  f.library = library_name();
  f.P = cx.P;
  f.llc = cx.llc;
  f.type = cx.opt.type;
  f.op = cx.opt.op;
  f.rotate = cx.opt.rotate;
  f.offset = cx.opt.offset;
  if (cx.opt.calibrate) {
    try {
      const collc::mpi::calibration cal = collc::mpi::calibrate_report(cx.comm);
      cx.model = cal.model;
      if (cx.me == 0)
        std::printf("# calibrated (%d node(s), network pair %s): COLLC_MACHINE_MODEL='%s'\n", cal.nodes,
                    cal.net_between_nodes ? "between nodes" : "on one node", collc::ir::to_string(*cx.model).c_str());
    } catch (const collc::error& e) {
      if (cx.me == 0) std::fprintf(stderr, "collc-bench: --calibrate: %s\n", e.what());
      MPI_Finalize();
      return 2;
    }
  }

  try {
    if (cx.opt.type == "float")
      rc = dispatch_op<float>(cx, f);
    else if (cx.opt.type == "int32")
      rc = dispatch_op<std::int32_t>(cx, f);
    else if (cx.opt.type == "int64")
      rc = dispatch_op<std::int64_t>(cx, f);
    else
      rc = dispatch_op<double>(cx, f);
  } catch (const std::exception& e) {
    // An execution error (timeout, mismatch) leaves peers inside a call.
    std::fprintf(stderr, "collc-bench: rank %d: %s\n", cx.me, e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return rc;
}
