#include <01_minimal_ops/csrc/allocator.h>
#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <c10/core/CachingDeviceAllocator.h>

#include <array>
#include <mutex>
#include <unordered_map>

namespace accinte {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kAggregate = static_cast<size_t>(StatType::AGGREGATE);

// LITERALINCLUDE START: CH01_SIMPLE_ALLOCATOR
/**
 * The simplest correct device allocator: every tensor allocation is one
 * emulator allocation, and freeing a tensor frees it at once.
 *
 * It is a `c10::DeviceAllocator`, not just a `c10::Allocator`, because
 * `torch.accelerator.memory_*` asks `c10::getDeviceAllocator()` for
 * statistics and would otherwise stop on an internal assert. With no cache,
 * reserved bytes always equal allocated bytes; chapter 07 replaces this
 * allocator with a caching one by registering at a higher priority.
 */
// LITERALINCLUDE EMPHASIZE NEXT
class SimpleDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = currentDevice();
    void* data = nullptr;
    if (nbytes > 0) {
      const accinteError_t status = accinteMalloc(&data, nbytes);
      if (status == accinteErrorMemoryAllocation) { // LITERALINCLUDE EMPHASIZE
        size_t free = 0;
        size_t total = 0;
        (void)accinteMemGetInfo(&free, &total);
        TORCH_CHECK_WITH(OutOfMemoryError, false, // LITERALINCLUDE EMPHASIZE
                         "accinte out of memory: tried to allocate ", nbytes,
                         " bytes on device ", static_cast<int>(device), " (",
                         free, " of ", total,
                         " bytes free). The capacity is set by "
                         "ACCINTE_DEVICE_MEMORY.");
      }
      ACCINTE_CHECK(status);
      record(device, nbytes, /*allocating=*/true); // LITERALINCLUDE EMPHASIZE
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_.emplace(data, Block{nbytes, device});
    }
    return {data, data, &SimpleDeviceAllocator::deleteBlock,
            c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &SimpleDeviceAllocator::deleteBlock;
  }
  // LITERALINCLUDE END: CH01_SIMPLE_ALLOCATOR

  void copy_data(void* dest, const void* src, std::size_t count) const final {
    copyDeviceMemoryOnCurrentStream(dest, src, count);
  }

  bool initialized() override {
    return true;
  }

  // NB: there is no cache to empty: freed memory went back to the device.
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {}

  // NB: accinteFree waits for the device to finish all its work, so a block
  // can never be freed while another stream still reads it.
  void recordStream(const c10::DataPtr& /*ptr*/,
                    c10::Stream /*stream*/) override {}

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_[device];
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    std::lock_guard<std::mutex> lock(mutex_);
    accinte::resetAccumulatedStats(stats_[device]);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    std::lock_guard<std::mutex> lock(mutex_);
    forEachStat(stats_[device],
                [](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return deviceMemoryInfo(device);
  }

  static SimpleDeviceAllocator& instance() {
    // NB: leaked on purpose: tensors may be freed during interpreter
    // shutdown, after static destructors would have run.
    static auto* allocator = new SimpleDeviceAllocator();
    return *allocator;
  }

 private:
  struct Block {
    size_t nbytes;
    c10::DeviceIndex device;
  };

  void record(c10::DeviceIndex device, size_t nbytes, bool allocating) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& stats = stats_[device];
    for (auto* stat : {&stats.allocation, &stats.segment, &stats.active}) {
      allocating ? (*stat)[kAggregate].increase(1)
                 : (*stat)[kAggregate].decrease(1);
    }
    for (auto* stat : {&stats.allocated_bytes, &stats.reserved_bytes,
                       &stats.active_bytes, &stats.requested_bytes}) {
      allocating ? (*stat)[kAggregate].increase(nbytes)
                 : (*stat)[kAggregate].decrease(nbytes);
    }
    allocating ? ++stats.num_device_alloc : ++stats.num_device_free;
  }

  static void deleteBlock(void* data) {
    SimpleDeviceAllocator& self = instance();
    Block block{};
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      auto it = self.sizes_.find(data);
      TORCH_INTERNAL_ASSERT(it != self.sizes_.end(),
                            "accinte: freeing a pointer this allocator does "
                            "not own");
      block = it->second;
      self.sizes_.erase(it);
    }
    // NB: deleters run in destructors and must not throw. The only way to
    // fail here is a process forked after initialization, whose device
    // memory is gone with the parent's runtime anyway.
    const accinteError_t status = accinteFree(data);
    if (status == accinteSuccess) {
      self.record(block.device, block.nbytes, /*allocating=*/false);
    } else {
      TORCH_WARN_ONCE("accinte: freeing device memory failed: ",
                      accinteGetErrorString(status));
    }
  }

  std::mutex mutex_;
  std::unordered_map<void*, Block> sizes_;
  std::array<DeviceStats, kMaxDevices> stats_;
};

// LITERALINCLUDE START: CH01_ALLOCATOR_REGISTER
// NB: priority 0, the lowest: chapter 07 registers its caching allocator with
// a higher priority and replaces this one without editing this file.
struct RegisterSimpleDeviceAllocator {
  RegisterSimpleDeviceAllocator() {
    c10::SetAllocator(c10::DeviceType::PrivateUse1,
                      &SimpleDeviceAllocator::instance(), /*priority=*/0);
  }
} register_simple_device_allocator;
// LITERALINCLUDE END: CH01_ALLOCATOR_REGISTER

} // namespace

void resetAccumulatedStats(DeviceStats& stats) {
  forEachStat(stats, [](c10::CachingAllocator::Stat& stat) {
    stat.reset_accumulated();
  });
  stats.num_alloc_retries = 0;
  stats.num_ooms = 0;
  stats.num_sync_all_streams = 0;
  stats.num_device_alloc = 0;
  stats.num_device_free = 0;
}

std::pair<size_t, size_t> deviceMemoryInfo(c10::DeviceIndex device) {
  checkDeviceIndex(device);
  const c10::DeviceIndex previous = exchangeDevice(device);
  size_t free = 0;
  size_t total = 0;
  const accinteError_t status = accinteMemGetInfo(&free, &total);
  exchangeDevice(previous);
  ACCINTE_CHECK(status);
  return {free, total};
}

} // namespace accinte
