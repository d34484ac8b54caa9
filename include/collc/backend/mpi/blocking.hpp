#pragma once
/// \file
/// Blocking collectives, MPI style, for callers whose sizes vary (CP2K calls
/// allreduce hundreds of thousands of times over a few dozen sizes): the
/// first call with a (communicator, collective, count, root, type, operator)
/// builds a plan, later calls reuse it. Built on the public plan API.
///
///   collc::allreduce(MPI_COMM_WORLD, x.data(), y.data(), n);              // sum of doubles
///   collc::allreduce(comm, collc::in_place, buf, n, collc::max{});
///   collc::bcast(comm, buf, n, 0);
///
/// The schedule of a new plan: COLLC_ALGO / COLLC_FACTORS if set; else, with
/// COLLC_TUNE=1, a measured choice (collc::tune, which also writes the wisdom
/// file); else the wisdom file's entry (COLLC_WISDOM); else the selector's
/// choice (collc::algo::select) for this communicator's layout and node.
///
/// Every call is collective, as in MPI: all ranks make the same calls in the
/// same order with the same counts. The operator object of the first call
/// for a key is the one kept (operators are assumed stateless). Cached plans
/// are freed when the communicator is freed (an attribute's delete callback),
/// at the start of MPI_Finalize, or by release_cached_plans(comm); always in
/// reverse creation order, the same on every rank. Not thread-safe for
/// concurrent calls on one communicator (neither is MPI's blocking API under
/// MPI_THREAD_SERIALIZED).
#include <collc/algo/select.hpp>
#include <collc/backend/mpi/plan.hpp>
#include <collc/backend/mpi/tune.hpp>
#include <collc/error.hpp>
#include <collc/ops.hpp>
#include <collc/wisdom.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

namespace collc {

namespace mpi {

/// The cached plans of one communicator, in creation order.
struct blocking_cache {
  using key = std::tuple<int, std::size_t, int, std::type_index, std::type_index>;  // coll, count, root, T, Op
  struct entry {
    std::shared_ptr<void> plan;  // a collc::plan<T, Op>, typed by the key
    std::string description;
  };
  std::map<key, std::size_t> index;
  std::vector<entry> entries;
  std::optional<comm_layout> layout[2];  // [order_sensitive]

  blocking_cache() = default;
  blocking_cache(const blocking_cache&) = delete;
  blocking_cache& operator=(const blocking_cache&) = delete;
  ~blocking_cache() {
    while (!entries.empty()) entries.pop_back();  // reverse creation order on every rank
  }
};

/// Every cache, by creation sequence (the same order on every rank).
struct blocking_registry {
  std::mutex m;
  std::map<std::uint64_t, std::unique_ptr<blocking_cache>> caches;
  std::uint64_t next = 1;
  bool finalize_hook = false;
};

inline blocking_registry& blocking_caches() {
  static blocking_registry r;
  return r;
}

inline void release_all_blocking_caches() {
  auto& r = blocking_caches();
  std::map<std::uint64_t, std::unique_ptr<blocking_cache>> all;
  {
    const std::lock_guard<std::mutex> lock(r.m);
    all.swap(r.caches);
  }
  while (!all.empty()) all.erase(std::prev(all.end()));  // newest first
}

inline int blocking_delete_attr(MPI_Comm, int, void* value, void*) {
  const auto seq = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value));
  std::unique_ptr<blocking_cache> gone;
  {
    auto& r = blocking_caches();
    const std::lock_guard<std::mutex> lock(r.m);
    if (auto it = r.caches.find(seq); it != r.caches.end()) {
      gone = std::move(it->second);
      r.caches.erase(it);
    }
  }
  return MPI_SUCCESS;  // `gone` frees the plans here, inside MPI_Comm_free
}

inline int blocking_finalize_attr(MPI_Comm, int, void*, void*) {
  release_all_blocking_caches();  // MPI_COMM_SELF's attributes go first in MPI_Finalize
  return MPI_SUCCESS;
}

