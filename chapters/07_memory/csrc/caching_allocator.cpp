// Chapter 07: the caching device allocator. It replaces chapter 01's
// allocator by registering with a higher priority, keeps freed blocks in
// per-device pools and hands them out again in stream order, and counts what
// it does in PyTorch's DeviceStats.

#include <07_memory/csrc/caching_allocator.h>

#include <01_minimal_ops/csrc/allocator.h>
#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace accinte {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

// LITERALINCLUDE START: CH07_SIZE_CLASSES
// NB: the same size classes as PyTorch's CUDA allocator, so that the
// statistics read the same way: requests are rounded to 512 bytes; requests
// up to 1 MiB share 2 MiB segments (the small pool), requests up to 10 MiB
// share 20 MiB segments, and larger ones get a segment of their own, rounded
// to 2 MiB (the large pool).
constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallBuffer = 2 << 20;
constexpr size_t kMinLargeAlloc = 10 << 20;
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kRoundLarge = 2 << 20;

size_t roundUp(size_t size, size_t multiple) {
  return (size + multiple - 1) / multiple * multiple;
}

/** The size of the block that serves a request of `nbytes`. */
size_t blockSize(size_t nbytes) {
  // LITERALINCLUDE EMPHASIZE NEXT 2
  return nbytes < kMinBlockSize ? kMinBlockSize
                                : roundUp(nbytes, kMinBlockSize);
}

/** The size of the segment to reserve from the device for a block. */
size_t segmentSize(size_t block_size) {
  if (block_size <= kSmallSize) {
    return kSmallBuffer; // LITERALINCLUDE EMPHASIZE
  }
  if (block_size < kMinLargeAlloc) {
    return kLargeBuffer; // LITERALINCLUDE EMPHASIZE
  }
  return roundUp(block_size, kRoundLarge); // LITERALINCLUDE EMPHASIZE
}
// LITERALINCLUDE END: CH07_SIZE_CLASSES

struct BlockPool;
struct PrivatePool;

// LITERALINCLUDE START: CH07_BLOCK
/**
 * A range of a segment (one accinteMalloc). A segment starts as one block;
 * allocating part of a free block splits it, and freeing merges a block with
 * free neighbours again, so `prev`/`next` link the blocks of one segment in
 * address order.
 */
struct Block {
  Block(c10::DeviceIndex device, c10::Stream stream, size_t size,
        BlockPool* pool, void* ptr)
      : device(device), stream(stream), size(size), pool(pool), ptr(ptr) {}

  c10::DeviceIndex device;
  // The stream the block was allocated on: a free block is handed out again
  // only to that stream, whose later work runs after all earlier uses.
  c10::Stream stream; // LITERALINCLUDE EMPHASIZE
  size_t size;
  size_t requested = 0; // bytes asked for, for requested_bytes
  BlockPool* pool;
  void* ptr;
  bool allocated = false;
  // Other streams that used the block (Tensor.record_stream); on free, an
  // event is recorded on each and the block waits for all of them.
  std::unordered_set<c10::Stream> stream_uses; // LITERALINCLUDE EMPHASIZE
  int pending_events = 0;                      // LITERALINCLUDE EMPHASIZE
  bool counted_inactive_split = false;
  Block* prev = nullptr; // LITERALINCLUDE EMPHASIZE
  Block* next = nullptr; // LITERALINCLUDE EMPHASIZE

  bool isSplit() const {
    return prev != nullptr || next != nullptr;
  }
  /** Free and not waiting for events: it is in its pool. */
  bool isCached() const {
    return !allocated && pending_events == 0;
  }
};

/** Free blocks ordered by stream, then size: a lookup finds the smallest
 * block of the allocating stream that is large enough. */
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream.id() != b->stream.id()) { // LITERALINCLUDE EMPHASIZE
      return a->stream.id() < b->stream.id();
    }
    if (a->size != b->size) {
      return a->size < b->size;
    }
    return std::less<const void*>()(a->ptr, b->ptr);
  }
};

struct BlockPool {
  explicit BlockPool(bool small, PrivatePool* owner = nullptr)
      : small(small), owner(owner) {}
  std::set<Block*, BlockOrder> blocks;
  const bool small;
  // The private pool (MemPool) this is one half of; nullptr for the
  // device's general pools.
  PrivatePool* const owner;
};
// LITERALINCLUDE END: CH07_BLOCK

// LITERALINCLUDE START: CH07_PRIVATE_POOL
/** A MemPool's blocks on one device: a small and a large pool of its own,
 * which no allocation outside the pool looks into. */
struct PrivatePool {
  PrivatePool(c10::MempoolId_t id, std::shared_ptr<PluggableAllocator> alloc)
      : id(id), allocator(std::move(alloc)) {}
  const c10::MempoolId_t id;
  BlockPool small_pool{true, this};
  BlockPool large_pool{false, this};
  // The MemPool object and each use_mem_pool block routing to it; at 0 the
  // pool's segments may go back to the device.
  int use_count = 1;
  // Segments reserved and not yet released: the pool is forgotten only
  // once it has none, since blocks point to it.
  size_t segments = 0;
  // Where the segments come from (nullptr: accinteMalloc).
  const std::shared_ptr<PluggableAllocator> allocator;
};
// LITERALINCLUDE END: CH07_PRIVATE_POOL

/** What routes allocations to a private pool: those of one thread
 * (use_mem_pool), or those whose stream a filter accepts (a graph's
 * capture, chapter 15). */
struct PoolRoute {
  c10::MempoolId_t id;
  std::thread::id thread; // NB: no thread (the default) with a filter
  AllocationFilter filter;

  bool takes(accinteStream_t stream) const {
    return filter ? filter(stream) : thread == std::this_thread::get_id();
  }
};

/** Everything the allocator keeps for one device, under one mutex. */
struct DeviceState {
  std::mutex mutex;
  BlockPool small_pool{true};
  BlockPool large_pool{false};
  // Blocks freed while other streams may still use them, with one event per
  // such stream; a block returns to its pool once all its events completed.
  std::deque<std::pair<accinteEvent_t, Block*>> pending;
  // Blocks freed while a stream that used them was capturing a graph: an
  // event recorded there would be part of the graph, so the events are
  // recorded once those streams stop capturing (see recordUses()).
  std::deque<std::pair<Block*, std::unordered_set<c10::Stream>>> deferred;
  DeviceStats stats;
  // The cap of set_per_process_memory_fraction on reserved bytes.
  double fraction = 1.0;
  size_t allowed_max = std::numeric_limits<size_t>::max();
  // The private pools of this device by id, and what routes allocations
  // to one, in the order the routes began.
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> pools;
  std::vector<PoolRoute> routes;
};

