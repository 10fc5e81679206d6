// Chapter 05's additions to `torch_accinte._C`: the table of autocast
// policies, for the tests and the guide.

#include <01_minimal_ops/csrc/python/bindings.h>
#include <05_amp/csrc/autocast.h>

namespace accinte::python {
namespace {

namespace py = pybind11;

void bindChapter05(py::module_& m) {
  m.def(
      "_autocast_policies",
      [] {
        py::list result;
        for (const AutocastPolicy& entry : autocastPolicies()) {
          result.append(py::make_tuple(entry.op, entry.policy));
        }
        return result;
      },
      "(operator, policy) for every AutocastPrivateUse1 kernel, in "
      "registration order.");
}

const BindingRegistrar chapter05("05_amp", &bindChapter05);

} // namespace
} // namespace accinte::python
