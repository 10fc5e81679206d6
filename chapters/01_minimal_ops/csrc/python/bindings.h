#pragma once

/**
 * @file
 * The `torch_accinte._C` module and how chapters add bindings to it.
 *
 * Each stage links the binding objects of its chapters into one library,
 * `libtorch_accinte_python.so`. A chapter adds its functions by defining a
 * static ::accinte::python::BindingRegistrar; the `_C` module calls every
 * registered function when Python imports it.
 */

#include <accinte/export.h>

#include <torch/csrc/utils/pybind.h>

namespace accinte::python {

/** Adds a chapter's functions to the `_C` module. */
using BindingFunction = void (*)(pybind11::module_& module);

/** Registers `function` from a static initializer (see the file comment). */
struct BindingRegistrar {
  /** Queues `function`; `chapter` orders the calls and names the chapter. */
  BindingRegistrar(const char* chapter, BindingFunction function);
};

} // namespace accinte::python

/** Creates `torch_accinte._C`; the extension module's `PyInit__C` calls it. */
extern "C" ACCINTE_EXPORT PyObject* accinte_python_create_module();
