#pragma once

/**
 * @file
 * The AccInte runtime: the C API of the emulated accelerator.
 *
 * The API follows the shape of the CUDA runtime so that the PyTorch
 * integration built on top of it reads like the integration of a real
 * device. Every function returns an ::accinteError_t; none aborts the process
 * on bad input.
 *
 * Device memory returned by accinteMalloc() is *not* host memory the host may
 * touch: its pages stay inaccessible except while a runtime copy or a kernel
 * launched with accinteLaunchKernel() is using them, so a stray host
 * dereference faults as it would on a real device.
 *
 * Configuration, read once at first use:
 * - `ACCINTE_DEVICE_COUNT`: number of devices, 1 to 16 (default 2).
 * - `ACCINTE_DEVICE_MEMORY`: capacity of each device in bytes, with an
 *   optional `K`, `M` or `G` suffix (default `8G`).
 *
 * An unset or empty variable takes the default. A bad value makes every
 * call except accinteGetErrorName() and accinteGetErrorString() return
 * ::accinteErrorInitialization.
 */

#include <stddef.h>
#include <stdint.h>

#include <accinte/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Error codes returned by every runtime function. */
typedef enum accinteError {
  /** The call succeeded. */
  accinteSuccess = 0,
  /** An argument is out of range or a required pointer is null. */
  accinteErrorInvalidValue = 1,
  /** The device has not enough free memory for the request. */
  accinteErrorMemoryAllocation = 2,
  /** `ACCINTE_DEVICE_COUNT` or `ACCINTE_DEVICE_MEMORY` is malformed. */
  accinteErrorInitialization = 3,
  /** A device index is outside `[0, device count)`. */
  accinteErrorInvalidDevice = 4,
  /** A pointer is not (or no longer) a live device allocation. */
  accinteErrorInvalidDevicePointer = 5,
  /** A copy kind does not match the pointers it was given. */
  accinteErrorInvalidMemcpyDirection = 6,
  /** A stream or event handle is null where forbidden, unknown or destroyed.
   */
  accinteErrorInvalidResourceHandle = 7,
  /** Work enqueued on a stream or before an event has not finished yet. */
  accinteErrorNotReady = 8,
  /** A kernel enqueued on the stream reported a failure. */
  accinteErrorLaunchFailure = 9,
  /** A copy range runs past the end of the allocation it starts in. */
  accinteErrorInvalidMemoryRange = 10,
  /** Pinned host memory could not be allocated. */
  accinteErrorHostMemoryAllocation = 11,
  /** Elapsed time asked of an event created without timing. */
  accinteErrorTimingDisabled = 12,
  /** Elapsed time or synchronisation asked of an event never recorded. */
  accinteErrorEventNotRecorded = 13,
  /** A pointer is not (or no longer) live pinned host memory. */
  accinteErrorInvalidHostPointer = 14,
  /** The runtime was initialised in a parent process before fork(); its
   * worker threads do not exist in this child. */
  accinteErrorForkedChild = 15,
  /** The call would wait for a stream from inside a kernel or copy running on
   * a stream's worker thread, where it could wait for itself forever. */
  accinteErrorNotPermitted = 16,
  /** An IPC handle is malformed, was made by the calling process itself, or
   * designates memory or an event that is gone: freed or destroyed by the
   * process that exported it, or that process has exited. */
  accinteErrorInvalidIpcHandle = 17,
  /** A wait for an interprocess event whose latest record was made by a
   * process that exited before the work before the record finished: the
   * record can never complete. */
  accinteErrorIpcPeerExited = 18,
  /** A system call the runtime needs failed for want of a resource of the
   * process or the system, not of the device: most often the process has
   * as many files open as its limit allows (`ulimit -n`, RLIMIT_NOFILE),
   * and exporting memory or creating the first interprocess event needs
   * one more. As CUDA's cudaErrorOperatingSystem. */
  accinteErrorOperatingSystem = 19,
  /** The call is not allowed while a stream is capturing (a synchronize or
   * query of a capturing stream, a copy from pageable host memory into a
   * capture, a blocking call the calling thread's capture mode forbids, or a
   * capture begun on a default stream): the capture it conflicts with is
   * invalidated, as CUDA's cudaErrorStreamCaptureUnsupported. */
  accinteErrorStreamCaptureUnsupported = 20,
  /** The stream's capture was invalidated by an earlier error; work on it is
   * refused until accinteStreamEndCapture() ends the capture. */
  accinteErrorStreamCaptureInvalidated = 21,
  /** A stream of one capture waited for an event recorded in another. */
  accinteErrorStreamCaptureMerge = 22,
  /** accinteStreamEndCapture() on a stream that is not the one the capture
   * began on, or that is not capturing. */
  accinteErrorStreamCaptureUnmatched = 23,
  /** The capture ended while a stream it forked (through an event) had
   * captured work the origin stream never waited for. */
  accinteErrorStreamCaptureUnjoined = 24,
  /** A dependency would cross the capture's boundary: a capturing stream
   * waited for an event recorded outside the capture, or a stream outside a
   * capture waited for an event recorded in one that has ended. */
  accinteErrorStreamCaptureIsolation = 25,
  /** A capture begun in global or thread-local mode was ended from another
   * thread than the one that began it. */
  accinteErrorStreamCaptureWrongThread = 26,
} accinteError_t;

/** Direction of a copy, checked against the pointers. */
typedef enum accinteMemcpyKind {
  accinteMemcpyHostToHost = 0,
  accinteMemcpyHostToDevice = 1,
  accinteMemcpyDeviceToHost = 2,
  /** Same device or across two devices. */
  accinteMemcpyDeviceToDevice = 3,
  /** Infer the direction from the pointers. */
  accinteMemcpyDefault = 4,
} accinteMemcpyKind;

/** What a pointer points into, as told by accintePointerGetAttributes(). */
typedef enum accinteMemoryType {
  /** Ordinary host memory the runtime knows nothing about. */
  accinteMemoryTypeUnregistered = 0,
  /** Pinned host memory from accinteMallocHost(). */
  accinteMemoryTypeHost = 1,
  /** Device memory from accinteMalloc(). */
  accinteMemoryTypeDevice = 2,
} accinteMemoryType;

/** Attributes of a pointer, which may point anywhere inside an allocation. */
typedef struct accintePointerAttributes {
  /** Kind of memory the pointer points into. */
  accinteMemoryType type;
  /** Device owning the allocation, or -1 for host memory. */
  int device;
  /** Start of the allocation, or NULL for unregistered memory. */
  void* base;
  /** Size in bytes requested for the allocation, or 0. */
  size_t size;
} accintePointerAttributes;