/** What the deleter of a pluggable allocator's memory needs to free it. */
struct PluggableBlock {
  size_t size;
  c10::DeviceIndex device;
  accinteStream_t stream;
  PluggableAllocator* allocator;
};

// LITERALINCLUDE START: CH07_RUN_CALLBACKS
/** The free-memory callbacks of registerFreeMemoryCallback(), by name. */
struct FreeMemoryCallbacks {
  std::mutex mutex;
  std::vector<std::pair<std::string, FreeMemoryCallback>> callbacks;

  static FreeMemoryCallbacks& instance() {
    // NB: leaked, and made on first use: later chapters register from
    // their static initializers, in whatever order the linker chose.
    static auto* callbacks = new FreeMemoryCallbacks();
    return *callbacks;
  }

  bool empty() {
    std::lock_guard<std::mutex> lock(mutex);
    return callbacks.empty();
  }

  /** Calls every callback; whether any freed memory. The caller holds no
   * lock of the allocator's. */
  bool run() {
    std::vector<std::pair<std::string, FreeMemoryCallback>> copy;
    {
      std::lock_guard<std::mutex> lock(mutex);
      copy = callbacks;
    }
    bool freed = false;
    for (const auto& [name, callback] : copy) {
      // NB: a failing callback must not turn into the allocation's error.
      try {
        freed = callback() || freed;
      } catch (const std::exception& error) {
        TORCH_WARN("accinte: the free-memory callback ", name,
                   " failed: ", error.what());
      }
    }
    return freed;
  }
};
// LITERALINCLUDE END: CH07_RUN_CALLBACKS

class CachingDeviceAllocator final : public c10::DeviceAllocator {
 public:
  CachingDeviceAllocator() {
    for (auto& state : states_) {
      state = std::make_unique<DeviceState>();
    }
  }

