// Chapter 02's addition to `torch_accinte._C`: the list of operators the
// fallback refuses.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <02_fallback/csrc/fallback.h>

namespace accinte::python {
namespace {

namespace py = pybind11;

void bindChapter02(py::module_& m) {
  m.def("_fallback_native_only_operators", &accinte::nativeOnlyOperators,
        "The operators the CPU fallback refuses, as 'aten::name: reason'.");
}

const BindingRegistrar chapter02("02_fallback", &bindChapter02);

} // namespace
} // namespace accinte::python