/** Static properties of a device. */
typedef struct accinteDeviceProp {
  /** Human-readable name, NUL-terminated. */
  char name[64];
  /** Capacity of the device memory in bytes (`ACCINTE_DEVICE_MEMORY`). */
  size_t totalGlobalMem;
  /** Compute capability, major part. */
  int major;
  /** Compute capability, minor part. */
  int minor;
  /** Number of host cores the emulator may use to run kernels. */
  int multiProcessorCount;
} accinteDeviceProp;

/** Opaque handle of a stream: an in-order queue of work on one device. */
typedef struct accinteStream* accinteStream_t;

/** Opaque handle of an event: a marker recorded into a stream. */
typedef struct accinteEvent* accinteEvent_t;

/** Opaque handle of a graph: the work a stream capture recorded
 * (accinteStreamEndCapture()). */
typedef struct accinteGraph* accinteGraph_t;

/** Opaque handle of an executable graph: a graph made ready to be launched
 * on a stream, any number of times (accinteGraphInstantiate()). */
typedef struct accinteGraphExec* accinteGraphExec_t;

/** Which calls a stream capture forbids, and to which threads, as CUDA's
 * `cudaStreamCaptureMode`. A *blocking* call is one that may wait for the
 * device or change what captured work refers to: accinteMalloc(),
 * accinteFree(), accinteMallocHost(), accinteFreeHost(), accinteMemcpy()
 * and accinteDeviceSynchronize(). */
typedef enum accinteStreamCaptureMode {
  /** While the capture lasts, blocking calls fail on the thread that began
   * it and on every thread whose own mode is global. */
  accinteStreamCaptureModeGlobal = 0,
  /** Blocking calls fail on the thread that began the capture only. */
  accinteStreamCaptureModeThreadLocal = 1,
  /** The capture forbids no blocking call; calls that conflict with it
   * (a synchronize of the capturing stream) still fail. */
  accinteStreamCaptureModeRelaxed = 2,
} accinteStreamCaptureMode;

/** Whether a stream is capturing, as CUDA's `cudaStreamCaptureStatus`. */
typedef enum accinteStreamCaptureStatus {
  /** Not capturing: work runs. */
  accinteStreamCaptureStatusNone = 0,
  /** Capturing: work is recorded into the capture's graph, not run. */
  accinteStreamCaptureStatusActive = 1,
  /** Capturing, but invalidated by an error: accinteStreamEndCapture() will
   * return no graph. */
  accinteStreamCaptureStatusInvalidated = 2,
} accinteStreamCaptureStatus;

/** Flags for accinteEventCreateWithFlags(), combined with `|`.
 *
 * NB: the enumeration is named only so that the API reference can list it;
 * the function takes the flags as an `unsigned int`, as CUDA's does. */
enum accinteEventFlags {
  /** Default: the event records the time it completes. */
  accinteEventDefault = 0,
  /** The event does not record time (cheaper, as in CUDA). */
  accinteEventDisableTiming = 1,
  /** accinteEventQuery() and accinteEventSynchronize() say only whether the
   * work before the event has finished, never whether it failed, and leave
   * its failures to the streams and events the user waits on. For a
   * backend's own bookkeeping, such as a caching allocator polling for a
   * block's last use. No CUDA equivalent: CUDA's errors are sticky for the
   * whole context, so there every call reports them anyway. */
  accinteEventDisableFailureReport = 2,
  /** The event can be shared with other processes through
   * accinteIpcGetEventHandle(). It must be created with
   * ::accinteEventDisableTiming too, as in CUDA. */
  accinteEventInterprocess = 4,
};

/** Size in bytes of the IPC handles, as CUDA's. */
#define ACCINTE_IPC_HANDLE_SIZE 64

/**
 * Names a device allocation of one process so that another process of the
 * same user can map it (accinteIpcGetMemHandle()).
 *
 * Plain bytes: send them any way (a pipe, a pickle). A handle designates the
 * whole allocation, as CUDA's does: a sub-allocation travels as the handle of
 * its allocation plus its offset from the allocation's base.
 */
typedef struct accinteIpcMemHandle {
  /** Opaque contents. */
  char reserved[ACCINTE_IPC_HANDLE_SIZE];
} accinteIpcMemHandle_t;

/** Names an interprocess event of one process so that another process can
 * wait for its records (accinteIpcGetEventHandle()). Plain bytes. */
typedef struct accinteIpcEventHandle {
  /** Opaque contents. */
  char reserved[ACCINTE_IPC_HANDLE_SIZE];
} accinteIpcEventHandle_t;

/** Flags for accinteIpcOpenMemHandle(). */
enum accinteIpcMemFlags {
  /** No flag. */
  accinteIpcMemNoFlags = 0,
  /** Accepted for CUDA's `cudaIpcMemLazyEnablePeerAccess`; changes nothing,
   * since every emulated device can already reach every other's memory. */
  accinteIpcMemLazyEnablePeerAccess = 1,
};

/**
 * A kernel: host code run by a stream's worker thread while the device memory
 * named at launch is accessible.
 *
 * @param args the pointer given to accinteLaunchKernel().
 * @return ::accinteSuccess, or an error code that the next
 *         accinteStreamSynchronize() or accinteStreamQuery() on that stream
 *         reports as ::accinteErrorLaunchFailure.
 */
typedef accinteError_t (*accinteKernelFn)(void* args);

/** Frees the `args` of a kernel once it has run (or failed to launch). */
typedef void (*accinteArgsDeleter)(void* args);

/* ------------------------------------------------------------------------ */
/* Errors and version                                                       */
/* ------------------------------------------------------------------------ */

/** Returns the enumerator name of an error code, e.g.
 * "accinteErrorInvalidValue". Never NULL; unknown codes give
 * "accinteErrorUnknown". */
ACCINTE_EXPORT const char* accinteGetErrorName(accinteError_t error);

/** Returns a one-sentence description of an error code. Never NULL. */
ACCINTE_EXPORT const char* accinteGetErrorString(accinteError_t error);

