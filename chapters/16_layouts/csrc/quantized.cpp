// Chapter 16, quantized tensors: the kernels of the QuantizedPrivateUse1
// dispatch key. A quantized accinte tensor is ATen's QTensorImpl (integers
// plus a quantizer) over accinte memory; the quantizer's parameters stay on
// the host, and the kernels that compute run ATen's CPU routines on the
// device memory inside launches on the current stream.

#include <01_minimal_ops/csrc/capability.h>
#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <01_minimal_ops/csrc/storage.h>
#include <02_fallback/csrc/layout_fallback.h>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/ops/_empty_affine_quantized.h>
#include <ATen/ops/_empty_per_channel_affine_quantized.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_channel.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/zeros.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace accinte {
namespace {

constexpr c10::DeviceType kAccinte = c10::DeviceType::PrivateUse1;

/** Bytes per element of a quantized dtype's storage row: the sub-byte
 * dtypes pack several elements in a byte. */
int64_t elementsPerByte(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::QUInt4x2:
      return 2;
    case c10::ScalarType::QUInt2x4:
      return 4;
    default:
      return 1;
  }
}

/** The storage bytes of a quantized tensor of `sizes`, as ATen counts them
 * (the innermost dimension of a sub-byte dtype is packed, rounded up). */
size_t quantizedStorageBytes(c10::IntArrayRef sizes, c10::ScalarType dtype) {
  const int64_t itemsize = static_cast<int64_t>(c10::elementSize(dtype));
  if (sizes.empty()) {
    return static_cast<size_t>(itemsize);
  }
  const int64_t per_byte = elementsPerByte(dtype);
  const int64_t row = (sizes.back() * itemsize + per_byte - 1) / per_byte;
  return static_cast<size_t>(
      c10::multiply_integers(sizes.begin(), sizes.end() - 1) * row);
}

// LITERALINCLUDE START: CH16_QUANTIZED_NEW_QTENSOR
/**
 * A quantized tensor of `sizes` on `device`: ATen's QTensorImpl, with the
 * QuantizedPrivateUse1 key, over new accinte memory.
 *
 * NB: ATen's own `new_qtensor` picks the allocator by device type and knows
 * only the CPU, CUDA and meta; and it constructs a plain StorageImpl. The
 * storage here comes from the device's allocator through
 * c10::make_storage_impl, as chapter 01's dense tensors do, so it is chapter
 * 10's storage class and chapter 07's caching allocator serves it.
 */
at::Tensor newQTensor(c10::IntArrayRef sizes, c10::Device device,
                      c10::ScalarType dtype, at::QuantizerPtr quantizer,
                      c10::MemoryFormat memory_format) {
  at::detail::check_size_nonnegative(sizes);
  TORCH_CHECK(c10::isQIntType(dtype), "ScalarType ", dtype,
              " is not supported in new_qtensor.");
  const c10::DeviceGuard guard(device);
  const size_t nbytes = quantizedStorageBytes(sizes, dtype);
  c10::Allocator* allocator = c10::GetAllocator(kAccinte);
  c10::Storage storage(c10::make_storage_impl(
      c10::StorageImpl::use_byte_size_t(), nbytes, allocator->allocate(nbytes),
      allocator, /*resizable=*/true, device));
  at::Tensor tensor = at::detail::make_tensor<at::QTensorImpl>(
      std::move(storage),
      c10::DispatchKeySet(
          c10::DispatchKey::QuantizedPrivateUse1), // LITERALINCLUDE EMPHASIZE
      c10::scalarTypeToTypeMeta(dtype), std::move(quantizer));
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  tensor.unsafeGetTensorImpl()->empty_tensor_restride(memory_format);
  return tensor;
}
// LITERALINCLUDE END: CH16_QUANTIZED_NEW_QTENSOR

