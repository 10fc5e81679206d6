#include <01_minimal_ops/csrc/capability.h>
#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdint>

namespace accinte {
namespace {

// The capability bits later chapters added (addCapabilityDtypes).
// NB: constant-initialized, so a later chapter's static initializer may add
// to it before or after this file's run.
std::atomic<uint64_t> added_capability_bits{0};

constexpr c10::DeviceType kAccinte = c10::DeviceType::PrivateUse1;

accinteEvent_t asEvent(void* event) {
  return static_cast<accinteEvent_t>(event);
}

/** The device's index; none (`torch.Stream(device="accinte")`) means the
 * current device, as for CUDA. */
c10::DeviceIndex indexOrCurrent(c10::Device device) {
  return device.has_index() ? device.index() : currentDevice();
}

// LITERALINCLUDE START: CH01_GUARD_IMPL
/**
 * How PyTorch switches devices, streams and events for accinte.
 *
 * `c10::DeviceGuard`, `torch.accelerator`, `torch.Stream` and `torch.Event`
 * all go through this one object, found by device type in a registry that
 * `C10_REGISTER_GUARD_IMPL` fills when the library is loaded.
 */
struct AccinteGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kAccinte;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kAccinte);
    return c10::Device(kAccinte, accinte::exchangeDevice(device.index()));
  }

  c10::Device getDevice() const override {
    return c10::Device(kAccinte, currentDevice());
  }

  void setDevice(c10::Device device) const override {
    TORCH_INTERNAL_ASSERT(device.type() == kAccinte);
    accinte::setDevice(device.index());
  }

  // NB: noexcept: guards call this from destructors to restore a device that
  // was valid when they saved it, so a failure here is ignored, not thrown.
  // LITERALINCLUDE EMPHASIZE NEXT 2
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    (void)accinteSetDevice(device.index());
  }

  // LITERALINCLUDE EMPHASIZE NEXT 2
  c10::DeviceIndex deviceCount() const noexcept override {
    return deviceCountOrZero();
  }
  // LITERALINCLUDE END: CH01_GUARD_IMPL

  // LITERALINCLUDE START: CH01_GUARD_CAPABILITY
  /**
   * The dtypes a tensor on the device can have and convert between, as
   * `torch.accelerator.get_device_capability` reports them: every dense
   * dtype the CPU converts between, since a kernel that converts on the
   * device runs the CPU's copy over device memory.
   *
   * NB: not the bits, float4 and sub-byte integer dtypes: their tensors
   * allocate and their bytes copy, but the CPU converts none of them, and
   * the capability promises conversion. Not the quantized dtypes either:
   * they need a quantizer and their own dispatch key, the layouts of
   * chapter 16, which adds them with addCapabilityDtypes (capability.h).
   */
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    // NB: an explicit index only, as synchronizeDevice: Python resolves
    // None to the current device before it calls the guard, so -1 here is
    // a bad index, not "the current device".
    checkDeviceIndex(device.index());
    c10::DeviceCapability capability;
    capability.capability_data.capability_bits =
        (1ULL << c10::kIndex_Bool) | (1ULL << c10::kIndex_Byte) |
        (1ULL << c10::kIndex_Char) | (1ULL << c10::kIndex_Short) |
        (1ULL << c10::kIndex_Int) | (1ULL << c10::kIndex_Long) |
        (1ULL << c10::kIndex_UInt16) | (1ULL << c10::kIndex_UInt32) |
        (1ULL << c10::kIndex_UInt64) | (1ULL << c10::kIndex_Half) |
        (1ULL << c10::kIndex_BFloat16) | (1ULL << c10::kIndex_Float) |
        (1ULL << c10::kIndex_Double) | (1ULL << c10::kIndex_ComplexHalf) |
        (1ULL << c10::kIndex_ComplexFloat) |
        (1ULL << c10::kIndex_ComplexDouble) |
        (1ULL << c10::kIndex_Float8_e5m2) |
        (1ULL << c10::kIndex_Float8_e4m3fn) |
        (1ULL << c10::kIndex_Float8_e5m2fnuz) |
        (1ULL << c10::kIndex_Float8_e4m3fnuz) |
        (1ULL << c10::kIndex_Float8_e8m0fnu) |
        added_capability_bits.load(); // LITERALINCLUDE EMPHASIZE
    return capability;
  }
  // LITERALINCLUDE END: CH01_GUARD_CAPABILITY

  // LITERALINCLUDE START: CH01_GUARD_STREAMS
  c10::Stream getStream(c10::Device device) const override {
    return currentStream(indexOrCurrent(device));
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return defaultStream(indexOrCurrent(device));
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device,
                                      bool is_high_priority) const override {
    return streamFromPool(indexOrCurrent(device), is_high_priority);
  }

  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return newStream(indexOrCurrent(device), priority);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return accinte::exchangeStream(stream);
  }

  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return nativeStream(stream);
  }

  bool queryStream(const c10::Stream& stream) const override {
    const accinteError_t status = accinteStreamQuery(nativeStream(stream));
    if (status == accinteErrorNotReady) {
      return false;
    }
    ACCINTE_CHECK(status);
    return true;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    // NB: as CUDA's stream synchronize, unlike a device's.
    warnOrErrorOnSync();
    ACCINTE_CHECK(accinteStreamSynchronize(nativeStream(stream)));
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    accinte::synchronizeDevice(device_index);
  }

  // NB: forwarded to whichever allocator is registered for the device, so a
  // caching allocator (chapter 07) learns which streams still use a block.
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override {
    c10::getDeviceAllocator(kAccinte)->recordStream(data_ptr, stream);
  }
  // LITERALINCLUDE END: CH01_GUARD_STREAMS

  // LITERALINCLUDE START: CH01_GUARD_EVENTS
  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "accinte: event on device ", static_cast<int>(device_index),
                " cannot be recorded on a stream of ", stream.device());
    if (*event == nullptr) {
      // NB: as for CUDA, PyTorch's default event skips timing (cheaper);
      // torch.Event(enable_timing=True) asks for the backend default.
      const unsigned int flags = flag == c10::EventFlag::BACKEND_DEFAULT
                                     ? accinteEventDefault
                                     : accinteEventDisableTiming;
      const c10::DeviceIndex previous =
          accinte::exchangeDevice(stream.device_index());
      accinteEvent_t created = nullptr;
      const accinteError_t status =
          accinteEventCreateWithFlags(&created, flags);
      accinte::exchangeDevice(previous);
      ACCINTE_CHECK(status);
      *event = created;
    }
    ACCINTE_CHECK(accinteEventRecord(asEvent(*event), nativeStream(stream)));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) {
      return; // never recorded: nothing to wait for
    }
    ACCINTE_CHECK(accinteStreamWaitEvent(nativeStream(stream), asEvent(event)));
  }
  // LITERALINCLUDE END: CH01_GUARD_EVENTS

  // LITERALINCLUDE START: CH01_GUARD_EVENT_QUERIES
  bool queryEvent(void* event) const override {
    if (event == nullptr) {
      return true;
    }
    const accinteError_t status = accinteEventQuery(asEvent(event));
    if (status == accinteErrorNotReady) {
      return false;
    }
    ACCINTE_CHECK(status);
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      ACCINTE_CHECK(accinteEventSynchronize(asEvent(event)));
    }
  }

  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "accinte: both events must be recorded before measuring the "
                "time between them");
    float milliseconds = 0;
    const accinteError_t status =
        accinteEventElapsedTime(&milliseconds, asEvent(start), asEvent(end));
    TORCH_CHECK(status != accinteErrorTimingDisabled,
                "accinte: both events must be created with "
                "enable_timing=True to measure elapsed time");
    ACCINTE_CHECK(status);
    return milliseconds;
  }

  void destroyEvent(void* event, const c10::DeviceIndex device_index)
      const noexcept override {
    if (event != nullptr) {
      (void)accinteEventDestroy(asEvent(event));
    }
  }
  // LITERALINCLUDE END: CH01_GUARD_EVENT_QUERIES
};

// LITERALINCLUDE START: CH01_GUARD_REGISTER
C10_REGISTER_GUARD_IMPL(PrivateUse1, AccinteGuardImpl);
// LITERALINCLUDE END: CH01_GUARD_REGISTER

} // namespace

void addCapabilityDtypes(std::initializer_list<c10::ScalarType> dtypes) {
  for (const c10::ScalarType dtype : dtypes) {
    // NB: a dtype's bit is its place in the list the capability's bits are
    // declared from (c10::ScalarTypeIndex), which is also the order in
    // which a full capability visits its dtypes.
    uint64_t bit = 0;
    uint64_t position = 0;
    c10::DeviceCapability().forEachSupportedScalarType(
        [&](c10::ScalarType supported) {
          if (supported == dtype) {
            bit = 1ULL << position;
          }
          ++position;
        });
    TORCH_INTERNAL_ASSERT(bit != 0, "dtype ", dtype, " has no capability bit");
    added_capability_bits.fetch_or(bit);
  }
}

} // namespace accinte