inline int blocking_keyval() {
  static const int kv = [] {
    int k = MPI_KEYVAL_INVALID;
    // Not copied to duplicates: a duplicate's calls are its own.
    tune_check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, blocking_delete_attr, &k, nullptr),
               "MPI_Comm_create_keyval");
    return k;
  }();
  return kv;
}

/// The cache of `comm`, created on first use.
inline blocking_cache& blocking_cache_of(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) throw error(errc::invalid_argument, "communicator is MPI_COMM_NULL");
  const int kv = blocking_keyval();
  void* value = nullptr;
  int found = 0;
  tune_check(MPI_Comm_get_attr(comm, kv, &value, &found), "MPI_Comm_get_attr");
  auto& r = blocking_caches();
  const std::lock_guard<std::mutex> lock(r.m);
  if (found) {
    const auto seq = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value));
    if (auto it = r.caches.find(seq); it != r.caches.end()) return *it->second;
  }
  if (!r.finalize_hook) {
    int self_kv = MPI_KEYVAL_INVALID;
    tune_check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, blocking_finalize_attr, &self_kv, nullptr),
               "MPI_Comm_create_keyval");
    tune_check(MPI_Comm_set_attr(MPI_COMM_SELF, self_kv, nullptr), "MPI_Comm_set_attr");
    r.finalize_hook = true;
  }
  const std::uint64_t seq = r.next++;
  auto& cache = r.caches[seq];
  cache = std::make_unique<blocking_cache>();
  tune_check(MPI_Comm_set_attr(comm, kv, reinterpret_cast<void*>(static_cast<std::uintptr_t>(seq))),
             "MPI_Comm_set_attr");
  return *cache;
}

/// The schedule for a new cached plan (see the file comment) and where it came from.
template <class T, class Op>
std::pair<algo::schedule, std::string> blocking_schedule(blocking_cache& cache, collective c, MPI_Comm comm,
                                                         std::size_t count, int root, const Op& op) {
  const bool commutative = commutative_v<Op> || !reduces(c);
  int P = 1;
  tune_check(MPI_Comm_size(comm, &P), "MPI_Comm_size");
  if (auto s = algo::override_from_env(c, P, commutative)) return {*s, "override"};
  if (P == 1) return {algo::schedule::copy_in(), "single rank"};
  // A boolean, as every collc switch (COLLC_TUNE=no tuned before).
  if (const auto t = env_value("COLLC_TUNE"); t && parse_env_bool("COLLC_TUNE", *t)) {
    const tune_result r = tune<T, Op>(c, comm, count, {}, op, root);
    return {r.chosen, r.from == tune_result::origin::wisdom ? "wisdom" : "tuned"};
  }
  auto& layout = cache.layout[reduces(c) && !commutative ? 1 : 0];
  if (!layout) layout = describe_comm(comm, reduces(c) && !commutative);
  if (auto s = wisdom_lookup(comm, wisdom_path_from_env(), wisdom_key_for<T, Op>(c, *layout), count))
    return {*s, "wisdom"};
  // The one default rule every plan takes (build.hpp), so the blocking call
  // and make_* pick the same schedule for the same call.
  return {default_for(c, P, count * sizeof(T), commutative, layout->node_of, online_cores()), "default"};
}

/// The cached plan for the call, built on first use.
template <class T, class Op>
plan<T, Op>& blocking_plan(collective c, MPI_Comm comm, std::size_t count, int root, const Op& op) {
  static_assert(std::is_trivially_copyable_v<T>, "collc blocking collectives: T must be trivially copyable");
  blocking_cache& cache = blocking_cache_of(comm);
  const blocking_cache::key k{static_cast<int>(c), count, root, std::type_index(typeid(T)),
                              std::type_index(typeid(Op))};
  if (auto it = cache.index.find(k); it != cache.index.end())
    return *static_cast<plan<T, Op>*>(cache.entries[it->second].plan.get());
  auto [sched, origin] = blocking_schedule<T, Op>(cache, c, comm, count, root, op);
  auto p = std::make_shared<plan<T, Op>>(make_for<T, Op>(c, comm, count, root, op, sched));
  std::string d = std::string(to_string(c)) + " count=" + std::to_string(count) + " type=" + type_name<T>() +
                  (reduces(c) ? " op=" + type_name<Op>() : std::string()) +
                  ((c == collective::reduce || c == collective::bcast) ? " root=" + std::to_string(root) : "") +
                  " schedule=" + p->schedule_name() + " (" + origin + ")";
  cache.index.emplace(k, cache.entries.size());
  cache.entries.push_back({p, std::move(d)});
  return *p;
}

}  // namespace mpi

