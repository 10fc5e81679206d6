#include <01_minimal_ops/csrc/python/bindings.h>

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/Context.h>
#include <torch/csrc/utils/device_lazy_init.h>

#include <map>
#include <string>

namespace accinte::python {
namespace {

namespace py = pybind11;

std::multimap<std::string, BindingFunction>& registeredBindings() {
  static std::multimap<std::string, BindingFunction> bindings;
  return bindings;
}

// LITERALINCLUDE START: CH01_LAZY_INIT
/**
 * Initializes the device the first time Python needs it (torch calls
 * `torch.accinte._lazy_init()`, which calls this).
 *
 * NB: the fork handler is what makes `_is_in_bad_fork()` true in a child
 * forked after this point: the emulator's worker threads do not survive
 * fork(), so such a child must not touch the device.
 */
void initialize() {
  torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
}
// LITERALINCLUDE END: CH01_LAZY_INIT

py::dict deviceProperties(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  accinteDeviceProp prop{};
  ACCINTE_CHECK(accinteGetDeviceProperties(&prop, index));
  py::dict result;
  result["name"] = std::string(prop.name);
  result["total_memory"] = prop.totalGlobalMem;
  result["major"] = prop.major;
  result["minor"] = prop.minor;
  result["multi_processor_count"] = prop.multiProcessorCount;
  return result;
}

void bindChapter01(py::module_& m) {
  m.def("_init", &initialize, "Initialize the accinte device (lazy init).");
  m.def(
      "_is_in_bad_fork",
      [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); },
      "True in a child process forked after the device was initialized.");
  m.def(
      "_get_device_count", [] { return deviceCountOrZero(); },
      "Number of devices, 0 if the emulator cannot start.");
  m.def("_get_device", &currentDevice, "The current device index.");
  m.def("_set_device", &setDevice, "Set the current device index.");
  m.def("_exchange_device", &exchangeDevice,
        "Set the current device, return the previous one.");
  m.def("_synchronize", &synchronizeDevice,
        py::call_guard<py::gil_scoped_release>(),
        "Wait for all work on a device.");
  m.def("_get_device_properties", &deviceProperties,
        "Properties of a device as a dict.");
  m.def(
      "_get_default_stream",
      [](c10::DeviceIndex index) {
        const c10::Stream stream = defaultStream(index);
        return py::make_tuple(stream.id(), stream.device_index(),
                              static_cast<int>(stream.device_type()));
      },
      "The default stream of a device as (stream_id, device_index, "
      "device_type).");
}

const BindingRegistrar chapter01("01_minimal_ops", &bindChapter01);

} // namespace

BindingRegistrar::BindingRegistrar(const char* chapter,
                                   BindingFunction function) {
  registeredBindings().emplace(chapter, function);
}

} // namespace accinte::python

// LITERALINCLUDE START: CH01_CREATE_MODULE
extern "C" PyObject* accinte_python_create_module() {
  namespace py = pybind11;
  try {
    static py::module_::module_def definition;
    py::module_ module = py::module_::create_extension_module(
        "torch_accinte._C", "accinte backend bindings", &definition);
    for (const auto& [chapter, bind] : accinte::python::registeredBindings()) {
      bind(module);
    }
    return module.release().ptr();
  } catch (py::error_already_set& error) {
    error.restore();
    return nullptr;
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_ImportError, error.what());
    return nullptr;
  }
}
// LITERALINCLUDE END: CH01_CREATE_MODULE
