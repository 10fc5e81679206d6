// Chapter 03's additions to `torch_accinte._C`: the launcher that the
// Python-defined operator accinte::scaled_add uses as its accinte kernel.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <03_custom_ops/csrc/custom_ops.h>

namespace accinte::python {
namespace {

namespace py = pybind11;

// LITERALINCLUDE START: CH03_BIND_LAUNCHER
void bindChapter03(py::module_& m) {
  // NB: the launch only enqueues work, so the GIL is kept: releasing it
  // would cost more than the call.
  m.def("_launch_scaled_add", &accinte::launchScaledAdd, py::arg("out"),
        py::arg("x"), py::arg("y"), py::arg("alpha"),
        "Enqueue out = x + alpha * y on the current stream (accinte tensors "
        "of one device, shape and floating-point dtype).");
}

const BindingRegistrar chapter03("03_custom_ops", &bindChapter03);
// LITERALINCLUDE END: CH03_BIND_LAUNCHER

} // namespace
} // namespace accinte::python
