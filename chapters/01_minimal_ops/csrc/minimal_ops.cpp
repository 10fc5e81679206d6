#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <01_minimal_ops/csrc/storage.h>

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>

namespace accinte {

at::Tensor KernelTensor::cpuView() const {
  at::Tensor view =
      at::from_blob(data_, sizes_, strides_,
                    at::TensorOptions().dtype(dtype_).device(at::kCPU));
  if (conjugated_) {
    view = view._conj();
  }
  if (negated_) {
    view = view._neg_view();
  }
  return view;
}

void synchronizeCurrentStream(c10::DeviceIndex device) {
  ACCINTE_CHECK(accinteStreamSynchronize(nativeStream(currentStream(device))));
}

namespace {

constexpr c10::DeviceType kAccinte = c10::DeviceType::PrivateUse1;
const c10::DispatchKeySet kAccinteKeys{c10::DispatchKey::PrivateUse1};

/** The device index a factory function targets: explicit or current. */
c10::Device resolveDevice(std::optional<c10::Device> device) {
  const c10::DeviceIndex index = device.has_value() && device->has_index()
                                     ? device->index()
                                     : currentDevice();
  checkDeviceIndex(index);
  return c10::Device(kAccinte, index);
}

void checkFactoryOptions(std::optional<c10::Layout> layout,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided,
              "accinte supports only strided tensors, got layout ", *layout);
  TORCH_CHECK(!pin_memory.value_or(false),
              "accinte: only CPU tensors can be pinned (pin_memory=True)");
}

// LITERALINCLUDE START: CH01_NEW_STORAGE
/**
 * A tensor of `dtype` on `device` over `nbytes` of new device memory; the
 * caller sets its sizes and strides.
 *
 * NB: the storage comes from c10::make_storage_impl, PyTorch's factory of
 * storages, which creates the StorageImpl class a backend registers for
 * PrivateUse1 (chapter 10 registers one) and a plain c10::StorageImpl
 * otherwise. ATen's empty_generic would construct a plain one directly.
 */
at::Tensor tensorOverNewStorage(size_t nbytes, c10::Device device,
                                c10::ScalarType dtype) {
  // NB: the guard makes the allocator, which allocates on the current
  // device, allocate on the requested one.
  const c10::DeviceGuard guard(device);
  c10::Allocator* allocator = c10::GetAllocator(kAccinte);
  c10::Storage storage(c10::make_storage_impl(
      c10::StorageImpl::use_byte_size_t(), nbytes, allocator->allocate(nbytes),
      allocator, /*resizable=*/true, device));
  return at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), kAccinteKeys, c10::scalarTypeToTypeMeta(dtype));
}
// LITERALINCLUDE END: CH01_NEW_STORAGE

// LITERALINCLUDE START: CH01_EMPTY
at::Tensor empty_memory_format(c10::IntArrayRef size,
                               std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  checkFactoryOptions(layout, pin_memory);
  at::detail::check_size_nonnegative(size);
  const c10::ScalarType scalarType = c10::dtype_or_default(dtype);
  at::Tensor tensor =
      tensorOverNewStorage(at::detail::computeStorageNbytesContiguous(
                               size, c10::elementSize(scalarType)),
                           resolveDevice(device), scalarType);
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  const auto format = memory_format.value_or(c10::MemoryFormat::Contiguous);
  if (format != c10::MemoryFormat::Contiguous) {
    tensor.unsafeGetTensorImpl()->empty_tensor_restride(format);
  }
  return tensor;
}
// LITERALINCLUDE END: CH01_EMPTY

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  checkFactoryOptions(layout, pin_memory);
  at::detail::check_size_nonnegative(size);
  const c10::ScalarType scalarType = c10::dtype_or_default(dtype);
  at::Tensor tensor =
      tensorOverNewStorage(at::detail::computeStorageNbytes(
                               size, stride, c10::elementSize(scalarType)),
                           resolveDevice(device), scalarType);
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return tensor;
}

// NB: views only reinterpret metadata; ATen's device-independent helpers do
// exactly that, so the backend reuses them.
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size,
                      c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size,
                         c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