/**
 * Returns what went wrong in the launch failure most recently reported to the
 * calling thread by a synchronize or query (::accinteErrorLaunchFailure):
 * the message of the exception the kernel threw, or which error code the
 * kernel or copy returned, after "waited for an event of a stream whose
 * earlier work failed: " if the failure was reported by a stream or event
 * that waited for the failed work. "" if this thread was never told of a
 * failure. Never NULL; valid until the next failure is reported to this
 * thread.
 *
 * NB: a failed kernel or copy is not reported by the call that enqueued it
 * but by the first synchronize or query of a stream or event that carries
 * it (see accinteStreamSynchronize()), however far from the launch that
 * caused it, so the message is what ties it back.
 */
ACCINTE_EXPORT const char* accinteGetLastFailureMessage(void);

/** Writes the runtime version as `1000 * major + 10 * minor`. */
ACCINTE_EXPORT accinteError_t accinteRuntimeGetVersion(int* version);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/** Writes the number of devices (`ACCINTE_DEVICE_COUNT`). */
ACCINTE_EXPORT accinteError_t accinteGetDeviceCount(int* count);

/** Writes the calling host thread's current device (0 until set). */
ACCINTE_EXPORT accinteError_t accinteGetDevice(int* device);

/** Makes `device` the calling host thread's current device. */
ACCINTE_EXPORT accinteError_t accinteSetDevice(int device);

/** Fills `prop` with the properties of `device`. */
ACCINTE_EXPORT accinteError_t
accinteGetDeviceProperties(accinteDeviceProp* prop, int device);

/** Blocks until all work on every stream of the current device has finished.
 * Reports the failures those streams carry, as accinteStreamSynchronize()
 * does for one. From a stream's worker (inside a kernel):
 * ::accinteErrorNotPermitted. */
ACCINTE_EXPORT accinteError_t accinteDeviceSynchronize(void);

/* ------------------------------------------------------------------------ */
/* Device telemetry                                                         */
/* ------------------------------------------------------------------------ */

/**
 * @name Device telemetry
 *
 * The emulator's counterpart of what NVML reports to `nvidia-smi` (and
 * `torch.cuda.utilization()` and its neighbours read). The utilization
 * rates are measured: the stream workers note when each kernel, copy and
 * memset starts and ends. Clock, temperature and power are a model computed
 * from the utilization rates (documented with the emulator), so they are
 * deterministic given them. None of these calls initialises the runtime.
 * @{
 */

/** The length of the sample period of accinteDeviceGetUtilizationRates(),
 * in milliseconds: the utilization rates describe the most recent second, as
 * NVML's do on most products. */
#define ACCINTE_UTILIZATION_SAMPLE_PERIOD_MS 1000

/**
 * Writes the percentages, 0 to 100, of the sample period
 * (::ACCINTE_UTILIZATION_SAMPLE_PERIOD_MS up to now) during which one or more
 * kernels were running on `device` (`kernelPercent`), and during which one or
 * more copies or memsets were reading or writing the memory of `device`
 * (`memoryPercent`), as NVML's `nvmlDeviceGetUtilizationRates` (its `gpu`
 * and `memory`).
 *
 * Work running at once on several streams of the device counts once: the
 * rate is the share of time *any* of it was running. A copy between two
 * devices counts on both; a host-to-host copy on neither. A kernel counts
 * only for `kernelPercent`, whatever memory it touches. Either pointer may
 * be NULL, not both (::accinteErrorInvalidValue); a device outside
 * `[0, device count)`: ::accinteErrorInvalidDevice.
 */
ACCINTE_EXPORT accinteError_t accinteDeviceGetUtilizationRates(
    int device, unsigned int* kernelPercent, unsigned int* memoryPercent);

/** Writes the clock of `device`'s multiprocessors in MHz, as NVML's
 * `nvmlDeviceGetClockInfo` for the SM clock. Emulated: a fixed clock. */
ACCINTE_EXPORT accinteError_t accinteDeviceGetClockRate(int device,
                                                        unsigned int* mhz);

/** Writes the temperature of `device` in degrees Celsius, as NVML's
 * `nvmlDeviceGetTemperature` for the GPU die. Emulated: rises with the
 * utilization rates from an idle value. */
ACCINTE_EXPORT accinteError_t
accinteDeviceGetTemperature(int device, unsigned int* celsius);

/** Writes the power drawn by `device` in milliwatts, as NVML's
 * `nvmlDeviceGetPowerUsage`. Emulated: rises with the utilization rates from
 * an idle value. */
ACCINTE_EXPORT accinteError_t
accinteDeviceGetPowerUsage(int device, unsigned int* milliwatts);

/** @} */

/* ------------------------------------------------------------------------ */
/* Device memory                                                            */
/* ------------------------------------------------------------------------ */

/**
 * Allocates `size` bytes of device memory on the current device.
 *
 * A zero-byte request succeeds and writes NULL. A request past the free
 * capacity returns ::accinteErrorMemoryAllocation and leaves the host's memory
 * untouched. The memory is not accessible from the host.
 *
 * The capacity is accounted in requested bytes (the page rounding of the
 * underlying mapping is not counted), so freeing an allocation makes exactly
 * its size available again.
 */
ACCINTE_EXPORT accinteError_t accinteMalloc(void** ptr, size_t size);

/**
 * Frees device memory from accinteMalloc(). NULL is a no-op.
 *
 * NB: like cudaFree, this first waits for all work on the owning device, so
 * no enqueued kernel or copy can still be using the memory; a copy running on
 * another device's stream is waited for too. Work that names the memory but
 * is still queued on another device fails with ::accinteErrorLaunchFailure
 * when its turn comes.
 * An unknown or already freed pointer, or a pointer inside (not at the start
 * of) an allocation, returns ::accinteErrorInvalidDevicePointer. Called from
 * a stream's worker (a kernel's arguments released there), it would wait for
 * its own stream: it returns ::accinteErrorNotPermitted and frees nothing.
 */
ACCINTE_EXPORT accinteError_t accinteFree(void* ptr);

/** Writes the free and total device memory of the current device in bytes. */
ACCINTE_EXPORT accinteError_t accinteMemGetInfo(size_t* free, size_t* total);

/** Describes what `ptr` points into; any pointer is accepted. */
ACCINTE_EXPORT accinteError_t accintePointerGetAttributes(
    accintePointerAttributes* attributes, const void* ptr);

/* ------------------------------------------------------------------------ */
/* Pinned host memory                                                       */
/* ------------------------------------------------------------------------ */

/** Allocates `size` bytes of page-locked host memory. Zero bytes writes NULL.
 */
ACCINTE_EXPORT accinteError_t accinteMallocHost(void** ptr, size_t size);

