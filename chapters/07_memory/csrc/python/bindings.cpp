// Chapter 07's additions to `torch_accinte._C`: the device allocator's
// statistics and cache control, for the memory functions of torch.accinte.
// They ask c10::getDeviceAllocator(PrivateUse1), the allocator that
// torch.accelerator's memory functions ask too.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <c10/core/CachingDeviceAllocator.h>

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
}
// LITERALINCLUDE END: CH07_BIND_STATS

const BindingRegistrar chapter07("07_memory", &bindChapter07);

} // namespace
} // namespace accinte::python
