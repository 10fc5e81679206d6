// Chapter 13's additions to `torch_accinte._C`: the launch of a kernel that
// Inductor generated, and the raw stream handle its wrapper code launches on.

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/python/bindings.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <accinte/kernel.h>

#include <torch/csrc/autograd/python_variable.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace accinte::python {
namespace {

namespace py = pybind11;

// LITERALINCLUDE START: CH13_ARGUMENT
/**
 * One argument of a generated kernel as its entry point reads it: the address
 * of a buffer, an integer (such as a size of a dynamic shape) or a
 * floating-point scalar. The entry point, which `torch_accinte/inductor.py`
 * appends to each kernel's source, unpacks them into the kernel's own
 * parameters.
 */
union KernelArgument {
  const void* pointer;
  int64_t integer;
  double real;
};

/** The signature of that entry point. */
using KernelEntry = void (*)(const KernelArgument* arguments);

/**
 * A one-element CPU tensor that a kernel reads, such as an optimizer's step
 * count: its value, copied at the launch.
 *
 * NB: the device cannot read host memory, and the host may change the tensor
 * before the kernel runs; CUDA's Inductor passes such a tensor by value too.
 */
struct HostScalar {
  size_t index;
  std::array<std::byte, 16> value;
};
// LITERALINCLUDE END: CH13_ARGUMENT

// LITERALINCLUDE START: CH13_LAUNCH
/**
 * Enqueues the generated kernel `entry` on `raw_stream` with `args`, the
 * tensors and numbers the wrapper code passes, in the kernel's order.
 *
 * Exactly the tensors' allocations are opened for the kernel, as for every
 * native kernel (chapter 09): the kernel runs on the stream's worker thread,
 * after the work queued before it, and this call returns at once. A kernel
 * that throws (an index out of bounds, say) fails its stream, and the next
 * synchronize reports the message.
 */
void launchCompiledKernel(uintptr_t entry, const std::string& name,
                          uintptr_t raw_stream, const py::tuple& args) {
  TORCH_CHECK(entry != 0, "accinte: compiled kernel ", name,
              " has no entry point");
  auto* stream = reinterpret_cast<accinteStream_t>(raw_stream);
  int device = 0;
  ACCINTE_CHECK(accinteStreamGetDevice(stream, &device));
  // LITERALINCLUDE END: CH13_LAUNCH

  // LITERALINCLUDE START: CH13_KERNEL_ARGS
  std::vector<KernelArgument> arguments(args.size());
  std::vector<HostScalar> host_scalars;
  std::vector<const void*> buffers;
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* arg = args[i].ptr();
    if (THPVariable_Check(arg) && THPVariable_Unpack(arg).is_cpu()) {
      const at::Tensor& tensor = THPVariable_Unpack(arg);
      HostScalar scalar{i, {}};
      TORCH_CHECK(
          tensor.numel() == 1 &&
              static_cast<size_t>(tensor.element_size()) <= scalar.value.size(),
          "accinte: argument ", i, " of compiled kernel ", name,
          " is a CPU tensor of ", tensor.numel(),
          " elements; a kernel reads only one-element CPU tensors");
      std::memcpy(scalar.value.data(), tensor.const_data_ptr(),
                  tensor.element_size());
      host_scalars.push_back(scalar);
    } else if (THPVariable_Check(arg)) {
      const at::Tensor& tensor = THPVariable_Unpack(arg);
      TORCH_CHECK(tensor.device() == c10::Device(c10::DeviceType::PrivateUse1,
                                                 static_cast<int8_t>(device)),
                  "accinte: argument ", i, " of compiled kernel ", name,
                  " is on ", tensor.device(), ", not on the kernel's device ",
                  c10::Device(c10::DeviceType::PrivateUse1,
                              static_cast<int8_t>(device)));
      arguments[i].pointer = tensor.const_data_ptr();
      // NB: the storage's start, not the view's: a view with no elements
      // may point at the end of its allocation, which opens nothing.
      if (tensor.storage().nbytes() > 0) {
        buffers.push_back(tensor.storage().data()); // LITERALINCLUDE EMPHASIZE
      }
    } else if (PyLong_Check(arg)) {
      arguments[i].integer = py::cast<int64_t>(args[i]);
    } else if (PyFloat_Check(arg)) {
      arguments[i].real = PyFloat_AS_DOUBLE(arg);
    } else {
      TORCH_CHECK(false, "accinte: argument ", i, " of compiled kernel ", name,
                  " is a ", Py_TYPE(arg)->tp_name,
                  "; a kernel takes tensors, ints and floats");
    }
  }
  // LITERALINCLUDE END: CH13_KERNEL_ARGS

  // LITERALINCLUDE START: CH13_ENQUEUE_COMPILED
  py::gil_scoped_release no_gil;
  ACCINTE_CHECK(launchNamedKernel(
      stream, name.c_str(), buffers.data(), buffers.size(),
      [entry = reinterpret_cast<KernelEntry>(entry), name,
       arguments = std::move(arguments),
       host_scalars = std::move(host_scalars)]() mutable {
        for (HostScalar& scalar : host_scalars) {
          arguments[scalar.index].pointer = scalar.value.data();
        }
        try {
          entry(arguments.data()); // LITERALINCLUDE EMPHASIZE
        } catch (const std::exception& error) {
          // NB: the kernel's own message names its C++ function and source
          // line; the name ties it to the wrapper code's launch.
          throw std::runtime_error(name + ": " + error.what());
        }
      }));
}
// LITERALINCLUDE END: CH13_ENQUEUE_COMPILED

void bindChapter13(py::module_& m) {
  m.def("_launch_compiled_kernel", &launchCompiledKernel,
        "Enqueues a kernel Inductor generated on a stream (chapter 13).");
  m.def(
      "_current_raw_stream",
      [](c10::DeviceIndex index) {
        checkDeviceIndex(index);
        return reinterpret_cast<uintptr_t>(nativeStream(currentStream(index)));
      },
      "The emulator handle of the device's current stream.");
}

const BindingRegistrar chapter13("13_compile", &bindChapter13);

} // namespace
} // namespace accinte::python