/** Frees memory from accinteMallocHost(). NULL is a no-op; anything else
 * unknown returns ::accinteErrorInvalidHostPointer. Like cudaFreeHost, first
 * waits for the work already enqueued on every stream, which may still copy
 * from or to the memory; so from a stream's worker it returns
 * ::accinteErrorNotPermitted and frees nothing. */
ACCINTE_EXPORT accinteError_t accinteFreeHost(void* ptr);

/** Writes 1 if `ptr` points anywhere inside live pinned host memory, else 0. */
ACCINTE_EXPORT accinteError_t accinteHostIsPinned(const void* ptr,
                                                  int* is_pinned);

/* ------------------------------------------------------------------------ */
/* Copies                                                                   */
/* ------------------------------------------------------------------------ */

/**
 * Copies `count` bytes and returns once the copy is done.
 *
 * The copy is ordered after all work already enqueued on the default stream
 * of the device involved (the destination's for a device-to-device copy; for
 * a copy across devices, after the source's default stream as well; for a
 * host-to-host copy, the current device's). The kind is checked against the
 * pointers, and a device range must lie inside one live allocation.
 *
 * Returns the copy's own status; a kernel failure pending on the stream is
 * left for the next accinteStreamSynchronize() or accinteStreamQuery().
 */
ACCINTE_EXPORT accinteError_t accinteMemcpy(void* dst, const void* src,
                                            size_t count,
                                            accinteMemcpyKind kind);

/**
 * Enqueues a copy of `count` bytes on `stream` (NULL: the current device's
 * default stream) and returns at once. Checks are done at enqueue time. The
 * host memory must stay valid until the copy has run. A copy that cannot run
 * when its turn comes (its device memory was freed meanwhile) is reported
 * like a failed kernel.
 */
ACCINTE_EXPORT accinteError_t accinteMemcpyAsync(void* dst, const void* src,
                                                 size_t count,
                                                 accinteMemcpyKind kind,
                                                 accinteStream_t stream);

/** Enqueues filling `count` bytes of device memory with the byte `value`. */
ACCINTE_EXPORT accinteError_t accinteMemsetAsync(void* dst, int value,
                                                 size_t count,
                                                 accinteStream_t stream);

/* ------------------------------------------------------------------------ */
/* Streams and kernels                                                      */
/* ------------------------------------------------------------------------ */

/** Writes the range of stream priorities, 0 (`least`) to -2 (`greatest`);
 * lower numbers mean higher priority, as in CUDA. The emulator stores and
 * reports priorities but does not schedule by them: every stream has its own
 * worker thread. */
ACCINTE_EXPORT accinteError_t
accinteDeviceGetStreamPriorityRange(int* least, int* greatest);

/** Creates a stream with default priority on the current device. */
ACCINTE_EXPORT accinteError_t accinteStreamCreate(accinteStream_t* stream);

/** Creates a stream on the current device; priorities outside the range are
 * clamped to it, as in CUDA. */
ACCINTE_EXPORT accinteError_t
accinteStreamCreateWithPriority(accinteStream_t* stream, int priority);

/** Writes the default stream of `device`: it exists for the whole process. */
ACCINTE_EXPORT accinteError_t accinteGetDefaultStream(int device,
                                                      accinteStream_t* stream);

/** Waits for the stream's work to finish, then destroys it. Default streams
 * cannot be destroyed (::accinteErrorInvalidResourceHandle), nor can a
 * capturing stream (::accinteErrorStreamCaptureUnsupported, which
 * invalidates its capture). */
ACCINTE_EXPORT accinteError_t accinteStreamDestroy(accinteStream_t stream);

/** Returns ::accinteSuccess when all work enqueued on the stream has
 * finished, ::accinteErrorNotReady otherwise. A failure the stream carries
 * is reported first, as by accinteStreamSynchronize(), even while later work
 * is still outstanding. */
ACCINTE_EXPORT accinteError_t accinteStreamQuery(accinteStream_t stream);

/**
 * Blocks until all work enqueued on the stream has finished. Returns
 * ::accinteErrorLaunchFailure if the stream carries a failure nobody has been
 * told of: an operation of its own failed, or it waited
 * (accinteStreamWaitEvent()) for an event whose record carried one. Each
 * failure is reported once, by the first synchronize or query of any stream
 * or event that carries it, and no later call reports it again; work
 * enqueued after that is not affected. A report covering several failures
 * tells the first one's message (accinteGetLastFailureMessage()). From a
 * stream's worker: ::accinteErrorNotPermitted.
 */
ACCINTE_EXPORT accinteError_t accinteStreamSynchronize(accinteStream_t stream);

/**
 * Writes 1 to `*failed` if the stream carries a failure nobody has been told
 * of (see accinteStreamSynchronize()), else 0, and reports nothing: the
 * failure stays for the synchronize or query that reports it, as
 * `cudaPeekAtLastError` leaves CUDA's error in place. The answer covers the
 * work the stream has finished; called by a kernel on the stream, that is
 * all the work enqueued before the kernel.
 *
 * NB: for a kernel that must not pass on what failed work left behind: a
 * collective whose inputs may never have been written tells its peers so,
 * where it would otherwise send them stale bytes as results.
 */
ACCINTE_EXPORT accinteError_t accinteStreamPeekFailure(accinteStream_t stream,
                                                       int* failed);

/** Makes all work enqueued on `stream` after this call wait until `event`'s
 * most recent record has completed. Works across streams and devices. An
 * event never recorded imposes no wait. The stream then carries the
 * failures the record carries (see accinteEventQuery()). */
ACCINTE_EXPORT accinteError_t accinteStreamWaitEvent(accinteStream_t stream,
                                                     accinteEvent_t event);

/** Writes the device the stream belongs to. */
ACCINTE_EXPORT accinteError_t accinteStreamGetDevice(accinteStream_t stream,
                                                     int* device);

/** Writes the (clamped) priority of the stream. */
ACCINTE_EXPORT accinteError_t accinteStreamGetPriority(accinteStream_t stream,
                                                       int* priority);

/**
 * Enqueues a kernel on `stream` (NULL: the current device's default stream).
 *
 * When its turn comes, the stream's worker makes each of the `num_buffers`
 * device allocations that `buffers` point into accessible, calls `fn(args)`,
 * closes the allocations again (unless another kernel or copy still uses
 * them) and finally calls `deleter(args)` if `deleter` is not NULL. The
 * deleter is also called when the launch itself fails.
 *
 * Every buffer must point into a live allocation on the stream's device
 * (::accinteErrorInvalidDevicePointer otherwise). A kernel must not call the
 * runtime.
 */