  // LITERALINCLUDE START: CH07_ALLOCATE
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex device = currentDevice();
    const c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (nbytes == 0) {
      return {nullptr, nullptr, &CachingDeviceAllocator::deleteBlock, where};
    }
    if (PluggableAllocator* pluggable = pluggable_.load()) {
      return allocatePluggable(pluggable, nbytes, where);
    }
    used_.store(true);
    if (!enabled_.load(std::memory_order_relaxed)) {
      return allocateUncached(nbytes, where);
    }
    // NB: no device has this much memory, and rounding it would wrap around.
    TORCH_CHECK_WITH(OutOfMemoryError,
                     nbytes <= std::numeric_limits<size_t>::max() / 2,
                     "accinte out of memory. Tried to allocate ", nbytes,
                     " bytes on device ", static_cast<int>(device));
    const c10::Stream stream = currentStream(device);
    const size_t size = blockSize(nbytes);
    DeviceState& state = *states_[device];
    std::unique_lock<std::mutex> lock(state.mutex);
    // NB: with free-memory callbacks registered, a request that finds no
    // room calls them and tries again before the last resort (see newSegment).
    bool lastResort = FreeMemoryCallbacks::instance().empty();
    Block* block = nullptr;
    while (block == nullptr) {
      processEvents(state); // LITERALINCLUDE EMPHASIZE
      // LITERALINCLUDE EMPHASIZE NEXT 4
      PrivatePool* routed = routedPool(state, stream);
      BlockPool& pool = size <= kSmallSize
                            ? (routed ? routed->small_pool : state.small_pool)
                            : (routed ? routed->large_pool : state.large_pool);
      // LITERALINCLUDE EMPHASIZE NEXT
      block = takeFreeBlock(state, pool, stream, size);
      if (block == nullptr) {
        // LITERALINCLUDE EMPHASIZE NEXT 2
        block =
            newSegment(state, device, pool, stream, size, nbytes, lastResort);
      }
      if (block == nullptr) {
        // NB: outside the device's lock, which is not recursive: a callback
        // frees tensors, and their blocks come back through free().
        lock.unlock();
        FreeMemoryCallbacks::instance().run(); // LITERALINCLUDE EMPHASIZE
        lock.lock();
        lastResort = true;
      }
    }
    // LITERALINCLUDE END: CH07_ALLOCATE
    // LITERALINCLUDE START: CH07_TAKE_BLOCK
    BlockPool& pool = *block->pool;
    if (shouldSplit(*block, size)) { // LITERALINCLUDE EMPHASIZE
      // The tail becomes a free block of its own in the same segment.
      auto* rest = new Block(device, stream, block->size - size, &pool,
                             static_cast<char*>(block->ptr) + size);
      rest->prev = block;
      rest->next = block->next;
      if (rest->next != nullptr) {
        rest->next->prev = rest;
      }
      block->next = rest;
      block->size = size;
      insertFree(state, rest);
    }
    block->allocated = true;
    block->requested = nbytes;
    update(state, pool, &DeviceStats::allocation, 1);
    update(state, pool, &DeviceStats::active, 1);
    update(state, pool, &DeviceStats::allocated_bytes, block->size);
    update(state, pool, &DeviceStats::active_bytes, block->size);
    update(state, pool, &DeviceStats::requested_bytes, nbytes);
    {
      std::lock_guard<std::mutex> blocks_lock(blocks_mutex_);
      allocated_blocks_.emplace(block->ptr, block);
    }
    reportToProfiler(state, block->ptr, static_cast<int64_t>(block->size),
                     where);
    return {block->ptr, block->ptr, &CachingDeviceAllocator::deleteBlock,
            where};
  }
  // LITERALINCLUDE END: CH07_TAKE_BLOCK

  c10::DeleterFnPtr raw_deleter() const override {
    return &CachingDeviceAllocator::deleteBlock;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const final {
    copyDeviceMemoryOnCurrentStream(dest, src, count);
  }

  bool initialized() override {
    return true;
  }

  // LITERALINCLUDE START: CH07_EMPTY_CACHE
  void emptyCache(c10::MempoolId_t mempool_id) override {
    for (c10::DeviceIndex device = 0; device < deviceCountOrZero(); ++device) {
      DeviceState& state = *states_[device];
      std::lock_guard<std::mutex> lock(state.mutex);
      // NB: accinteFree waits for the device, which a capture refuses.
      TORCH_CHECK(!capturing(state),
                  "accinte: empty_cache() cannot free "
                  "memory while device ",
                  static_cast<int>(device),
                  " captures a graph; call it before the capture or after");
      synchronizeEvents(state);
      // NB: {0, 0}, the default, names the general pools; another id one
      // private pool, released only once nothing references it.
      if (mempool_id == c10::MempoolId_t{0, 0}) {
        releaseCachedSegments(state);
      } else {
        releaseUnusedPool(state, mempool_id);
      }
    }
  }
  // LITERALINCLUDE END: CH07_EMPTY_CACHE

  // LITERALINCLUDE START: CH07_RECORD_STREAM
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    // NB: the block is found by its address, as CUDA's allocator finds it,
    // not by the DataPtr's deleter: a storage may hold a block through a
    // DataPtr of another layer's (chapter 14 wraps the memory it sends).
    // Memory this allocator did not make (empty tensors, from_blob, a
    // mapping of another process's) has no block to hold back.
    if (ptr.get() == nullptr ||
        ptr.device().type() != c10::DeviceType::PrivateUse1 ||
        ptr.device().index() < 0 || ptr.device().index() >= kMaxDevices) {
      return;
    }
    DeviceState& state = *states_[ptr.device().index()];
    // NB: looked up under the device's lock, which free() holds while it
    // erases a block: the block cannot go away in between.
    std::lock_guard<std::mutex> lock(state.mutex);
    Block* block = findBlock(ptr.get(), /*erase=*/false);
    if (block == nullptr || block->device != ptr.device().index()) {
      return;
    }
    if (stream != block->stream) {
      block->stream_uses.insert(stream);
    }
  }
  // LITERALINCLUDE END: CH07_RECORD_STREAM

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    TORCH_CHECK(pluggable_.load() == nullptr,
                "accinte: the allocator set by change_current_allocator keeps "
                "no memory statistics (the caching allocator does)");
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    return state.stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    accinte::resetAccumulatedStats(state.stats);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    forEachStat(state.stats, [](Stat& stat) { stat.reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return deviceMemoryInfo(device);
  }

  void setMemoryFraction(double fraction, c10::DeviceIndex device) {
    checkDeviceIndex(device);
    TORCH_CHECK_VALUE(fraction >= 0.0 && fraction <= 1.0,
                      "Invalid fraction value: ", fraction,
                      ". Allowed range: 0~1");
    const size_t total = deviceMemoryInfo(device).second;
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    state.fraction = fraction;
    state.allowed_max = fraction >= 1.0 ? std::numeric_limits<size_t>::max()
                                        : static_cast<size_t>(fraction * total);
  }

  double memoryFraction(c10::DeviceIndex device) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    return state.fraction;
  }

  void rawDelete(void* ptr) {
    if (ptr != nullptr && findBlock(ptr, /*erase=*/false) == nullptr) {
      bool uncached = false;
      bool pluggable = false;
      {
        std::lock_guard<std::mutex> lock(blocks_mutex_);
        uncached = uncached_.count(ptr) != 0;
        pluggable = pluggable_blocks_.count(ptr) != 0;
      }
      TORCH_CHECK(uncached || pluggable, "invalid device pointer: ", ptr);
      pluggable ? deletePluggable(ptr) : deleteUncached(ptr);
      return;
    }
    deleteBlock(ptr);
  }

  // LITERALINCLUDE START: CH07_PLUGGABLE
  /** Hands every later allocation to `allocator`; refused once the cache
   * has allocated, as its blocks could not be told apart from the new
   * allocator's memory any more. */
  void changeCurrentAllocator(std::shared_ptr<PluggableAllocator> allocator) {
    TORCH_CHECK_VALUE(allocator != nullptr && allocator->alloc != nullptr &&
                          allocator->free != nullptr,
                      "change_current_allocator: the allocator needs both an "
                      "alloc and a free function");
    TORCH_CHECK(!used_.load(),
                "change_current_allocator: the caching allocator has already "
                "allocated device memory in this process; the allocator can "
                "only be changed before the first allocation");
    std::lock_guard<std::mutex> lock(blocks_mutex_);
    // NB: kept for the rest of the process: tensors of an earlier choice
    // free through it.
    pluggable_.store(allocator.get());
    pluggable_keep_.push_back(std::move(allocator));
  }

  /** One call of the pluggable allocator's alloc function per tensor;
   * the deleter calls its free function with the same size, device and
   * stream. */
  c10::DataPtr allocatePluggable(PluggableAllocator* allocator, size_t nbytes,
                                 c10::Device where) {
    const c10::DeviceIndex device = where.index();
    accinteStream_t stream = nativeStream(currentStream(device));
    // LITERALINCLUDE EMPHASIZE NEXT
    void* ptr = allocator->alloc(static_cast<ssize_t>(nbytes), device, stream);
    TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr,
                     "accinte out of memory: the allocator set by "
                     "change_current_allocator returned NULL for ",
                     nbytes, " bytes on device ", static_cast<int>(device));
    {
      std::lock_guard<std::mutex> lock(blocks_mutex_);
      pluggable_blocks_.emplace(
          ptr, PluggableBlock{nbytes, device, stream, allocator});
    }
    return {ptr, ptr, &CachingDeviceAllocator::deletePluggable, where};
  }
  // LITERALINCLUDE END: CH07_PLUGGABLE

  std::string backend() const {
    return pluggable_.load() != nullptr ? "pluggable" : "native";
  }

  // LITERALINCLUDE START: CH07_POOL_ROUTES
  /** Creates pool `id` on `device`, or takes one more reference to it. */
  void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t id,
                          std::shared_ptr<PluggableAllocator> allocator) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    auto& pool = state.pools[id];
    if (pool == nullptr) {
      pool = std::make_unique<PrivatePool>(id, std::move(allocator));
    } else {
      // NB: may revive a pool whose references were all dropped while
      // some of its blocks were still in use.
      ++pool->use_count;
    }
  }

  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                           std::shared_ptr<PluggableAllocator> allocator) {
    TORCH_CHECK(pluggable_.load() == nullptr,
                "use_mem_pool: memory pools belong to the caching allocator, "
                "and change_current_allocator replaced it");
    createOrIncrefPool(device, id, std::move(allocator));
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    // LITERALINCLUDE EMPHASIZE NEXT
    state.routes.push_back({id, std::this_thread::get_id(), nullptr});
  }

  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    const auto it = std::find_if(
        state.routes.begin(), state.routes.end(), [&](const auto& route) {
          return route.id == id && !route.filter &&
                 route.thread == std::this_thread::get_id();
        });
    TORCH_CHECK(it != state.routes.end(), "end of use_mem_pool: pool (",
                id.first, ", ", id.second,
                ") routes no allocations of this "
                "thread on device ",
                static_cast<int>(device));
    state.routes.erase(it);
  }

  void releasePool(c10::DeviceIndex device, c10::MempoolId_t id) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    const auto it = state.pools.find(id);
    TORCH_INTERNAL_ASSERT(it != state.pools.end() && it->second->use_count > 0,
                          "releasing a memory pool nobody holds");
    if (--it->second->use_count == 0) { // LITERALINCLUDE EMPHASIZE
      synchronizeEvents(state);
      releaseUnusedPool(state, id); // LITERALINCLUDE EMPHASIZE
    }
  }
  // LITERALINCLUDE END: CH07_POOL_ROUTES

  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                           AllocationFilter filter) {
    TORCH_INTERNAL_ASSERT(filter != nullptr);
    TORCH_CHECK(pluggable_.load() == nullptr,
                "accinte: memory pools belong to the caching allocator, "
                "and change_current_allocator replaced it");
    createOrIncrefPool(device, id, nullptr);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    state.routes.push_back({id, std::thread::id(), std::move(filter)});
  }

  void endFilteredAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    const auto it = std::find_if(
        state.routes.begin(), state.routes.end(), [&](const auto& route) {
          return route.id == id && route.filter != nullptr;
        });
    TORCH_INTERNAL_ASSERT(it != state.routes.end(),
                          "no filtered route to the pool ends");
    state.routes.erase(it);
  }

  int poolUseCount(c10::DeviceIndex device, c10::MempoolId_t id) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    const auto it = state.pools.find(id);
    return it == state.pools.end() ? 0 : it->second->use_count;
  }

  std::vector<c10::MempoolId_t> poolRoutes(c10::DeviceIndex device) {
    checkDeviceIndex(device);
    DeviceState& state = *states_[device];
    std::lock_guard<std::mutex> lock(state.mutex);
    std::vector<c10::MempoolId_t> ids;
    for (const PoolRoute& route : state.routes) {
      if (!route.filter && route.thread == std::this_thread::get_id()) {
        ids.push_back(route.id);
      }
    }
    return ids;
  }

  // LITERALINCLUDE START: CH07_ENABLE
  /** Whether allocations go through the cache (true unless switched off,
   * as by torch.cuda.caching_allocator_enable(False)). */
  void setEnabled(bool enabled) {
    enabled_.store(enabled, std::memory_order_relaxed);
  }

  bool isEnabled() const {
    return enabled_.load(std::memory_order_relaxed);
  }

  /** With the cache switched off: one accinteMalloc per tensor, freed with
   * accinteFree, outside the pools and the statistics, as CUDA's allocator
   * does with cudaMalloc and cudaFree. */
  c10::DataPtr allocateUncached(size_t nbytes, c10::Device where) {
    void* ptr = nullptr;
    accinteError_t status = accinteMalloc(&ptr, nbytes);
    if (status == accinteErrorMemoryAllocation &&
        FreeMemoryCallbacks::instance().run()) {
      status = accinteMalloc(&ptr, nbytes);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, status != accinteErrorMemoryAllocation,
                     "accinte out of memory. Tried to allocate ", nbytes,
                     " bytes on device ", static_cast<int>(where.index()),
                     " with the caching allocator switched off");
    ACCINTE_CHECK(status);
    {
      std::lock_guard<std::mutex> lock(blocks_mutex_);
      uncached_.insert(ptr);
    }
    return {ptr, ptr, &CachingDeviceAllocator::deleteUncached, where};
  }
  // LITERALINCLUDE END: CH07_ENABLE

  // LITERALINCLUDE START: CH07_SNAPSHOT
  std::vector<SegmentSnapshot> snapshot() {
    std::vector<SegmentSnapshot> segments;
    for (c10::DeviceIndex device = 0; device < deviceCountOrZero(); ++device) {
      DeviceState& state = *states_[device];
      std::lock_guard<std::mutex> lock(state.mutex);
      // Every block is allocated, cached in a pool or waiting for events;
      // the first block of each segment leads to the others.
      std::vector<Block*> heads;
      const auto note = [&heads](Block* block) {
        if (block->prev == nullptr) {
          heads.push_back(block);
        }
      };
      {
        std::lock_guard<std::mutex> blocks_lock(blocks_mutex_);
        for (const auto& [ptr, block] : allocated_blocks_) {
          if (block->device == device) {
            note(block);
          }
        }
      }
      for (BlockPool* pool : {&state.small_pool, &state.large_pool}) {
        std::for_each(pool->blocks.begin(), pool->blocks.end(), note);
      }
      for (const auto& [id, priv] : state.pools) {
        for (BlockPool* pool : {&priv->small_pool, &priv->large_pool}) {
          std::for_each(pool->blocks.begin(), pool->blocks.end(), note);
        }
      }
      for (const auto& [event, block] : state.pending) {
        note(block);
      }
      std::sort(heads.begin(), heads.end());
      heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
      for (Block* head : heads) {
        segments.push_back(segmentSnapshot(device, head));
      }
    }
    std::sort(segments.begin(), segments.end(),
              [](const SegmentSnapshot& a, const SegmentSnapshot& b) {
                return std::make_pair(a.device, a.address) <
                       std::make_pair(b.device, b.address);
              });
    return segments;
  }
  // LITERALINCLUDE END: CH07_SNAPSHOT

  static CachingDeviceAllocator& instance() {
    // NB: leaked on purpose: tensors may be freed during interpreter
    // shutdown, after static destructors would have run.
    static auto* allocator = new CachingDeviceAllocator();
    return *allocator;
  }

 private:
  /** Adds `delta` to a statistic, both in total and for `pool`'s class. */
  static void update(DeviceState& state, const BlockPool& pool,
                     StatArray DeviceStats::*array, int64_t delta) {
    StatArray& stats = state.stats.*array;
    const auto pool_type =
        pool.small ? StatType::SMALL_POOL : StatType::LARGE_POOL;
    for (const StatType type : {StatType::AGGREGATE, pool_type}) {
      Stat& stat = stats[static_cast<size_t>(type)];
      delta >= 0 ? stat.increase(delta) : stat.decrease(-delta);
    }
  }

  // LITERALINCLUDE START: CH07_PROFILER
  /** Reports an allocation (`delta` > 0) or a free to PyTorch's profiler
   * when it records memory on this thread (`profile_memory=True`), with the
   * device's totals after it, as CUDA's caching allocator does. */
  static void reportToProfiler(const DeviceState& state, void* ptr,
                               int64_t delta, c10::Device device) {
    if (!c10::memoryProfilingEnabled()) {
      return;
    }
    constexpr auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
    c10::reportMemoryUsageToProfiler(
        ptr, delta, state.stats.allocated_bytes[aggregate].current,
        state.stats.reserved_bytes[aggregate].current, device);
  }
  // LITERALINCLUDE END: CH07_PROFILER

  /** The private pool serving an allocation of the calling thread on
   * `stream`, nullptr if none does.
   * NB: the first route that matches wins, as on CUDA, so an inner
   * use_mem_pool of the same thread does not take over from an outer one. */
  static PrivatePool* routedPool(DeviceState& state, c10::Stream stream) {
    if (state.routes.empty()) {
      return nullptr;
    }
    const accinteStream_t native = nativeStream(stream);
    for (const PoolRoute& route : state.routes) {
      if (route.takes(native)) {
        return state.pools.at(route.id).get();
      }
    }
    return nullptr;
  }

  static bool shouldSplit(const Block& block, size_t size) {
    const size_t rest = block.size - size;
    return block.pool->small ? rest >= kMinBlockSize : rest > kSmallSize;
  }

  // A free block in a split segment cannot be returned to the device: that
  // is what inactive_split counts.
  static void insertFree(DeviceState& state, Block* block) {
    TORCH_INTERNAL_ASSERT(block->isCached());
    block->pool->blocks.insert(block);
    block->counted_inactive_split = block->isSplit();
    if (block->counted_inactive_split) {
      update(state, *block->pool, &DeviceStats::inactive_split, 1);
      update(state, *block->pool, &DeviceStats::inactive_split_bytes,
             static_cast<int64_t>(block->size));
    }
  }

  static void eraseFree(DeviceState& state, Block* block) {
    const size_t erased = block->pool->blocks.erase(block);
    TORCH_INTERNAL_ASSERT(erased == 1);
    if (block->counted_inactive_split) {
      update(state, *block->pool, &DeviceStats::inactive_split, -1);
      update(state, *block->pool, &DeviceStats::inactive_split_bytes,
             -static_cast<int64_t>(block->size));
      block->counted_inactive_split = false;
    }
  }

  // LITERALINCLUDE START: CH07_FIND_BLOCK
  /** The smallest cached block of `stream` with room for `size`, removed
   * from its pool; nullptr if there is none. */
  static Block* takeFreeBlock(DeviceState& state, BlockPool& pool,
                              c10::Stream stream, size_t size) {
    Block key(stream.device_index(), stream, size, &pool, nullptr);
    const auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) {
      return nullptr; // NB: never a block of another stream, see Block
    }
    Block* block = *it;
    eraseFree(state, block);
    return block;
  }
  // LITERALINCLUDE END: CH07_FIND_BLOCK

  // LITERALINCLUDE START: CH07_OOM
  /** Reserves a new segment from the device. When the device is full:
   * returns nullptr unless this is the `lastResort` (the caller then runs
   * the free-memory callbacks and tries again); as the last resort, frees
   * the cache and retries once, then raises torch.OutOfMemoryError. */
  Block* newSegment(DeviceState& state, c10::DeviceIndex device,
                    BlockPool& pool, c10::Stream stream, size_t size,
                    size_t requested, bool lastResort) {
    const size_t nbytes = segmentSize(size);
    void* ptr = nullptr;
    accinteError_t status = reserve(state, pool, stream, &ptr, nbytes);
    if (status == accinteErrorMemoryAllocation && !lastResort) {
      return nullptr; // LITERALINCLUDE EMPHASIZE
    }
    if (status == accinteErrorMemoryAllocation) {
      ++state.stats.num_alloc_retries;
      // LITERALINCLUDE EMPHASIZE NEXT 3
      synchronizeEvents(state);
      releaseCachedSegments(state);
      status = reserve(state, pool, stream, &ptr, nbytes);
    }
    if (status == accinteErrorMemoryAllocation) {
      ++state.stats.num_ooms;
      size_t free = 0;
      size_t total = 0;
      (void)accinteMemGetInfo(&free, &total);
      const auto aggregate = static_cast<size_t>(StatType::AGGREGATE);
      // LITERALINCLUDE EMPHASIZE NEXT 2
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "accinte out of memory. Tried to allocate ",
          requested, " bytes (a segment of ", nbytes, " bytes) on device ",
          static_cast<int>(device), ", which has a capacity of ", total,
          " bytes, of which ", free, " bytes are free. Allocated by tensors: ",
          state.stats.allocated_bytes[aggregate].current,
          " bytes; reserved by the caching allocator: ",
          state.stats.reserved_bytes[aggregate].current, " bytes",
          allowedInfo(state),
          ". The capacity is set by ACCINTE_DEVICE_MEMORY.");
    }
    ACCINTE_CHECK(status);
    ++state.stats.num_device_alloc;
    if (pool.owner != nullptr) {
      ++pool.owner->segments;
    }
    update(state, pool, &DeviceStats::segment, 1);
    update(state, pool, &DeviceStats::reserved_bytes,
           static_cast<int64_t>(nbytes));
    return new Block(device, stream, nbytes, &pool, ptr);
  }
  // LITERALINCLUDE END: CH07_OOM

  /** accinteMalloc of a segment (or the alloc function of a pool's own
   * allocator), refused as the device refuses it when the segment would take
   * the reserved bytes past the process's cap. */
  static accinteError_t reserve(DeviceState& state, const BlockPool& pool,
                                c10::Stream stream, void** ptr, size_t nbytes) {
    const auto reserved = static_cast<size_t>(
        state.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)]
            .current);
    if (nbytes > state.allowed_max || reserved > state.allowed_max - nbytes) {
      return accinteErrorMemoryAllocation;
    }
    if (pool.owner != nullptr && pool.owner->allocator != nullptr) {
      *ptr = pool.owner->allocator->alloc(static_cast<ssize_t>(nbytes),
                                          stream.device_index(),
                                          nativeStream(stream));
      return *ptr == nullptr ? accinteErrorMemoryAllocation : accinteSuccess;
    }
    return mallocMaybeCapturing(nativeStream(stream), ptr, nbytes);
  }

  /**
   * accinteMalloc for an allocation on `stream`. NB: while `stream` is
   * capturing a graph (chapter 15), the calling thread switches to relaxed
   * capture mode for this one call, as CUDA's allocator does: a blocking
   * call is refused during a global capture, but the memory of a graph's
   * pool is only reserved, never freed before the graph is gone, so no
   * replay can see it change.
   */
  static accinteError_t mallocMaybeCapturing(accinteStream_t stream, void** ptr,
                                             size_t nbytes) {
    if (!captures(stream)) {
      return accinteMalloc(ptr, nbytes);
    }
    accinteStreamCaptureMode mode = accinteStreamCaptureModeRelaxed;
    ACCINTE_CHECK(accinteThreadExchangeStreamCaptureMode(&mode));
    const accinteError_t result = accinteMalloc(ptr, nbytes);
    ACCINTE_CHECK(accinteThreadExchangeStreamCaptureMode(&mode));
    return result;
  }

  /** What the out-of-memory message says of a cap, if one is set. */
  static std::string allowedInfo(const DeviceState& state) {
    if (state.fraction >= 1.0) {
      return "";
    }
    return c10::str("; the process may reserve ", state.allowed_max,
                    " bytes (set_per_process_memory_fraction(", state.fraction,
                    "))");
  }

  static SegmentSnapshot segmentSnapshot(c10::DeviceIndex device, Block* head) {
    SegmentSnapshot segment{};
    segment.device = device;
    segment.address = reinterpret_cast<uintptr_t>(head->ptr);
    segment.segment_type = head->pool->small ? "small" : "large";
    segment.pool_id = head->pool->owner != nullptr ? head->pool->owner->id
                                                   : c10::MempoolId_t{0, 0};
    try {
      segment.stream = reinterpret_cast<uintptr_t>(nativeStream(head->stream));
    } catch (const c10::Error&) {
      segment.stream = 0; // NB: not a live stream any more
    }
    for (Block* block = head; block != nullptr; block = block->next) {
      const bool active = block->allocated || block->pending_events > 0;
      segment.total_size += block->size;
      if (block->allocated) {
        segment.allocated_size += block->size;
        segment.requested_size += block->requested;
      }
      if (active) {
        segment.active_size += block->size;
      }
      segment.blocks.push_back(
          BlockSnapshot{reinterpret_cast<uintptr_t>(block->ptr), block->size,
                        block->allocated ? block->requested : 0,
                        block->allocated ? "active_allocated"
                        : active         ? "active_pending_free"
                                         : "inactive"});
    }
    return segment;
  }

  // LITERALINCLUDE START: CH07_RELEASE
  /** Returns every cached segment that is not split to the device: those of
   * the general pools and of private pools nothing references any more,
   * which are forgotten once they have no segment left. A private pool
   * still referenced keeps its segments. */
  static void releaseCachedSegments(DeviceState& state) {
    releaseWholeBlocks(state, state.small_pool);
    releaseWholeBlocks(state, state.large_pool);
    std::vector<c10::MempoolId_t> unused;
    for (const auto& [id, pool] : state.pools) {
      if (pool->use_count == 0) { // LITERALINCLUDE EMPHASIZE
        unused.push_back(id);
      }
    }
    for (const c10::MempoolId_t& id : unused) {
      releaseUnusedPool(state, id);
    }
  }

  /** Releases the cached segments of private pool `id` if nothing
   * references it, and forgets it once it has none left. */
  static void releaseUnusedPool(DeviceState& state, c10::MempoolId_t id) {
    const auto it = state.pools.find(id);
    if (it == state.pools.end() || it->second->use_count > 0) {
      return;
    }
    releaseWholeBlocks(state, it->second->small_pool);
    releaseWholeBlocks(state, it->second->large_pool);
    if (it->second->segments == 0) { // LITERALINCLUDE EMPHASIZE
      state.pools.erase(it);
    }
  }
  // LITERALINCLUDE END: CH07_RELEASE

  // LITERALINCLUDE START: CH07_WHOLE_BLOCKS
  static void releaseWholeBlocks(DeviceState& state, BlockPool& pool) {
    std::vector<Block*> whole;
    for (Block* block : pool.blocks) {
      if (!block->isSplit()) {
        whole.push_back(block);
      }
    }
    for (Block* block : whole) {
      eraseFree(state, block);
      PrivatePool* owner = pool.owner;
      if (owner != nullptr && owner->allocator != nullptr) {
        accinteStream_t stream = nullptr;
        try {
          stream = nativeStream(block->stream);
        } catch (const c10::Error&) {
          stream = nullptr; // NB: not a live stream any more
        }
        owner->allocator->free(block->ptr, static_cast<ssize_t>(block->size),
                               block->device, stream);
      } else {
        // NB: accinteFree waits for the whole device, as cudaFree does; it
        // is only reached from empty_cache, the out-of-memory path and the
        // end of a memory pool.
        const accinteError_t status = accinteFree(block->ptr);
        if (status != accinteSuccess) {
          // NB: the segment is still the device's: it stays cached rather
          // than leave the books.
          TORCH_WARN_ONCE("accinte: freeing device memory failed: ",
                          accinteGetErrorString(status));
          insertFree(state, block);
          continue;
        }
      }
      if (owner != nullptr) {
        --owner->segments;
      }
      ++state.stats.num_device_free;
      update(state, pool, &DeviceStats::segment, -1);
      update(state, pool, &DeviceStats::reserved_bytes,
             -static_cast<int64_t>(block->size));
      delete block;
    }
  }
  // LITERALINCLUDE END: CH07_WHOLE_BLOCKS

  static void deleteUncached(void* ptr) {
    CachingDeviceAllocator& self = instance();
    {
      std::lock_guard<std::mutex> lock(self.blocks_mutex_);
      self.uncached_.erase(ptr);
    }
    // NB: waits for the whole device, as cudaFree does.
    const accinteError_t status = accinteFree(ptr);
    if (status != accinteSuccess) {
      TORCH_WARN_ONCE("accinte: freeing device memory failed: ",
                      accinteGetErrorString(status));
    }
  }

  static void deletePluggable(void* ptr) {
    CachingDeviceAllocator& self = instance();
    PluggableBlock block{};
    {
      std::lock_guard<std::mutex> lock(self.blocks_mutex_);
      const auto it = self.pluggable_blocks_.find(ptr);
      TORCH_INTERNAL_ASSERT(it != self.pluggable_blocks_.end(),
                            "accinte: freeing a pointer the pluggable "
                            "allocator did not allocate");
      block = std::move(it->second);
      self.pluggable_blocks_.erase(it);
    }
    block.allocator->free(ptr, static_cast<ssize_t>(block.size), block.device,
                          block.stream);
  }

  // LITERALINCLUDE START: CH07_FREE
  static void deleteBlock(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    CachingDeviceAllocator& self = instance();
    Block* block = self.findBlock(ptr, /*erase=*/false);
    TORCH_INTERNAL_ASSERT(block != nullptr,
                          "accinte: freeing a pointer this allocator does "
                          "not own");
    self.free(block);
  }

  void free(Block* block) {
    DeviceState& state = *states_[block->device];
    std::lock_guard<std::mutex> lock(state.mutex);
    // NB: erased under the device's lock, so that a snapshot, which holds
    // it, finds every block either allocated or in the allocator's hands.
    findBlock(block->ptr, /*erase=*/true);
    block->allocated = false; // LITERALINCLUDE EMPHASIZE
    update(state, *block->pool, &DeviceStats::allocation, -1);
    update(state, *block->pool, &DeviceStats::allocated_bytes,
           -static_cast<int64_t>(block->size));
    update(state, *block->pool, &DeviceStats::requested_bytes,
           -static_cast<int64_t>(block->requested));
    reportToProfiler(state, block->ptr, -static_cast<int64_t>(block->size),
                     c10::Device(c10::DeviceType::PrivateUse1, block->device));
    // LITERALINCLUDE END: CH07_FREE
    // LITERALINCLUDE START: CH07_STREAM_EVENTS
    std::unordered_set<c10::Stream> uses;
    std::swap(uses, block->stream_uses);
    if (anyCapturing(uses)) {
      // NB: counted as one pending event until the events are recorded.
      ++block->pending_events;
      state.deferred.emplace_back(block, std::move(uses));
      return;
    }
    recordUses(state, block, uses);
  }

  /** Records an event on each stream of `uses` that `block` waits for, and
   * returns the block to its pool if there is none. */
  static void recordUses(DeviceState& state, Block* block,
                         const std::unordered_set<c10::Stream>& uses) {
    for (const c10::Stream& stream : uses) { // LITERALINCLUDE EMPHASIZE
      // An event on each other stream that used the block: it completes
      // when the work enqueued there so far, which may read or write the
      // block, has finished.
      accinteStream_t native = nullptr;
      try {
        native = nativeStream(stream);
      } catch (const c10::Error&) {
        continue; // not a live stream: nothing of it can be pending
      }
      // NB: the event only says when the block's last use is over; a
      // failure of that work is left to the user's own synchronize.
      accinteEvent_t event = nullptr;
      accinteError_t status = accinteEventCreateWithFlags(
          &event, accinteEventDisableTiming | accinteEventDisableFailureReport);
      if (status == accinteSuccess) {
        status = accinteEventRecord(event, native); // LITERALINCLUDE EMPHASIZE
      }
      if (status != accinteSuccess) {
        // NB: a deleter must not throw; waiting for the stream is the safe
        // fallback.
        if (event != nullptr) {
          (void)accinteEventDestroy(event);
        }
        (void)accinteStreamSynchronize(native);
        continue;
      }
      state.pending.emplace_back(event, block); // LITERALINCLUDE EMPHASIZE
      ++block->pending_events;
    }
    if (block->pending_events == 0) {
      returnToPool(state, block); // LITERALINCLUDE EMPHASIZE
    }
  }
  // LITERALINCLUDE END: CH07_STREAM_EVENTS

  // LITERALINCLUDE START: CH07_COALESCE
  /** Puts a block whose last use is over back in its pool, merged with its
   * free neighbours in the segment. */
  static void returnToPool(DeviceState& state, Block* block) {
    TORCH_INTERNAL_ASSERT(block->isCached());
    BlockPool& pool = *block->pool;
    update(state, pool, &DeviceStats::active, -1);
    update(state, pool, &DeviceStats::active_bytes,
           -static_cast<int64_t>(block->size));
    // LITERALINCLUDE EMPHASIZE NEXT
    if (block->prev != nullptr && block->prev->isCached()) {
      Block* prev = block->prev;
      eraseFree(state, prev);
      block->ptr = prev->ptr;
      block->size += prev->size;
      block->prev = prev->prev;
      if (block->prev != nullptr) {
        block->prev->next = block;
      }
      delete prev;
    }
    // LITERALINCLUDE EMPHASIZE NEXT
    if (block->next != nullptr && block->next->isCached()) {
      Block* next = block->next;
      eraseFree(state, next);
      block->size += next->size;
      block->next = next->next;
      if (block->next != nullptr) {
        block->next->prev = block;
      }
      delete next;
    }
    insertFree(state, block); // LITERALINCLUDE EMPHASIZE
  }
  // LITERALINCLUDE END: CH07_COALESCE

  /** Whether allocations of `state`'s device are routed to a pool by
   * stream, which only a capture does. */
  static bool capturing(const DeviceState& state) {
    return std::any_of(
        state.routes.begin(), state.routes.end(),
        [](const PoolRoute& route) { return route.filter != nullptr; });
  }

  /** Whether a stream of `streams` is capturing a graph. */
  static bool anyCapturing(const std::unordered_set<c10::Stream>& streams) {
    for (const c10::Stream& stream : streams) {
      accinteStream_t native = nullptr;
      try {
        native = nativeStream(stream);
      } catch (const c10::Error&) {
        continue; // not a live stream: it captures nothing
      }
      if (captures(native)) {
        return true;
      }
    }
    return false;
  }

  /** Whether `stream` is capturing a graph (a failed query: no). */
  static bool captures(accinteStream_t stream) {
    accinteStreamCaptureStatus status = accinteStreamCaptureStatusNone;
    return accinteStreamIsCapturing(stream, &status) == accinteSuccess &&
           status != accinteStreamCaptureStatusNone;
  }

  /** Records the events of blocks freed during a capture once none of their
   * streams captures any more. */
  static void processDeferred(DeviceState& state) {
    for (auto it = state.deferred.begin(); it != state.deferred.end();) {
      if (anyCapturing(it->second)) {
        ++it;
        continue;
      }
      Block* block = it->first;
      const std::unordered_set<c10::Stream> uses = std::move(it->second);
      it = state.deferred.erase(it);
      --block->pending_events;
      recordUses(state, block, uses);
    }
  }

  /** Returns the blocks whose events have all completed to their pools. */
  static void processEvents(DeviceState& state) {
    if (C10_UNLIKELY(!state.deferred.empty())) {
      processDeferred(state);
    }
    for (auto it = state.pending.begin(); it != state.pending.end();) {
      if (accinteEventQuery(it->first) == accinteErrorNotReady) {
        ++it;
        continue;
      }
      Block* block = it->second;
      (void)accinteEventDestroy(it->first);
      it = state.pending.erase(it);
      if (--block->pending_events == 0) {
        returnToPool(state, block);
      }
    }
  }

  /** Waits for every pending event, then returns their blocks. */
  static void synchronizeEvents(DeviceState& state) {
    ++state.stats.num_sync_all_streams;
    for (auto& [event, block] : state.pending) {
      (void)accinteEventSynchronize(event);
    }
    processEvents(state);
    TORCH_INTERNAL_ASSERT(state.pending.empty());
  }

  /** The allocated block starting at `ptr` (nullptr if none). */
  Block* findBlock(void* ptr, bool erase) {
    std::lock_guard<std::mutex> lock(blocks_mutex_);
    const auto it = allocated_blocks_.find(ptr);
    if (it == allocated_blocks_.end()) {
      return nullptr;
    }
    Block* block = it->second;
    if (erase) {
      allocated_blocks_.erase(it);
    }
    return block;
  }

  std::array<std::unique_ptr<DeviceState>, kMaxDevices> states_;
  // NB: one map for all devices, so that a deleter, which gets nothing but
  // the pointer, finds its block and device.
  std::mutex blocks_mutex_;
  std::unordered_map<void*, Block*> allocated_blocks_;
  // Memory allocated while the cache was switched off.
  std::unordered_set<void*> uncached_;
  // Memory of the pluggable allocator, with what its free function takes.
  std::unordered_map<void*, PluggableBlock> pluggable_blocks_;
  std::atomic<bool> enabled_{true};
  // Whether the caching allocator has allocated (then the allocator can no
  // longer be changed), and the allocator change_current_allocator set.
  std::atomic<bool> used_{false};
  std::atomic<PluggableAllocator*> pluggable_{nullptr};
  std::vector<std::shared_ptr<PluggableAllocator>> pluggable_keep_;
};

