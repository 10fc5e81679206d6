/**
 * @file
 * libFuzzer harness of the emulator's C API.
 *
 * Each input is a program: a sequence of runtime calls (allocations, frees,
 * copies of every kind, memsets, kernels, streams, events, synchronizes and
 * deliberately bad calls) decoded from the fuzzer's bytes. The harness plays
 * a correct program around the bad calls: it orders every access to a buffer
 * after the previous one with events, as a real caller must, so the result of
 * each call is known in advance. A model (the expected bytes of every buffer,
 * the free memory of every device) is updated as calls succeed and checked
 * against the emulator:
 *
 * - a call the model knows to be valid succeeds, and one it knows to be
 *   invalid returns the documented error and changes nothing;
 * - reading any buffer back gives the model's bytes (ordering, copies,
 *   kernels and memsets are right, and a refused call wrote nothing);
 * - `accinteMemGetInfo` reports the model's free memory exactly;
 * - pointer attributes describe the allocation a pointer points into;
 * - a kernel failure is reported only if a kernel failed, with a message,
 *   and never twice: there are never more reports than failed kernels;
 * - at the end of each input, with everything freed and destroyed, every
 *   device is back to its full capacity;
 * - tracing, turned on and off at random, reports whether it is on as the
 *   program left it, never hands over more records than asked for, and every
 *   record it hands over is whole: a known kind, a NUL-terminated name,
 *   `start <= end`, a correlation id, a stream and device for device work,
 *   bytes for copies and memsets; the external correlation and name stacks
 *   pop what was pushed and refuse to pop when empty;
 * - exporting a device allocation (accinteIpcGetMemHandle) changes nothing
 *   the model sees, however much work on it is queued, and a handle of this
 *   process never opens in it;
 * - the telemetry of a device is refused out of range, its utilization rates
 *   stay within 0 to 100 % and its modelled clock, temperature and power
 *   within their documented bounds;
 * - a stream capture (any mode) of memsets, kernels and copies runs nothing
 *   until its graph is launched, and each launch changes the buffers as the
 *   captured calls would have, in their order; a call that conflicts with
 *   the capture (a synchronize or query of the capturing stream, a copy
 *   with pageable memory, an allocation the mode forbids) is refused and
 *   invalidates it, after which the capture ends with no graph and nothing
 *   it recorded ever runs; a default stream cannot capture, and a graph
 *   does not launch on another device.
 *
 * AddressSanitizer and UndefinedBehaviorSanitizer watch the emulator itself
 * (a stale handle or pointer must be refused, not dereferenced). A broken
 * invariant aborts with a message naming it.
 *
 * Build and run: `make fuzz` (FUZZ_SECONDS=N to change the time bound).
 */

#include <accinte/kernel.h>
#include <accinte/runtime.h>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

constexpr int kDeviceCount = 2;
// NB: a small device, so that a few allocations exhaust it and the
// out-of-memory path is fuzzed as often as the others.
constexpr size_t kCapacity = size_t{1} << 20;
constexpr const char* kCapacitySetting = "1M";
constexpr size_t kMaxAllocation = kCapacity / 4;
constexpr size_t kMaxObjects = 8;

/** Aborts with the invariant that broke (libFuzzer keeps the input). */
[[noreturn]] void fail(const char* what, const char* detail = "") {
  std::fprintf(stderr, "accinte fuzzer: invariant broken: %s %s\n", what,
               detail);
  std::abort();
}

/** Checks that a call returned `expected`. */
void expectStatus(accinteError_t actual, accinteError_t expected,
                  const char* call) {
  if (actual != expected) {
    std::fprintf(stderr, "accinte fuzzer: %s returned %s, expected %s\n", call,
                 accinteGetErrorName(actual), accinteGetErrorName(expected));
    std::abort();
  }
}

/** Checks a call that the harness only ever makes with valid arguments. */
void expectSuccess(accinteError_t actual, const char* call) {
  expectStatus(actual, accinteSuccess, call);
}

enum class MemoryKind { Device, Pinned, Pageable };

/** A buffer of the program and the bytes it must hold. */
struct Buffer {
  MemoryKind kind = MemoryKind::Device;
  /** Owning device, or -1 for host memory. */
  int device = -1;
  /** Device pointers are never dereferenced by the host. */
  uint8_t* ptr = nullptr;
  std::vector<uint8_t> expected;
  /** Stream of the last access still possibly in flight, or null. */
  accinteStream_t lastStream = nullptr;
};

struct StreamSlot {
  accinteStream_t handle = nullptr;
  int device = 0;
};

struct EventSlot {
  accinteEvent_t handle = nullptr;
  bool timing = true;
  /** Created with accinteEventInterprocess. */
  bool interprocess = false;
  bool recorded = false;
};

/** The program's state and the model the emulator is checked against. */
class Program {
 public:
  explicit Program(FuzzedDataProvider& input) : input_(input) {
    for (int device = 0; device < kDeviceCount; ++device) {
      expectSuccess(accinteGetDefaultStream(device, &defaultStreams_[device]),
                    "accinteGetDefaultStream");
      freeMemory_[device] = kCapacity;
    }
    expectSuccess(
        accinteEventCreateWithFlags(&orderingEvent_, accinteEventDisableTiming),
        "accinteEventCreateWithFlags");
  }

  /** Decodes and runs calls until the input is used up, then cleans up. */
  void run() {
    while (input_.remaining_bytes() > 0) {
      step();
    }
    finish();
  }

 private:
  void step() {
    switch (input_.ConsumeIntegralInRange<int>(0, 20)) {
      case 0:
        setDevice();
        break;
      case 1:
        allocate();
        break;
      case 2:
        release();
        break;
      case 3:
        copy(/*async=*/false);
        break;
      case 4:
        copy(/*async=*/true);
        break;
      case 5:
        memset();
        break;
      case 6:
        kernel();
        break;
      case 7:
        createStream();
        break;
      case 8:
        destroyStream();
        break;
      case 9:
        createEvent();
        break;
      case 10:
        eventCall();
        break;
      case 11:
        synchronize();
        break;
      case 12:
        readBack();
        break;
      case 13:
        hostWrite();
        break;
      case 14:
        pointerAttributes();
        break;
      case 15:
        staleUse();
        break;
      case 16:
        badArguments();
        break;
      case 17:
        destroyEvent();
        break;
      case 18:
        trace();
        break;
      case 19:
        ipcCall();
        break;
      case 20:
        graphCall();
        break;
    }
  }

  // --- Choosing objects ----------------------------------------------------

  template <typename T>
  T* pick(std::vector<T>& items) {
    if (items.empty()) {
      return nullptr;
    }
    return &items[input_.ConsumeIntegralInRange<size_t>(0, items.size() - 1)];
  }