ACCINTE_EXPORT accinteError_t accinteLaunchKernel(
    accinteStream_t stream, accinteKernelFn fn, void* args,
    accinteArgsDeleter deleter, const void* const* buffers, size_t num_buffers);

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

/** Creates an event with timing on the current device. */
ACCINTE_EXPORT accinteError_t accinteEventCreate(accinteEvent_t* event);

/** Creates an event; `flags` is ::accinteEventDefault or a combination of
 * ::accinteEventDisableTiming, ::accinteEventDisableFailureReport and
 * ::accinteEventInterprocess (which needs ::accinteEventDisableTiming). */
ACCINTE_EXPORT accinteError_t accinteEventCreateWithFlags(accinteEvent_t* event,
                                                          unsigned int flags);

/** Destroys an event. Streams already waiting on it still complete. */
ACCINTE_EXPORT accinteError_t accinteEventDestroy(accinteEvent_t event);

/** Records the event on `stream` (NULL: current device's default stream): it
 * completes when all work enqueued on the stream before it has finished.
 *
 * NB: each record is a record of its own: waits that captured an earlier
 * one keep waiting for that one, whatever later records do. An interprocess
 * event holds at most 240 outstanding records: one more waits until the
 * oldest completes, or fails with ::accinteErrorNotPermitted on a stream's
 * worker and with ::accinteErrorIpcPeerExited if the oldest's process exited
 * before completing it. */
ACCINTE_EXPORT accinteError_t accinteEventRecord(accinteEvent_t event,
                                                 accinteStream_t stream);

/** ::accinteSuccess if the most recent record has completed (or the event was
 * never recorded), ::accinteErrorNotReady otherwise. A completed record
 * carries the failures its stream carried when it reached the record; those
 * nobody has been told of yet are reported (::accinteErrorLaunchFailure),
 * once, as by accinteStreamSynchronize(), unless the event was created with
 * ::accinteEventDisableFailureReport. */
ACCINTE_EXPORT accinteError_t accinteEventQuery(accinteEvent_t event);

/** Blocks until the most recent record has completed, then reports its
 * failures as accinteEventQuery() does; an event never recorded returns at
 * once with ::accinteSuccess. From a stream's worker:
 * ::accinteErrorNotPermitted. */
ACCINTE_EXPORT accinteError_t accinteEventSynchronize(accinteEvent_t event);

/**
 * Writes the milliseconds between the completion of `start` and of `end`.
 *
 * Both events need timing (::accinteErrorTimingDisabled), a record
 * (::accinteErrorEventNotRecorded) and completion (::accinteErrorNotReady).
 */
ACCINTE_EXPORT accinteError_t accinteEventElapsedTime(float* milliseconds,
                                                      accinteEvent_t start,
                                                      accinteEvent_t end);

/* ------------------------------------------------------------------------ */
/* Stream capture and graphs                                                */
/* ------------------------------------------------------------------------ */

/**
 * @name Stream capture and graphs
 *
 * As CUDA's stream capture: between accinteStreamBeginCapture() and
 * accinteStreamEndCapture(), the kernels, copies and memsets enqueued on a
 * capturing stream are not run but recorded, with the order they must keep,
 * into a graph; accinteGraphInstantiate() makes it executable, and each
 * accinteGraphLaunch() runs all of it as *one* operation of a stream. That
 * is what graphs are for: a launch costs one enqueue, however many
 * operations the graph holds.
 *
 * A captured operation keeps what it was given, by value: a kernel its
 * `args` (released with its deleter when the last graph or executable
 * graph holding it is destroyed, not after it ran) and the device pointers
 * it names, a copy its pointers. Each launch reads and writes that same
 * memory again: to give a launch new input, copy the input into the memory
 * the capture used. Memory freed after the capture makes a launch that
 * touches it fail (::accinteErrorLaunchFailure at the next synchronize),
 * never touch whatever memory took its place.
 *
 * Several streams take part in one capture through events, as in CUDA: a
 * stream that waits (accinteStreamWaitEvent()) for an event recorded on a
 * capturing stream joins that capture (a fork); the origin stream waiting
 * for an event recorded on the forked stream joins it back. An event record
 * on a capturing stream runs nothing: it only marks the point a waiting
 * stream depends on. Every forked stream's work must be joined back before
 * the capture ends (::accinteErrorStreamCaptureUnjoined).
 *
 * Calls that would need captured work to have run fail with
 * ::accinteErrorStreamCaptureUnsupported and invalidate the capture: a
 * synchronize or query of a capturing stream, accinteEventQuery() or
 * accinteEventSynchronize() of an event last recorded in a capture,
 * accinteDeviceSynchronize() while a stream of the device captures, a copy
 * between a capturing stream and pageable host memory (whose contents a
 * launch would read later: use pinned memory), and the blocking calls that
 * the capture's and the calling thread's modes forbid
 * (::accinteStreamCaptureMode).
 * @{
 */

/**
 * Starts capturing the work enqueued on `stream`. A default stream cannot
 * capture (::accinteErrorStreamCaptureUnsupported, as CUDA's legacy
 * stream); nor can a stream that already captures. Work enqueued before
 * keeps running; `mode` (::accinteStreamCaptureMode, else
 * ::accinteErrorInvalidValue) decides which blocking calls fail meanwhile.
 */
ACCINTE_EXPORT accinteError_t accinteStreamBeginCapture(
    accinteStream_t stream, accinteStreamCaptureMode mode);

/**
 * Ends the capture begun on `stream` and writes its graph, which the caller
 * destroys with accinteGraphDestroy(). Every stream that took part stops
 * capturing, whatever the outcome. A capture that was invalidated writes
 * NULL and returns ::accinteErrorStreamCaptureInvalidated; one whose forked
 * work was not joined back, NULL and ::accinteErrorStreamCaptureUnjoined.
 * `stream` not capturing, or not the stream the capture began on:
 * ::accinteErrorStreamCaptureUnmatched. A global or thread-local capture
 * ended from another thread than the one that began it:
 * ::accinteErrorStreamCaptureWrongThread (the capture goes on).
 */
ACCINTE_EXPORT accinteError_t accinteStreamEndCapture(accinteStream_t stream,
                                                      accinteGraph_t* graph);

