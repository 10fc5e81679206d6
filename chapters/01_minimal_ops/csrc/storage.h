#pragma once

/**
 * @file
 * Growing the storage of an accinte tensor, and what a later chapter learns
 * about copies of whole storages.
 */

#include <c10/core/Storage.h>

namespace accinte {

/**
 * Resizes `storage` to `nbytes`: allocates new device memory with the
 * storage's allocator, copies the bytes both sizes share on the device and
 * releases the old memory. Used by `resize_`, `set_` and
 * `UntypedStorage.resize_()`.
 */
void resizeStorageBytes(const c10::Storage& storage, size_t nbytes);

// LITERALINCLUDE START: CH01_STORAGE_COPY_OBSERVER
/**
 * Called after a copy replaced every byte of the accinte storage `dst`,
 * verbatim, with every byte of `src` (an accinte or a CPU storage): the
 * copy behind `clone()`, `copy.deepcopy`, `UntypedStorage.copy_`, `to()`
 * between accinte devices, and `copy_` between two tensors that each span
 * all of their storage. Copies of part of a storage, and copies that
 * convert, broadcast or gather strided elements, are not reported.
 */
using StorageCopyObserver = void (*)(const c10::Storage& dst,
                                     const c10::Storage& src);

/**
 * Installs the observer of whole-storage copies: the extension point for
 * metadata that describes a storage's bytes (chapter 10's format tag), which
 * must follow the bytes into the copy.
 */
void registerStorageCopyObserver(StorageCopyObserver observer);
// LITERALINCLUDE END: CH01_STORAGE_COPY_OBSERVER

} // namespace accinte
