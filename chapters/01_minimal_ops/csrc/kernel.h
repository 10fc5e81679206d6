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

#include <utility>
#include <vector>

namespace accinte {

// LITERALINCLUDE START: CH01_KERNEL_TENSOR
/**
 * What a kernel may know of a tensor: where its elements are and how they are
 * laid out, never ownership.
 *
 * NB: a kernel must not hold an `at::Tensor` of accinte memory: dropping the
 * last reference on the worker thread would free device memory from inside a
 * kernel, and freeing waits for the device, that is, for this very kernel.
 */
class KernelTensor {
 public:
  /** Captures the layout of `tensor` (an accinte or a CPU tensor). */
  explicit KernelTensor(const at::Tensor& tensor)
      : data_(tensor.data_ptr()),
        sizes_(tensor.sizes().vec()),
        strides_(tensor.strides().vec()),
        dtype_(tensor.scalar_type()) {}

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
};

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
  ACCINTE_CHECK(accinte::launchKernel(nativeStream(currentStream(device)),
                                      named.data(), named.size(),
                                      std::forward<Body>(body)));
}
// LITERALINCLUDE END: CH01_KERNEL_TENSOR

/** Waits for the current stream of `device`. */
void synchronizeCurrentStream(c10::DeviceIndex device);

} // namespace accinte