/** Writes whether `stream` is capturing (::accinteStreamCaptureStatus). Legal
 * during a capture, on any stream. */
ACCINTE_EXPORT accinteError_t accinteStreamIsCapturing(
    accinteStream_t stream, accinteStreamCaptureStatus* status);

/** accinteStreamIsCapturing(), and the capture's id, unique in the process
 * and never 0, unless `id` is NULL; 0 when not capturing. Streams forked
 * into a capture report the capture's id. */
ACCINTE_EXPORT accinteError_t accinteStreamGetCaptureInfo(
    accinteStream_t stream, accinteStreamCaptureStatus* status,
    unsigned long long* id);

/**
 * Exchanges the calling thread's capture mode with `*mode`: the thread's
 * mode becomes `*mode`, and `*mode` receives the previous one. A thread
 * starts in ::accinteStreamCaptureModeGlobal. A thread in relaxed mode may
 * make blocking calls during any capture; one in thread-local mode is
 * refused them only while it has a capture of its own that is not relaxed;
 * one in global mode, also while any thread has a global capture. As CUDA's
 * cudaThreadExchangeStreamCaptureMode(): a caching allocator switches to
 * relaxed around the accinteMalloc() it makes during a capture.
 */
ACCINTE_EXPORT accinteError_t
accinteThreadExchangeStreamCaptureMode(accinteStreamCaptureMode* mode);

/** Writes how many operations (kernels, copies, memsets) `graph` holds. */
ACCINTE_EXPORT accinteError_t accinteGraphGetNodeCount(accinteGraph_t graph,
                                                       size_t* count);

/**
 * Writes `graph` to the file `path` in Graphviz's DOT language: one node per
 * operation, labelled with its kind, name and size, and one edge per
 * dependency. For debugging, as CUDA's cudaGraphDebugDotPrint(). A file
 * that cannot be written gives ::accinteErrorOperatingSystem.
 */
ACCINTE_EXPORT accinteError_t accinteGraphDebugDotPrint(accinteGraph_t graph,
                                                        const char* path);

/** Makes an executable graph of `graph`, which may then be destroyed or
 * instantiated again. */
ACCINTE_EXPORT accinteError_t accinteGraphInstantiate(accinteGraphExec_t* exec,
                                                      accinteGraph_t graph);

/**
 * Enqueues one run of every operation of `exec` on `stream`, as one
 * operation: it starts once the work enqueued on `stream` before it has
 * finished, and after the previous launch of `exec` on any stream, as
 * CUDA orders launches of one executable graph. The operations run in an
 * order that keeps every dependency the capture recorded. A failing
 * operation does not stop the others; the launch fails with the first
 * failure's message, reported once like any other launch failure. The
 * stream must be of the device the capture began on
 * (::accinteErrorInvalidValue); launching on a capturing stream:
 * ::accinteErrorStreamCaptureUnsupported.
 */
ACCINTE_EXPORT accinteError_t accinteGraphLaunch(accinteGraphExec_t exec,
                                                 accinteStream_t stream);

/** Destroys an executable graph; launches already enqueued still run. */
ACCINTE_EXPORT accinteError_t accinteGraphExecDestroy(accinteGraphExec_t exec);

/** Destroys a graph; executable graphs made from it are unaffected. */
ACCINTE_EXPORT accinteError_t accinteGraphDestroy(accinteGraph_t graph);

/** @} */

/* ------------------------------------------------------------------------ */
/* Interprocess communication                                               */
/* ------------------------------------------------------------------------ */

/**
 * Writes a handle for the device allocation `ptr` points into (anywhere
 * inside it), which another process can open with accinteIpcOpenMemHandle().
 *
 * The handle designates the whole allocation: the importer adds the offset
 * of `ptr` from the allocation's base (accintePointerGetAttributes()) itself.
 * The handle stays valid until the allocation is freed or this process exits;
 * a process that has opened it keeps its mapping after either.
 *
 * Memory opened from a handle cannot be exported again
 * (::accinteErrorInvalidValue, as CUDA refuses); pinned host memory or an
 * unknown pointer gives ::accinteErrorInvalidDevicePointer.
 *
 * NB: the first handle of an allocation makes it shareable, which waits
 * until no copy, memset or kernel is running on it (work merely enqueued is
 * not waited for, and is not affected). From a stream's worker, where that
 * could wait forever, it gives ::accinteErrorNotPermitted; if the process
 * has no file descriptor or memory left to share it with,
 * ::accinteErrorMemoryAllocation.
 */
ACCINTE_EXPORT accinteError_t
accinteIpcGetMemHandle(accinteIpcMemHandle_t* handle, void* ptr);

/**
 * Maps the allocation of a handle from another process into this one and
 * writes its base address.
 *
 * The memory is device memory of the handle's device, with the same rules as
 * any allocation of this process: the host cannot touch it, copies and
 * kernels can. It is the same memory in both processes: what one process
 * writes, the other reads once the two are ordered (an interprocess event).
 * Opening the same handle again returns the same address; each open needs
 * its accinteIpcCloseMemHandle().
 *
 * `flags` is ::accinteIpcMemNoFlags or ::accinteIpcMemLazyEnablePeerAccess
 * (else ::accinteErrorInvalidValue). A handle of this very process, a
 * malformed one, or one whose allocation or process is gone gives
 * ::accinteErrorInvalidIpcHandle; a handle of a device this process does not
 * have, ::accinteErrorInvalidDevice.
 */
ACCINTE_EXPORT accinteError_t accinteIpcOpenMemHandle(
    void** ptr, accinteIpcMemHandle_t handle, unsigned int flags);

/**
 * Undoes one accinteIpcOpenMemHandle() of the address it returned.
 *
 * NB: first waits (without reporting their failures) for the work already
 * enqueued on every stream of the process, so that once it returns, nothing
 * in this process still reads or writes the memory: the exporter may reuse
 * it as soon as it is told. The last close unmaps it. Any other pointer
 * gives ::accinteErrorInvalidDevicePointer; from a stream's worker,
 * ::accinteErrorNotPermitted.
 */
ACCINTE_EXPORT accinteError_t accinteIpcCloseMemHandle(void* ptr);

/**
 * Writes a handle for `event`, which another process can open with
 * accinteIpcOpenEventHandle() to wait for the event's records. The event
 * must have been created with ::accinteEventInterprocess by this process
 * (else ::accinteErrorInvalidResourceHandle, as CUDA): an event opened from
 * a handle is not exported again; its creator's handle serves every process.
 */
