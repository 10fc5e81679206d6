#pragma once

/**
 * @file
 * C++ convenience over accinteLaunchKernel() and accinteLaunchKernelNamed():
 * launch a lambda as a kernel.
 */

#include <accinte/runtime.h>

#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace accinte {

/**
 * launchKernel() with a name for the kernel's activity record
 * (accinteLaunchKernelNamed()), such as the ATen operator it computes; NULL
 * names it "kernel". The name is copied, and only while tracing is on, so it
 * need only live during the call and costs nothing when tracing is off.
 */
template <typename Body>
accinteError_t launchNamedKernel(accinteStream_t stream, const char* name,
                                 const void* const* buffers, size_t num_buffers,
                                 Body&& body) {
  using Stored = std::decay_t<Body>;
  auto* stored = new (std::nothrow) Stored(std::forward<Body>(body));
  if (stored == nullptr) {
    return accinteErrorHostMemoryAllocation;
  }
  auto run = [](void* args) -> accinteError_t {
    auto& callable = *static_cast<Stored*>(args);
    if constexpr (std::is_void_v<std::invoke_result_t<Stored&>>) {
      callable();
      return accinteSuccess;
    } else {
      return callable();
    }
  };
  auto destroy = [](void* args) { delete static_cast<Stored*>(args); };
  return accinteLaunchKernelNamed(stream, name, run, stored, destroy, buffers,
                                  num_buffers);
}

/**
 * Enqueues `body` as a kernel on `stream`.
 *
 * The device allocations that the `num_buffers` pointers in `buffers` point
 * into are accessible while `body` runs on the stream's worker thread. `body`
 * may return `void` (success) or an ::accinteError_t. It is moved to the heap
 * and destroyed on the worker after it ran, so it must own (capture by value)
 * everything it uses.
 */
template <typename Body>
accinteError_t launchKernel(accinteStream_t stream, const void* const* buffers,
                            size_t num_buffers, Body&& body) {
  return launchNamedKernel(stream, nullptr, buffers, num_buffers,
                           std::forward<Body>(body));
}

/** launchKernel() with the buffers given as a braced list. */
template <typename Body>
accinteError_t launchKernel(accinteStream_t stream,
                            std::initializer_list<const void*> buffers,
                            Body&& body) {
  return launchKernel(stream, buffers.begin(), buffers.size(),
                      std::forward<Body>(body));
}

/** launchNamedKernel() with the buffers given as a braced list. */
template <typename Body>
accinteError_t launchNamedKernel(accinteStream_t stream, const char* name,
                                 std::initializer_list<const void*> buffers,
                                 Body&& body) {
  return launchNamedKernel(stream, name, buffers.begin(), buffers.size(),
                           std::forward<Body>(body));
}

} // namespace accinte
