#pragma once

/**
 * @file
 * accinte storages shared between processes, as CUDA's are: the producer
 * sends an IPC handle of the caching allocator's segment, the storage's
 * offset in it, an interprocess event recorded after its pending work, and a
 * reference counter; the consumer maps the same memory and waits for the
 * event; the producer keeps the storage's block out of the allocator until
 * every consumer has released it, whatever the storage holds by then.
 *
 * `torch_accinte/ipc.py` turns these into `torch.multiprocessing`
 * reductions.
 */

#include <accinte/export.h>
#include <accinte/runtime.h>

#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace accinte {

// LITERALINCLUDE START: CH14_HANDLE
/**
 * Names one of the reference counters that a producer shares with its
 * consumers: the producer's pid, the file descriptor of its counter file,
 * a random nonce the file's name carries, and the counter's slot in it.
 */
struct RefCounterHandle {
  /** The producer's process id. */
  pid_t pid = 0;
  /** The counter file's descriptor in the producer. */
  int fd = -1;
  /** The random number in the file's name, which tells it from another file
   * that took the same descriptor number later. */
  uint64_t nonce = 0;
  /** Which counter of the file. */
  int64_t slot = 0;
};

/** Everything a consumer needs to map one shared storage. */
struct SharedStorage {
  /** The device the storage is on. */
  c10::DeviceIndex device = -1;
  /** accinteIpcGetMemHandle() of the segment (the emulator allocation) that
   * holds the storage, as its raw bytes. */
  std::string memoryHandle;
  /** Where the storage starts in the segment. */
  size_t offset = 0;
  /** The storage's size in bytes. */
  size_t nbytes = 0;
  /** accinteIpcGetEventHandle() of an event recorded on the producer's
   * current stream when it shared the storage, as raw bytes. */
  std::string eventHandle;
  /** The counter the consumer decrements when it releases the storage. */
  RefCounterHandle counter;
};
// LITERALINCLUDE END: CH14_HANDLE

/**
 * Shares `storage` (an accinte storage with bytes): the producer's side.
 *
 * Keeps the storage's memory (not the storage: its bytes may be let go
 * while it lives on, by `resize_` or `set_data_ptr`), with the interprocess
 * event recorded for the send, out of the caching allocator until a
 * consumer releases it (collectSharedStorages()). From the first send on,
 * the storage holds its bytes through a DataPtr of this chapter's, as a
 * CUDA storage holds them through CudaIPCSentData's. A storage that was
 * itself received from another process cannot be shared on, as on CUDA.
 */
ACCINTE_EXPORT SharedStorage shareStorage(const c10::Storage& storage);

/**
 * Maps the storage a producer shared: the consumer's side.
 *
 * Its current stream on the storage's device waits for the producer's event,
 * so the consumer's work reads what the producer's work wrote. Releasing the
 * returned storage waits for this process's work on it, then decrements the
 * producer's counter. `producer` (a pid) is for error messages only.
 */
ACCINTE_EXPORT c10::Storage openSharedStorage(const SharedStorage& shared,
                                              pid_t producer);

/**
 * What a consumer does with a storage it has already mapped and receives
 * again: waits for the new send's event on its current stream (the producer
 * may have written since) and releases the new send's counter at once.
 */
ACCINTE_EXPORT void acceptSharedStorageAgain(const SharedStorage& shared,
                                             pid_t producer);

/** Whether `storage` was received from another process (openSharedStorage).
 */
ACCINTE_EXPORT bool isReceivedStorage(const c10::Storage& storage);

/**
 * Releases every received storage still alive, for a consumer that is
 * exiting: the producer may reuse their memory from then on, and the
 * storages' bytes are no longer mapped here (work on them fails).
 *
 * NB: a process rarely frees everything before it ends (a `Process`
 * argument stays referenced until the interpreter is torn down), and a
 * counter left up keeps the producer's memory until the producer exits.
 */
ACCINTE_EXPORT void releaseReceivedStoragesAtExit();

/**
 * Gives back to the caching allocator the storages that every consumer has
 * released, as `torch.cuda.ipc_collect`; returns how many sends are still
 * held by a consumer (or not yet received).
 */
ACCINTE_EXPORT size_t collectSharedStorages();

} // namespace accinte
