#include <10_storage/csrc/tensor_format.h>

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
  const auto meta =
      tensor.unsafeGetTensorImpl()->get_backend_meta_intrusive_ptr();
  const auto* formatMeta = dynamic_cast<const TensorFormatMeta*>(meta.get());
  return formatMeta == nullptr ? TensorFormat::kPlain : formatMeta->format;
}

void setTensorFormat(const at::Tensor& tensor, TensorFormat format) {
  TORCH_CHECK_VALUE(
      tensor.device().is_privateuseone(),
      "accinte: only accinte tensors carry a format, got a tensor on ",
      tensor.device());
  tensor.unsafeGetTensorImpl()->set_backend_meta(
      format == TensorFormat::kPlain
          ? nullptr
          : c10::make_intrusive<TensorFormatMeta>(format));
}
// LITERALINCLUDE END: CH10_FORMAT_GET_SET

namespace {

// LITERALINCLUDE START: CH10_FORMAT_SERIALIZATION
/** A checkpoint holds a tensor's metadata as string -> bool pairs; the
 * format is the one key of this prefix that is present. */
// LITERALINCLUDE EMPHASIZE NEXT
constexpr std::string_view kFormatKeyPrefix = "accinte.format.";

/** Called by `torch.save` for every accinte tensor it writes. */
void saveFormat(const at::Tensor& tensor,
                std::unordered_map<std::string, bool>& metadata) {
  const TensorFormat format = tensorFormat(tensor);
  if (format != TensorFormat::kPlain) {
    // LITERALINCLUDE EMPHASIZE NEXT
    metadata[std::string(kFormatKeyPrefix) + tensorFormatName(format)] = true;
  }
}

/** Called by `torch.load` for every tensor it rebuilds on accinte. A tensor
 * loaded elsewhere (`map_location="cpu"`) never reaches it, and loses its
 * format. */
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