ACCINTE_EXPORT accinteError_t
accinteIpcGetEventHandle(accinteIpcEventHandle_t* handle, accinteEvent_t event);

/**
 * Opens, as a new event of this process, the event of a handle from another
 * process.
 *
 * The two events share their records: accinteEventQuery(),
 * accinteEventSynchronize() and accinteStreamWaitEvent() on either one see
 * the most recent record made by either process, and accinteEventRecord() on
 * either one records for both. Failures are per process: a record made in
 * another process carries none of that process's failures. A wait for a
 * record whose process exited before the record completed fails with
 * ::accinteErrorIpcPeerExited (a stream that waits for it fails, and its
 * next synchronize reports it). Destroy it with accinteEventDestroy().
 *
 * A handle of this very process, a malformed one, or one whose event or
 * process is gone gives ::accinteErrorInvalidIpcHandle.
 */
ACCINTE_EXPORT accinteError_t accinteIpcOpenEventHandle(
    accinteEvent_t* event, accinteIpcEventHandle_t handle);

/* ------------------------------------------------------------------------ */
/* Activity tracing                                                         */
/* ------------------------------------------------------------------------ */

/**
 * @name Activity tracing
 *
 * The emulator's counterpart of CUPTI's activity API: while tracing is
 * enabled, the runtime writes one ::accinteActivityRecord for every kernel,
 * copy and memset a stream runs and for every runtime call listed under
 * ::accinteActivityKindRuntime, and the host takes them out of the runtime
 * with accinteActivityTake().
 *
 * What CUPTI calls `cuptiActivityEnable`, `cuptiActivityFlushAll` and
 * `cuptiActivityGetNumDroppedRecords` are accinteActivityEnable(),
 * accinteActivityTake() and accinteActivityGetDropped();
 * `cuptiActivityPushExternalCorrelationId` and its pop are
 * accinteActivityPushExternalCorrelationId() and
 * accinteActivityPopExternalCorrelationId(); `cuptiGetTimestamp` is
 * accinteActivityGetTimestamp().
 *
 * NB: CUPTI hands records over in buffers the client allocates and gets
 * back through two callbacks (`cuptiActivityRegisterCallbacks`: buffer
 * requested, buffer completed), called from CUPTI's own threads. Here the
 * host instead *takes* records into storage it passes in. A callback would
 * run client code on a stream's worker, where no runtime call is allowed
 * and a slow client would stall the device's queue; and a profiler (Kineto's
 * activity profiler session) collects the device's activities when the
 * profile stops anyway. The runtime keeps one bounded buffer instead of the
 * client's: records that do not fit are counted, not kept, as CUPTI counts
 * the records it dropped for want of a buffer.
 *
 * Cost when off: every traced call and every launch reads one atomic with
 * relaxed ordering and does nothing else for tracing; a stream's worker tests
 * one pointer per operation. Tracing is off until accinteActivityEnable().
 *
 * Clock: every timestamp is in nanoseconds of `CLOCK_MONOTONIC`
 * (`std::chrono::steady_clock` on Linux), the host's clock, since the
 * stream workers that run the "device" work are host threads. A monotonic
 * clock does not jump when the wall clock is set during a profile; a reader
 * that needs Unix time (Kineto's and the PyTorch profiler's timestamps are
 * nanoseconds since the epoch) samples accinteActivityGetTimestamp() and the
 * realtime clock together once and adds the difference.
 * @{
 */

/** What an ::accinteActivityRecord describes. */
typedef enum accinteActivityKind {
  /** A kernel run by a stream (accinteLaunchKernel(),
   * accinteLaunchKernelNamed()). */
  accinteActivityKindKernel = 1,
  /** A copy run by a stream (accinteMemcpy(), accinteMemcpyAsync()); see
   * ::accinteActivityMemcpyKind. */
  accinteActivityKindMemcpy = 2,
  /** A memset run by a stream (accinteMemsetAsync()). */
  accinteActivityKindMemset = 3,
  /** A runtime call on a host thread, from entry to return. Traced:
   * accinteMalloc(), accinteFree(), accinteMallocHost(), accinteFreeHost(),
   * accinteMemcpy(), accinteMemcpyAsync(), accinteMemsetAsync(),
   * accinteLaunchKernel() and accinteLaunchKernelNamed() (both recorded as
   * "accinteLaunchKernel"), accinteStreamSynchronize(),
   * accinteDeviceSynchronize(), accinteStreamWaitEvent(), accinteEventRecord(),
   * accinteEventSynchronize(), accinteIpcGetMemHandle(),
   * accinteIpcOpenMemHandle(), accinteIpcCloseMemHandle() and
   * accinteGraphLaunch() (whose kernels, copies and memsets are each
   * recorded when the launch runs them). Queries and getters are not. */
  accinteActivityKindRuntime = 4,
} accinteActivityKind;

/** Direction of a traced copy, as CUPTI's `CUpti_ActivityMemcpyKind`. */
typedef enum accinteActivityMemcpyKind {
  /** Not a copy. */
  accinteActivityMemcpyNone = 0,
  /** Host (pinned or pageable) to device. */
  accinteActivityMemcpyHtoD = 1,
  /** Device to host. */
  accinteActivityMemcpyDtoH = 2,
  /** Within one device. */
  accinteActivityMemcpyDtoD = 3,
  /** From one device to another (peer to peer). */
  accinteActivityMemcpyPtoP = 4,
  /** Host to host, through a stream. */
  accinteActivityMemcpyHtoH = 5,
} accinteActivityMemcpyKind;

/** Longest name kept in a record, with its NUL; longer names are cut. */
#define ACCINTE_ACTIVITY_NAME_SIZE 128

/**
 * One traced activity: a kernel, copy or memset a stream ran, or a runtime
 * call a host thread made.
 *
 * A runtime call and the work it enqueued share `correlationId`, as in CUPTI,
 * and both carry the `externalCorrelationId` the calling thread had pushed.
 */
