// Chapter 07's additions to `torch_accinte._C`: the device allocator's
// statistics and cache control, for the memory functions of torch.accinte.
// They ask c10::getDeviceAllocator(PrivateUse1), the allocator that
// torch.accelerator's memory functions ask too.

#include <07_memory/csrc/caching_allocator.h>

#include <01_minimal_ops/csrc/python/bindings.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <pybind11/stl.h>

#include <memory>

namespace accinte::python {
namespace {

namespace py = pybind11;

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

c10::DeviceAllocator* deviceAllocator() {
  return c10::getDeviceAllocator(c10::DeviceType::PrivateUse1);
}

py::dict statDict(const Stat& stat) {
  py::dict dict;
  dict["current"] = stat.current;
  dict["peak"] = stat.peak;
  dict["allocated"] = stat.allocated;
  dict["freed"] = stat.freed;
  return dict;
}

py::dict statArrayDict(const StatArray& array) {
  py::dict dict;
  dict["all"] = statDict(array[static_cast<size_t>(StatType::AGGREGATE)]);
  dict["small_pool"] =
      statDict(array[static_cast<size_t>(StatType::SMALL_POOL)]);
  dict["large_pool"] =
      statDict(array[static_cast<size_t>(StatType::LARGE_POOL)]);
  return dict;
}

py::dict durationDict(const c10::CachingAllocator::DurationStat& stat) {
  py::dict dict;
  dict["total"] = stat.total;
  dict["max"] = stat.max;
  dict["min"] = stat.min;
  dict["count"] = stat.count;
  dict["avg"] = stat.count == 0 ? 0.0
                                : static_cast<double>(stat.total) /
                                      static_cast<double>(stat.count);
  return dict;
}

/** The pinned host allocator's statistics as nested dicts, in the shape of
 * torch.cuda.host_memory_stats before flattening. */
py::dict hostMemoryStats() {
  const at::HostStats stats =
      at::getHostAllocator(c10::DeviceType::PrivateUse1)->get_stats();
  py::dict dict;
  dict["allocations"] = statDict(stats.allocations);
  dict["allocated_bytes"] = statDict(stats.allocated_bytes);
  dict["active_requests"] = statDict(stats.active_requests);
  dict["active_bytes"] = statDict(stats.active_bytes);
  dict["num_host_alloc"] = stats.num_host_alloc;
  dict["num_host_free"] = stats.num_host_free;
  dict["host_alloc_time"] = durationDict(stats.host_alloc_time);
  dict["host_free_time"] = durationDict(stats.host_free_time);
  return dict;
}

/** The caching allocator's segments, in the shape of the list
 * torch.cuda.memory_snapshot returns. */
py::list memorySnapshot() {
  py::list segments;
  for (const SegmentSnapshot& segment : accinte::memorySnapshot()) {
    py::list blocks;
    for (const BlockSnapshot& block : segment.blocks) {
      py::dict entry;
      entry["address"] = block.address;
      entry["size"] = block.size;
      entry["requested_size"] = block.requested_size;
      entry["state"] = block.state;
      entry["frames"] = py::list();
      blocks.append(entry);
    }
    py::dict entry;
    entry["device"] = segment.device;
    entry["address"] = segment.address;
    entry["total_size"] = segment.total_size;
    entry["allocated_size"] = segment.allocated_size;
    entry["active_size"] = segment.active_size;
    entry["requested_size"] = segment.requested_size;
    entry["stream"] = segment.stream;
    entry["segment_type"] = segment.segment_type;
    entry["segment_pool_id"] =
        py::make_tuple(segment.pool_id.first, segment.pool_id.second);
    entry["is_expandable"] = false;
    entry["frames"] = py::list();
    entry["blocks"] = blocks;
    segments.append(entry);
  }
  return segments;
}

/** The memory pools and the pluggable allocator: `_MemPool` is the base
 * class of torch.accinte.MemPool, as torch._C._MemPool is of
 * torch.cuda.MemPool. */
void bindPools(py::module_& m) {
  py::class_<PluggableAllocator, std::shared_ptr<PluggableAllocator>>(
      m, "_PluggableAllocator",
      "The alloc and free functions of a shared library.");
  m.def(
      "_pluggable_allocator",
      [](uintptr_t alloc, uintptr_t free) {
        TORCH_CHECK_VALUE(alloc != 0 && free != 0,
                          "a pluggable allocator needs the addresses of its "
                          "alloc and free functions");
        auto allocator = std::make_shared<PluggableAllocator>();
        allocator->alloc = reinterpret_cast<decltype(allocator->alloc)>(alloc);
        allocator->free = reinterpret_cast<decltype(allocator->free)>(free);
        return allocator;
      },
      py::arg("alloc_fn"), py::arg("free_fn"));
  m.def("_change_current_allocator", &changeCurrentAllocator,
        py::arg("allocator"));
  m.def("_allocator_backend", &allocatorBackend);
  py::class_<MemPool, std::shared_ptr<MemPool>>(m, "_MemPool")
      .def(py::init<std::shared_ptr<PluggableAllocator>>(),
           py::arg("allocator") = nullptr)
      .def_property_readonly("id", &MemPool::id)
      .def_property_readonly("device", &MemPool::device)
      .def_property_readonly("allocator", &MemPool::allocator)
      .def("use_count", &MemPool::useCount);
  // NB: releasing a pool may wait for the device.
  m.def(
      "_begin_allocate_to_pool",
      [](c10::DeviceIndex device, const MemPool& pool) {
        beginAllocateToPool(device, pool.id(), pool.allocator());
      },
      py::arg("device"), py::arg("pool"));
  m.def("_end_allocate_to_pool", &endAllocateToPool, py::arg("device"),
        py::arg("pool_id"));
  m.def("_release_pool", &releasePool, py::arg("device"), py::arg("pool_id"),
        py::call_guard<py::gil_scoped_release>());
  m.def("_mem_pool_routes", &poolRoutes, py::arg("device"),
        "The ids of the pools routing this thread's allocations on device.");
}

// LITERALINCLUDE START: CH07_BIND_STATS
/** The device's DeviceStats as nested dicts, in the shape of
 * torch.cuda.memory_stats before flattening. */
py::dict memoryStats(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  // LITERALINCLUDE EMPHASIZE NEXT
  const auto stats = deviceAllocator()->getDeviceStats(device);
  py::dict dict;
  dict["allocation"] = statArrayDict(stats.allocation);
  dict["segment"] = statArrayDict(stats.segment);
  dict["active"] = statArrayDict(stats.active);
  dict["inactive_split"] = statArrayDict(stats.inactive_split);
  dict["allocated_bytes"] = statArrayDict(stats.allocated_bytes);
  dict["reserved_bytes"] = statArrayDict(stats.reserved_bytes);
  dict["active_bytes"] = statArrayDict(stats.active_bytes);
  dict["inactive_split_bytes"] = statArrayDict(stats.inactive_split_bytes);
  dict["requested_bytes"] = statArrayDict(stats.requested_bytes);
  dict["num_alloc_retries"] = stats.num_alloc_retries;
  dict["num_ooms"] = stats.num_ooms;
  dict["num_sync_all_streams"] = stats.num_sync_all_streams;
  dict["num_device_alloc"] = stats.num_device_alloc;
  dict["num_device_free"] = stats.num_device_free;
  dict["oversize_allocations"] = statDict(stats.oversize_allocations);
  dict["oversize_segments"] = statDict(stats.oversize_segments);
  dict["max_split_size"] = stats.max_split_size;
  return dict;
}
// LITERALINCLUDE END: CH07_BIND_STATS

// LITERALINCLUDE START: CH07_BIND_FUNCTIONS
void bindChapter07(py::module_& m) {
  m.def("_memory_stats", &memoryStats, py::arg("device"),
        "The caching allocator's statistics of a device, as nested dicts.");
  m.def(
      "_reset_peak_memory_stats",
      [](c10::DeviceIndex device) {
        checkDeviceIndex(device);
        deviceAllocator()->resetPeakStats(device); // LITERALINCLUDE EMPHASIZE
      },
      py::arg("device"));
  m.def(
      "_reset_accumulated_memory_stats",
      [](c10::DeviceIndex device) {
        checkDeviceIndex(device);
        // LITERALINCLUDE EMPHASIZE NEXT
        deviceAllocator()->resetAccumulatedStats(device);
      },
      py::arg("device"));
  // NB: emptying the cache may wait for the device; other Python threads
  // run meanwhile.
  m.def(
      "_empty_cache", [] { deviceAllocator()->emptyCache(); },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "_mem_get_info",
      [](c10::DeviceIndex device) {
        // LITERALINCLUDE EMPHASIZE NEXT
        return deviceAllocator()->getMemoryInfo(device);
      },
      py::arg("device"), "(free, total) bytes of the device.");
  m.def("_host_memory_stats", &hostMemoryStats,
        "The pinned host allocator's statistics, as nested dicts.");
  m.def("_reset_accumulated_host_memory_stats", [] {
    at::getHostAllocator(c10::DeviceType::PrivateUse1)
        ->reset_accumulated_stats();
  });
  m.def("_reset_peak_host_memory_stats", [] {
    at::getHostAllocator(c10::DeviceType::PrivateUse1)->reset_peak_stats();
  });
  m.def("_set_memory_fraction", &setMemoryFraction, py::arg("fraction"),
        py::arg("device"));
  m.def("_get_memory_fraction", &memoryFraction, py::arg("device"));
  m.def("_caching_allocator_enable", &setCachingAllocatorEnabled,
        py::arg("enabled"));
  m.def("_caching_allocator_is_enabled", &cachingAllocatorEnabled);
  m.def("_free_memory_callbacks", &freeMemoryCallbacks,
        "The names of the free-memory callbacks the caching allocator calls "
        "before it raises out of memory.");
  m.def("_memory_snapshot", &memorySnapshot,
        "The caching allocator's segments and their blocks.");
  // NB: allocating may free the cache and wait for the device.
  m.def(
      "_caching_allocator_alloc",
      [](size_t nbytes) {
        return reinterpret_cast<uintptr_t>(rawAlloc(nbytes));
      },
      py::arg("nbytes"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "_caching_allocator_delete",
      [](uintptr_t ptr) { rawDelete(reinterpret_cast<void*>(ptr)); },
      py::arg("ptr"));
  bindPools(m);
}
// LITERALINCLUDE END: CH07_BIND_FUNCTIONS

const BindingRegistrar chapter07("07_memory", &bindChapter07);

} // namespace
} // namespace accinte::python
