#pragma once

/**
 * @file
 * Growing the storage of an accinte tensor.
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

} // namespace accinte
