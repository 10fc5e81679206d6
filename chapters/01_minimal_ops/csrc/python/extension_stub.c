/*
 * The `torch_accinte._C` extension module. It holds no code of its own: every
 * stage links this one object against that stage's bindings library, whose
 * function builds the module.
 */
#include <Python.h>

PyObject* accinte_python_create_module(void);

PyMODINIT_FUNC PyInit__C(void) {
  return accinte_python_create_module();
}