  /** A stream of `device`: its default stream or one the program made. */
  accinteStream_t pickStream(int device) {
    std::vector<accinteStream_t> candidates{defaultStreams_[device]};
    for (const auto& slot : streams_) {
      if (slot.device == device) {
        candidates.push_back(slot.handle);
      }
    }
    return *pick(candidates);
  }

  int deviceOf(accinteStream_t stream) {
    int device = -1;
    expectSuccess(accinteStreamGetDevice(stream, &device),
                  "accinteStreamGetDevice");
    return device;
  }

  // --- Ordering, as a correct program does it --------------------------------
  // LITERALINCLUDE START: FUZZ_ORDERING

  /** Makes work enqueued next on `stream` wait for the last access to
   * `buffer`. */
  void orderAfterLastAccess(Buffer& buffer, accinteStream_t stream) {
    if (buffer.lastStream != nullptr && buffer.lastStream != stream) {
      expectSuccess(accinteEventRecord(orderingEvent_, buffer.lastStream),
                    "accinteEventRecord");
      expectSuccess(accinteStreamWaitEvent(stream, orderingEvent_),
                    "accinteStreamWaitEvent");
    }
  }

  /** Waits on the host for the last access to `buffer`. */
  void settle(Buffer& buffer) {
    if (buffer.lastStream != nullptr) {
      expectSynchronized(accinteStreamSynchronize(buffer.lastStream),
                         "accinteStreamSynchronize");
      markStreamDone(buffer.lastStream);
    }
  }

  // LITERALINCLUDE END: FUZZ_ORDERING

  void markStreamDone(accinteStream_t stream) {
    for (auto& buffer : buffers_) {
      if (buffer.lastStream == stream) {
        buffer.lastStream = nullptr;
      }
    }
  }

  /** A synchronize or query returns success, or a failure a kernel really
   * caused and that no earlier call reported. */
  void expectSynchronized(accinteError_t status, const char* call) {
    if (status == accinteErrorLaunchFailure) {
      if (failingKernels_ == 0) {
        fail("a launch failure was reported but no kernel failed:", call);
      }
      // NB: each report covers at least one failure, and each failure is
      // reported once, whichever stream or event carries it.
      if (++reportedFailures_ > failingKernels_) {
        fail("a launch failure was reported twice:", call);
      }
      if (accinteGetLastFailureMessage()[0] == '\0') {
        fail("a launch failure came without a message:", call);
      }
      return;
    }
    expectSuccess(status, call);
  }

  // --- Calls -----------------------------------------------------------------

  void setDevice() {
    const int device = input_.ConsumeIntegralInRange<int>(-2, kDeviceCount + 1);
    if (device < 0 || device >= kDeviceCount) {
      expectStatus(accinteSetDevice(device), accinteErrorInvalidDevice,
                   "accinteSetDevice(out of range)");
    } else {
      expectSuccess(accinteSetDevice(device), "accinteSetDevice");
      currentDevice_ = device;
    }
    int current = -1;
    expectSuccess(accinteGetDevice(&current), "accinteGetDevice");
    if (current != currentDevice_) {
      fail("the current device is not the one last set");
    }
  }

  void allocate() {
    if (buffers_.size() >= kMaxObjects) {
      return;
    }
    Buffer buffer;
    buffer.kind = static_cast<MemoryKind>(input_.ConsumeIntegralInRange(0, 2));
    const size_t size =
        input_.ConsumeIntegralInRange<size_t>(0, kMaxAllocation);
    const auto fill = input_.ConsumeIntegral<uint8_t>();
    void* ptr = nullptr;
    switch (buffer.kind) {
      case MemoryKind::Device: {
        const accinteError_t status = accinteMalloc(&ptr, size);
        if (size > freeMemory_[currentDevice_]) {
          expectStatus(status, accinteErrorMemoryAllocation,
                       "accinteMalloc(past capacity)");
          checkFreeMemory();
          return;
        }
        expectSuccess(status, "accinteMalloc");
        if (size == 0) {
          if (ptr != nullptr) {
            fail("a zero-byte accinteMalloc did not write NULL");
          }
          return;
        }
        buffer.device = currentDevice_;
        freeMemory_[currentDevice_] -= size;
        // NB: device memory starts undefined; a memset gives it known bytes.
        expectSuccess(accinteMemsetAsync(ptr, fill, size, nullptr),
                      "accinteMemsetAsync");
        buffer.lastStream = defaultStreams_[currentDevice_];
        break;
      }
      case MemoryKind::Pinned:
        expectSuccess(accinteMallocHost(&ptr, size), "accinteMallocHost");
        if (size == 0) {
          if (ptr != nullptr) {
            fail("a zero-byte accinteMallocHost did not write NULL");
          }
          return;
        }
        std::memset(ptr, fill, size);
        break;
      case MemoryKind::Pageable:
        if (size == 0) {
          return;
        }
        ptr = std::malloc(size);
        std::memset(ptr, fill, size);
        break;
    }
    buffer.ptr = static_cast<uint8_t*>(ptr);
    buffer.expected.assign(size, fill);
    buffers_.push_back(std::move(buffer));
    checkAttributes(buffers_.back(), 0);
    checkFreeMemory();
  }

  void release() {
    Buffer* buffer = pick(buffers_);
    if (buffer == nullptr) {
      return;
    }
    // NB: a correct program frees memory only once every stream that uses it
    // is done with it (PyTorch's allocators record streams for this).
    settle(*buffer);
    releaseBuffer(*buffer);
    stale_.push_back(buffer->ptr);
    buffers_.erase(buffers_.begin() + (buffer - buffers_.data()));
    checkFreeMemory();
  }

  void releaseBuffer(Buffer& buffer) {
    switch (buffer.kind) {
      case MemoryKind::Device:
        expectSuccess(accinteFree(buffer.ptr), "accinteFree");
        freeMemory_[buffer.device] += buffer.expected.size();
        break;
      case MemoryKind::Pinned:
        expectSuccess(accinteFreeHost(buffer.ptr), "accinteFreeHost");
        break;
      case MemoryKind::Pageable:
        std::free(buffer.ptr);
        break;
    }
  }

  /** Picks a range of `buffer`; for device memory, it may run past the end
   * (the runtime must refuse it), host ranges stay inside (the runtime cannot
   * know their size, as in CUDA). */
  void pickRange(const Buffer& buffer, size_t* offset, size_t* count) {
    const size_t size = buffer.expected.size();
    *offset = input_.ConsumeIntegralInRange<size_t>(0, size - 1);
    if (buffer.kind == MemoryKind::Device && input_.ConsumeBool()) {
      *count = input_.ConsumeIntegralInRange<size_t>(0, size + 1);
    } else {
      *count = input_.ConsumeIntegralInRange<size_t>(0, size - *offset);
    }
  }

  static bool inRange(const Buffer& buffer, size_t offset, size_t count) {
    return count <= buffer.expected.size() - offset;
  }

