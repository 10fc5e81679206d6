// Chapter 10's additions to `torch_accinte._C`: reading and setting a
// tensor's format tag, and reading a storage's origin.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <10_storage/csrc/storage_impl.h>
#include <10_storage/csrc/tensor_format.h>

#include <pybind11/stl.h>

#include <string>

namespace accinte::python {
namespace {

namespace py = pybind11;

// LITERALINCLUDE START: CH10_BIND
void bindChapter10(py::module_& m) { // LITERALINCLUDE EMPHASIZE
  m.def(
      "_tensor_format", // LITERALINCLUDE EMPHASIZE
      [](const at::Tensor& tensor) {
        return tensorFormatName(tensorFormat(tensor));
      },
      py::arg("tensor"), "The format tag of a tensor (\"plain\" if untagged).");
  m.def(
      "_set_tensor_format", // LITERALINCLUDE EMPHASIZE
      [](const at::Tensor& tensor, const std::string& name) {
        const auto format = tensorFormatFromName(name);
        if (!format.has_value()) {
          throw py::value_error("accinte: unknown tensor format '" + name +
                                "'");
        }
        setTensorFormat(tensor, *format);
      },
      py::arg("tensor"), py::arg("format"), "Tags an accinte tensor.");
  m.def(
      "_storage_origin", // LITERALINCLUDE EMPHASIZE
      [](const at::Tensor& tensor) -> std::optional<py::tuple> {
        const auto origin =
            storageOrigin(*tensor.storage().unsafeGetStorageImpl());
        if (!origin.has_value()) {
          return std::nullopt;
        }
        const auto data = reinterpret_cast<uintptr_t>(tensor.storage().data());
        return py::make_tuple(origin->serial, origin->device,
                              origin->allocationBase, origin->allocationSize,
                              origin->offset, data != origin->data);
      },
      py::arg("tensor"),
      "The StorageOrigin fields of a tensor's storage and whether its bytes "
      "moved since, or None for a storage of another class.");
}

// LITERALINCLUDE EMPHASIZE NEXT
const BindingRegistrar chapter10("10_storage", &bindChapter10);
// LITERALINCLUDE END: CH10_BIND

} // namespace
} // namespace accinte::python
