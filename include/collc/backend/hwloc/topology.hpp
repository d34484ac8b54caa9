#pragma once
/// \file
/// Fills collc::node_topology from hwloc 2.x: the machine this process runs
/// on, or a synthetic description (hwloc's own parser, so tests can check the
/// mapping for machines we do not have), and the PUs this process is bound to.
///
///   auto node = collc::hwloc::read_node();                                  // this machine
///   auto epyc = collc::hwloc::read_synthetic("pack:2 numa:4 core:16 pu:1");  // hwloc 2.9: PU level last
///   collc::rank_binding me = node.locate(collc::hwloc::bound_pus());
///
/// Levels kept (node_topology::from_levels): packages, NUMA domains (hwloc 2
/// attaches them as memory children; they become a level of their own when
/// they split the PUs differently from their parent), dies, data/unified
/// caches, groups, cores, PUs. Instruction caches and I/O objects are ignored.
/// PUs are numbered by hwloc's logical index.
#include <collc/error.hpp>
#include <collc/topology.hpp>

#include <hwloc.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace collc::hwloc {

namespace detail {

struct topology_deleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<hwloc_topology, topology_deleter>;

struct bitmap_deleter {
  void operator()(hwloc_bitmap_s* b) const noexcept { hwloc_bitmap_free(b); }
};
using bitmap_ptr = std::unique_ptr<hwloc_bitmap_s, bitmap_deleter>;

/// Loads a topology: this machine (synthetic == nullptr) or a description.
inline topology_ptr load(const char* synthetic) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw error(errc::unsupported, "hwloc_topology_init failed");
  topology_ptr t(raw);
  if (synthetic != nullptr && hwloc_topology_set_synthetic(t.get(), synthetic) != 0)
    throw error(errc::invalid_argument, "hwloc rejects the synthetic topology '" + std::string(synthetic) +
                                            "' (hwloc 2.9 wants kind:arity levels ending with a PU level, "
                                            "e.g. \"pack:2 numa:4 core:16 pu:1\")");
  if (hwloc_topology_load(t.get()) != 0) throw error(errc::unsupported, "hwloc_topology_load failed");
  return t;
}

/// collc's name for a level of hwloc objects, or "" for levels collc ignores.
inline std::string kind_of(hwloc_obj_type_t type) {
  switch (type) {
    case HWLOC_OBJ_PACKAGE: return "pack";
    case HWLOC_OBJ_DIE: return "die";
    case HWLOC_OBJ_GROUP: return "group";
    case HWLOC_OBJ_CORE: return "core";
    case HWLOC_OBJ_PU: return "pu";
    case HWLOC_OBJ_NUMANODE: return "numa";
    case HWLOC_OBJ_L1CACHE: return "l1";
    case HWLOC_OBJ_L2CACHE: return "l2";
    case HWLOC_OBJ_L3CACHE: return "l3";
    case HWLOC_OBJ_L4CACHE: return "l4";
    case HWLOC_OBJ_L5CACHE: return "l5";
    default: return "";
  }
}

/// The level of `objs`: which object holds each PU, objects renumbered in PU
/// order. Empty if some PU is held by no object (memory-only NUMA nodes).
inline std::vector<int> partition(hwloc_topology_t t, const std::vector<hwloc_obj_t>& objs, int pus) {
  std::vector<int> of(static_cast<std::size_t>(pus), -1);
  for (std::size_t i = 0; i < objs.size(); ++i) {
    if (objs[i]->cpuset == nullptr) continue;
    for (hwloc_obj_t pu = hwloc_get_next_obj_covering_cpuset_by_type(t, objs[i]->cpuset, HWLOC_OBJ_PU, nullptr);
         pu != nullptr; pu = hwloc_get_next_obj_covering_cpuset_by_type(t, objs[i]->cpuset, HWLOC_OBJ_PU, pu)) {
      if (pu->logical_index >= static_cast<unsigned>(pus)) continue;
      if (of[pu->logical_index] >= 0) return {};  // overlapping objects: not a partition
      of[pu->logical_index] = static_cast<int>(i);
    }
  }
  std::vector<int> renumber(objs.size(), -1);
  int next = 0;
  for (int& o : of) {
    if (o < 0) return {};
    auto& r = renumber[static_cast<std::size_t>(o)];
    if (r < 0) r = next++;
    o = r;
  }
  return of;
}

