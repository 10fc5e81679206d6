#pragma once

/**
 * @file
 * The storage class of accinte tensors: a c10::StorageImpl that remembers
 * which device allocation its bytes were placed in, and in which format
 * they are.
 *
 * PyTorch creates storages through c10::make_storage_impl, which calls the
 * function a backend registers with c10::SetStorageImplCreate for its device
 * type. Chapter 01's factories, `torch.UntypedStorage(n, device="accinte")`,
 * `torch.load` and copy-on-write clones all go through it, so every accinte
 * storage is an AccinteStorageImpl.
 */

#include <10_storage/csrc/tensor_format.h>

#include <accinte/export.h>

#include <c10/core/StorageImpl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace accinte {

// LITERALINCLUDE START: CH10_ORIGIN
/** Where a storage's bytes were placed when the storage was created. */
struct StorageOrigin {
  /** Creation order of the storage in this process, from 1; tells apart
   * storages that reuse the same freed address. */
  uint64_t serial = 0;
  /** Device the storage belongs to. */
  c10::DeviceIndex device = -1;
  /** Start of the emulator allocation (accinteMalloc()) that held the bytes;
   * with chapter 07's caching allocator, a segment several storages share.
   * 0 for a storage without bytes, or whose bytes are not device memory
   * the emulator allocated. */
  uintptr_t allocationBase = 0;
  /** Size of that allocation in bytes. */
  size_t allocationSize = 0;
  /** Offset of the storage's first byte in the allocation. */
  size_t offset = 0;
  /** The storage's data pointer at creation; `resize_` moves the bytes of a
   * storage it grows, and the pointer then differs. */
  uintptr_t data = 0;
};
// LITERALINCLUDE END: CH10_ORIGIN

// LITERALINCLUDE START: CH10_STORAGE_CLASS
/** The StorageImpl of every accinte storage: a plain storage that also
 * keeps its StorageOrigin and the format of its bytes. */
class AccinteStorageImpl final : public c10::StorageImpl {
 public:
  /** The signature of c10::StorageImplCreateHelper; `dataPtr` must hold the
   * storage's bytes (accinte::createStorage allocates them if not). */
  AccinteStorageImpl(c10::StorageImpl::use_byte_size_t useByteSize,
                     c10::SymInt sizeBytes, c10::DataPtr dataPtr,
                     c10::Allocator* allocator, bool resizable);

  /** Where the bytes were placed at creation. */
  const StorageOrigin& origin() const {
    return origin_;
  }

  /** The format the bytes are in; kPlain for a new storage. */
  TensorFormat format() const {
    return format_.load(std::memory_order_relaxed);
  }

  /** Records that the bytes are in `format` (they are not rearranged). */
  void setFormat(TensorFormat format) {
    format_.store(format, std::memory_order_relaxed);
  }

 private:
  StorageOrigin origin_;
  // NB: atomic because every tensor over the storage, in any thread, may
  // read or set it; it orders nothing else.
  std::atomic<TensorFormat> format_{TensorFormat::kPlain};
};
// LITERALINCLUDE END: CH10_STORAGE_CLASS

/**
 * The origin recorded by `storage`, or nothing if `storage` is not an
 * AccinteStorageImpl (a storage PyTorch built without
 * c10::make_storage_impl, such as that of `at::from_blob`).
 */
ACCINTE_EXPORT std::optional<StorageOrigin> storageOrigin(
    const c10::StorageImpl& storage);

/** `storage` as an AccinteStorageImpl, or nullptr if it is of another
 * class (see storageOrigin). */
ACCINTE_EXPORT AccinteStorageImpl* accinteStorage(c10::StorageImpl& storage);

} // namespace accinte