/** Moves bytes through the emulator on the current stream of `device`. */
void copyBytes(void* dst, const void* src, size_t nbytes,
               accinteMemcpyKind kind, c10::DeviceIndex device,
               bool synchronize) {
  const accinteStream_t stream = nativeStream(currentStream(device));
  ACCINTE_CHECK(accinteMemcpyAsync(dst, src, nbytes, kind, stream));
  if (synchronize) {
    ACCINTE_CHECK(accinteStreamSynchronize(stream));
  }
}

bool isPinned(const void* data) {
  int pinned = 0;
  return accinteHostIsPinned(data, &pinned) == accinteSuccess && pinned != 0;
}

/**
 * True when the bytes of `src` can be copied to `dst` as one block: same
 * dtype, same dense layout, and read the same way (a conjugated or negated
 * view holds other values than its bytes say).
 */
bool sameDenseLayout(const at::Tensor& src, const at::Tensor& dst) {
  return src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() &&
         src.strides() == dst.strides() && src.is_conj() == dst.is_conj() &&
         src.is_neg() == dst.is_neg() && src.is_non_overlapping_and_dense();
}

size_t denseBytes(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

// LITERALINCLUDE START: CH01_COPY_H2D
void copyHostToDevice(const at::Tensor& src, const at::Tensor& dst,
                      bool non_blocking) {
  const c10::DeviceIndex device = dst.device().index();
  const c10::DeviceGuard guard(dst.device());
  if (sameDenseLayout(src, dst)) {
    // NB: only pinned memory may be read after the call returns; pageable
    // memory could be freed or reused by the caller at any moment.
    const bool asynchronous = non_blocking && isPinned(src.data_ptr());
    if (!asynchronous) {
      warnOrErrorOnSync(); // LITERALINCLUDE EMPHASIZE
    }
    copyBytes(dst.data_ptr(), src.const_data_ptr(), denseBytes(src),
              accinteMemcpyHostToDevice, device, !asynchronous);
    if (asynchronous) {
      recordPinnedMemoryUse(src, currentStream(device));
    }
    return;
  }
  // Any other layout or dtype: a kernel writes the (converted, broadcast)
  // host values into dst's strided device memory.
  if (!non_blocking) {
    warnOrErrorOnSync();
  }
  const at::Tensor staging = non_blocking ? src.clone() : src;
  const KernelTensor target(dst);
  launchOnCurrentStream(device, {target.buffer()},
                        [target, staging] { target.cpuView().copy_(staging); });
  if (!non_blocking) {
    synchronizeCurrentStream(device);
  }
}
// LITERALINCLUDE END: CH01_COPY_H2D

// LITERALINCLUDE START: CH01_COPY_D2H
void copyDeviceToHost(const at::Tensor& src, const at::Tensor& dst,
                      bool non_blocking) {
  const c10::DeviceIndex device = src.device().index();
  const c10::DeviceGuard guard(src.device());
  if (sameDenseLayout(src, dst)) {
    const bool asynchronous = non_blocking && isPinned(dst.data_ptr());
    if (!asynchronous) {
      warnOrErrorOnSync(); // LITERALINCLUDE EMPHASIZE
    }
    copyBytes(dst.data_ptr(), src.const_data_ptr(), denseBytes(src),
              accinteMemcpyDeviceToHost, device, !asynchronous);
    if (asynchronous) {
      recordPinnedMemoryUse(dst, currentStream(device));
    }
    return;
  }
  // A kernel gathers src's strided device memory into a dense host buffer;
  // the CPU then converts it into dst's dtype and layout.
  warnOrErrorOnSync();
  const at::Tensor staging =
      at::empty(src.sizes(), src.options().device(at::kCPU));
  const KernelTensor source(src);
  const KernelTensor gathered(staging);
  launchOnCurrentStream(device, {source.buffer()}, [source, gathered] {
    gathered.cpuView().copy_(source.cpuView());
  });
  synchronizeCurrentStream(device);
  dst.copy_(staging);
}
// LITERALINCLUDE END: CH01_COPY_D2H

/**
 * Makes `waiter` wait, on the device and without blocking the host, for all
 * work enqueued on `signaller` so far. The streams may be on two devices.
 */
void streamWaitStream(const c10::Stream& waiter, const c10::Stream& signaller) {
  const c10::DeviceGuard guard(signaller.device());
  accinteEvent_t event = nullptr;
  ACCINTE_CHECK(accinteEventCreateWithFlags(&event, accinteEventDisableTiming));
  accinteError_t status = accinteEventRecord(event, nativeStream(signaller));
  if (status == accinteSuccess) {
    status = accinteStreamWaitEvent(nativeStream(waiter), event);
  }
  // NB: destroying the event at once is safe: a stream already waiting on
  // its record keeps that record alive until it completes.
  (void)accinteEventDestroy(event);
  ACCINTE_CHECK(status);
}

// LITERALINCLUDE START: CH01_COPY_D2D
void copyDeviceToDevice(const at::Tensor& src, const at::Tensor& dst) {
  const c10::DeviceIndex device = dst.device().index();
  const c10::DeviceGuard guard(dst.device());
  // NB: as on CUDA, a copy between device tensors is ordered by streams and
  // never makes the host wait, whatever non_blocking says.
  if (src.device() == dst.device()) {
    if (sameDenseLayout(src, dst)) {
      copyBytes(dst.data_ptr(), src.const_data_ptr(), denseBytes(src),
                accinteMemcpyDeviceToDevice, device, /*synchronize=*/false);
      return;
    }
    const KernelTensor source(src);
    const KernelTensor target(dst);
    launchOnCurrentStream(
        device, {source.buffer(), target.buffer()},
        [source, target] { target.cpuView().copy_(source.cpuView()); });
    return;
  }
  if (sameDenseLayout(src, dst)) {
    // Across devices the copy runs on the destination's current stream. It
    // waits for what the source's current stream still has to write, and
    // the source's stream waits for the copy before it may overwrite what
    // is being read.
    const c10::Stream source_stream = currentStream(src.device().index());
    const c10::Stream target_stream = currentStream(device);
    streamWaitStream(target_stream, source_stream); // LITERALINCLUDE EMPHASIZE
    copyBytes(dst.data_ptr(), src.const_data_ptr(), denseBytes(src),
              accinteMemcpyDeviceToDevice, device, /*synchronize=*/false);
    streamWaitStream(source_stream, target_stream); // LITERALINCLUDE EMPHASIZE
    return;
  }
  // A strided view, or a dtype conversion, across devices goes through the
  // host.
  // NB: the source is read on the source's current stream, so that stream
  // first waits for the destination's, as the copy above does the other way
  // round: code that ordered either current stream after the producer sees
  // the same values whatever the layout.
  streamWaitStream(currentStream(src.device().index()), currentStream(device));
  const at::Tensor staging =
      at::empty(src.sizes(), src.options().device(at::kCPU));
  copyDeviceToHost(src, staging, /*non_blocking=*/false);
  copyHostToDevice(staging, dst, /*non_blocking=*/false);
}
// LITERALINCLUDE END: CH01_COPY_D2D

std::atomic<StorageCopyObserver> storageCopyObserver{nullptr};

/** Whether `tensor` is all the bytes of its storage, each once, in order. */
bool spansItsStorage(const at::Tensor& tensor) {
  return tensor.storage_offset() == 0 &&
         tensor.is_non_overlapping_and_dense() &&
         denseBytes(tensor) == tensor.storage().nbytes();
}

/** Reports a copy of all of `src`'s storage onto all of `dst`'s. */
void reportStorageCopy(const at::Tensor& src, const at::Tensor& dst) {
  const StorageCopyObserver observer = storageCopyObserver.load();
  if (observer != nullptr && dst.is_privateuseone() &&
      !dst.storage().is_alias_of(src.storage()) && sameDenseLayout(src, dst) &&
      spansItsStorage(src) && spansItsStorage(dst)) {
    observer(dst.storage(), src.storage());
  }
}

// LITERALINCLUDE START: CH01_COPY_FROM
/**
 * Writes `src` into `dst`, on the host, on the device or between them.
 *
 * NB: everything is checked here, before anything is enqueued, with the
 * errors the CPU gives: a copy that failed on the stream's worker could only
 * report a sticky launch failure at some later, unrelated synchronization.
 */
void copyInto(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(dst.defined(), "self is undefined");
  TORCH_CHECK(src.defined(), "src is undefined");
  TORCH_CHECK(src.is_cpu() || src.is_privateuseone(),
              "accinte can copy only from CPU or accinte tensors, got ",
              src.device());
  TORCH_CHECK(dst.is_cpu() || dst.is_privateuseone(),
              "accinte can copy only to CPU or accinte tensors, got ",
              dst.device());
  // Broadcasting as on the CPU: src must expand to dst's shape.
  const c10::DimVector shape =
      at::infer_size_dimvector(dst.sizes(), src.sizes());
  TORCH_CHECK(c10::IntArrayRef(shape) == dst.sizes(), "output with shape ",
              dst.sizes(), " doesn't match the broadcast shape ", shape);
  if (dst.is_same(src) || dst.numel() == 0) {
    return;
  }
  at::assert_no_internal_overlap(dst);
  if (src.device() == dst.device()) {
    at::assert_no_partial_overlap(dst, src);
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  const at::Tensor expanded = src.expand(dst.sizes());
  if (src.is_cpu()) {
    copyHostToDevice(expanded, dst, non_blocking); // LITERALINCLUDE EMPHASIZE
  } else if (dst.is_cpu()) {
    copyDeviceToHost(expanded, dst, non_blocking); // LITERALINCLUDE EMPHASIZE
  } else {
    copyDeviceToDevice(expanded, dst); // LITERALINCLUDE EMPHASIZE
  }
  reportStorageCopy(expanded, dst);
}

// NB: ATen's own `copy_` (CompositeExplicitAutograd) would hand a device
// tensor to `_copy_from` through the dispatcher, where the Conjugate and
// Negative fallbacks first materialize a conjugated source with `clone`,
// which copies, which calls `_copy_from` again: endless recursion. As the
// `copy_` of CUDA does, this kernel sees the lazy bits and resolves them.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  copyInto(self, src, non_blocking);
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  copyInto(dst, self, non_blocking);
  return dst;
}
// LITERALINCLUDE END: CH01_COPY_FROM

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  copyInto(dst, self, /*non_blocking=*/false);
  return dst;
}

