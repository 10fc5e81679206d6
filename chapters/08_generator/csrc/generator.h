#pragma once

/**
 * @file
 * The accinte random number generator: one Philox4x32-10 stream per
 * generator, addressed by (seed, offset, element index).
 *
 * The host keeps only two numbers per generator. A launch reserves its random
 * numbers by reading them and advancing the offset; the kernel receives both
 * by value and computes every element's numbers from its index.
 */

#include <08_generator/csrc/philox.h>

#include <accinte/export.h>

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <optional>

namespace accinte {

// LITERALINCLUDE START: CH08_PHILOX_ELEMENT
/** What a kernel needs to know of a generator: the (seed, offset) pair its
 * launch reserved. */
struct PhiloxState {
  /** The key of the Philox stream. */
  uint64_t seed;
  /** Counts 32-bit random numbers already handed out per element. */
  uint64_t offset;
  /**
   * Device memory holding a (seed, offset) pair that the kernel reads when
   * it runs, or nullptr. With it, `seed` is unused and `offset` counts from
   * the offset read there: a launch captured into a graph draws new numbers
   * at each replay (see PhiloxCaptureHook).
   */
  const uint64_t* device_state = nullptr;

  /** The pointer to name in the launch, so that `device_state` is
   * accessible while the kernel runs (nullptr: none). */
  const void* buffer() const {
    return device_state;
  }
};

/**
 * How far one launch advances a generator's offset: the number of 32-bit
 * random numbers one Philox block gives each element.
 *
 * NB: the unit is CUDA's: the offset counts 32-bit numbers consumed by each
 * thread, so it grows by a multiple of four per launch. A kernel here uses at
 * most one block per element (per output element of randperm and
 * multinomial), so four is always enough.
 */
constexpr uint64_t kPhiloxOffsetPerLaunch = 4; // LITERALINCLUDE EMPHASIZE

/**
 * The four random 32-bit words of element `index` of the launch that
 * reserved `state`.
 *
 * NB: the counter is (element index, offset / 4): distinct elements of one
 * launch, and distinct launches, never share a counter, so no two draws of a
 * generator share a block until its offset wraps around 2^64.
 */
inline PhiloxBlock philoxElement(const PhiloxState& state, uint64_t index) {
  const uint64_t seed =
      state.device_state != nullptr ? state.device_state[0] : state.seed;
  const uint64_t offset = state.device_state != nullptr
                              ? state.device_state[1] + state.offset
                              : state.offset;
  // LITERALINCLUDE EMPHASIZE NEXT 4
  const uint64_t row = offset / kPhiloxOffsetPerLaunch;
  return philox4x32_10(
      {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
       static_cast<uint32_t>(row), static_cast<uint32_t>(row >> 32)},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}
// LITERALINCLUDE END: CH08_PHILOX_ELEMENT

// LITERALINCLUDE START: CH08_GENERATOR_CLASS
/**
 * The generator of one accinte device: a seed and an offset.
 *
 * Its state, as `get_state()` returns it and `set_state()` takes it, is a
 * 16-byte uint8 CPU tensor holding the seed and then the offset (two
 * native-endian uint64), the layout of CUDA's Philox generator state.
 *
 * NB: like every `c10::GeneratorImpl`, its methods do not lock: callers hold
 * `mutex_` (PyTorch's Python bindings do, and so does reservePhilox()).
 */
class AccinteGeneratorImpl final : public c10::GeneratorImpl {
 public:
  /** A generator of `device`, seeded with PyTorch's default seed. */
  explicit AccinteGeneratorImpl(c10::DeviceIndex device,
                                uint64_t seed = c10::default_rng_seed_val);

  /** Restarts the stream of `seed` at offset 0. */
  void set_current_seed(uint64_t seed) override;
  /** Moves within the stream; `offset` must be a multiple of four. */
  void set_offset(uint64_t offset) override;
  /** The offset the next launch starts from. */
  uint64_t get_offset() const override;
  /** The seed of the stream. */
  uint64_t current_seed() const override;
  /** Seeds with a non-deterministic random number and returns it. */
  uint64_t seed() override;
  /** Restores a state from get_state(); rejects any other tensor clearly. */
  void set_state(const c10::TensorImpl& new_state) override;
  /** The state: 16 bytes, seed then offset. */
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  /** The (seed, offset) of the next launch; advances the offset by
   * `increment`. The caller holds `mutex_`. */
  PhiloxState reserve(uint64_t increment); // LITERALINCLUDE EMPHASIZE

  /** The device type, for at::check_generator(). */
  static c10::DeviceType device_type() {
    return c10::DeviceType::PrivateUse1;
  }

 private:
  AccinteGeneratorImpl* clone_impl() const override;

  uint64_t seed_;       // LITERALINCLUDE EMPHASIZE
  uint64_t offset_ = 0; // LITERALINCLUDE EMPHASIZE
};
// LITERALINCLUDE END: CH08_GENERATOR_CLASS

// LITERALINCLUDE START: CH08_CAPTURE_HOOK
/**
 * Reserves the random numbers of a launch enqueued on a stream that is being
 * captured into a graph (chapter 15_graphs): returns a PhiloxState whose
 * `device_state` the graph fills before each replay, and leaves the
 * generator's own offset alone. Called with the generator's `mutex_` held.
 */
using PhiloxCaptureHook = PhiloxState (*)(AccinteGeneratorImpl& generator,
                                          uint64_t increment);

/**
 * Installs the hook reservePhilox() calls for launches on a capturing
 * stream. Until one is installed, such a launch raises: numbers reserved by
 * value would repeat at every replay of the graph, silently.
 */
ACCINTE_EXPORT void registerPhiloxCaptureHook(PhiloxCaptureHook hook);
// LITERALINCLUDE END: CH08_CAPTURE_HOOK

/** Number of bytes of an accinte generator state. */
constexpr int64_t kGeneratorStateBytes = 16;

/**
 * Reserves the random numbers of one launch on `device`: checks that
 * `generator` (the device's default generator if empty) is an accinte
 * generator of that very device, then returns its (seed, offset) and
 * advances the offset.
 */
PhiloxState reservePhilox(const std::optional<at::Generator>& generator,
                          const c10::Device& device);

/** The (seed, offset) of a launch on a capturing stream, from the hook of
 * registerPhiloxCaptureHook(); raises if none is installed. The caller holds
 * `generator`'s `mutex_`. */
PhiloxState reserveInCapture(AccinteGeneratorImpl& generator,
                             uint64_t increment);

/** The default generator of `device` (-1: the current device). */
ACCINTE_EXPORT const at::Generator& defaultGenerator(c10::DeviceIndex device);

} // namespace accinte