// LITERALINCLUDE START: CH07_REGISTER
// NB: chapter 01 registered its simple allocator with priority 0; the higher
// priority wins whichever static initializer runs first.
struct RegisterCachingDeviceAllocator {
  RegisterCachingDeviceAllocator() {
    c10::SetAllocator(c10::DeviceType::PrivateUse1,
                      &CachingDeviceAllocator::instance(), /*priority=*/1);
  }
} register_caching_device_allocator;
// LITERALINCLUDE END: CH07_REGISTER

} // namespace

void registerFreeMemoryCallback(const std::string& name,
                                FreeMemoryCallback callback) {
  TORCH_CHECK(callback != nullptr, "accinte: the free-memory callback ", name,
              " is null");
  auto& registry = FreeMemoryCallbacks::instance();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (const auto& [known, ignored] : registry.callbacks) {
    TORCH_CHECK(known != name, "accinte: a free-memory callback named ", name,
                " is already registered");
  }
  registry.callbacks.emplace_back(name, callback);
}

std::vector<std::string> freeMemoryCallbacks() {
  auto& registry = FreeMemoryCallbacks::instance();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, callback] : registry.callbacks) {
    names.push_back(name);
  }
  return names;
}

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  CachingDeviceAllocator::instance().setMemoryFraction(fraction, device);
}

