#include <10_storage/csrc/tensor_format.h>

#include <01_minimal_ops/csrc/storage.h>
#include <10_storage/csrc/storage_impl.h>

#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <array>
#include <string>
#include <unordered_map>

namespace accinte {
namespace {

constexpr std::array<std::pair<TensorFormat, const char*>, 3> kFormatNames{{
    {TensorFormat::kPlain, "plain"},
    {TensorFormat::kTiled, "tiled"},
    {TensorFormat::kCompressed, "compressed"},
}};

/** The names of every format, for error messages. */
std::string knownFormats() {
  std::string names;
  for (const auto& [format, name] : kFormatNames) {
    names += names.empty() ? "" : ", ";
    names += name;
  }
  return names;
}

} // namespace

const char* tensorFormatName(TensorFormat format) {
  for (const auto& [candidate, name] : kFormatNames) {
    if (candidate == format) {
      return name;
    }
  }
  TORCH_INTERNAL_ASSERT(
      false, "a TensorFormat without a name: ", static_cast<int>(format));
}

std::optional<TensorFormat> tensorFormatFromName(std::string_view name) {
  for (const auto& [format, candidate] : kFormatNames) {
    if (name == candidate) {
      return format;
    }
  }
  return std::nullopt;
}

// LITERALINCLUDE START: CH10_FORMAT_GET_SET
TensorFormat tensorFormat(const at::Tensor& tensor) {
  if (!tensor.has_storage()) {
    return TensorFormat::kPlain;
  }
  const AccinteStorageImpl* storage =
      accinteStorage(*tensor.storage().unsafeGetStorageImpl());
  return storage == nullptr ? TensorFormat::kPlain : storage->format();
}

void setTensorFormat(const at::Tensor& tensor, TensorFormat format) {
  TORCH_CHECK_VALUE(
      tensor.device().is_privateuseone(),
      "accinte: only accinte tensors carry a format, got a tensor on ",
      tensor.device());
  AccinteStorageImpl* storage =
      accinteStorage(*tensor.storage().unsafeGetStorageImpl());
  // NB: every accinte storage PyTorch makes comes from c10::make_storage_impl
  // (see storage_impl.h); one that did not has nowhere to keep the tag.
  TORCH_CHECK(storage != nullptr,
              "accinte: this tensor's storage was not made by "
              "c10::make_storage_impl and cannot carry a format");
  storage->setFormat(format);
}
// LITERALINCLUDE END: CH10_FORMAT_GET_SET

namespace {

// LITERALINCLUDE START: CH10_FORMAT_COPY
/**
 * Chapter 01 calls this after a copy replaced all of an accinte storage's
 * bytes, verbatim, with all the bytes of another storage.
 *
 * NB: only an untagged destination takes the source's tag. A storage that
 * has a format keeps it: a copy into it writes values, which a device's
 * copy kernel stores in the destination's format. That is also what the
 * writes of in-place operators are (chapter 02's fallback copies a result
 * back from the host; composite in-place operators copy one in), and those
 * must not change a tensor's format. A fresh storage, which is what
 * `clone()`, `copy.deepcopy`, `to()` another device and a new module's
 * parameters are, then holds the source's bytes as they were.
 */
void copyFormat(const c10::Storage& dst, const c10::Storage& src) {
  AccinteStorageImpl* target = accinteStorage(*dst.unsafeGetStorageImpl());
  const AccinteStorageImpl* source =
      accinteStorage(*src.unsafeGetStorageImpl());
  if (target != nullptr && source != nullptr &&
      target->format() == TensorFormat::kPlain) {
    target->setFormat(source->format());
  }
}

const bool copiesRegistered = [] {
  registerStorageCopyObserver(&copyFormat);
  return true;
}();
// LITERALINCLUDE END: CH10_FORMAT_COPY

// LITERALINCLUDE START: CH10_FORMAT_SERIALIZATION
/** A checkpoint holds a tensor's metadata as string -> bool pairs; the
 * format is the one key of this prefix that is present. */
// LITERALINCLUDE EMPHASIZE NEXT
constexpr std::string_view kFormatKeyPrefix = "accinte.format.";

/** Called by `torch.save` for every accinte tensor it writes: each tensor
 * over a tagged storage carries its storage's tag. */
void saveFormat(const at::Tensor& tensor,
                std::unordered_map<std::string, bool>& metadata) {
  const TensorFormat format = tensorFormat(tensor);
  if (format != TensorFormat::kPlain) {
    // LITERALINCLUDE EMPHASIZE NEXT
    metadata[std::string(kFormatKeyPrefix) + tensorFormatName(format)] = true;
  }
}

/** Called by `torch.load` for every tensor it rebuilds on accinte, after
 * the storage's bytes are in place: tags the storage the tensor is rebuilt
 * on. A tensor loaded elsewhere (`map_location="cpu"`) never reaches it,
 * and loses its format. */
void loadFormat(const at::Tensor& tensor,
                std::unordered_map<std::string, bool>& metadata) {
  for (auto entry = metadata.begin(); entry != metadata.end();) {
    const std::string_view key = entry->first;
    if (key.substr(0, kFormatKeyPrefix.size()) != kFormatKeyPrefix) {
      ++entry;
      continue;
    }
    const std::string_view name = key.substr(kFormatKeyPrefix.size());
    const auto format = tensorFormatFromName(name);
    TORCH_CHECK(format.has_value(), // LITERALINCLUDE EMPHASIZE
                "accinte: the checkpoint tags a tensor "
                "with the format '",
                name,
                "', which this version of "
                "torch_accinte does not know (known formats: ",
                knownFormats(), ")");
    setTensorFormat(tensor, *format);
    entry = metadata.erase(entry);
  }
}

const bool registered = [] {
  // LITERALINCLUDE EMPHASIZE NEXT 2
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1,
                                        &saveFormat, &loadFormat);
  return true;
}();
// LITERALINCLUDE END: CH10_FORMAT_SERIALIZATION

} // namespace
} // namespace accinte
