#pragma once

/**
 * @file
 * Launching emulator kernels on accinte tensors.
 *
 * An emulator kernel is host code that runs on a stream's worker thread while
 * the device memory it names is accessible. Inside it, a device tensor's
 * memory can be seen as a CPU tensor and handed to ATen's CPU kernels, which
 * is how this backend computes "on the device".
 */

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <accinte/kernel.h>

#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace accinte {

// LITERALINCLUDE START: CH01_KERNEL_TENSOR
/**
 * What a kernel may know of a tensor: where its elements are, how they are
 * laid out and how to read them, never ownership.
 *
 * NB: a kernel must not hold an `at::Tensor` of accinte memory: dropping the
 * last reference on the worker thread would free device memory from inside a
 * kernel, and freeing waits for the device, that is, for this very kernel
 * (the emulator refuses with accinteErrorNotPermitted).
 *
 * NB: the lazy conjugate and negative bits are part of how to read the
 * memory: a conjugated view shares its input's memory and only flags that
 * every element is to be read conjugated. The CPU view carries the same
 * flags, so ATen's CPU kernels resolve them as they would for a CPU tensor.
 */
class KernelTensor {
 public:
  /** Captures the layout of `tensor` (an accinte or a CPU tensor). */
  explicit KernelTensor(const at::Tensor& tensor)
      : data_(tensor.data_ptr()), // LITERALINCLUDE EMPHASIZE
        sizes_(tensor.sizes().vec()),
        strides_(tensor.strides().vec()),
        dtype_(tensor.scalar_type()),
        conjugated_(tensor.is_conj()),
        negated_(tensor.is_neg()) {}

  /** The memory as a CPU tensor; valid only while the kernel runs. */
  at::Tensor cpuView() const;

  /** The pointer to name in a launch so that its allocation is accessible. */
  const void* buffer() const {
    return data_;
  }

 private:
  void* data_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  at::ScalarType dtype_;
  bool conjugated_;
  bool negated_;
};
// LITERALINCLUDE END: CH01_KERNEL_TENSOR

// LITERALINCLUDE START: CH01_LAUNCH_ON_STREAM
/**
 * Enqueues `body` on the current stream of `device`, with the allocations that
 * `buffers` point into accessible while it runs. Null buffers (empty tensors)
 * are skipped.
 */
template <typename Body>
void launchOnCurrentStream(c10::DeviceIndex device,
                           std::initializer_list<const void*> buffers,
                           Body&& body) {
  std::vector<const void*> named;
  for (const void* buffer : buffers) {
    if (buffer != nullptr) {
      named.push_back(buffer);
    }
  }
  // NB: the emulator keeps what a failed kernel's exception said and hands
  // it to the synchronize that reports the failure. A c10::Error's what()
  // carries a C++ backtrace of the worker thread, which says nothing about
  // the call that launched the kernel, so only its message is kept.
  ACCINTE_CHECK(accinte::launchKernel( // LITERALINCLUDE EMPHASIZE
      nativeStream(currentStream(device)), named.data(), named.size(),
      [body = std::forward<Body>(
           body)]() mutable -> std::invoke_result_t<std::decay_t<Body>&> {
        try {
          return body();
        } catch (const c10::Error& error) {
          // LITERALINCLUDE EMPHASIZE NEXT
          throw std::runtime_error(error.what_without_backtrace());
        }
      }));
}
// LITERALINCLUDE END: CH01_LAUNCH_ON_STREAM

/** Waits for the current stream of `device`. */
void synchronizeCurrentStream(c10::DeviceIndex device);

} // namespace accinte