// LITERALINCLUDE START: CH01_RECORD_STREAM
/**
 * `Tensor.record_stream(s)`: tells the device allocator that `stream` uses
 * the tensor's memory, so that a caching allocator (chapter 07) does not
 * hand the block to another tensor before that stream's work is done.
 */
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kAccinte,
              "record_stream: expected an accinte stream, got a stream on ",
              stream.device());
  TORCH_CHECK(self.device() == stream.device(), "record_stream: the tensor is ",
              "on ", self.device(), " but the stream on ", stream.device());
  c10::getDeviceAllocator(kAccinte)->recordStream(self.storage().data_ptr(),
                                                  stream);
}
// LITERALINCLUDE END: CH01_RECORD_STREAM

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  const at::Tensor host =
      at::empty(self.sizes(), self.options().device(at::kCPU));
  copyDeviceToHost(self, host, /*non_blocking=*/false);
  return host.item();
}

void growStorageIfNeeded(const at::Tensor& self) {
  const size_t needed = at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.dtype().itemsize(),
      self.storage_offset());
  if (needed > self.storage().nbytes()) {
    resizeStorageBytes(self.storage(), needed);
  }
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  // NB: only a new shape resets the strides; resizing a strided view to its
  // own shape (what out= and in-place fallbacks do) must keep the view.
  if (self.sizes() != size) {
    self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "resize_: unsupported memory format ", *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  growStorageIfNeeded(self);
  return self;
}

