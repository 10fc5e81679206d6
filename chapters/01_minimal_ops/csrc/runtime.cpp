#include <01_minimal_ops/csrc/runtime.h>

#include <01_minimal_ops/csrc/exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <mutex>

namespace accinte {
namespace {

constexpr c10::DeviceType kAccinte = c10::DeviceType::PrivateUse1;

/** Switches the emulator's current device for one scope. */
class ScopedEmulatorDevice {
 public:
  explicit ScopedEmulatorDevice(c10::DeviceIndex index) {
    ACCINTE_CHECK(accinteGetDevice(&previous_));
    if (previous_ != index) {
      ACCINTE_CHECK(accinteSetDevice(index));
    }
    target_ = index;
  }
  ~ScopedEmulatorDevice() {
    if (previous_ != target_) {
      // NB: a destructor must not throw; the previous index was valid.
      (void)accinteSetDevice(previous_);
    }
  }
  ScopedEmulatorDevice(const ScopedEmulatorDevice&) = delete;
  ScopedEmulatorDevice& operator=(const ScopedEmulatorDevice&) = delete;

 private:
  int previous_ = 0;
  int target_ = 0;
};

// LITERALINCLUDE START: CH01_STREAM_REGISTRY
/**
 * The streams this backend created, per device.
 *
 * A `c10::Stream` carries only a device and a 64-bit id, so the backend keeps
 * the mapping to emulator handles: id 0 is the device's default stream and id
 * k > 0 is the k-th stream created on it.
 *
 * NB: as CUDA's, every stream PyTorch asks for (`torch.Stream()`,
 * `torch.accinte.Stream()`, the guard's pool) comes from a fixed pool per
 * device and priority, handed out round robin and created on first use.
 * Each emulator stream owns a worker thread, so creating one per request
 * would grow the process's threads without bound; pooled streams live as
 * long as the process, so an id never dangles.
 */
class StreamRegistry {
 public:
  /** Streams per device and priority level (CUDA keeps 32). */
  static constexpr size_t kStreamsPerPriority = 8;

  // LITERALINCLUDE START: CH01_STREAM_POOL
  /** The next stream of the pool of `priority` (clamped to the range). */
  c10::Stream next(c10::DeviceIndex index, int priority) {
    int least = 0;
    int greatest = 0;
    ACCINTE_CHECK(accinteDeviceGetStreamPriorityRange(&least, &greatest));
    TORCH_INTERNAL_ASSERT(least - greatest < static_cast<int>(kPriorityLevels));
    priority = std::clamp(priority, greatest, least);
    // LITERALINCLUDE EMPHASIZE NEXT 2
    Pool& pool = pools_[index][static_cast<size_t>(least - priority)];
    const size_t slot = pool.next.fetch_add(1) % kStreamsPerPriority;
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (pool.ids[slot] == 0) {
      pool.ids[slot] = create(index, priority).id(); // LITERALINCLUDE EMPHASIZE
    }
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kAccinte, index),
                       pool.ids[slot]);
  }
  // LITERALINCLUDE END: CH01_STREAM_POOL

  accinteStream_t lookup(const c10::Stream& stream) {
    const c10::DeviceIndex index = stream.device_index();
    checkDeviceIndex(index);
    if (stream.id() == 0) {
      accinteStream_t handle = nullptr;
      ACCINTE_CHECK(accinteGetDefaultStream(index, &handle));
      return handle;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const auto& streams = streams_[index];
    TORCH_CHECK(
        stream.id() > 0 && static_cast<size_t>(stream.id()) <= streams.size(),
        "accinte: stream id ", stream.id(), " does not exist on ",
        stream.device());
    return streams[stream.id() - 1];
  }

 private:
  /** The streams of one device and priority level. */
  struct Pool {
    std::mutex mutex;
    std::array<c10::StreamId, kStreamsPerPriority> ids{};
    std::atomic<size_t> next{0};
  };
  /** Priorities 0 (least) to -2 (greatest): three levels. */
  static constexpr size_t kPriorityLevels = 3;

  c10::Stream create(c10::DeviceIndex index, int priority) {
    ScopedEmulatorDevice on_device(index);
    accinteStream_t handle = nullptr;
    ACCINTE_CHECK(accinteStreamCreateWithPriority(&handle, priority));
    std::lock_guard<std::mutex> lock(mutex_);
    auto& streams = streams_[index];
    streams.push_back(handle); // LITERALINCLUDE EMPHASIZE
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kAccinte, index),
                       static_cast<c10::StreamId>(streams.size()));
  }

  std::mutex mutex_;
  std::array<std::deque<accinteStream_t>, kMaxDevices> streams_;
  std::array<std::array<Pool, kPriorityLevels>, kMaxDevices> pools_;
};

StreamRegistry& streamRegistry() {
  // NB: leaked on purpose: tensors freed during interpreter shutdown may
  // still ask for streams after static destructors would have run.
  static auto* registry = new StreamRegistry();
  return *registry;
}

/** Per host thread, the id of the current stream of each device. */
thread_local std::array<c10::StreamId, kMaxDevices> current_stream_ids{};
// LITERALINCLUDE END: CH01_STREAM_REGISTRY

} // namespace

