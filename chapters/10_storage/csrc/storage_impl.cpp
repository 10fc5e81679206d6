#include <10_storage/csrc/storage_impl.h>

#include <01_minimal_ops/csrc/exception.h>

#include <accinte/runtime.h>

#include <atomic>
#include <utility>

namespace accinte {
namespace {

std::atomic<uint64_t> lastSerial{0};

/** The allocation of the emulator that holds `data` (see StorageOrigin). */
StorageOrigin originOf(const c10::DataPtr& data) {
  StorageOrigin origin;
  origin.serial = ++lastSerial;
  origin.device = data.device().index();
  origin.data = reinterpret_cast<uintptr_t>(data.get());
  if (data.get() == nullptr) {
    return origin;
  }
  accintePointerAttributes attributes{};
  ACCINTE_CHECK(accintePointerGetAttributes(&attributes, data.get()));
  // NB: make_storage_impl adopts whatever DataPtr its caller passes; bytes
  // that are no allocation of the device's are recorded as none.
  if (attributes.type != accinteMemoryTypeDevice) {
    return origin;
  }
  origin.allocationBase = reinterpret_cast<uintptr_t>(attributes.base);
  origin.allocationSize = attributes.size;
  origin.offset = origin.data - origin.allocationBase;
  return origin;
}

} // namespace

AccinteStorageImpl::AccinteStorageImpl(use_byte_size_t useByteSize,
                                       c10::SymInt sizeBytes,
                                       c10::DataPtr dataPtr,
                                       c10::Allocator* allocator,
                                       bool resizable)
    : c10::StorageImpl(useByteSize, std::move(sizeBytes), std::move(dataPtr),
                       allocator, resizable),
      origin_(originOf(data_ptr())) {}

AccinteStorageImpl* accinteStorage(c10::StorageImpl& storage) {
  return dynamic_cast<AccinteStorageImpl*>(&storage);
}

std::optional<StorageOrigin> storageOrigin(const c10::StorageImpl& storage) {
  const auto* impl = dynamic_cast<const AccinteStorageImpl*>(&storage);
  if (impl == nullptr) {
    return std::nullopt;
  }
  return impl->origin();
}

namespace {

// LITERALINCLUDE START: CH10_STORAGE_CREATE
/**
 * What c10::make_storage_impl calls for every PrivateUse1 storage.
 *
 * NB: callers that want new memory, such as
 * `torch.UntypedStorage(n, device="accinte")`, may pass an empty DataPtr
 * and leave the allocation to the storage, as c10::StorageImpl's own
 * constructors do; a DataPtr that holds bytes is adopted as it is.
 */
c10::intrusive_ptr<c10::StorageImpl> createStorage(
    c10::StorageImpl::use_byte_size_t useByteSize, c10::SymInt sizeBytes,
    c10::DataPtr dataPtr, c10::Allocator* allocator, bool resizable) {
  if (dataPtr.get() == nullptr) {
    TORCH_CHECK(allocator != nullptr,
                "accinte: a storage without bytes needs an allocator");
    dataPtr = allocator->allocate(sizeBytes.expect_int());
  }
  return c10::make_intrusive<AccinteStorageImpl>(
      useByteSize, std::move(sizeBytes), std::move(dataPtr), allocator,
      resizable);
}

const bool registered = [] {
  c10::SetStorageImplCreate(c10::DeviceType::PrivateUse1, &createStorage);
  return true;
}();
// LITERALINCLUDE END: CH10_STORAGE_CREATE

} // namespace
} // namespace accinte