// LITERALINCLUDE START: CH16_QUANTIZED_KERNEL_VIEW
/**
 * What a kernel may know of a quantized accinte tensor: where its storage
 * is, its layout and its quantizer, never ownership (as chapter 01's
 * KernelTensor).
 *
 * NB: the quantizer is shared, not copied: it holds only host values (a
 * scale and zero point, or per-channel host tensors), so the worker may
 * hold and drop it.
 */
class QuantizedKernelTensor {
 public:
  explicit QuantizedKernelTensor(const at::Tensor& qtensor)
      : storage_(const_cast<void*>(qtensor.storage().data())),
        nbytes_(qtensor.storage().nbytes()),
        offset_(qtensor.storage_offset()),
        sizes_(qtensor.sizes().vec()),
        strides_(qtensor.strides().vec()),
        dtype_(qtensor.scalar_type()),
        quantizer_(qtensor.quantizer()) {
    if (const auto* channels =
            dynamic_cast<const at::PerChannelAffineQuantizer*>(
                quantizer_.get())) {
      // NB: every kernel that makes a quantized accinte tensor takes its
      // per-channel q-parameters to the host; the worker reads them there.
      TORCH_INTERNAL_ASSERT(channels->scales().is_cpu() &&
                            channels->zero_points().is_cpu());
    }
  }

  /** The memory as a quantized CPU tensor; valid only while the kernel
   * runs. */
  at::Tensor cpuView() const {
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes_,
                         c10::DataPtr(storage_, c10::Device(c10::kCPU)),
                         /*allocator=*/nullptr, /*resizable=*/false);
    at::Tensor view = at::detail::make_tensor<at::QTensorImpl>(
        std::move(storage),
        c10::DispatchKeySet(
            c10::DispatchKey::QuantizedCPU), // LITERALINCLUDE EMPHASIZE
        c10::scalarTypeToTypeMeta(dtype_), quantizer_);
    view.unsafeGetTensorImpl()->set_sizes_and_strides(sizes_, strides_,
                                                      offset_);
    return view;
  }

  /** The pointer to name in a launch. */
  const void* buffer() const {
    return storage_;
  }

 private:
  void* storage_;
  size_t nbytes_;
  int64_t offset_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
  c10::ScalarType dtype_;
  at::QuantizerPtr quantizer_;
};
// LITERALINCLUDE END: CH16_QUANTIZED_KERNEL_VIEW

/** Raises the CPU's error for a tensor on another device than `device`. */
void checkSameDevice(const char* op, c10::Device device,
                     const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device() == device || tensor.is_cpu(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              device, " and ", tensor.device(),
              "! (when checking arguments "
              "of ",
              op, ")");
}

/** The host copy of a q-parameter tensor: quantizers keep host values. */
at::Tensor onHost(const char* op, c10::Device device, const at::Tensor& t) {
  checkSameDevice(op, device, t);
  return t.cpu();
}

// LITERALINCLUDE START: CH16_QUANTIZED_PROBE
/**
 * A host tensor of `self`'s dtype and rank with (at most) one element per
 * dimension, except `keep` (a per-channel axis), which keeps its size.
 *
 * NB: running the CPU's operator on it first gives, at the call, exactly
 * the CPU's errors (dtype, zero point range, axis, number of channels) and
 * the CPU's quantizer, for the price of a few host elements; the device
 * then only has to apply that quantizer.
 */
at::Tensor probeFor(const at::Tensor& self, int64_t keep = -1) {
  std::vector<int64_t> sizes = self.sizes().vec();
  for (size_t dim = 0; dim < sizes.size(); ++dim) {
    if (static_cast<int64_t>(dim) != keep) {
      sizes[dim] = std::min<int64_t>(sizes[dim], 1);
    }
  }
  return at::zeros(sizes, self.options().device(c10::kCPU));
}
// LITERALINCLUDE END: CH16_QUANTIZED_PROBE

/** The memory format the CPU gives the result of quantizing `values` with
 * `quantizer`, and of dequantizing a quantized `values` (float q-params:
 * always contiguous). */
