// Chapter 11's addition to `torch_accinte._C`: the factory of the accl
// backend, which the Python plug-in registers with torch.distributed.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <11_distributed/csrc/process_group.h>

#include <torch/csrc/utils/pybind.h>

namespace accinte::python {
namespace {

namespace py = pybind11;

// LITERALINCLUDE START: CH11_BIND
void bindChapter11(py::module_& m) {
  // NB: returned as the c10d::Backend that torch.distributed's own bindings
  // know, so c10d can hold it as any other backend; the host backend comes
  // in the same way.
  m.def(
      "_create_accl_backend",
      [](int rank, int size, c10::intrusive_ptr<c10d::Backend> hostBackend)
          -> c10::intrusive_ptr<c10d::Backend> {
        return createProcessGroupAccl(rank, size, std::move(hostBackend));
      },
      py::arg("rank"), py::arg("size"), py::arg("host_backend"),
      "The accl backend of one rank, moving bytes with `host_backend`.");
}

const BindingRegistrar chapter11("11_distributed", &bindChapter11);
// LITERALINCLUDE END: CH11_BIND

} // namespace
} // namespace accinte::python