double memoryFraction(c10::DeviceIndex device) {
  return CachingDeviceAllocator::instance().memoryFraction(device);
}

void* rawAlloc(size_t nbytes) {
  return CachingDeviceAllocator::instance().raw_allocate(nbytes);
}

void rawDelete(void* ptr) {
  CachingDeviceAllocator::instance().rawDelete(ptr);
}

void setCachingAllocatorEnabled(bool enabled) {
  CachingDeviceAllocator::instance().setEnabled(enabled);
}

bool cachingAllocatorEnabled() {
  return CachingDeviceAllocator::instance().isEnabled();
}

std::vector<SegmentSnapshot> memorySnapshot() {
  return CachingDeviceAllocator::instance().snapshot();
}

void changeCurrentAllocator(std::shared_ptr<PluggableAllocator> allocator) {
  CachingDeviceAllocator::instance().changeCurrentAllocator(
      std::move(allocator));
}

std::string allocatorBackend() {
  return CachingDeviceAllocator::instance().backend();
}

namespace {
// NB: ids {0, n} from 1, as CUDA's user-created pools; {0, 0} is the
// general pools.
std::atomic<c10::CaptureId_t> next_pool_id{1};
} // namespace

MemPool::MemPool(std::shared_ptr<PluggableAllocator> allocator)
    : id_{0, next_pool_id++},
      device_(currentDevice()),
      allocator_(std::move(allocator)) {
  CachingDeviceAllocator::instance().createOrIncrefPool(device_, id_,
                                                        allocator_);
}