c10::MemoryFormat quantizedFormat(const at::Tensor& values,
                                  const at::QuantizerPtr& quantizer) {
  return quantizer->qscheme() == c10::kPerChannelAffineFloatQParams
             ? c10::MemoryFormat::Contiguous
             : values.suggest_memory_format();
}

// LITERALINCLUDE START: CH16_QUANTIZED_QUANTIZE_KERNEL
/** Writes `values` (float, on q's device) quantized by q's quantizer into
 * `q`'s memory, with ATen's CPU routine, on the current stream. */
void launchQuantize(const at::Tensor& values, const at::Tensor& q) {
  const KernelTensor source(values);
  const QuantizedKernelTensor target(q);
  const c10::MemoryFormat format = q.suggest_memory_format();
  launchOnCurrentStream(
      q.device().index(), {source.buffer(), target.buffer()},
      [source, target, format] {
        const at::Tensor in = source.cpuView().contiguous(format);
        at::Tensor out = target.cpuView();
        const at::QuantizerPtr quantizer = out.quantizer();
        switch (quantizer->qscheme()) { // LITERALINCLUDE EMPHASIZE
          case c10::kPerTensorAffine:
            at::native::quantize_tensor_per_tensor_affine(
                in, out, out.q_scale(), out.q_zero_point());
            break;
          case c10::kPerChannelAffine:
            at::native::quantize_tensor_per_channel_affine(
                in, out, out.q_per_channel_scales(),
                out.q_per_channel_zero_points(), out.q_per_channel_axis());
            break;
          case c10::kPerChannelAffineFloatQParams:
            at::native::quantize_tensor_per_channel_float_qparams(
                in, out, out.q_per_channel_scales(),
                out.q_per_channel_zero_points(), out.q_per_channel_axis());
            break;
          default:
            TORCH_INTERNAL_ASSERT(false, "unexpected qscheme");
        }
      });
}

/** A quantized tensor on `self`'s device, as the CPU quantized `probe`. */
at::Tensor quantizeLike(const at::Tensor& self, const at::Tensor& probe) {
  TORCH_CHECK(self.is_privateuseone(),
              "Expected all tensors to be on the same device, but found at "
              "least two devices, ",
              self.device(), " and an accinte device!");
  at::Tensor q =
      newQTensor(self.sizes(), self.device(), probe.scalar_type(),
                 probe.quantizer(), quantizedFormat(self, probe.quantizer()));
  if (q.numel() > 0) {
    launchQuantize(self, q);
  }
  return q;
}

at::Tensor quantize_per_tensor(const at::Tensor& self, double scale,
                               int64_t zero_point, c10::ScalarType dtype) {
  return quantizeLike(
      self, at::quantize_per_tensor(probeFor(self), scale, zero_point, dtype));
}
// LITERALINCLUDE END: CH16_QUANTIZED_QUANTIZE_KERNEL

at::Tensor quantize_per_tensor_tensor_qparams(const at::Tensor& self,
                                              const at::Tensor& scale,
                                              const at::Tensor& zero_point,
                                              c10::ScalarType dtype) {
  const char* op = "aten::quantize_per_tensor.tensor_qparams";
  return quantizeLike(
      self,
      at::quantize_per_tensor(probeFor(self), onHost(op, self.device(), scale),
                              onHost(op, self.device(), zero_point), dtype));
}

at::Tensor quantize_per_channel(const at::Tensor& self,
                                const at::Tensor& scales,
                                const at::Tensor& zero_points, int64_t axis,
                                c10::ScalarType dtype) {
  const char* op = "aten::quantize_per_channel";
  return quantizeLike(
      self, at::quantize_per_channel(
                probeFor(self, axis), onHost(op, self.device(), scales),
                onHost(op, self.device(), zero_points), axis, dtype));
}

