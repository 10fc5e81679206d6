#pragma once

/**
 * @file
 * A format tag for the bytes of an accinte storage: device metadata PyTorch
 * knows nothing about, kept by the storage (AccinteStorageImpl), so that
 * every view of the bytes sees it, and carried by `torch.save` and
 * `torch.load`.
 *
 * A vendor keeps such a tag to tell its kernels how a storage's bytes are
 * arranged on the device (a blocked layout, a compressed encoding). The
 * emulator's kernels store every tensor as plain dense bytes, so here the
 * tag is metadata only: what this chapter shows is how it travels.
 */

#include <accinte/export.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace accinte {

// LITERALINCLUDE START: CH10_FORMAT_META
/** The formats a storage's bytes can be tagged with. */
enum class TensorFormat : uint8_t {
  /** Dense bytes in the tensor's strides: every storage without a tag. */
  kPlain,
  /** Blocked in tiles, as matrix units read them. */
  kTiled,
  /** Encoded by the device's compression. */
  kCompressed,
};
// LITERALINCLUDE END: CH10_FORMAT_META

/** The name of `format` in Python and in checkpoints ("plain", "tiled",
 * "compressed"). */
ACCINTE_EXPORT const char* tensorFormatName(TensorFormat format);

/** The format called `name`, or nothing if there is none. */
ACCINTE_EXPORT std::optional<TensorFormat> tensorFormatFromName(
    std::string_view name);

/** The format of the bytes of `tensor`'s storage; kPlain for an untagged
 * storage and for a tensor on another device. */
ACCINTE_EXPORT TensorFormat tensorFormat(const at::Tensor& tensor);

/** Tags the storage of the accinte tensor `tensor` with `format`, for every
 * tensor over it; kPlain removes the tag. A tensor on another device is a
 * value error (`ValueError` in Python). */
ACCINTE_EXPORT void setTensorFormat(const at::Tensor& tensor,
                                    TensorFormat format);

} // namespace accinte