/// Allreduce of `count` elements: recv = send of every rank combined with `op`
/// in rank order. Collective over `comm`.
///   collc::allreduce(comm, x, y, n);  collc::allreduce(comm, x, y, n, collc::max{});
template <class T, class Op = plus>
void allreduce(MPI_Comm comm, const T* send, T* recv, std::size_t count, Op op = {}) {
  static_assert(reduction_op<Op, T>, "collc::allreduce: Op must be callable as T(const T&, const T&)");
  mpi::blocking_plan<T, Op>(collective::allreduce, comm, count, 0, op)(send, recv);
}
/// In place (MPI_IN_PLACE): `buf` is input and output.
///   collc::allreduce(comm, collc::in_place, buf, n);
template <class T, class Op = plus>
void allreduce(MPI_Comm comm, in_place_t, T* buf, std::size_t count, Op op = {}) {
  static_assert(reduction_op<Op, T>, "collc::allreduce: Op must be callable as T(const T&, const T&)");
  mpi::blocking_plan<T, Op>(collective::allreduce, comm, count, 0, op)(in_place, std::span<T>(buf, count));
}
/// Reduce_scatter_block: send holds P blocks of `count`; rank r receives block r combined.
///   collc::reduce_scatter_block(comm, send /* count*P */, recv /* count */, count);
template <class T, class Op = plus>
void reduce_scatter_block(MPI_Comm comm, const T* send, T* recv, std::size_t count, Op op = {}) {
  static_assert(reduction_op<Op, T>, "collc::reduce_scatter_block: Op must be callable as T(const T&, const T&)");
  mpi::blocking_plan<T, Op>(collective::reduce_scatter, comm, count, 0, op)(send, recv);
}
/// Allgather of `count` elements per rank into P blocks.
///   collc::allgather(comm, mine /* count */, all /* count*P */, count);
template <class T>
void allgather(MPI_Comm comm, const T* send, T* recv, std::size_t count) {
  mpi::blocking_plan<T, plus>(collective::allgather, comm, count, 0, plus{})(send, recv);
}
/// Reduce of `count` elements to `root` (recv significant at the root only; may be null elsewhere).
///   collc::reduce(comm, x, y, n, 0);
template <class T, class Op = plus>
void reduce(MPI_Comm comm, const T* send, T* recv, std::size_t count, int root, Op op = {}) {
  static_assert(reduction_op<Op, T>, "collc::reduce: Op must be callable as T(const T&, const T&)");
  mpi::blocking_plan<T, Op>(collective::reduce, comm, count, root, op)(send, recv);
}
/// Broadcast of `count` elements from `root`, in place.
///   collc::bcast(comm, buf, n, 0);
template <class T>
void bcast(MPI_Comm comm, T* buf, std::size_t count, int root) {
  mpi::blocking_plan<T, plus>(collective::bcast, comm, count, root, plus{})(std::span<T>(buf, count));
}

/// One line per plan cached for `comm` ("allreduce count=1000 type=double
/// op=collc::plus schedule=recexch{-2,2} (model)"), in creation order.
inline std::vector<std::string> cached_plans(MPI_Comm comm) {
  std::vector<std::string> out;
  for (const auto& e : mpi::blocking_cache_of(comm).entries) out.push_back(e.description);
  return out;
}

/// Frees the plans cached for `comm` (collective over `comm`, like freeing it).
inline void release_cached_plans(MPI_Comm comm) {
  auto& c = mpi::blocking_cache_of(comm);
  while (!c.entries.empty()) c.entries.pop_back();
  c.index.clear();
  c.layout[0].reset();
  c.layout[1].reset();
}

}  // namespace collc