// LITERALINCLUDE START: CH16_QUANTIZED_DEQUANTIZE
at::Tensor dequantize(const at::Tensor& self) {
  const c10::MemoryFormat format = quantizedFormat(self, self.quantizer());
  const c10::DeviceGuard guard(self.device());
  at::Tensor result = at::empty(
      self.sizes(), at::TensorOptions().dtype(at::kFloat).device(self.device()),
      format);
  if (result.numel() == 0) {
    return result;
  }
  const QuantizedKernelTensor source(self);
  const KernelTensor target(result);
  launchOnCurrentStream(self.device().index(),
                        {source.buffer(), target.buffer()}, [source, target] {
                          // ATen's CPU dequantization, on device memory.
                          target.cpuView().copy_(source.cpuView().dequantize());
                        });
  return result;
}
// LITERALINCLUDE END: CH16_QUANTIZED_DEQUANTIZE

// LITERALINCLUDE START: CH16_QUANTIZED_INTEGERS
/** The dense dtype of a quantized dtype's integers. */
c10::ScalarType integerType(c10::ScalarType dtype) {
  return c10::toUnderlying(dtype);
}

/**
 * A dense tensor over the same memory as the quantized tensor `q` (on the
 * CPU or on accinte), its integers: same sizes, strides and offset.
 *
 * NB: a quantized tensor is integers plus a quantizer, so copying its
 * integers is a dense copy, which chapter 01 already does between any two
 * of the host and the devices, for any layout, on the right streams.
 */
at::Tensor integersOf(const at::Tensor& q) {
  TORCH_INTERNAL_ASSERT(q.is_quantized());
  const c10::DispatchKey key =
      q.is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1;
  at::Tensor dense = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(q.storage()), c10::DispatchKeySet(key),
      c10::scalarTypeToTypeMeta(integerType(q.scalar_type())));
  if (elementsPerByte(q.scalar_type()) > 1) {
    // NB: the sub-byte dtypes pack elements; their bytes only are copied.
    dense.unsafeGetTensorImpl()->set_sizes_contiguous(
        {static_cast<int64_t>(q.storage().nbytes())});
  } else {
    dense.unsafeGetTensorImpl()->set_sizes_and_strides(q.sizes(), q.strides(),
                                                       q.storage_offset());
  }
  return dense;
}

at::Tensor int_repr(const at::Tensor& self) {
  if (elementsPerByte(self.scalar_type()) > 1) {
    // NB: the CPU's own shape rule for packed elements, on a host copy.
    return self.cpu().int_repr().to(self.device());
  }
  const c10::DeviceGuard guard(self.device());
  at::Tensor result = at::empty(self.sizes(),
                                at::TensorOptions()
                                    .dtype(integerType(self.scalar_type()))
                                    .device(self.device()),
                                self.suggest_memory_format());
  result.copy_(integersOf(self)); // LITERALINCLUDE EMPHASIZE
  return result;
}
// LITERALINCLUDE END: CH16_QUANTIZED_INTEGERS

/** `quantizer`, with its per-channel q-parameters on the host (a CPU
 * tensor's quantizer may hold device tensors if it was made with them). */
at::QuantizerPtr onHost(at::QuantizerPtr quantizer) {
  const auto* channels =
      dynamic_cast<const at::PerChannelAffineQuantizer*>(quantizer.get());
  if (channels == nullptr ||
      (channels->scales().is_cpu() && channels->zero_points().is_cpu())) {
    return quantizer;
  }
  return at::make_per_channel_affine_quantizer(
      channels->scales().cpu(), channels->zero_points().cpu(), channels->axis(),
      channels->scalar_type());
}

/** Whether `q`'s quantizer is still unknown (an empty quantized tensor). */
bool isUnknown(const at::Tensor& q) {
  return dynamic_cast<at::UnknownQuantizer*>(q.quantizer().get()) != nullptr;
}

/** The CPU's check, and so its message, that a quantized copy keeps the
 * dtype (`self` is the destination). */
void checkSameDtype(const at::Tensor& self, const at::Tensor& src) {
  TORCH_CHECK(self.scalar_type() == src.scalar_type());
}

