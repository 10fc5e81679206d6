#include <01_minimal_ops/csrc/python/bindings.h>

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/Context.h>
#include <ATen/ops/from_blob.h>
#include <torch/csrc/utils/device_lazy_init.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
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

// LITERALINCLUDE START: CH01_TELEMETRY
/**
 * The utilization rates of a device over the emulator's sample period, in
 * percent: (kernels, memory), as `nvmlDeviceGetUtilizationRates`.
 */
py::tuple utilizationRates(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  unsigned int kernelPercent = 0;
  unsigned int memoryPercent = 0;
  ACCINTE_CHECK(
      accinteDeviceGetUtilizationRates(index, &kernelPercent, &memoryPercent));
  return py::make_tuple(kernelPercent, memoryPercent);
}

/** One modelled value of a device's telemetry (see
 * accinteDeviceGetClockRate() and its neighbours). */
template <accinteError_t (*Get)(int, unsigned int*)>
unsigned int telemetryValue(c10::DeviceIndex index) {
  checkDeviceIndex(index);
  unsigned int value = 0;
  ACCINTE_CHECK(Get(index, &value));
  return value;
}
// LITERALINCLUDE END: CH01_TELEMETRY

// LITERALINCLUDE START: CH01_STREAM_GATE
/**
 * A kernel that holds a stream until the host opens the gate.
 *
 * Work queued behind it on the same stream cannot start, so a test can
 * launch an operator, see that the call returned while the stream is still
 * busy, and see its result appear only after `open()`.
 *
 * NB: the kernel gives up after `timeout_seconds`, so a test that fails
 * before opening the gate cannot hang the process forever. It names no
 * device memory and calls no runtime function, as a kernel must not.
 */
class StreamGate {
 public:
  explicit StreamGate(c10::DeviceIndex device, double timeout_seconds)
      : state_(std::make_shared<State>()) {
    const auto timeout = std::chrono::duration<double>(timeout_seconds);
    // LITERALINCLUDE EMPHASIZE NEXT
    launchOnCurrentStream(device, {}, [state = state_, timeout] {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->opened.wait_for(lock, timeout, [&] { return state->open; });
    });
  }

  // NB: a gate dropped without open() must not hold its stream.
  ~StreamGate() {
    open();
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  /** Lets the stream run on. */
  void open() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->open = true; // LITERALINCLUDE EMPHASIZE
    }
    state_->opened.notify_all(); // LITERALINCLUDE EMPHASIZE
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable opened;
    bool open = false;
  };
  std::shared_ptr<State> state_;
};
// LITERALINCLUDE END: CH01_STREAM_GATE

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
  m.def(
      "_set_sync_debug_mode",
      [](int mode) {
        TORCH_CHECK_VALUE(mode >= 0 && mode <= 2,
                          "invalid value of debug_mode, expected one of "
                          "0 (default), 1 (warn), 2 (error), got ",
                          mode);
        setSyncDebugMode(static_cast<SyncDebugMode>(mode));
      },
      py::arg("mode"));
  m.def("_get_sync_debug_mode",
        [] { return static_cast<int>(syncDebugMode()); });
  m.def("_synchronize", &synchronizeDevice,
        py::call_guard<py::gil_scoped_release>(),
        "Wait for all work on a device.");
  m.def("_get_device_properties", &deviceProperties,
        "Properties of a device as a dict.");
  m.def("_get_utilization_rates", &utilizationRates,
        "(kernel, memory) utilization of a device in percent.");
  m.def("_get_clock_rate", &telemetryValue<accinteDeviceGetClockRate>,
        "Clock of a device in MHz.");
  m.def("_get_temperature", &telemetryValue<accinteDeviceGetTemperature>,
        "Temperature of a device in degrees Celsius.");
  m.def("_get_power_draw", &telemetryValue<accinteDeviceGetPowerUsage>,
        "Power drawn by a device in milliwatts.");
  m.def(
      "_get_default_stream",
      [](c10::DeviceIndex index) {
        const c10::Stream stream = defaultStream(index);
        return py::make_tuple(stream.id(), stream.device_index(),
                              static_cast<int>(stream.device_type()));
      },
      "The default stream of a device as (stream_id, device_index, "
      "device_type).");

  // NB: a submodule, so that the testing aids are never mistaken for the
  // device module's surface.
  py::module_ testing = m.def_submodule(
      "_testing", "Testing aids of the accinte backend; not a public API.");
  py::class_<StreamGate>(testing, "StreamGate",
                         "Holds the current stream of a device until open().")
      .def(py::init<c10::DeviceIndex, double>(), py::arg("device"),
           py::arg("timeout_seconds") = 60.0)
      .def("open", &StreamGate::open);
  testing.def(
      "pinned_bytes",
      [](int64_t nbytes) {
        TORCH_CHECK(nbytes >= 0, "pinned_bytes: negative size ", nbytes);
        void* data = nullptr;
        ACCINTE_CHECK(accinteMallocHost(&data, static_cast<size_t>(nbytes)));
        return at::from_blob(
            data, {nbytes}, [](void* pinned) { (void)accinteFreeHost(pinned); },
            at::TensorOptions().dtype(at::kByte));
      },
      "A uint8 CPU tensor of `nbytes` bytes of pinned memory straight from "
      "the emulator, so chapter 01's asynchronous copies can be tested "
      "before chapter 07 adds Tensor.pin_memory().");
  testing.def(
      "launch_failing_kernel",
      [](c10::DeviceIndex device, const std::string& message) {
        launchOnCurrentStream(device, {},
                              [message] { TORCH_CHECK(false, message); });
      },
      "Enqueues a kernel that fails with `message` on the current stream.");
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
