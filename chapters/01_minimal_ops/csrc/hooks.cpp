#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <01_minimal_ops/csrc/storage.h>

#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <atomic>

namespace accinte {
namespace {

std::atomic<const GeneratorProvider*> installed_generator_provider{nullptr};
std::atomic<at::HostAllocator*> installed_pinned_allocator{nullptr};
std::atomic<BoxedKernel> installed_fallback_kernel{nullptr};

// LITERALINCLUDE START: CH01_HOOKS
/**
 * The one PrivateUse1 hooks object of the process.
 *
 * ATen asks it what it cannot learn from the dispatcher: whether the backend
 * is available, how to initialize it lazily, which device owns a pointer,
 * whether host memory is pinned, and for generators. What belongs to later
 * chapters is looked up in the extension registry at call time.
 */
struct AccinteHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return deviceCountOrZero() > 0;
  }

  // Called once, by at::globalContext().lazyInitDevice(PrivateUse1).
  void init() const override {
    accinte::deviceCount(); // raises a clear error if the emulator can't start
  }
  // LITERALINCLUDE END: CH01_HOOKS

  // LITERALINCLUDE START: CH01_HOOK_DEVICES

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < deviceCountOrZero();
  }

  c10::DeviceIndex deviceCount() const override {
    return deviceCountOrZero();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    setDevice(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return currentDevice();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return accinte::exchangeDevice(device);
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return accinte::exchangeDevice(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    accintePointerAttributes attributes{};
    ACCINTE_CHECK(accintePointerGetAttributes(&attributes, data));
    TORCH_CHECK(attributes.type == accinteMemoryTypeDevice, "accinte: pointer ",
                data, " is not accinte device memory");
    return {c10::DeviceType::PrivateUse1,
            static_cast<c10::DeviceIndex>(attributes.device)};
  }
  // LITERALINCLUDE END: CH01_HOOK_DEVICES

  // LITERALINCLUDE START: CH01_HOOK_EXTENSIONS

  // NB: answered by the emulator, which knows every pinned block whichever
  // allocator made it.
  bool isPinnedPtr(const void* data) const override {
    int is_pinned = 0;
    // LITERALINCLUDE EMPHASIZE NEXT 2
    return accinteHostIsPinned(data, &is_pinned) == accinteSuccess &&
           is_pinned != 0;
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    return pinnedMemoryAllocator(); // LITERALINCLUDE EMPHASIZE
  }

  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device_index) const override {
    // LITERALINCLUDE EMPHASIZE NEXT
    return generatorProvider().default_generator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    // LITERALINCLUDE EMPHASIZE NEXT
    return generatorProvider().new_generator(device_index);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t new_bytes) const override {
    resizeStorageBytes(storage, new_bytes);
  }
};

struct RegisterAccinteHooks {
  RegisterAccinteHooks() {
    static AccinteHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks); // LITERALINCLUDE EMPHASIZE
  }
} register_accinte_hooks;
// LITERALINCLUDE END: CH01_HOOK_EXTENSIONS

} // namespace

// LITERALINCLUDE START: CH01_EXTENSION_REGISTRY
void registerGeneratorProvider(GeneratorProvider provider) {
  // NB: leaked on purpose; generators outlive static destruction.
  installed_generator_provider.store(new GeneratorProvider(provider));
}

const GeneratorProvider& generatorProvider() {
  const GeneratorProvider* provider = installed_generator_provider.load();
  // LITERALINCLUDE EMPHASIZE NEXT 3
  TORCH_CHECK(provider != nullptr,
              "accinte has no random number generator yet: chapter "
              "08_generator adds it (torch.Generator(device='accinte'), "
              "random operators, manual_seed)");
  return *provider;
}

void registerPinnedMemoryAllocator(at::HostAllocator* allocator) {
  installed_pinned_allocator.store(allocator);
}

at::HostAllocator* pinnedMemoryAllocator() {
  at::HostAllocator* allocator = installed_pinned_allocator.load();
  // LITERALINCLUDE EMPHASIZE NEXT 3
  TORCH_CHECK(allocator != nullptr,
              "accinte has no pinned host memory allocator yet: chapter "
              "07_memory adds it (Tensor.pin_memory(), "
              "torch.empty(..., pin_memory=True))");
  return allocator;
}

void recordPinnedMemoryUse(const at::Tensor& host, c10::Stream stream) {
  if (at::HostAllocator* allocator = installed_pinned_allocator.load()) {
    const c10::DataPtr& data = host.storage().data_ptr();
    allocator->record_event(data.get(), data.get_context(), stream);
  }
}
// LITERALINCLUDE END: CH01_EXTENSION_REGISTRY

void registerFallbackKernel(BoxedKernel kernel) {
  installed_fallback_kernel.store(kernel);
}

BoxedKernel fallbackKernel() {
  return installed_fallback_kernel.load();
}

} // namespace accinte