inline node_topology model_of(hwloc_topology_t t) {
  const int pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  if (pus <= 0) throw error(errc::unsupported, "hwloc found no PU");
  std::vector<topology_level> raw;
  std::vector<cache_info> caches;
  const int depth = hwloc_topology_get_depth(t);
  const int numa_count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  bool numa_done = numa_count <= 1;
  auto objects_at = [&](int d) {
    std::vector<hwloc_obj_t> objs;
    for (hwloc_obj_t o = hwloc_get_next_obj_by_depth(t, d, nullptr); o != nullptr;
         o = hwloc_get_next_obj_by_depth(t, d, o))
      objs.push_back(o);
    return objs;
  };
  auto add_numa = [&] {
    std::vector<hwloc_obj_t> objs;
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); o != nullptr;
         o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o))
      objs.push_back(o);
    if (auto of = partition(t, objs, pus); !of.empty()) raw.push_back({"numa", std::move(of), 0});
    numa_done = true;
  };
  for (int d = 1; d < depth; ++d) {
    const hwloc_obj_type_t type = hwloc_get_depth_type(t, d);
    const std::string kind = kind_of(type);
    const auto objs = objects_at(d);
    if (!kind.empty() && !objs.empty()) {
      if (auto of = partition(t, objs, pus); !of.empty()) {
        std::size_t bytes = 0;
        if (hwloc_obj_type_is_cache(type) && objs.front()->attr != nullptr) {
          bytes = static_cast<std::size_t>(objs.front()->attr->cache.size);
          caches.push_back(
              {static_cast<int>(objs.front()->attr->cache.depth), bytes, pus / static_cast<int>(objs.size())});
        }
        raw.push_back({kind, std::move(of), bytes});
      }
    }
    // NUMA nodes hang off objects of this depth: their level comes right below it.
    if (!numa_done && !objs.empty() && objs.front()->memory_arity > 0) add_numa();
  }
  if (!numa_done) add_numa();
  std::sort(caches.begin(), caches.end(), [](const cache_info& a, const cache_info& b) { return a.depth < b.depth; });
  return node_topology::from_levels(std::move(raw), std::move(caches));
}

}  // namespace detail

/// The node this process runs on, without bindings (see bound_pus).
inline node_topology read_node() {
  auto t = detail::load(nullptr);
  return detail::model_of(t.get());
}

/// A node described in hwloc's synthetic syntax, parsed by hwloc itself.
inline node_topology read_synthetic(std::string_view description) {
  const std::string text(description);
  auto t = detail::load(text.c_str());
  return detail::model_of(t.get());
}

/// Logical indices of the PUs this process may run on (all PUs if unbound;
/// empty if hwloc cannot tell).
inline std::vector<int> bound_pus() {
  auto t = detail::load(nullptr);
  detail::bitmap_ptr set(hwloc_bitmap_alloc());
  if (!set) return {};
  if (hwloc_get_cpubind(t.get(), set.get(), HWLOC_CPUBIND_PROCESS) != 0 &&
      hwloc_get_cpubind(t.get(), set.get(), HWLOC_CPUBIND_THREAD) != 0)
    return {};
  std::vector<int> out;
  for (hwloc_obj_t pu = hwloc_get_next_obj_covering_cpuset_by_type(t.get(), set.get(), HWLOC_OBJ_PU, nullptr);
       pu != nullptr; pu = hwloc_get_next_obj_covering_cpuset_by_type(t.get(), set.get(), HWLOC_OBJ_PU, pu))
    out.push_back(static_cast<int>(pu->logical_index));
  return out;
}

}  // namespace collc::hwloc
