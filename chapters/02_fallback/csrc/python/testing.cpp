// Chapter 02's additions to `torch_accinte._C`: the list of operators the
// fallback refuses, and a stream gate, a teaching and testing aid that makes
// "this kernel runs on the stream, not on the calling thread" observable.

#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/python/bindings.h>
#include <02_fallback/csrc/fallback.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace accinte::python {
namespace {

namespace py = pybind11;

// LITERALINCLUDE START: CH02_STREAM_GATE
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
      state_->open = true;
    }
    state_->opened.notify_all();
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable opened;
    bool open = false;
  };
  std::shared_ptr<State> state_;
};
// LITERALINCLUDE END: CH02_STREAM_GATE

void bindChapter02(py::module_& m) {
  m.def("_fallback_native_only_operators", &accinte::nativeOnlyOperators,
        "The operators the CPU fallback refuses, as 'aten::name: reason'.");
  py::class_<StreamGate>(
      m, "_TestingStreamGate",
      "Testing aid: holds the current stream of a device until open().")
      .def(py::init<c10::DeviceIndex, double>(), py::arg("device"),
           py::arg("timeout_seconds") = 60.0)
      .def("open", &StreamGate::open);
}

const BindingRegistrar chapter02("02_fallback", &bindChapter02);

} // namespace
} // namespace accinte::python
