#pragma once

/**
 * @file
 * A per-tensor format tag: device metadata PyTorch knows nothing about,
 * attached to accinte tensors as a c10::BackendMeta and carried by
 * `torch.save` and `torch.load`.
 *
 * A vendor keeps such a tag to tell its kernels how a tensor's bytes are
 * arranged on the device (a blocked layout, a compressed encoding). The
 * emulator's kernels store every tensor as plain dense bytes, so here the
 * tag is metadata only: what this chapter shows is how it travels.
 */

#include <accinte/export.h>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace accinte {

// LITERALINCLUDE START: CH10_FORMAT_META
/** The formats a tensor's bytes can be tagged with. */
enum class TensorFormat : uint8_t {
  /** Dense bytes in the tensor's strides: every tensor without a tag. */
  kPlain,
  /** Blocked in tiles, as matrix units read them. */
  kTiled,
  /** Encoded by the device's compression. */
  kCompressed,
};

/** The BackendMeta of a tagged tensor.
 *
 * NB: immutable. Setting a format installs a new object, so the copies of
 * metadata that PyTorch makes by sharing the pointer (see clone()) never
 * see a later change of the original. */
struct TensorFormatMeta final : c10::BackendMeta {
  /** Tags a tensor with `format`. */
  explicit TensorFormatMeta(TensorFormat format) : format(format) {}

  /** PyTorch calls this where it copies a tensor's metadata (`detach()`,
   * `nn.Parameter`, `.data`); sharing the immutable object is a copy. */
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>& self) const override {
    return self;
  }

  /** The tag. */
  const TensorFormat format;
};
// LITERALINCLUDE END: CH10_FORMAT_META

/** The name of `format` in Python and in checkpoints ("plain", "tiled",
 * "compressed"). */
ACCINTE_EXPORT const char* tensorFormatName(TensorFormat format);

/** The format called `name`, or nothing if there is none. */
ACCINTE_EXPORT std::optional<TensorFormat> tensorFormatFromName(
    std::string_view name);

/** The format `tensor` is tagged with; kPlain if it has no tag. */
ACCINTE_EXPORT TensorFormat tensorFormat(const at::Tensor& tensor);

/** Tags the accinte tensor `tensor` with `format`; kPlain removes the tag.
 * A tensor on another device is a value error (`ValueError` in Python). */
ACCINTE_EXPORT void setTensorFormat(const at::Tensor& tensor,
                                    TensorFormat format);

} // namespace accinte
