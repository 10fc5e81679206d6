#pragma once

/**
 * @file
 * What every device allocator of the backend shares: chapter 01's simple
 * allocator and chapter 07's caching allocator keep their statistics in
 * PyTorch's shape and ask the emulator the same way for free memory.
 */

#include <c10/core/CachingDeviceAllocator.h>

#include <cstddef>
#include <utility>

namespace accinte {

/** Applies `action` to every `c10::CachingAllocator::Stat` of `stats`. */
template <typename Action>
void forEachStat(c10::CachingDeviceAllocator::DeviceStats& stats,
                 Action action) {
  for (auto* array :
       {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
        &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
        &stats.inactive_split_bytes, &stats.requested_bytes}) {
    for (auto& stat : *array) {
      action(stat);
    }
  }
  action(stats.oversize_allocations);
  action(stats.oversize_segments);
}

/**
 * Resets what `stats` has accumulated (allocation and free counts, retries,
 * out-of-memory errors) and keeps what is current, as
 * `torch.accelerator.reset_accumulated_memory_stats` expects.
 */
void resetAccumulatedStats(c10::CachingDeviceAllocator::DeviceStats& stats);

/** The free and total bytes of `device`, as the emulator counts them. */
std::pair<size_t, size_t> deviceMemoryInfo(c10::DeviceIndex device);

} // namespace accinte