// LITERALINCLUDE START: CH01_SYNC_DEBUG
namespace {
std::atomic<int> sync_debug_mode{static_cast<int>(SyncDebugMode::Disabled)};
} // namespace

void setSyncDebugMode(SyncDebugMode mode) {
  sync_debug_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
}

SyncDebugMode syncDebugMode() {
  return static_cast<SyncDebugMode>(
      sync_debug_mode.load(std::memory_order_relaxed));
}

void warnOrErrorOnSync() {
  switch (syncDebugMode()) {
    case SyncDebugMode::Disabled:
      return;
    case SyncDebugMode::Warn:
      TORCH_WARN("called a synchronizing accinte operation");
      return;
    case SyncDebugMode::Error:
      TORCH_CHECK(false, "called a synchronizing accinte operation");
  }
}
// LITERALINCLUDE END: CH01_SYNC_DEBUG

c10::DeviceIndex deviceCount() {
  int count = 0;
  const accinteError_t error = accinteGetDeviceCount(&count);
  TORCH_CHECK(error != accinteErrorInitialization,
              "accinte: the emulated device cannot start: ",
              accinteGetErrorString(error),
              " Check ACCINTE_DEVICE_COUNT (1 to 16) and "
              "ACCINTE_DEVICE_MEMORY (bytes, optional K/M/G suffix).");
  TORCH_CHECK(error != accinteErrorForkedChild,
              "accinte: cannot use the device in a process forked after the "
              "device was initialized; use the 'spawn' start method for "
              "multiprocessing.");
  ACCINTE_CHECK(error);
  return static_cast<c10::DeviceIndex>(count);
}

c10::DeviceIndex deviceCountOrZero() noexcept {
  int count = 0;
  if (accinteGetDeviceCount(&count) != accinteSuccess) {
    return 0;
  }
  return static_cast<c10::DeviceIndex>(count);
}

void checkDeviceIndex(c10::DeviceIndex index) {
  const c10::DeviceIndex count = deviceCount();
  TORCH_CHECK(index >= 0 && index < count, "accinte: invalid device index ",
              static_cast<int>(index), ": there are ", static_cast<int>(count),
              " accinte devices (valid indices 0 to ",
              static_cast<int>(count) - 1, ")");
}

c10::DeviceIndex currentDevice() {
  int index = 0;
  ACCINTE_CHECK(accinteGetDevice(&index));
  return static_cast<c10::DeviceIndex>(index);
}

void setDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  ACCINTE_CHECK(accinteSetDevice(index));
}

c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) {
  const c10::DeviceIndex previous = currentDevice();
  if (previous != index) {
    setDevice(index);
  }
  return previous;
}

void synchronizeDevice(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  ScopedEmulatorDevice on_device(index);
  ACCINTE_CHECK(accinteDeviceSynchronize());
}

c10::Stream defaultStream(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  return c10::Stream(c10::Stream::DEFAULT, c10::Device(kAccinte, index));
}

c10::Stream currentStream(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kAccinte, index),
                     current_stream_ids[index]);
}

c10::Stream exchangeStream(c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kAccinte,
              "accinte: expected an accinte stream, got a stream on ",
              stream.device());
  // NB: looking the stream up validates it before it becomes current.
  streamRegistry().lookup(stream);
  const c10::Stream previous = currentStream(stream.device_index());
  current_stream_ids[stream.device_index()] = stream.id();
  return previous;
}

c10::Stream newStream(c10::DeviceIndex index, int priority) {
  checkDeviceIndex(index);
  return streamRegistry().next(index, priority);
}

c10::Stream streamFromPool(c10::DeviceIndex index, bool high_priority) {
  int least = 0;
  int greatest = 0;
  ACCINTE_CHECK(accinteDeviceGetStreamPriorityRange(&least, &greatest));
  return newStream(index, high_priority ? greatest : least);
}

accinteStream_t nativeStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kAccinte,
              "accinte: expected an accinte stream, got a stream on ",
              stream.device());
  return streamRegistry().lookup(stream);
}

bool isCapturing(c10::DeviceIndex index) {
  accinteStreamCaptureStatus status = accinteStreamCaptureStatusNone;
  ACCINTE_CHECK(
      accinteStreamIsCapturing(nativeStream(currentStream(index)), &status));
  return status != accinteStreamCaptureStatusNone;
}

void copyDeviceMemoryOnCurrentStream(void* dest, const void* src,
                                     size_t count) {
  accintePointerAttributes attributes{};
  ACCINTE_CHECK(accintePointerGetAttributes(&attributes, dest));
  TORCH_CHECK(attributes.type == accinteMemoryTypeDevice,
              "accinte: copying device memory into memory that is not device "
              "memory");
  const accinteStream_t stream = nativeStream(
      currentStream(static_cast<c10::DeviceIndex>(attributes.device)));
  ACCINTE_CHECK(accinteMemcpyAsync(dest, src, count,
                                   accinteMemcpyDeviceToDevice, stream));
  ACCINTE_CHECK(accinteStreamSynchronize(stream));
}

int streamPriority(const c10::Stream& stream) {
  int priority = 0;
  ACCINTE_CHECK(accinteStreamGetPriority(nativeStream(stream), &priority));
  return priority;
}

} // namespace accinte
