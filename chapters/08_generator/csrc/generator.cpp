// Chapter 08: the accinte generator, its (seed, offset) state, the default
// generator of each device, and their registration with chapter 01's hooks.

#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <08_generator/csrc/generator.h>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstring>
#include <vector>

namespace accinte {

AccinteGeneratorImpl::AccinteGeneratorImpl(c10::DeviceIndex device,
                                           uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

// LITERALINCLUDE START: CH08_GENERATOR_STATE
void AccinteGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0; // LITERALINCLUDE EMPHASIZE
}

void AccinteGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % kPhiloxOffsetPerLaunch == 0, // LITERALINCLUDE EMPHASIZE
              "accinte generator: the offset must be a multiple of ",
              kPhiloxOffsetPerLaunch, ", got ", offset);
  offset_ = offset;
}

uint64_t AccinteGeneratorImpl::get_offset() const {
  return offset_;
}

uint64_t AccinteGeneratorImpl::current_seed() const {
  return seed_;
}

uint64_t AccinteGeneratorImpl::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom(true);
  set_current_seed(random);
  return random;
}

c10::intrusive_ptr<c10::TensorImpl> AccinteGeneratorImpl::get_state() const {
  at::Tensor state =
      at::detail::empty_cpu({kGeneratorStateBytes}, at::kByte, std::nullopt,
                            std::nullopt, std::nullopt, std::nullopt);
  auto* bytes = state.mutable_data_ptr<uint8_t>();
  std::memcpy(bytes, &seed_, sizeof(seed_)); // LITERALINCLUDE EMPHASIZE
  // LITERALINCLUDE EMPHASIZE NEXT
  std::memcpy(bytes + sizeof(seed_), &offset_, sizeof(offset_));
  return state.getIntrusivePtr();
}

void AccinteGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.device_type() == c10::DeviceType::CPU &&
                  new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  new_state.layout() == c10::kStrided,
              "accinte generator: the RNG state must be a uint8 CPU tensor "
              "(torch.ByteTensor), as get_rng_state() returns it; got a ",
              new_state.dtype(), " tensor on ", new_state.device_type());
  TORCH_CHECK(new_state.numel() == kGeneratorStateBytes,
              "accinte generator: the RNG state must have ",
              kGeneratorStateBytes, " bytes (seed and offset), got ",
              new_state.numel());
  TORCH_CHECK(new_state.is_contiguous(),
              "accinte generator: the RNG state must be contiguous");
  uint64_t seed = 0;
  uint64_t offset = 0;
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed, bytes, sizeof(seed)); // LITERALINCLUDE EMPHASIZE
  // LITERALINCLUDE EMPHASIZE NEXT
  std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
  set_offset(offset); // checks it before anything changes
  seed_ = seed;
}
// LITERALINCLUDE END: CH08_GENERATOR_STATE

// LITERALINCLUDE START: CH08_GENERATOR_RESERVE
PhiloxState AccinteGeneratorImpl::reserve(uint64_t increment) {
  const PhiloxState state{seed_, offset_};
  offset_ += increment;
  return state;
}

PhiloxState reservePhilox(const std::optional<at::Generator>& generator,
                          const c10::Device& device) {
  const at::Generator& chosen = generator.has_value() && generator->defined()
                                    ? *generator
                                    : defaultGenerator(device.index());
  auto* impl = at::check_generator<AccinteGeneratorImpl>(chosen);
  TORCH_CHECK(impl->device() == device, "accinte: a generator of ",
              impl->device(), " cannot draw for a tensor on ", device,
              "; create it with torch.Generator(device='", device, "')");
  // NB: the lock covers two integer updates and nothing else: the kernel
  // gets the numbers by value, so nothing waits for the device while the
  // generator is held, and launches on other streams only take turns here.
  const std::lock_guard<std::mutex> lock(impl->mutex_);
  if (C10_UNLIKELY(isCapturing(device.index()))) {
    return reserveInCapture(*impl, kPhiloxOffsetPerLaunch);
  }
  return impl->reserve(kPhiloxOffsetPerLaunch);
}
// LITERALINCLUDE END: CH08_GENERATOR_RESERVE

namespace {
std::atomic<PhiloxCaptureHook> capture_hook{nullptr};
} // namespace

void registerPhiloxCaptureHook(PhiloxCaptureHook hook) {
  capture_hook.store(hook);
}

PhiloxState reserveInCapture(AccinteGeneratorImpl& generator,
                             uint64_t increment) {
  const PhiloxCaptureHook hook = capture_hook.load();
  TORCH_CHECK(hook != nullptr,
              "accinte: a random operator cannot be captured into a graph "
              "before chapter 15_graphs makes the generator capture-safe: its "
              "numbers would repeat at every replay");
  return hook(generator, increment);
}

AccinteGeneratorImpl* AccinteGeneratorImpl::clone_impl() const {
  auto* copy = new AccinteGeneratorImpl(device_.index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

namespace {

c10::DeviceIndex resolveDevice(c10::DeviceIndex device) {
  if (device < 0) {
    return currentDevice();
  }
  checkDeviceIndex(device);
  return device;
}

} // namespace

// LITERALINCLUDE START: CH08_DEFAULT_GENERATORS
const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  // NB: created together on first use and leaked on purpose: Python objects
  // and other static objects may still reach them during shutdown. They are
  // host objects only, so creating them does not initialize the device.
  static const std::vector<at::Generator>* const generators = [] {
    auto* all = new std::vector<at::Generator>();
    for (c10::DeviceIndex index = 0; index < deviceCount(); ++index) {
      all->push_back(at::make_generator<AccinteGeneratorImpl>(index));
    }
    return all;
  }();
  return generators->at(resolveDevice(device));
}

namespace {

at::Generator newGenerator(c10::DeviceIndex device) {
  return at::make_generator<AccinteGeneratorImpl>(resolveDevice(device));
}

struct RegisterGeneratorProvider {
  RegisterGeneratorProvider() {
    registerGeneratorProvider({&defaultGenerator, &newGenerator});
  }
} register_generator_provider;

} // namespace
// LITERALINCLUDE END: CH08_DEFAULT_GENERATORS

} // namespace accinte
