// Chapter 04's addition to `torch_accinte._C`: the exit hook's half in C++,
// which lets autograd's device threads finish what a backward pass left them
// while the interpreter can still give them the GIL (see the chapter's page
// exit.md, "Exiting right after backward").

#include <01_minimal_ops/csrc/python/bindings.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <c10/core/Device.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace accinte::python {
namespace {

namespace py = pybind11;

/** How long the exit hook waits for the device threads (PyTorch's own
 * shutdown of them waits 10 s by default, too). */
constexpr auto kDrainTimeout = std::chrono::seconds(10);

/** What the probe thread reports to the thread that waits for it. */
struct DrainState {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::string error;
};

// LITERALINCLUDE START: CH04_DRAIN_DEVICE_THREADS
/**
 * Runs a backward pass on every accinte device, from the calling thread.
 *
 * Autograd runs the nodes of device `d` on its device thread `d`, one task
 * at a time, so this pass's first node starts only once that thread has
 * finished the loop iteration of the backward before it, including letting
 * go of that backward's graph task and what it captured.
 *
 * NB: the calling thread is a new C++ thread and the tensors never reach
 * Python: the graph task snapshots its caller's thread-local state, which
 * on a Python thread can hold Python objects (`torch.autograd.backward`
 * stashes a `contextvars.Context` there). This pass's own graph task holds
 * none, so the device thread lets go of it without the GIL.
 */
void backwardOnEveryDevice() {
  const c10::DeviceIndex count = deviceCountOrZero();
  for (c10::DeviceIndex index = 0; index < count; ++index) {
    const auto options = at::TensorOptions().device(
        c10::Device(c10::DeviceType::PrivateUse1, index));
    at::Tensor leaf = at::ones({1}, options).requires_grad_();
    torch::autograd::backward({leaf.sum()});
  }
}
// LITERALINCLUDE END: CH04_DRAIN_DEVICE_THREADS

// LITERALINCLUDE START: CH04_DRAIN_WAIT
/**
 * Waits (with the GIL released) until each accinte autograd device thread
 * has finished the work of earlier backward passes. Returns false if that
 * took longer than kDrainTimeout; raises if the probe failed.
 */
bool drainAutogradDeviceThreads() {
  auto state = std::make_shared<DrainState>();
  std::thread probe([state] {
    std::string error;
    try {
      backwardOnEveryDevice();
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown exception";
    }
    std::lock_guard<std::mutex> lock(state->mutex);
    state->done = true;
    state->error = std::move(error);
    state->finished.notify_all();
  });
  bool done = false;
  {
    // NB: the GIL must be free while waiting: the device thread's last
    // step of the previous backward is a Python decref.
    py::gil_scoped_release noGil;
    std::unique_lock<std::mutex> lock(state->mutex);
    done = state->finished.wait_for(lock, kDrainTimeout,
                                    [&] { return state->done; });
  }
  if (!done) {
    // NB: a device thread busy for that long (a daemon thread's backward)
    // must not hang the exit; the probe holds no Python object, so it may
    // outlive the interpreter.
    probe.detach();
    return false;
  }
  probe.join();
  TORCH_CHECK(
      state->error.empty(),
      "accinte: could not wait for autograd's device threads: ", state->error);
  return true;
}
// LITERALINCLUDE END: CH04_DRAIN_WAIT

void bindChapter04(py::module_& m) {
  m.def("_drain_autograd_device_threads", &drainAutogradDeviceThreads,
        "Wait until autograd's accinte device threads have finished the "
        "work of earlier backward passes (the exit hook calls it). False "
        "if they were still busy after 10 s.");
}

const BindingRegistrar chapter04("04_autograd", &bindChapter04);

} // namespace
} // namespace accinte::python