// LITERALINCLUDE START: CH16_QUANTIZED_COPY
/**
 * `_copy_from(self, dst)`: `dst.copy_(self)` when either is a quantized
 * accinte tensor. ATen's `copy_` hands every copy that involves a device it
 * does not know to `_copy_from` before it looks at quantization, so the
 * CPU's rules are checked here, with the CPU's errors.
 */
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  TORCH_CHECK(dst.is_quantized(),
              "Copying from quantized Tensor to non-quantized Tensor is not "
              "allowed, please use dequantize to get a float Tensor from a "
              "quantized Tensor");
  if (!self.is_quantized()) {
    // A float tensor assigned to a quantized one: quantized with dst's
    // quantizer, on dst's device.
    TORCH_CHECK(self.scalar_type() == at::kFloat,
                "Quantized copy only works with kFloat as source Tensor");
    TORCH_CHECK((dst.is_contiguous() && self.is_contiguous()) ||
                    (dst.is_contiguous(c10::MemoryFormat::ChannelsLast) &&
                     self.is_contiguous(c10::MemoryFormat::ChannelsLast)),
                "Quantized copy only works with contiguous and NHWC Tensors");
    TORCH_CHECK(dst.sizes().equals(self.sizes()),
                "Quantized copy only works with Tensors with the same shape");
    if (dst.is_cpu()) {
      return dst.copy_(self.cpu()); // the CPU quantizes into its tensor
    }
    if (dst.numel() > 0) {
      launchQuantize(self.to(dst.device()), dst);
    }
    return dst;
  }
  const at::Tensor& src = self;
  // NB: a quantizer not set yet (`torch.empty(..., dtype=torch.qint8)`) has
  // no qscheme to compare; the copy gives it src's.
  TORCH_CHECK(
      isUnknown(dst) || isUnknown(src) || dst.qscheme() == src.qscheme(),
      "Quantized Copy only works with same qscheme");
  checkSameDtype(dst, src);
  at::set_quantizer_(dst, onHost(src.quantizer())); // LITERALINCLUDE EMPHASIZE
  integersOf(dst).copy_(integersOf(src), non_blocking);
  return dst;
}
// LITERALINCLUDE END: CH16_QUANTIZED_COPY

/** `_copy_from_and_resize(self, dst)`: how the CPU fallback writes a
 * result back into a quantized accinte tensor. */
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) {
    dst.unsafeGetTensorImpl()->set_sizes_contiguous(self.sizes());
    const size_t needed =
        quantizedStorageBytes(self.sizes(), dst.scalar_type());
    if (needed > dst.storage().nbytes()) {
      resizeStorageBytes(dst.storage(), needed);
    }
  }
  return copy_from(self, dst, /*non_blocking=*/false);
}

/** A factory function's `pin_memory`: only host memory is pinned, as
 * chapter 01's factories say. */
void checkNotPinned(std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "accinte: only CPU tensors can be pinned (pin_memory=True)");
}

/** The accinte device a factory function targets: explicit or current. */
c10::Device resolveDevice(std::optional<c10::Device> device) {
  TORCH_CHECK(!device.has_value() || device->type() == kAccinte,
              "accinte: a quantized tensor with accinte q-parameters cannot "
              "be made on ",
              *device);
  const c10::DeviceIndex index = device.has_value() && device->has_index()
                                     ? device->index()
                                     : currentDevice();
  checkDeviceIndex(index);
  return c10::Device(kAccinte, index);
}

/** Sizes of the same rank with no elements, but `keep`'s size kept. */
std::vector<int64_t> probeSizes(c10::IntArrayRef size, int64_t keep = -1) {
  std::vector<int64_t> sizes(size.size(), 0);
  if (keep >= 0 && keep < static_cast<int64_t>(size.size())) {
    sizes[keep] = size[keep];
  }
  return sizes;
}