  static accinteMemcpyKind kindFor(const Buffer& dst, const Buffer& src) {
    const bool dstDevice = dst.kind == MemoryKind::Device;
    const bool srcDevice = src.kind == MemoryKind::Device;
    if (dstDevice) {
      return srcDevice ? accinteMemcpyDeviceToDevice
                       : accinteMemcpyHostToDevice;
    }
    return srcDevice ? accinteMemcpyDeviceToHost : accinteMemcpyHostToHost;
  }

  void copy(bool async) {
    Buffer* src = pick(buffers_);
    Buffer* dst = pick(buffers_);
    if (src == nullptr || dst == nullptr) {
      return;
    }
    size_t srcOffset = 0;
    size_t count = 0;
    pickRange(*src, &srcOffset, &count);
    const size_t dstOffset =
        input_.ConsumeIntegralInRange<size_t>(0, dst->expected.size() - 1);
    if (dst->kind != MemoryKind::Device) {
      // Host ranges stay inside (see pickRange).
      count = std::min(count, dst->expected.size() - dstOffset);
    }
    const accinteMemcpyKind rightKind = kindFor(*dst, *src);
    accinteMemcpyKind kind = rightKind;
    switch (input_.ConsumeIntegralInRange(0, 5)) {
      case 0:
        kind = accinteMemcpyDefault;
        break;
      case 1:
        kind =
            static_cast<accinteMemcpyKind>(input_.ConsumeIntegralInRange(0, 3));
        break;
      default:
        break;
    }
    // LITERALINCLUDE START: FUZZ_COPY_ORACLE
    accinteError_t expected = accinteSuccess;
    if (count == 0) {
      expected = accinteSuccess;
    } else if (kind != rightKind && kind != accinteMemcpyDefault) {
      expected = accinteErrorInvalidMemcpyDirection;
    } else if (!inRange(*dst, dstOffset, count) ||
               !inRange(*src, srcOffset, count)) {
      expected = accinteErrorInvalidMemoryRange;
    }
    // LITERALINCLUDE END: FUZZ_COPY_ORACLE

    // The stream the copy runs on: the chosen one, or for a blocking copy the
    // default stream of the device involved (see accinteMemcpy).
    int device = dst->device != -1 ? dst->device : src->device;
    if (device == -1) {
      device = currentDevice_;
    }
    accinteStream_t stream = defaultStreams_[device];
    if (async) {
      stream = pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1));
    }
    if (expected == accinteSuccess && count > 0) {
      orderAfterLastAccess(*src, stream);
      orderAfterLastAccess(*dst, stream);
    }
    const accinteError_t status =
        async ? accinteMemcpyAsync(dst->ptr + dstOffset, src->ptr + srcOffset,
                                   count, kind, stream)
              : accinteMemcpy(dst->ptr + dstOffset, src->ptr + srcOffset, count,
                              kind);
    expectStatus(status, expected,
                 async ? "accinteMemcpyAsync" : "accinteMemcpy");
    if (expected != accinteSuccess || count == 0) {
      return;
    }
    std::memmove(dst->expected.data() + dstOffset,
                 src->expected.data() + srcOffset, count);
    if (async) {
      src->lastStream = stream;
      dst->lastStream = stream;
    } else {
      // A blocking copy has finished, and so has everything before it on
      // its stream.
      markStreamDone(stream);
      src->lastStream = nullptr;
      dst->lastStream = nullptr;
    }
  }

  Buffer* pickDeviceBuffer() {
    std::vector<Buffer*> device;
    for (auto& buffer : buffers_) {
      if (buffer.kind == MemoryKind::Device) {
        device.push_back(&buffer);
      }
    }
    Buffer** chosen = pick(device);
    return chosen == nullptr ? nullptr : *chosen;
  }

  void memset() {
    Buffer* buffer = pickDeviceBuffer();
    if (buffer == nullptr) {
      return;
    }
    size_t offset = 0;
    size_t count = 0;
    pickRange(*buffer, &offset, &count);
    const auto value = input_.ConsumeIntegral<uint8_t>();
    accinteStream_t stream =
        pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1));
    const bool valid = inRange(*buffer, offset, count);
    if (valid && count > 0) {
      orderAfterLastAccess(*buffer, stream);
    }
    expectStatus(accinteMemsetAsync(buffer->ptr + offset, value, count, stream),
                 valid ? accinteSuccess : accinteErrorInvalidMemoryRange,
                 "accinteMemsetAsync");
    if (valid && count > 0) {
      std::memset(buffer->expected.data() + offset, value, count);
      buffer->lastStream = stream;
    }
  }

  /** A kernel reading one device buffer and writing another (or the same)
   * byte by byte; or a kernel that fails without writing anything. */
  void kernel() {
    Buffer* src = pickDeviceBuffer();
    Buffer* dst = pickDeviceBuffer();
    if (src == nullptr || dst == nullptr) {
      return;
    }
    accinteStream_t stream =
        pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1));
    const int device = deviceOf(stream);
    const size_t count = std::min(src->expected.size(), dst->expected.size());
    const auto key = input_.ConsumeIntegral<uint8_t>();
    const int failure = input_.ConsumeIntegralInRange(0, 7);
    const void* buffers[] = {src->ptr, dst->ptr};
    const bool sameDevice = src->device == device && dst->device == device;
    if (sameDevice) {
      orderAfterLastAccess(*src, stream);
      orderAfterLastAccess(*dst, stream);
    }
    uint8_t* in = src->ptr;
    uint8_t* out = dst->ptr;
    const char* name = input_.ConsumeBool() ? "fuzzer kernel" : nullptr;
    const accinteError_t status = accinte::launchNamedKernel(
        stream, name, buffers, 2,
        [in, out, count, key, failure]() -> accinteError_t {
          if (failure == 1) {
            return accinteErrorInvalidValue;
          }
          if (failure == 2) {
            throw std::runtime_error("fuzzer kernel failure");
          }
          // Through a copy: the two buffers may be one.
          std::vector<uint8_t> values(in, in + count);
          for (size_t i = 0; i < count; ++i) {
            out[i] = static_cast<uint8_t>(values[i] ^ key);
          }
          return accinteSuccess;
        });
    if (!sameDevice) {
      expectStatus(status, accinteErrorInvalidDevicePointer,
                   "accinteLaunchKernel(buffer of another device)");
      return;
    }
    expectSuccess(status, "accinteLaunchKernel");
    src->lastStream = stream;
    dst->lastStream = stream;
    if (failure == 1 || failure == 2) {
      ++failingKernels_;
      return;
    }
    std::vector<uint8_t> values(src->expected.begin(),
                                src->expected.begin() + count);
    for (size_t i = 0; i < count; ++i) {
      dst->expected[i] = static_cast<uint8_t>(values[i] ^ key);
    }
  }

  void createStream() {
    if (streams_.size() >= kMaxObjects) {
      return;
    }
    StreamSlot slot;
    if (input_.ConsumeBool()) {
      expectSuccess(accinteStreamCreate(&slot.handle), "accinteStreamCreate");
    } else {
      const int priority = input_.ConsumeIntegralInRange(-5, 5);
      expectSuccess(accinteStreamCreateWithPriority(&slot.handle, priority),
                    "accinteStreamCreateWithPriority");
      int least = 0;
      int greatest = 0;
      expectSuccess(accinteDeviceGetStreamPriorityRange(&least, &greatest),
                    "accinteDeviceGetStreamPriorityRange");
      int actual = 0;
      expectSuccess(accinteStreamGetPriority(slot.handle, &actual),
                    "accinteStreamGetPriority");
      if (actual != std::clamp(priority, greatest, least)) {
        fail("a stream priority was not clamped to the range");
      }
    }
    slot.device = currentDevice_;
    if (deviceOf(slot.handle) != currentDevice_) {
      fail("a stream was not created on the current device");
    }
    streams_.push_back(slot);
  }

  void destroyStream() {
    StreamSlot* slot = pick(streams_);
    if (slot == nullptr) {
      if (input_.ConsumeBool()) {
        expectStatus(accinteStreamDestroy(defaultStreams_[currentDevice_]),
                     accinteErrorInvalidResourceHandle,
                     "accinteStreamDestroy(default stream)");
      }
      return;
    }
    // NB: destroying waits for the stream's work, so its buffers are settled;
    // a failure still pending on it is dropped with it.
    expectSuccess(accinteStreamDestroy(slot->handle), "accinteStreamDestroy");
    markStreamDone(slot->handle);
    staleStreams_.push_back(slot->handle);
    streams_.erase(streams_.begin() + (slot - streams_.data()));
  }

  void createEvent() {
    if (events_.size() >= kMaxObjects) {
      return;
    }
    EventSlot slot;
    slot.timing = input_.ConsumeBool();
    // An interprocess event, used by this process alone, is an event
    // without timing in every respect.
    slot.interprocess = !slot.timing && input_.ConsumeBool();
    unsigned int flags =
        slot.timing ? accinteEventDefault : accinteEventDisableTiming;
    if (slot.interprocess) {
      flags |= accinteEventInterprocess;
    }
    expectSuccess(accinteEventCreateWithFlags(&slot.handle, flags),
                  "accinteEventCreateWithFlags");
    events_.push_back(slot);
  }

  /** IPC calls within one process: exporting changes nothing the model sees
   * (the allocation's pages move under queued work), and a handle of this
   * process does not open. */
  void ipcCall() {
    if (input_.ConsumeBool()) {
      EventSlot* event = pick(events_);
      if (event == nullptr) {
        return;
      }
      accinteIpcEventHandle_t handle;
      const accinteError_t status =
          accinteIpcGetEventHandle(&handle, event->handle);
      if (!event->interprocess) {
        expectStatus(status, accinteErrorInvalidResourceHandle,
                     "accinteIpcGetEventHandle(not interprocess)");
        return;
      }
      expectSuccess(status, "accinteIpcGetEventHandle");
      accinteEvent_t opened = nullptr;
      expectStatus(accinteIpcOpenEventHandle(&opened, handle),
                   accinteErrorInvalidIpcHandle,
                   "accinteIpcOpenEventHandle(own handle)");
      return;
    }
    Buffer* buffer = pick(buffers_);
    if (buffer == nullptr) {
      return;
    }
    const size_t offset =
        input_.ConsumeIntegralInRange<size_t>(0, buffer->expected.size() - 1);
    accinteIpcMemHandle_t handle;
    const accinteError_t status =
        accinteIpcGetMemHandle(&handle, buffer->ptr + offset);
    expectStatus(accinteIpcCloseMemHandle(buffer->ptr),
                 accinteErrorInvalidDevicePointer,
                 "accinteIpcCloseMemHandle(not opened)");
    if (buffer->kind != MemoryKind::Device) {
      expectStatus(status, accinteErrorInvalidDevicePointer,
                   "accinteIpcGetMemHandle(host memory)");
      return;
    }
    expectSuccess(status, "accinteIpcGetMemHandle");
    void* opened = nullptr;
    expectStatus(accinteIpcOpenMemHandle(&opened, handle, 0),
                 accinteErrorInvalidIpcHandle,
                 "accinteIpcOpenMemHandle(own handle)");
  }

  /** Device buffers of `device`. */
  std::vector<Buffer*> deviceBuffersOf(int device) {
    std::vector<Buffer*> found;
    for (auto& buffer : buffers_) {
      if (buffer.kind == MemoryKind::Device && buffer.device == device) {
        found.push_back(&buffer);
      }
    }
    return found;
  }

  /** A capture of up to four calls on a stream of the program's, then zero
   * to three launches of its graph; the model changes at each launch, as
   * the captured calls would change it, in their order. */
  void graphCall() {
    StreamSlot* slot = pick(streams_);
    if (slot == nullptr) {
      expectStatus(accinteStreamBeginCapture(defaultStreams_[currentDevice_],
                                             accinteStreamCaptureModeGlobal),
                   accinteErrorStreamCaptureUnsupported,
                   "accinteStreamBeginCapture(default stream)");
      return;
    }
    const accinteStream_t stream = slot->handle;
    const int device = slot->device;
    const auto mode = static_cast<accinteStreamCaptureMode>(
        input_.ConsumeIntegralInRange(0, 2));
    expectSuccess(accinteStreamBeginCapture(stream, mode),
                  "accinteStreamBeginCapture");
    // What each captured call does to the model, and the buffers it touches.
    std::vector<std::function<void()>> effects;
    std::vector<Buffer*> touched;
    bool invalidated = false;
    bool fails = false;
    // NB: once invalidated, work on the capturing stream is refused.
    const auto captured = [&](accinteError_t status, const char* call) {
      expectStatus(
          status,
          invalidated ? accinteErrorStreamCaptureInvalidated : accinteSuccess,
          call);
      return !invalidated;
    };
    const int calls = input_.ConsumeIntegralInRange(0, 4);
    for (int i = 0; i < calls; ++i) {
      switch (input_.ConsumeIntegralInRange(0, 3)) {
        case 0: {
          // NB: a memset may set memory of any device, as outside captures.
          std::vector<Buffer*> candidates = deviceBuffersOf(
              input_.ConsumeIntegralInRange(0, kDeviceCount - 1));
          Buffer** chosen = pick(candidates);
          if (chosen == nullptr) {
            break;
          }
          Buffer* buffer = *chosen;
          const size_t offset = input_.ConsumeIntegralInRange<size_t>(
              0, buffer->expected.size() - 1);
          const size_t count = buffer->expected.size() - offset;
          const auto value = input_.ConsumeIntegral<uint8_t>();
          if (captured(accinteMemsetAsync(buffer->ptr + offset, value, count,
                                          stream),
                       "accinteMemsetAsync(captured)")) {
            effects.push_back([buffer, offset, count, value] {
              std::memset(buffer->expected.data() + offset, value, count);
            });
            touched.push_back(buffer);
          }
          break;
        }
        case 1: {
          std::vector<Buffer*> candidates = deviceBuffersOf(device);
          Buffer** src = pick(candidates);
          Buffer** dst = pick(candidates);
          if (src == nullptr || dst == nullptr) {
            break;
          }
          Buffer* in = *src;
          Buffer* out = *dst;
          const size_t count =
              std::min(in->expected.size(), out->expected.size());
          const auto key = input_.ConsumeIntegral<uint8_t>();
          const bool failing = input_.ConsumeIntegralInRange(0, 7) == 0;
          const void* buffers[] = {in->ptr, out->ptr};
          uint8_t* from = in->ptr;
          uint8_t* to = out->ptr;
          if (!captured(accinte::launchKernel(
                            stream, buffers, 2,
                            [from, to, count, key, failing]() {
                              if (failing) {
                                throw std::runtime_error(
                                    "fuzzer captured kernel failure");
                              }
                              std::vector<uint8_t> values(from, from + count);
                              for (size_t j = 0; j < count; ++j) {
                                to[j] = static_cast<uint8_t>(values[j] ^ key);
                              }
                            }),
                        "accinteLaunchKernel(captured)")) {
            break;
          }
          touched.push_back(in);
          touched.push_back(out);
          if (failing) {
            fails = true;
            break;
          }
          effects.push_back([in, out, count, key] {
            std::vector<uint8_t> values(in->expected.begin(),
                                        in->expected.begin() + count);
            for (size_t j = 0; j < count; ++j) {
              out->expected[j] = static_cast<uint8_t>(values[j] ^ key);
            }
          });
          break;
        }
        case 2: {
          Buffer* src = pick(buffers_);
          Buffer* dst = pick(buffers_);
          if (src == nullptr || dst == nullptr) {
            break;
          }
          const size_t count =
              std::min(src->expected.size(), dst->expected.size());
          const accinteError_t status = accinteMemcpyAsync(
              dst->ptr, src->ptr, count, kindFor(*dst, *src), stream);
          if (src->kind == MemoryKind::Pageable ||
              dst->kind == MemoryKind::Pageable) {
            expectStatus(status, accinteErrorStreamCaptureUnsupported,
                         "accinteMemcpyAsync(captured, pageable)");
            invalidated = true;
            break;
          }
          if (captured(status, "accinteMemcpyAsync(captured)")) {
            effects.push_back([src, dst, count] {
              std::memmove(dst->expected.data(), src->expected.data(), count);
            });
            touched.push_back(src);
            touched.push_back(dst);
          }
          break;
        }
        case 3:
          conflictWithCapture(stream, mode, &invalidated);
          break;
      }
    }
    // LITERALINCLUDE START: FUZZ_GRAPH
    accinteGraph_t graph = nullptr;
    const accinteError_t ended = accinteStreamEndCapture(stream, &graph);
    if (invalidated) {
      expectStatus(ended, accinteErrorStreamCaptureInvalidated,
                   "accinteStreamEndCapture(invalidated)");
      if (graph != nullptr) {
        fail("an invalidated capture gave a graph");
      }
      return;
    }
    expectSuccess(ended, "accinteStreamEndCapture");
    accinteGraphExec_t exec = nullptr;
    expectSuccess(accinteGraphInstantiate(&exec, graph),
                  "accinteGraphInstantiate");
    expectSuccess(accinteGraphDestroy(graph), "accinteGraphDestroy");
    const int launches = input_.ConsumeIntegralInRange(0, 3);
    for (int i = 0; i < launches; ++i) {
      if (input_.ConsumeBool()) {
        const int other = (device + 1) % kDeviceCount;
        expectStatus(accinteGraphLaunch(exec, defaultStreams_[other]),
                     accinteErrorInvalidValue,
                     "accinteGraphLaunch(another device)");
        continue;
      }
      for (Buffer* buffer : touched) {
        orderAfterLastAccess(*buffer, stream);
      }
      expectSuccess(accinteGraphLaunch(exec, stream), "accinteGraphLaunch");
      for (const auto& effect : effects) {
        effect();
      }
      for (Buffer* buffer : touched) {
        buffer->lastStream = stream;
      }
      // NB: a launch reports one failure, however many of its kernels fail.
      failingKernels_ += fails ? 1 : 0;
    }
    // LITERALINCLUDE END: FUZZ_GRAPH
    expectSuccess(accinteGraphExecDestroy(exec), "accinteGraphExecDestroy");
  }

  /** A call that conflicts with the capture on `stream`, begun in `mode`:
   * refused, and then the capture is invalidated; or an allocation that a
   * relaxed capture allows. */
  void conflictWithCapture(accinteStream_t stream,
                           accinteStreamCaptureMode mode, bool* invalidated) {
    switch (input_.ConsumeIntegralInRange(0, 2)) {
      case 0:
        expectStatus(accinteStreamSynchronize(stream),
                     accinteErrorStreamCaptureUnsupported,
                     "accinteStreamSynchronize(capturing)");
        *invalidated = true;
        break;
      case 1:
        expectStatus(accinteStreamQuery(stream),
                     accinteErrorStreamCaptureUnsupported,
                     "accinteStreamQuery(capturing)");
        *invalidated = true;
        break;
      case 2: {
        void* ptr = nullptr;
        const accinteError_t status = accinteMalloc(&ptr, 1);
        if (mode != accinteStreamCaptureModeRelaxed) {
          expectStatus(status, accinteErrorStreamCaptureUnsupported,
                       "accinteMalloc(during a capture)");
          *invalidated = true;
          break;
        }
        expectStatus(status,
                     freeMemory_[currentDevice_] >= 1
                         ? accinteSuccess
                         : accinteErrorMemoryAllocation,
                     "accinteMalloc(during a relaxed capture)");
        expectSuccess(accinteFree(ptr),
                      "accinteFree(during a relaxed capture)");
        break;
      }
    }
  }

  void destroyEvent() {
    EventSlot* slot = pick(events_);
    if (slot == nullptr) {
      return;
    }
    expectSuccess(accinteEventDestroy(slot->handle), "accinteEventDestroy");
    staleEvents_.push_back(slot->handle);
    events_.erase(events_.begin() + (slot - events_.data()));
  }

  void eventCall() {
    EventSlot* event = pick(events_);
    if (event == nullptr) {
      return;
    }
    switch (input_.ConsumeIntegralInRange(0, 4)) {
      case 0:
        expectSuccess(
            accinteEventRecord(
                event->handle,
                pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1))),
            "accinteEventRecord");
        event->recorded = true;
        break;
      case 1:
        // Extra waits the model does not need; they must not change results.
        expectSuccess(
            accinteStreamWaitEvent(
                pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1)),
                event->handle),
            "accinteStreamWaitEvent");
        break;
      case 2: {
        const accinteError_t status = accinteEventQuery(event->handle);
        if (status != accinteErrorNotReady) {
          expectSynchronized(status, "accinteEventQuery");
        } else if (!event->recorded) {
          fail("an event never recorded is not ready");
        }
        break;
      }
      case 3:
        expectSynchronized(accinteEventSynchronize(event->handle),
                           "accinteEventSynchronize");
        break;
      case 4:
        elapsedTime(*event, *pick(events_));
        break;
    }
  }

  void elapsedTime(EventSlot& start, EventSlot& end) {
    float milliseconds = 0;
    const accinteError_t status =
        accinteEventElapsedTime(&milliseconds, start.handle, end.handle);
    if (!start.timing || !end.timing) {
      if (status != accinteErrorTimingDisabled &&
          status != accinteErrorEventNotRecorded) {
        fail("elapsed time of an event without timing:",
             accinteGetErrorName(status));
      }
    } else if (!start.recorded || !end.recorded) {
      expectStatus(status, accinteErrorEventNotRecorded,
                   "accinteEventElapsedTime(never recorded)");
    } else if (status != accinteErrorNotReady) {
      expectSuccess(status, "accinteEventElapsedTime");
      if (!(milliseconds == milliseconds)) {
        fail("elapsed time is not a number");
      }
    }
  }

  void synchronize() {
    switch (input_.ConsumeIntegralInRange(0, 2)) {
      case 0: {
        accinteStream_t stream =
            pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1));
        expectSynchronized(accinteStreamSynchronize(stream),
                           "accinteStreamSynchronize");
        markStreamDone(stream);
        break;
      }
      case 1: {
        accinteStream_t stream =
            pickStream(input_.ConsumeIntegralInRange(0, kDeviceCount - 1));
        const accinteError_t status = accinteStreamQuery(stream);
        if (status == accinteSuccess) {
          markStreamDone(stream);
        } else if (status != accinteErrorNotReady) {
          expectSynchronized(status, "accinteStreamQuery");
        }
        break;
      }
      case 2:
        expectSynchronized(accinteDeviceSynchronize(),
                           "accinteDeviceSynchronize");
        for (auto& buffer : buffers_) {
          if (buffer.lastStream != nullptr &&
              deviceOf(buffer.lastStream) == currentDevice_) {
            buffer.lastStream = nullptr;
          }
        }
        break;
    }
  }

  /** Compares a buffer's bytes with the model. */
  void readBack() {
    Buffer* buffer = pick(buffers_);
    if (buffer != nullptr) {
      checkContents(*buffer);
    }
  }

  void checkContents(Buffer& buffer) {
    std::vector<uint8_t> actual(buffer.expected.size());
    if (buffer.kind == MemoryKind::Device) {
      orderAfterLastAccess(buffer, defaultStreams_[buffer.device]);
      expectSuccess(accinteMemcpy(actual.data(), buffer.ptr, actual.size(),
                                  accinteMemcpyDeviceToHost),
                    "accinteMemcpy(read back)");
      markStreamDone(defaultStreams_[buffer.device]);
      buffer.lastStream = nullptr;
    } else {
      settle(buffer);
      std::memcpy(actual.data(), buffer.ptr, actual.size());
    }
    if (actual != buffer.expected) {
      fail("a buffer does not hold the bytes the calls wrote");
    }
  }

  void hostWrite() {
    Buffer* buffer = pick(buffers_);
    if (buffer == nullptr || buffer->kind == MemoryKind::Device) {
      return;
    }
    settle(*buffer);
    const auto value = input_.ConsumeIntegral<uint8_t>();
    const size_t offset =
        input_.ConsumeIntegralInRange<size_t>(0, buffer->expected.size() - 1);
    const size_t count = buffer->expected.size() - offset;
    std::memset(buffer->ptr + offset, value, count);
    std::memset(buffer->expected.data() + offset, value, count);
  }

  void pointerAttributes() {
    Buffer* buffer = pick(buffers_);
    if (buffer != nullptr) {
      checkAttributes(*buffer, input_.ConsumeIntegralInRange<size_t>(
                                   0, buffer->expected.size() - 1));
    }
  }

  void checkAttributes(const Buffer& buffer, size_t offset) {
    accintePointerAttributes attributes{};
    expectSuccess(accintePointerGetAttributes(&attributes, buffer.ptr + offset),
                  "accintePointerGetAttributes");
    int pinned = -1;
    expectSuccess(accinteHostIsPinned(buffer.ptr + offset, &pinned),
                  "accinteHostIsPinned");
    switch (buffer.kind) {
      case MemoryKind::Device:
        if (attributes.type != accinteMemoryTypeDevice ||
            attributes.device != buffer.device ||
            attributes.base != buffer.ptr ||
            attributes.size != buffer.expected.size() || pinned != 0) {
          fail("wrong attributes of device memory");
        }
        break;
      case MemoryKind::Pinned:
        if (attributes.type != accinteMemoryTypeHost ||
            attributes.device != -1 || attributes.base != buffer.ptr ||
            attributes.size != buffer.expected.size() || pinned != 1) {
          fail("wrong attributes of pinned memory");
        }
        break;
      case MemoryKind::Pageable:
        if (attributes.type != accinteMemoryTypeUnregistered || pinned != 0) {
          fail("wrong attributes of pageable memory");
        }
        break;
    }
  }

  /** Whether `ptr` lies inside a live buffer (a freed address may have been
   * handed out again). */
  bool isLive(const uint8_t* ptr) const {
    return std::any_of(buffers_.begin(), buffers_.end(), [&](const Buffer& b) {
      return ptr >= b.ptr && ptr < b.ptr + b.expected.size();
    });
  }

  /** Freed pointers and destroyed handles must be refused, not used. */
  void staleUse() {
    switch (input_.ConsumeIntegralInRange(0, 2)) {
      case 0: {
        uint8_t** ptr = pick(stale_);
        if (ptr == nullptr || isLive(*ptr)) {
          return;
        }
        accintePointerAttributes attributes{};
        expectSuccess(accintePointerGetAttributes(&attributes, *ptr),
                      "accintePointerGetAttributes(freed)");
        if (attributes.type != accinteMemoryTypeUnregistered) {
          fail("a freed pointer is still registered");
        }
        expectStatus(accinteMemsetAsync(*ptr, 0, 1, nullptr),
                     accinteErrorInvalidDevicePointer,
                     "accinteMemsetAsync(freed)");
        const accinteError_t status = accinteFree(*ptr);
        if (status != accinteErrorInvalidDevicePointer) {
          fail("a second accinteFree was not refused:",
               accinteGetErrorName(status));
        }
        break;
      }
      case 1: {
        accinteStream_t* stream = pick(staleStreams_);
        if (stream == nullptr || isLiveStream(*stream)) {
          return;
        }
        expectStatus(accinteStreamQuery(*stream),
                     accinteErrorInvalidResourceHandle,
                     "accinteStreamQuery(destroyed)");
        expectStatus(accinteStreamSynchronize(*stream),
                     accinteErrorInvalidResourceHandle,
                     "accinteStreamSynchronize(destroyed)");
        expectStatus(accinteStreamDestroy(*stream),
                     accinteErrorInvalidResourceHandle,
                     "accinteStreamDestroy(destroyed)");
        break;
      }
      case 2: {
        accinteEvent_t* event = pick(staleEvents_);
        if (event == nullptr || isLiveEvent(*event)) {
          return;
        }
        expectStatus(accinteEventQuery(*event),
                     accinteErrorInvalidResourceHandle,
                     "accinteEventQuery(destroyed)");
        expectStatus(accinteEventRecord(*event, nullptr),
                     accinteErrorInvalidResourceHandle,
                     "accinteEventRecord(destroyed)");
        expectStatus(accinteEventDestroy(*event),
                     accinteErrorInvalidResourceHandle,
                     "accinteEventDestroy(destroyed)");
        break;
      }
    }
  }

  bool isLiveStream(accinteStream_t stream) const {
    return std::any_of(streams_.begin(), streams_.end(),
                       [&](const StreamSlot& s) { return s.handle == stream; });
  }

  bool isLiveEvent(accinteEvent_t event) const {
    return event == orderingEvent_ ||
           std::any_of(events_.begin(), events_.end(),
                       [&](const EventSlot& e) { return e.handle == event; });
  }

  void badArguments() {
    void* ptr = nullptr;
    switch (input_.ConsumeIntegralInRange(0, 6)) {
      case 0:
        expectStatus(accinteMalloc(nullptr, 16), accinteErrorInvalidValue,
                     "accinteMalloc(NULL)");
        break;
      case 1:
        expectStatus(accinteMalloc(&ptr, SIZE_MAX),
                     accinteErrorMemoryAllocation, "accinteMalloc(SIZE_MAX)");
        break;
      case 2: {
        accinteDeviceProp prop{};
        const int device = input_.ConsumeIntegral<int>();
        const accinteError_t status = accinteGetDeviceProperties(&prop, device);
        if (device >= 0 && device < kDeviceCount) {
          expectSuccess(status, "accinteGetDeviceProperties");
          if (prop.totalGlobalMem != kCapacity) {
            fail("a device's capacity is not ACCINTE_DEVICE_MEMORY");
          }
        } else {
          expectStatus(status, accinteErrorInvalidDevice,
                       "accinteGetDeviceProperties(out of range)");
        }
        break;
      }
      case 3: {
        // NB: any value a C caller may pass in the enum's range (0 to 31);
        // beyond it, the call itself would be undefined behaviour in C++.
        const auto error =
            static_cast<accinteError_t>(input_.ConsumeIntegralInRange(0, 31));
        if (accinteGetErrorName(error) == nullptr ||
            accinteGetErrorString(error) == nullptr) {
          fail("an error name or string is NULL");
        }
        break;
      }
      case 4:
        // An unknown flag, or an interprocess event with timing.
        expectStatus(
            accinteEventCreateWithFlags(reinterpret_cast<accinteEvent_t*>(&ptr),
                                        input_.ConsumeBool() ? 8u : 6u),
            accinteErrorInvalidValue, "accinteEventCreateWithFlags(bad flags)");
        break;
      case 5: {
        // NB: not a kind, yet in the enum's range (see case 3).
        const auto kind =
            static_cast<accinteMemcpyKind>(input_.ConsumeIntegralInRange(5, 7));
        uint8_t host[4] = {};
        expectStatus(accinteMemcpy(host, host + 2, 2, kind),
                     accinteErrorInvalidValue, "accinteMemcpy(bad kind)");
        break;
      }
      case 6:
        telemetry(input_.ConsumeIntegral<int>());
        break;
    }
  }

  /** The telemetry of `device`: refused out of range, else rates within 0
   * to 100 and the model's values within their documented bounds. */
  void telemetry(int device) {
    unsigned int kernel = 0;
    unsigned int memory = 0;
    unsigned int mhz = 0;
    unsigned int celsius = 0;
    unsigned int milliwatts = 0;
    const accinteError_t statuses[] = {
        accinteDeviceGetUtilizationRates(device, &kernel, &memory),
        accinteDeviceGetClockRate(device, &mhz),
        accinteDeviceGetTemperature(device, &celsius),
        accinteDeviceGetPowerUsage(device, &milliwatts)};
    for (accinteError_t status : statuses) {
      if (device >= 0 && device < kDeviceCount) {
        expectSuccess(status, "accinteDeviceGet<telemetry>");
      } else {
        expectStatus(status, accinteErrorInvalidDevice,
                     "accinteDeviceGet<telemetry>(out of range)");
      }
    }
    expectStatus(accinteDeviceGetUtilizationRates(0, nullptr, nullptr),
                 accinteErrorInvalidValue,
                 "accinteDeviceGetUtilizationRates(NULL, NULL)");
    if (device < 0 || device >= kDeviceCount) {
      return;
    }
    if (kernel > 100 || memory > 100) {
      fail("a utilization rate is above 100%");
    }
    if (mhz != 1500 || celsius < 30 || celsius > 80 || milliwatts < 40'000 ||
        milliwatts > 240'000) {
      fail("a modelled clock, temperature or power is out of its bounds");
    }
  }

  // --- Tracing ---------------------------------------------------------------

  void trace() {
    switch (input_.ConsumeIntegralInRange(0, 6)) {
      case 0: {
        // Small capacities, so that the buffer fills and drops; past the
        // largest, refused.
        const size_t capacity =
            input_.ConsumeBool() ? input_.ConsumeIntegralInRange<size_t>(0, 8)
                                 : size_t{ACCINTE_ACTIVITY_MAX_CAPACITY} + 1;
        if (capacity > ACCINTE_ACTIVITY_MAX_CAPACITY) {
          expectStatus(accinteActivityEnable(capacity),
                       accinteErrorInvalidValue,
                       "accinteActivityEnable(too large)");
        } else {
          expectSuccess(accinteActivityEnable(capacity),
                        "accinteActivityEnable");
          tracing_ = true;
        }
        break;
      }
      case 1:
        expectSuccess(accinteActivityDisable(), "accinteActivityDisable");
        tracing_ = false;
        break;
      case 2:
        takeRecords(input_.ConsumeIntegralInRange<size_t>(0, 4));
        break;
      case 3: {
        const uint64_t id = input_.ConsumeIntegralInRange<uint64_t>(0, 3);
        if (id == 0) {
          expectStatus(accinteActivityPushExternalCorrelationId(0),
                       accinteErrorInvalidValue,
                       "accinteActivityPushExternalCorrelationId(0)");
        } else {
          expectSuccess(accinteActivityPushExternalCorrelationId(id),
                        "accinteActivityPushExternalCorrelationId");
          externalIds_.push_back(id);
        }
        break;
      }
      case 4:
        popExternalId();
        break;
      case 5: {
        int enabled = -1;
        expectSuccess(accinteActivityIsEnabled(&enabled),
                      "accinteActivityIsEnabled");
        if (enabled != (tracing_ ? 1 : 0)) {
          fail("accinteActivityIsEnabled disagrees with the program");
        }
        uint64_t dropped = 0;
        expectSuccess(accinteActivityGetDropped(&dropped),
                      "accinteActivityGetDropped");
        expectStatus(accinteActivityTake(nullptr, 1, nullptr),
                     accinteErrorInvalidValue, "accinteActivityTake(NULL)");
        break;
      }
      case 6:
        if (input_.ConsumeBool()) {
          expectSuccess(accinteActivityPushName("fuzzer operator"),
                        "accinteActivityPushName");
          ++pushedNames_;
        } else {
          popName();
        }
        break;
    }
  }

  void popName() {
    if (pushedNames_ == 0) {
      expectStatus(accinteActivityPopName(), accinteErrorInvalidValue,
                   "accinteActivityPopName(empty)");
      return;
    }
    expectSuccess(accinteActivityPopName(), "accinteActivityPopName");
    --pushedNames_;
  }

  void popExternalId() {
    uint64_t id = 0;
    if (externalIds_.empty()) {
      expectStatus(accinteActivityPopExternalCorrelationId(&id),
                   accinteErrorInvalidValue,
                   "accinteActivityPopExternalCorrelationId(empty)");
      return;
    }
    expectSuccess(accinteActivityPopExternalCorrelationId(&id),
                  "accinteActivityPopExternalCorrelationId");
    if (id != externalIds_.back()) {
      fail("the external correlation stack popped another id than pushed");
    }
    externalIds_.pop_back();
  }

  /** Takes up to `capacity` records and checks that each one is whole;
   * returns how many it took. */
  size_t takeRecords(size_t capacity) {
    accinteActivityRecord records[4];
    size_t count = capacity + 1;
    expectSuccess(accinteActivityTake(records, capacity, &count),
                  "accinteActivityTake");
    if (count > capacity) {
      fail("accinteActivityTake handed over more records than asked for");
    }
    for (size_t i = 0; i < count; ++i) {
      checkRecord(records[i]);
    }
    return count;
  }

  static void checkRecord(const accinteActivityRecord& record) {
    if (std::memchr(record.name, '\0', sizeof(record.name)) == nullptr ||
        record.name[0] == '\0') {
      fail("an activity record's name is empty or not NUL-terminated");
    }
    if (record.start > record.end || record.correlationId == 0) {
      fail("an activity record ends before it starts or has no id",
           record.name);
    }
    switch (record.kind) {
      case accinteActivityKindRuntime:
        if (record.stream != nullptr || record.bytes != 0) {
          fail("a runtime call's record has a stream or bytes", record.name);
        }
        return;
      case accinteActivityKindKernel:
        if (record.bytes != 0) {
          fail("a kernel's record has bytes", record.name);
        }
        break;
      case accinteActivityKindMemcpy:
      case accinteActivityKindMemset:
        if (record.bytes == 0 || record.bytes > kCapacity) {
          fail("a copy's or memset's record has no or impossible bytes",
               record.name);
        }
        break;
      default:
        fail("an activity record of unknown kind", record.name);
    }
    if (record.stream == nullptr || record.device < 0 ||
        record.device >= kDeviceCount) {
      fail("a record of device work has no stream or device", record.name);
    }
  }

  void checkFreeMemory() {
    size_t free = 0;
    size_t total = 0;
    expectSuccess(accinteMemGetInfo(&free, &total), "accinteMemGetInfo");
    if (total != kCapacity || free != freeMemory_[currentDevice_]) {
      fail("accinteMemGetInfo disagrees with the allocations made");
    }
  }

  /** Checks every buffer, then releases everything the program made. */
  void finish() {
    for (auto& buffer : buffers_) {
      checkContents(buffer);
    }
    for (auto& buffer : buffers_) {
      settle(buffer);
      releaseBuffer(buffer);
    }
    for (const auto& slot : streams_) {
      expectSuccess(accinteStreamDestroy(slot.handle), "accinteStreamDestroy");
    }
    for (const auto& slot : events_) {
      expectSuccess(accinteEventDestroy(slot.handle), "accinteEventDestroy");
    }
    expectSuccess(accinteEventDestroy(orderingEvent_), "accinteEventDestroy");
    // Failures left pending on the default streams are reported once each.
    for (int device = 0; device < kDeviceCount; ++device) {
      expectSuccess(accinteSetDevice(device), "accinteSetDevice");
      expectSynchronized(accinteDeviceSynchronize(),
                         "accinteDeviceSynchronize");
      expectSuccess(accinteStreamSynchronize(defaultStreams_[device]),
                    "accinteStreamSynchronize(drained)");
      size_t free = 0;
      size_t total = 0;
      expectSuccess(accinteMemGetInfo(&free, &total), "accinteMemGetInfo");
      if (free != total) {
        fail("device memory is still in use once everything was freed");
      }
    }
    expectSuccess(accinteSetDevice(0), "accinteSetDevice");
    // Tracing off, its records checked and taken, the stack empty: the next
    // input starts from nothing.
    expectSuccess(accinteActivityDisable(), "accinteActivityDisable");
    tracing_ = false;
    while (takeRecords(4) == 4) {
    }
    while (!externalIds_.empty()) {
      popExternalId();
    }
    while (pushedNames_ > 0) {
      popName();
    }
  }

  FuzzedDataProvider& input_;
  int currentDevice_ = 0;
  accinteStream_t defaultStreams_[kDeviceCount] = {};
  size_t freeMemory_[kDeviceCount] = {};
  accinteEvent_t orderingEvent_ = nullptr;
  std::vector<Buffer> buffers_;
  std::vector<StreamSlot> streams_;
  std::vector<EventSlot> events_;
  std::vector<uint8_t*> stale_;
  std::vector<accinteStream_t> staleStreams_;
  std::vector<accinteEvent_t> staleEvents_;
  int failingKernels_ = 0;
  bool tracing_ = false;
  /** The external correlation ids this thread pushed, innermost last. */
  std::vector<uint64_t> externalIds_;
  /** How many kernel names this thread pushed and has not popped. */
  int pushedNames_ = 0;
  /** Launch failures reported so far. */
  int reportedFailures_ = 0;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // NB: read once, at the runtime's first call.
  setenv("ACCINTE_DEVICE_COUNT", "2", 1);
  setenv("ACCINTE_DEVICE_MEMORY", kCapacitySetting, 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  Program program(input);
  program.run();
  return 0;
}
