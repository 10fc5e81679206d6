// Chapter 08's additions to `torch_accinte._C`: the default generators as
// Python `torch.Generator` objects, and Philox itself, for its known-answer
// test.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <08_generator/csrc/generator.h>

#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>

namespace accinte::python {
namespace {

namespace py = pybind11;

// LITERALINCLUDE START: CH08_BIND_GENERATORS
void bindChapter08(py::module_& m) {
  // NB: a new Python object around the same C++ generator on each call, as
  // torch.cuda's default generators are made; the device module caches one
  // per device.
  m.def(
      "_default_generator",
      [](c10::DeviceIndex device) {
        // NB: for the hooks, a negative index means the current device; from
        // Python it is a user's mistake, and the device module would cache
        // the current device's generator under it for every later call.
        checkDeviceIndex(device);
        return py::reinterpret_steal<py::object>(
            THPGenerator_initDefaultGenerator(defaultGenerator(device)));
      },
      py::arg("device"), "The default torch.Generator of an accinte device.");
  m.def(
      "_philox4x32_10",
      [](const PhiloxBlock& counter, const PhiloxKey& key) {
        return philox4x32_10(counter, key);
      },
      py::arg("counter"), py::arg("key"),
      "One Philox4x32-10 block: four 32-bit words of counter, two of key.");
}

const BindingRegistrar chapter08("08_generator", &bindChapter08);
// LITERALINCLUDE END: CH08_BIND_GENERATORS

} // namespace
} // namespace accinte::python
