// Chapter 15's additions to `torch_accinte._C`: the graph class behind
// torch.accinte.AccinteGraph, pool handles and the capture status.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <15_graphs/csrc/graph.h>

#include <memory>
#include <optional>
#include <string>

namespace accinte::python {
namespace {

namespace py = pybind11;

at::GraphCaptureMode captureMode(const std::string& mode) {
  if (mode == "default") {
    return at::GraphCaptureMode::Default;
  }
  if (mode == "global") {
    return at::GraphCaptureMode::Global;
  }
  if (mode == "thread_local") {
    return at::GraphCaptureMode::ThreadLocal;
  }
  TORCH_CHECK(mode == "relaxed", "accinte graph: capture_error_mode must be ",
              "'default', 'global', 'thread_local' or 'relaxed', not '", mode,
              "'");
  return at::GraphCaptureMode::Relaxed;
}

void bindChapter15(py::module_& m) {
  // NB: no GIL while the emulator works: replay() waits for nothing, but
  // capture_end() and reset() may wait for the device.
  py::class_<AccinteGraph, std::shared_ptr<AccinteGraph>>(m, "_Graph")
      .def(py::init([](bool keep_graph) {
             return std::make_shared<AccinteGraph>(
                 at::GraphImplArgs{keep_graph});
           }),
           py::arg("keep_graph") = false)
      .def(
          "capture_begin",
          [](AccinteGraph& self, std::optional<c10::MempoolId_t> pool,
             const std::string& mode) {
            self.capture_begin(pool.value_or(c10::MempoolId_t{0, 0}),
                               captureMode(mode));
          },
          py::arg("pool") = std::nullopt,
          py::arg("capture_error_mode") = "global")
      .def("capture_end", &AccinteGraph::capture_end,
           py::call_guard<py::gil_scoped_release>())
      .def("instantiate", &AccinteGraph::instantiate,
           py::call_guard<py::gil_scoped_release>())
      .def("replay", &AccinteGraph::replay,
           py::call_guard<py::gil_scoped_release>())
      .def("reset", &AccinteGraph::reset,
           py::call_guard<py::gil_scoped_release>())
      .def("pool", &AccinteGraph::pool)
      .def("enable_debug_mode", &AccinteGraph::enable_debug_mode)
      .def("debug_dump", &AccinteGraph::debug_dump, py::arg("debug_path"))
      .def("register_generator_state", &AccinteGraph::registerGenerator,
           py::arg("generator"));
  m.def("_register_graph_impl", &registerGraphImpl,
        "Registers the graph with PyTorch's registry, under the backend's "
        "name: call after rename_privateuse1_backend.");
  m.def("_graph_pool_handle", &newGraphPoolId,
        "A fresh id for a graph's private memory pool.");
  m.def("_captures_underway", &capturesUnderway,
        "How many graphs of the process are capturing.");
  m.def(
      "_is_current_stream_capturing",
      [] { return isCapturing(currentDevice()); },
      "Whether the current stream of the current device is capturing.");
}

const BindingRegistrar registrar("15_graphs", &bindChapter15);

} // namespace
} // namespace accinte::python