at::Tensor empty_affine_quantized(c10::IntArrayRef size,
                                  std::optional<c10::ScalarType> dtype,
                                  std::optional<c10::Layout> layout,
                                  std::optional<c10::Device> device,
                                  std::optional<bool> pin_memory, double scale,
                                  int64_t zero_point,
                                  std::optional<c10::MemoryFormat> format) {
  checkNotPinned(pin_memory);
  at::detail::check_size_nonnegative(size);
  // The CPU's checks and quantizer, on a tensor with no elements.
  const at::Tensor probe =
      at::_empty_affine_quantized(probeSizes(size), dtype, layout, c10::kCPU,
                                  false, scale, zero_point, format);
  return newQTensor(size, resolveDevice(device), probe.scalar_type(),
                    probe.quantizer(),
                    format.value_or(c10::MemoryFormat::Contiguous));
}

at::Tensor empty_per_channel_affine_quantized(
    c10::IntArrayRef size, const at::Tensor& scales,
    const at::Tensor& zero_points, int64_t axis,
    std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
    std::optional<c10::Device> device, std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> format) {
  if (device.has_value() && device->is_cpu()) {
    // NB: chosen by q-parameters on accinte, for a tensor on the host: the
    // CPU makes it, with host copies of them.
    return at::_empty_per_channel_affine_quantized(
        size, scales.cpu(), zero_points.cpu(), axis, dtype, layout, device,
        pin_memory, format);
  }
  checkNotPinned(pin_memory);
  at::detail::check_size_nonnegative(size);
  const c10::Device target = resolveDevice(device);
  const char* op = "aten::_empty_per_channel_affine_quantized";
  const at::Tensor probe = at::_empty_per_channel_affine_quantized(
      probeSizes(size, axis), onHost(op, target, scales),
      onHost(op, target, zero_points), axis, dtype, layout, c10::kCPU, false,
      format);
  return newQTensor(size, target, probe.scalar_type(), probe.quantizer(),
                    format.value_or(c10::MemoryFormat::Contiguous));
}

/** `empty_quantized(size, qtensor)`: ATen's, which asks `qtensor` its
 * qscheme, unless its quantizer is still unknown (then an empty tensor of
 * the same kind), so that such a tensor can be moved as the CPU's can. */
at::Tensor empty_quantized(c10::IntArrayRef size, const at::Tensor& qtensor,
                           std::optional<c10::ScalarType> dtype,
                           std::optional<c10::Layout> layout,
                           std::optional<c10::Device> device,
                           std::optional<bool> pin_memory,
                           std::optional<c10::MemoryFormat> format) {
  if (!isUnknown(qtensor)) {
    return at::native::empty_quantized(size, qtensor, dtype, layout, device,
                                       pin_memory, format);
  }
  return at::empty(size,
                   at::TensorOptions()
                       .dtype(dtype.value_or(qtensor.scalar_type()))
                       .device(device.value_or(qtensor.device()))
                       .pinned_memory(pin_memory),
                   format);
}

/** `torch.empty(..., dtype=torch.qint8, device="accinte")`: a quantized
 * tensor whose quantizer is still unknown, as on the CPU. */
at::Tensor empty_unknown_quantized(c10::IntArrayRef size,
                                   std::optional<c10::ScalarType> dtype,
                                   std::optional<c10::Layout> layout,
                                   std::optional<c10::Device> device,
                                   std::optional<bool> pin_memory,
                                   std::optional<c10::MemoryFormat> format) {
  checkNotPinned(pin_memory);
  TORCH_CHECK(dtype.has_value(),
              "Must provide data type for Tensor creation functions.");
  return newQTensor(size, resolveDevice(device), *dtype,
                    at::make_unknown_quantizer(*dtype),
                    format.value_or(c10::MemoryFormat::Contiguous));
}

// LITERALINCLUDE START: CH16_QUANTIZED_CAPABILITY
// NB: each quantized dtype now quantizes from float, dequantizes and
// round-trips on the device, so the device reports it.
struct AddQuantizedCapability {
  AddQuantizedCapability() {
    addCapabilityDtypes({c10::ScalarType::QInt8, c10::ScalarType::QUInt8,
                         c10::ScalarType::QInt32, c10::ScalarType::QUInt4x2,
                         c10::ScalarType::QUInt2x4});
  }
} add_quantized_capability;
// LITERALINCLUDE END: CH16_QUANTIZED_CAPABILITY

