// Chapter 14's additions to `torch_accinte._C`: the producer's and the
// consumer's halves of sharing an accinte storage, for the reductions of
// `torch_accinte/ipc.py`.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <14_ipc/csrc/ipc.h>

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>

#include <sys/types.h>

#include <string>
#include <utility>

namespace accinte::python {
namespace {

namespace py = pybind11;

/** A SharedStorage as plain values a pickle carries: (device, memory
 * handle, offset, nbytes, event handle, (pid, fd, nonce, slot)). */
py::tuple toTuple(const SharedStorage& shared) {
  const auto& counter = shared.counter;
  return py::make_tuple(
      shared.device, py::bytes(shared.memoryHandle), shared.offset,
      shared.nbytes, py::bytes(shared.eventHandle),
      py::make_tuple(counter.pid, counter.fd, counter.nonce, counter.slot));
}

SharedStorage fromTuple(const py::tuple& values) {
  TORCH_CHECK(values.size() == 6, "accinte: a shared storage is 6 values, not ",
              values.size());
  SharedStorage shared;
  shared.device = values[0].cast<c10::DeviceIndex>();
  shared.memoryHandle = values[1].cast<std::string>();
  shared.offset = values[2].cast<size_t>();
  shared.nbytes = values[3].cast<size_t>();
  shared.eventHandle = values[4].cast<std::string>();
  const auto counter = values[5].cast<py::tuple>();
  TORCH_CHECK(counter.size() == 4, "accinte: a reference counter is 4 values");
  shared.counter.pid = counter[0].cast<pid_t>();
  shared.counter.fd = counter[1].cast<int>();
  shared.counter.nonce = counter[2].cast<uint64_t>();
  shared.counter.slot = counter[3].cast<int64_t>();
  return shared;
}

void bindChapter14(py::module_& m) {
  m.def(
      "_ipc_share",
      [](const at::Tensor& tensor) {
        return toTuple(shareStorage(tensor.storage()));
      },
      py::arg("tensor"),
      "Shares the storage of an accinte tensor; returns what a consumer "
      "needs to map it.");
  m.def(
      "_ipc_open",
      [](const py::tuple& shared, pid_t producer) {
        const auto values = fromTuple(shared);
        auto storage = openSharedStorage(values, producer);
        // NB: handed to Python as a byte tensor over the whole storage,
        // whose untyped_storage() is the storage itself.
        return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(
                                  storage.device()))
            .set_(storage, 0, {static_cast<int64_t>(values.nbytes)}, {1});
      },
      py::arg("shared"), py::arg("producer"),
      "Maps a storage another process shared; returns a byte tensor over "
      "it.");
  m.def(
      "_ipc_accept_again",
      [](const py::tuple& shared, pid_t producer) {
        acceptSharedStorageAgain(fromTuple(shared), producer);
      },
      py::arg("shared"), py::arg("producer"),
      "Takes a storage this process has already mapped: waits for the new "
      "send and releases its counter.");
  m.def(
      "_ipc_is_received",
      [](const at::Tensor& tensor) {
        return isReceivedStorage(tensor.storage());
      },
      py::arg("tensor"),
      "Whether a tensor's storage was received from another process.");
  m.def("_ipc_release_received_at_exit", &releaseReceivedStoragesAtExit,
        "Releases every storage received from another process, for an "
        "exiting consumer.");
  m.def("_ipc_collect", &collectSharedStorages,
        "Frees the shared storages every consumer released; returns how "
        "many sends a consumer still holds.");

  py::module_ testing = m.attr("_testing").cast<py::module_>();
  testing.def(
      "replace_storage_bytes",
      [](const at::Tensor& tensor) {
        // NB: what a C++ extension may do to a storage: new bytes from its
        // allocator, the old ones copied, swapped in with set_data_ptr.
        c10::StorageImpl* impl = tensor.storage().unsafeGetStorageImpl();
        TORCH_CHECK(impl->allocator() != nullptr,
                    "replace_storage_bytes: the storage has no allocator");
        const c10::DeviceGuard guard(impl->device());
        c10::DataPtr fresh = impl->allocator()->allocate(impl->nbytes());
        impl->allocator()->copy_data(fresh.get(), impl->data(), impl->nbytes());
        impl->set_data_ptr(std::move(fresh));
      },
      py::arg("tensor"),
      "Gives a tensor's storage new bytes (a copy of the old) through "
      "StorageImpl::set_data_ptr.");
}

const BindingRegistrar chapter14("14_ipc", &bindChapter14);

} // namespace
} // namespace accinte::python
