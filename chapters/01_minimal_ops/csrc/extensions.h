#pragma once

/**
 * @file
 * Extension points that later chapters fill.
 *
 * Some PyTorch registrations can happen only once per process: one
 * PrivateUse1 hooks object, one boxed fallback per dispatch key. Chapter 01
 * makes both, and lets the pieces that belong to later chapters plug in here
 * instead of editing chapter 01. Until a chapter registers its piece, the
 * feature fails with an error naming that chapter.
 */

#include <accinte/export.h>

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace c10 {
class OperatorHandle;
} // namespace c10

namespace accinte {

/** Generators of one device (chapter 08_generator). */
struct GeneratorProvider {
  /** The device's default generator, created on first use. */
  const at::Generator& (*default_generator)(c10::DeviceIndex device);
  /** A fresh generator for the device. */
  at::Generator (*new_generator)(c10::DeviceIndex device);
};

/** Installs the generator provider (chapter 08_generator). */
ACCINTE_EXPORT void registerGeneratorProvider(GeneratorProvider provider);

/** The installed generator provider; raises an error naming chapter 08 if
 * none is installed. */
ACCINTE_EXPORT const GeneratorProvider& generatorProvider();

/** Installs the pinned host memory allocator (chapter 07_memory). */
ACCINTE_EXPORT void registerPinnedMemoryAllocator(at::HostAllocator* allocator);

/** The installed pinned host memory allocator; raises an error naming
 * chapter 07 if none is installed. */
ACCINTE_EXPORT at::HostAllocator* pinnedMemoryAllocator();

/**
 * Tells the installed pinned memory allocator that work enqueued on `stream`
 * reads or writes the pinned host memory of `host` (an asynchronous copy), so
 * that it does not hand the block out again before that work is done, as
 * CUDA's copies tell its caching host allocator. Nothing to do when no
 * allocator is installed: then pinned memory is freed with accinteFreeHost,
 * which waits for every stream.
 */
ACCINTE_EXPORT void recordPinnedMemoryUse(const at::Tensor& host,
                                          c10::Stream stream);

/** A boxed kernel: runs an operator on the arguments on the stack. */
using BoxedKernel = void (*)(const c10::OperatorHandle& op,
                             torch::jit::Stack* stack);

/** Installs the kernel the PrivateUse1 fallback hands operators to when they
 * have no accinte kernel (chapter 02_fallback). */
ACCINTE_EXPORT void registerFallbackKernel(BoxedKernel kernel);

/** The installed fallback kernel, or nullptr. */
ACCINTE_EXPORT BoxedKernel fallbackKernel();

} // namespace accinte