/** Every other operator on a quantized accinte tensor: chapter 02's CPU
 * fallback, run with the CPU's quantized kernels. */
void quantizedCpuFallback(const c10::OperatorHandle& op,
                          torch::jit::Stack* stack) {
  cpuFallbackWithKey(op, stack, c10::DispatchKey::QuantizedCPU);
}

// LITERALINCLUDE START: CH16_QUANTIZED_REGISTER
// NB: what is the same on every device is ATen's: views and q-parameters
// only read or rewrite a QTensorImpl's metadata, and `clone`, `empty_like`,
// `empty_quantized` call the operators below through the dispatcher.
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", TORCH_FN(empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized",
         TORCH_FN(empty_per_channel_affine_quantized));
  m.impl("empty.memory_format", TORCH_FN(empty_unknown_quantized));
  m.impl("empty_quantized", TORCH_FN(empty_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("empty_strided",
         TORCH_FN(at::native::empty_strided_unknown_quantized));
  m.impl("dequantize.self", TORCH_FN(dequantize));
  m.impl("int_repr", TORCH_FN(int_repr));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("clone", TORCH_FN(at::native::quantized_clone));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("squeeze", TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&)>(
                        at::native::squeeze_quantized)));
  m.impl("squeeze.dim",
         TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(
             at::native::squeeze_quantized)));
  m.impl(
      "squeeze.dims",
      TORCH_FN(static_cast<at::Tensor (*)(const at::Tensor&, c10::IntArrayRef)>(
          at::native::squeeze_quantized)));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_quantized));
  m.impl("set_.source_Storage_storage_offset",
         TORCH_FN(at::native::set_storage_quantized_));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("q_per_channel_scales", TORCH_FN(at::native::q_per_channel_scales));
  m.impl("q_per_channel_zero_points",
         TORCH_FN(at::native::q_per_channel_zero_points));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  // NB: these have a kernel for every backend that has none of its own
  // (structured or composite), which allocates an output of no known
  // quantizer: named here, they take the fallback, as the boxed fallback
  // below never sees them, and run the CPU's quantized kernel.
  for (const char* name : {"cat",
                           "clamp",
                           "index.Tensor",
                           "max.dim",
                           "mean.dim",
                           "min.dim",
                           "gelu_",
                           "gelu",
                           "sigmoid",
                           "tanh",
                           "threshold",
                           "ne.Scalar",
                           "ne.Tensor",
                           "eq.Scalar",
                           "eq.Tensor",
                           "ge.Scalar",
                           "ge.Tensor",
                           "le.Scalar",
                           "le.Tensor",
                           "gt.Scalar",
                           "gt.Tensor",
                           "lt.Scalar",
                           "lt.Tensor",
                           "sort.stable",
                           "topk",
                           "hardsigmoid",
                           "leaky_relu",
                           "leaky_relu_",
                           "avg_pool2d",
                           "avg_pool3d",
                           "upsample_bilinear2d",
                           "upsample_nearest2d",
                           "_upsample_nearest_exact2d",
                           "upsample_nearest3d",
                           "_upsample_nearest_exact3d"}) {
    m.impl(name,
           torch::CppFunction::makeFromBoxedFunction<&quantizedCpuFallback>());
  }
}

// The float tensors that are quantized are dense accinte tensors.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", TORCH_FN(quantize_per_tensor));
  m.impl("quantize_per_tensor.tensor_qparams",
         TORCH_FN(quantize_per_tensor_tensor_qparams));
  m.impl("quantize_per_channel", TORCH_FN(quantize_per_channel));
}

// NB: the fallback's copies to and from the host are the `_copy_from` above,
// and the CPU's quantized kernel, or the CPU's error, decides the result.
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(
      torch::CppFunction::makeFromBoxedFunction<&quantizedCpuFallback>());
}
// LITERALINCLUDE END: CH16_QUANTIZED_REGISTER

} // namespace
} // namespace accinte