MemPool::~MemPool() {
  // NB: a destructor must not throw; the pool is in the allocator's table
  // since the constructor put it there.
  try {
    CachingDeviceAllocator::instance().releasePool(device_, id_);
  } catch (const c10::Error& error) {
    TORCH_WARN("accinte: releasing a memory pool failed: ", error.what());
  }
}

int MemPool::useCount() const {
  return CachingDeviceAllocator::instance().poolUseCount(device_, id_);
}

void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                         std::shared_ptr<PluggableAllocator> allocator) {
  CachingDeviceAllocator::instance().beginAllocateToPool(device, id,
                                                         std::move(allocator));
}

void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  CachingDeviceAllocator::instance().endAllocateToPool(device, id);
}

void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id,
                         AllocationFilter filter) {
  CachingDeviceAllocator::instance().beginAllocateToPool(device, id,
                                                         std::move(filter));
}

void endFilteredAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  CachingDeviceAllocator::instance().endFilteredAllocateToPool(device, id);
}

void releasePool(c10::DeviceIndex device, c10::MempoolId_t id) {
  CachingDeviceAllocator::instance().releasePool(device, id);
}

int poolUseCount(c10::DeviceIndex device, c10::MempoolId_t id) {
  return CachingDeviceAllocator::instance().poolUseCount(device, id);
}

std::vector<c10::MempoolId_t> poolRoutes(c10::DeviceIndex device) {
  return CachingDeviceAllocator::instance().poolRoutes(device);
}
} // namespace accinte
