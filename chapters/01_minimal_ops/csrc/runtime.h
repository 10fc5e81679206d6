#pragma once

/**
 * @file
 * Devices and streams of the accinte backend, on top of the emulator.
 *
 * This is the backend's own runtime layer: the device guard, the allocator,
 * the operators and the Python bindings all reach the emulator through it, so
 * the rules (valid device indices, which stream is current) live in one place.
 */

#include <accinte/export.h>
#include <accinte/runtime.h>

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace accinte {

/** The largest device count the emulator accepts (`ACCINTE_DEVICE_COUNT`). */
constexpr c10::DeviceIndex kMaxDevices = 16;

/**
 * Number of accinte devices. Raises a clear error when the emulator cannot
 * start (a malformed `ACCINTE_DEVICE_COUNT` or `ACCINTE_DEVICE_MEMORY`).
 */
ACCINTE_EXPORT c10::DeviceIndex deviceCount();

/** Number of accinte devices, or 0 when the emulator cannot start. */
ACCINTE_EXPORT c10::DeviceIndex deviceCountOrZero() noexcept;

/** Raises an error naming the valid range unless `index` is a device. */
ACCINTE_EXPORT void checkDeviceIndex(c10::DeviceIndex index);

/** The calling thread's current device. */
ACCINTE_EXPORT c10::DeviceIndex currentDevice();

/** Makes `index` the calling thread's current device (checked). */
ACCINTE_EXPORT void setDevice(c10::DeviceIndex index);

/** Sets the current device and returns the previous one. */
ACCINTE_EXPORT c10::DeviceIndex exchangeDevice(c10::DeviceIndex index);

/** Blocks until all work on every stream of `index` has finished. */
ACCINTE_EXPORT void synchronizeDevice(c10::DeviceIndex index);

// LITERALINCLUDE START: CH01_DECLARE_SYNC_DEBUG
/**
 * What an operation that makes the host wait for the device does first, as
 * `torch.cuda.set_sync_debug_mode` sets it: nothing, warn, or raise. The
 * first tool for finding accidental `.item()` and `.cpu()` stalls.
 */
enum class SyncDebugMode : int { Disabled = 0, Warn = 1, Error = 2 };

/** Sets the mode for the whole process. */
ACCINTE_EXPORT void setSyncDebugMode(SyncDebugMode mode);

/** The mode of setSyncDebugMode() (Disabled until one is set). */
ACCINTE_EXPORT SyncDebugMode syncDebugMode();

/**
 * Called before each operation that synchronizes the host with the device
 * (a synchronous copy to or from the host, `_local_scalar_dense`, a stream's
 * synchronize): warns or raises as the mode says, as CUDA's
 * `c10::cuda::warn_or_error_on_sync` does.
 */
ACCINTE_EXPORT void warnOrErrorOnSync();
// LITERALINCLUDE END: CH01_DECLARE_SYNC_DEBUG

/** The default stream of a device: stream id 0, always there. */
ACCINTE_EXPORT c10::Stream defaultStream(c10::DeviceIndex index);

/** The calling thread's current stream on a device (initially the default).
 */
ACCINTE_EXPORT c10::Stream currentStream(c10::DeviceIndex index);

/** Makes `stream` current on its device for the calling thread and returns
 * the stream that was current there. */
ACCINTE_EXPORT c10::Stream exchangeStream(c10::Stream stream);

/** The next stream of the device's bounded pool of `priority` (handed out
 * round robin, as CUDA's pool); lower `priority` runs first, as in CUDA. */
ACCINTE_EXPORT c10::Stream newStream(c10::DeviceIndex index, int priority);

/** A stream from a small per-device pool, handed out round robin. */
ACCINTE_EXPORT c10::Stream streamFromPool(c10::DeviceIndex index,
                                          bool high_priority);

/** Whether the calling thread's current stream on `index` is capturing a
 * graph (chapter 15_graphs): work enqueued there is recorded, not run, and
 * calls that wait for the device are refused. */
ACCINTE_EXPORT bool isCapturing(c10::DeviceIndex index);

/** The emulator handle behind a `c10::Stream` of this backend. */
ACCINTE_EXPORT accinteStream_t nativeStream(const c10::Stream& stream);

/** The (clamped) priority of a stream. */
ACCINTE_EXPORT int streamPriority(const c10::Stream& stream);

/**
 * Copies `count` bytes of device memory on the current stream of the device
 * that owns `dest` and waits for the copy: what a device allocator's
 * `copy_data` must do (PyTorch calls it to materialize a lazy clone).
 *
 * NB: on the current stream, as every other copy: accinteMemcpy is ordered
 * only after the default stream, and would read `src` before a kernel
 * queued on a side stream has written it.
 */
ACCINTE_EXPORT void copyDeviceMemoryOnCurrentStream(void* dest, const void* src,
                                                    size_t count);

} // namespace accinte
