// Chapter 07: pinned host memory. PyTorch's generic caching host allocator
// (ATen/core/CachingHostAllocator.h) keeps the cache and the bookkeeping;
// this file supplies the accinte runtime calls it is written against: pinned
// allocation, events, and the current stream.

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/core/CachingHostAllocator.h>

#include <optional>
#include <utility>
#include <vector>

namespace accinte {
namespace {

// LITERALINCLUDE START: CH07_HOST_EVENT
/**
 * An emulator event recorded on a stream, owned (destroyed with the object).
 * The host allocator records one on each stream that used a pinned block
 * when the block is freed, and reuses the block once all have completed.
 */
class HostEvent {
 public:
  // NB: made while a pinned tensor is freed, inside its deleter, which must
  // not throw: if the event cannot be recorded, waiting for the stream here
  // gives the same guarantee, and the event then counts as completed.
  explicit HostEvent(const c10::Stream& stream) {
    accinteStream_t native = nullptr;
    try {
      native = nativeStream(stream); // LITERALINCLUDE EMPHASIZE
    } catch (const c10::Error&) {
      return; // not a live stream: nothing of it can be pending
    }
    // NB: the event only says when the block's last use is over; a failure
    // of that work is left to the user's own synchronize.
    if (accinteEventCreateWithFlags(
            &event_, accinteEventDisableTiming |
                         accinteEventDisableFailureReport) == accinteSuccess &&
        accinteEventRecord(event_, native) == accinteSuccess) {
      return;
    }
    if (event_ != nullptr) {
      (void)accinteEventDestroy(event_);
      event_ = nullptr;
    }
    (void)accinteStreamSynchronize(native); // LITERALINCLUDE EMPHASIZE
  }
  HostEvent(HostEvent&& other) noexcept
      : event_(std::exchange(other.event_, nullptr)) {}
  HostEvent& operator=(HostEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  HostEvent(const HostEvent&) = delete;
  HostEvent& operator=(const HostEvent&) = delete;
  ~HostEvent() {
    if (event_ != nullptr) {
      (void)accinteEventDestroy(event_);
    }
  }

  /** Whether the work before the record has finished. */
  bool completed() const {
    return event_ == nullptr ||
           accinteEventQuery(event_) != accinteErrorNotReady;
  }

 private:
  accinteEvent_t event_ = nullptr;
};
// LITERALINCLUDE END: CH07_HOST_EVENT

// LITERALINCLUDE START: CH07_HOST_IMPL
/**
 * The runtime half of the caching host allocator. The generic half rounds
 * sizes to powers of two, caches freed blocks by size, and on free records
 * an event on every stream that `record_event` named for the block (the
 * asynchronous copies that read or wrote it); a block is reused only once
 * those events have completed.
 */
struct AccinteHostAllocatorImpl
    : public at::CachingHostAllocatorImpl<c10::Stream, HostEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    // LITERALINCLUDE EMPHASIZE NEXT
    const accinteError_t status = accinteMallocHost(ptr, size);
    TORCH_CHECK_WITH(OutOfMemoryError,
                     status != accinteErrorHostMemoryAllocation,
                     "accinte: out of pinned host memory, tried to allocate ",
                     size, " bytes");
    ACCINTE_CHECK(status);
  }

  // NB: reached from empty_cache, and for a block larger than
  // pinned_max_cached_size_mb (PYTORCH_ALLOC_CONF; no limit by default),
  // which is never cached, from the free that releases it or from the event
  // processing that finds its last copy done (in a later allocation, or on
  // PyTorch's thread with pinned_use_background_threads). accinteFreeHost
  // waits for every stream, and refuses to run on a stream's worker.
  void free_block(at::HostBlock<c10::Stream>* block) override {
    // LITERALINCLUDE EMPHASIZE NEXT
    const accinteError_t status = accinteFreeHost(block->ptr_);
    if (status != accinteSuccess) {
      TORCH_WARN_ONCE("accinte: freeing pinned memory failed: ",
                      accinteGetErrorString(status));
    }
  }

  void record_stream(std::optional<std::vector<HostEvent>>& events,
                     c10::Stream stream) override {
    events->emplace_back(stream); // LITERALINCLUDE EMPHASIZE
  }

  bool query_event(HostEvent& event) override {
    return event.completed(); // LITERALINCLUDE EMPHASIZE
  }

  c10::Stream get_current_stream() const override {
    return currentStream(currentDevice());
  }

  // The emulator has no graph capture.
  bool stream_is_capturing(c10::Stream /*stream*/) const override {
    return false;
  }
};
// LITERALINCLUDE END: CH07_HOST_IMPL

void deletePinnedBlock(void* context);

/** The allocator object PyTorch sees: allocate, free, record_event, stats. */
struct AccinteHostAllocator final
    : public at::CachingHostAllocatorInterface<AccinteHostAllocatorImpl,
                                               deletePinnedBlock> {};

AccinteHostAllocator& hostAllocator() {
  // NB: leaked on purpose: pinned tensors may die during interpreter
  // shutdown, after static destructors would have run.
  static auto* allocator = new AccinteHostAllocator();
  return *allocator;
}

void deletePinnedBlock(void* context) {
  hostAllocator().free(context);
}

// LITERALINCLUDE START: CH07_HOST_REGISTER
// Two registrations: chapter 01's hooks hand the allocator to
// pin_memory()/empty(pin_memory=True), and PyTorch's host allocator registry
// serves torch.accelerator's host memory functions.
struct RegisterHostAllocator {
  RegisterHostAllocator() {
    registerPinnedMemoryAllocator(&hostAllocator());
    at::setHostAllocator(at::kPrivateUse1, &hostAllocator());
  }
} register_host_allocator;
// LITERALINCLUDE END: CH07_HOST_REGISTER

} // namespace
} // namespace accinte