// LITERALINCLUDE START: CH01_SET_STORAGE
at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source,
                                      int64_t storage_offset,
                                      c10::IntArrayRef size,
                                      c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size,
                              stride);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(storage_offset);
  if (stride.data() != nullptr) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  growStorageIfNeeded(self);
  return self;
}
// LITERALINCLUDE END: CH01_SET_STORAGE

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t itemsize = static_cast<int64_t>(self.dtype().itemsize());
  const int64_t numel = static_cast<int64_t>(source.nbytes()) / itemsize;
  return set_source_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_source_storage_offset(self, source.storage(),
                                   source.storage_offset(), source.sizes(),
                                   source.strides());
}

// LITERALINCLUDE START: CH01_SHALLOW_COPY_TYPE
/**
 * Whether `keys` are those of a plain dense tensor on the CPU or on accinte.
 *
 * NB: the same test as ATen's own list of dense backends (Dense
 * functionality and one of the listed backends), with the list cut down to
 * the two devices this backend moves tensors between. A sparse, quantized
 * or nested tensor has no Dense functionality key, and a meta tensor has
 * the Meta backend, so none of them qualifies.
 */
bool isDenseOnHostOrAccinte(c10::DispatchKeySet keys) {
  const c10::BackendComponent backend = keys.highestBackendKey();
  return keys.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
         (backend == c10::BackendComponent::CPUBit ||
          backend == c10::BackendComponent::PrivateUse1Bit);
}

