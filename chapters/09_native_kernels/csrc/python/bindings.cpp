// Chapter 09's additions to `torch_accinte._C`: the fallback recorder and the
// list of native operators.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <09_native_kernels/csrc/fallback_recorder.h>
#include <09_native_kernels/csrc/native_kernels.h>

#include <pybind11/stl.h>

namespace accinte::python {
namespace {

namespace py = pybind11;

void bindChapter09(py::module_& m) {
  m.def("_native_kernel_operators", &accinte::nativeKernelOperators,
        "The ATen operators chapter 09 runs as native accinte kernels.");
  m.def("_start_fallback_recording", &accinte::startFallbackRecording,
        "Starts counting the operator calls that take the CPU fallback.");
  m.def(
      "_stop_fallback_recording",
      [] {
        std::vector<py::tuple> rows;
        for (const FallbackCount& count : accinte::stopFallbackRecording()) {
          rows.push_back(py::make_tuple(count.op, count.calls, count.seconds));
        }
        return rows;
      },
      "Stops the recording: (operator, calls, seconds) rows, slowest first.");
}

const BindingRegistrar chapter09("09_native_kernels", &bindChapter09);

} // namespace
} // namespace accinte::python