typedef struct accinteActivityRecord {
  /** What this record describes. */
  accinteActivityKind kind;
  /** For ::accinteActivityKindMemcpy, the direction; else
   * ::accinteActivityMemcpyNone. */
  accinteActivityMemcpyKind memcpyKind;
  /** Device whose stream ran the work; for a runtime call, the calling
   * thread's current device. */
  int device;
  /** Copies: device of the source, or -1 for host memory. Else -1. */
  int srcDevice;
  /** Copies and memsets: device of the destination, or -1 for host memory.
   * Else -1. */
  int dstDevice;
  /** Linux thread id (`gettid()`) of the host thread that made the runtime
   * call, or that enqueued the work. */
  uint32_t threadId;
  /** Stream that ran the work, never NULL for work (a default stream is
   * reported by its own handle, see accinteGetDefaultStream()); NULL for a
   * runtime call. */
  accinteStream_t stream;
  /** When the work started running, or the call was entered: nanoseconds
   * of `CLOCK_MONOTONIC` (see accinteActivityGetTimestamp()). */
  uint64_t start;
  /** When the work finished, or the call returned; `start <= end`. */
  uint64_t end;
  /** Bytes copied or set; 0 for kernels and runtime calls. */
  uint64_t bytes;
  /** The runtime's id of the call, unique in the process and never 0: a
   * runtime call's record and the records of the work it enqueued have the
   * same. */
  uint64_t correlationId;
  /** The id on top of the calling thread's external correlation stack when
   * the call was made (accinteActivityPushExternalCorrelationId()), or 0. */
  uint64_t externalCorrelationId;
  /** A kernel's name as given to accinteLaunchKernelNamed(), else the top
   * of the launching thread's name stack (accinteActivityPushName()), else
   * "kernel"; "Memcpy HtoD" and the like for copies, "Memset", or the name
   * of the runtime function. NUL-terminated. */
  char name[ACCINTE_ACTIVITY_NAME_SIZE];
} accinteActivityRecord;

/** The number of records accinteActivityEnable() keeps when given 0. */
#define ACCINTE_ACTIVITY_DEFAULT_CAPACITY 65536
/** The largest capacity accinteActivityEnable() accepts. */
#define ACCINTE_ACTIVITY_MAX_CAPACITY (1 << 22)

/**
 * Starts a tracing session that keeps at most `capacity` records
 * (0: ::ACCINTE_ACTIVITY_DEFAULT_CAPACITY), discarding the records a previous
 * session left untaken and its dropped count.
 *
 * Work is traced if tracing was enabled when it was enqueued and is still
 * enabled, in the same session, when it finishes. Memory is taken as records
 * arrive, up to `capacity` records; a record that does not fit is dropped and
 * counted (accinteActivityGetDropped()). A capacity above
 * ::ACCINTE_ACTIVITY_MAX_CAPACITY returns ::accinteErrorInvalidValue.
 *
 * Enabling tracing counts as using the runtime: a child forked afterwards
 * gets ::accinteErrorForkedChild, as after any other use.
 */
ACCINTE_EXPORT accinteError_t accinteActivityEnable(size_t capacity);

/**
 * Ends the tracing session. Once it returns, no record is added, not even
 * for work enqueued before it that is still running or queued: synchronize
 * first to have that work traced. The records stay until taken or until the
 * next accinteActivityEnable(). Disabling when off does nothing.
 */
ACCINTE_EXPORT accinteError_t accinteActivityDisable(void);

/** Writes 1 while tracing is enabled, else 0. */
ACCINTE_EXPORT accinteError_t accinteActivityIsEnabled(int* enabled);

/**
 * Moves up to `capacity` of the oldest records into `records` and writes how
 * many to `count`; they leave the runtime's buffer. May be called at any time,
 * while tracing or after it was disabled, from any thread.
 *
 * Records are in the order they were completed: the records of one stream
 * are in the stream's order. A runtime call's record is completed when the
 * call returns, so it may come after the records of the work it enqueued.
 * `records` may be NULL only if `capacity` is 0; `count` must not be NULL
 * (::accinteErrorInvalidValue).
 */
ACCINTE_EXPORT accinteError_t accinteActivityTake(
    accinteActivityRecord* records, size_t capacity, size_t* count);

/** Writes how many records the current (or last) session dropped because its
 * buffer was full. */
ACCINTE_EXPORT accinteError_t accinteActivityGetDropped(uint64_t* dropped);

/**
 * Pushes `id` on the calling thread's external correlation stack: the calls
 * this thread makes until it is popped, and the work they enqueue, carry it
 * as `externalCorrelationId`. A profiler pushes the id of the operator it is
 * recording, as Kineto does with CUPTI. Works whether or not tracing is on.
 * 0 means "none" and is refused (::accinteErrorInvalidValue).
 */
ACCINTE_EXPORT accinteError_t
accinteActivityPushExternalCorrelationId(uint64_t id);

/** Pops the calling thread's external correlation stack and writes the id
 * popped to `id` unless `id` is NULL. An empty stack returns
 * ::accinteErrorInvalidValue. */
ACCINTE_EXPORT accinteError_t
accinteActivityPopExternalCorrelationId(uint64_t* id);

/**
 * Pushes a copy of `name` on the calling thread's kernel name stack: a kernel
 * this thread launches without a name of its own (accinteLaunchKernel(), or
 * accinteLaunchKernelNamed() with NULL) is named after the top of the stack.
 * A profiler pushes the name of the operator being run, so that the kernels
 * of code it cannot change are named after the operator that launched them.
 * Works whether or not tracing is on; the stack is read only while it is on.
 * NULL is refused (::accinteErrorInvalidValue).
 */
ACCINTE_EXPORT accinteError_t accinteActivityPushName(const char* name);

/** Pops the calling thread's kernel name stack; an empty stack returns
 * ::accinteErrorInvalidValue. */
ACCINTE_EXPORT accinteError_t accinteActivityPopName(void);

/** Writes the current time of the records' clock, nanoseconds of
 * `CLOCK_MONOTONIC`. */
ACCINTE_EXPORT accinteError_t accinteActivityGetTimestamp(uint64_t* timestamp);

/**
 * accinteLaunchKernel() with a name for the kernel's activity record, such as
 * the ATen operator the kernel computes. NULL names it after the top of the
 * calling thread's name stack (accinteActivityPushName()), or "kernel" if the
 * stack is empty.
 *
 * NB: the name is copied, and only while tracing is on: the string need only
 * be valid during the call, and naming a kernel costs nothing when tracing is
 * off.
 */
ACCINTE_EXPORT accinteError_t accinteLaunchKernelNamed(
    accinteStream_t stream, const char* name, accinteKernelFn fn, void* args,
    accinteArgsDeleter deleter, const void* const* buffers, size_t num_buffers);

/** @} */

#ifdef __cplusplus
} // extern "C"
#endif