/**
 * `torch._has_compatible_shallow_copy_type(self, from)`: whether `from`'s
 * TensorImpl may be shallow-copied into `self`'s, which is what
 * `param.data = new` does.
 *
 * NB: nn.Module._apply keeps a module's Parameter objects across
 * `to(device)`, `cpu()` and `to_empty()` only when this says yes; otherwise
 * it wraps every moved tensor in a new Parameter, which unties shared
 * weights and leaves an optimizer made before the move holding the old
 * ones. ATen's answer (same key set, or two dense tensors of its built-in
 * backends, or two sparse ones) leaves PrivateUse1 out, so a move between
 * the CPU and accinte, or between two accinte devices, would never keep
 * them. Both are plain TensorImpls over a strided storage, exactly the pair
 * ATen accepts between the CPU and CUDA.
 */
bool has_compatible_shallow_copy_type(const at::Tensor& self,
                                      const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(
             from.key_set()) ||
         (isDenseOnHostOrAccinte(self.key_set()) &&
          isDenseOnHostOrAccinte(from.key_set()));
}
// LITERALINCLUDE END: CH01_SHALLOW_COPY_TYPE

// LITERALINCLUDE START: CH01_REGISTER_OPS
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset",
         TORCH_FN(set_source_storage_offset));
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_has_compatible_shallow_copy_type",
         TORCH_FN(has_compatible_shallow_copy_type));
}
// LITERALINCLUDE END: CH01_REGISTER_OPS

// LITERALINCLUDE START: CH01_FALLBACK_HOOK
/**
 * Every operator without an accinte kernel lands here. Chapter 01 has no way
 * to run it, so unless a later chapter installed a fallback kernel, the user
 * learns which operator is missing and which chapter provides it.
 */
void missingKernelFallback(const c10::OperatorHandle& op,
                           torch::jit::Stack* stack) {
  if (BoxedKernel kernel = fallbackKernel()) {
    kernel(op, stack);
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "accinte has no kernel for '", op.schema().operator_name(),
      "'. Chapter 01_minimal_ops implements only the operators every tensor "
      "needs (creation, views, copies); chapter 02_fallback adds the CPU "
      "fallback that runs every other ATen operator.");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&missingKernelFallback>());
}
// LITERALINCLUDE END: CH01_FALLBACK_HOOK

} // namespace

void registerStorageCopyObserver(StorageCopyObserver observer) {
  storageCopyObserver.store(observer);
}

void resizeStorageBytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(),
              "Trying to resize storage that is not resizable");
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  c10::Allocator* allocator = impl->allocator();
  TORCH_CHECK(allocator != nullptr,
              "accinte: cannot resize a storage without an allocator");
  const c10::DeviceGuard guard(storage.device());
  c10::DataPtr grown = allocator->allocate(nbytes);
  const size_t kept = std::min(nbytes, impl->nbytes());
  if (kept > 0) {
    copyBytes(grown.get(), impl->data(), kept, accinteMemcpyDeviceToDevice,
              storage.device().index(), /*synchronize=*/true);
  }
  impl->set_data_ptr_noswap(std::move(grown));
  impl->set_nbytes(nbytes);
}

} // namespace accinte
