"""Chapter 13: Inductor's backend for accinte.

Inductor generates code per device type from two registered parts:

- the **scheduling** (``AccinteScheduling``) writes the kernels. accinte
  reuses Inductor's C++ code generator, the CPU's vectorized C++ with OpenMP,
  for the kernels' bodies, and gives each kernel an entry point that takes
  its arguments packed, so that one launch can call any kernel;
- the **wrapper code generator** (``AccinteWrapperCodegen``) writes the
  Python code that allocates the buffers and calls the kernels: here each
  call is a launch on the device's current stream (``launch_kernel``).

A third registration, the **device op overrides**
(``AccinteDeviceOpOverrides``), gives the wrapper the lines that name the
device's stream, guard and synchronize. The chapter's plug-in registers all
three when Inductor is imported (``_chapters/13_compile.py``).
"""

import ctypes
from typing import Any

import torch
from torch._inductor import config
from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files
from torch._inductor.codegen.wrapper import (
    PythonWrapperCodegen,
    SubgraphPythonWrapperCodegen,
)
from torch._inductor.stream_constants import DEFAULT_STREAM_IDX
from torch._inductor.utils import Placeholder, get_fused_kernel_name
from torch._inductor.virtualized import V

from torch_accinte import _C


# LITERALINCLUDE START: CH13_OP_OVERRIDES
class AccinteDeviceOpOverrides(DeviceOpOverrides):
    """The lines of wrapper code that name accinte's stream, guard and
    synchronize."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_accinte._C import _current_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.accinte.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.accinte.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.accinte.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.accinte.current_stream()"
# LITERALINCLUDE END: CH13_OP_OVERRIDES


# LITERALINCLUDE START: CH13_ENTRY
# NB: the union matches KernelArgument in csrc/python/bindings.cpp. An entry
# point with one fixed signature lets one C++ launch call every kernel,
# whatever its parameters.
_ENTRY_POINT = """
union accinte_argument {{ const void* pointer; int64_t integer; double real; }};
extern "C" void kernel(const accinte_argument* arguments) {{
    {body}({arguments});
}}
"""

_BODY = "accinte_kernel_body"


def _unpack(index: int, cpp_type: str) -> str:
    """The C++ expression that reads argument `index` of type `cpp_type`."""
    if cpp_type.endswith("*"):
        return f"static_cast<{cpp_type}>(const_cast<void*>(arguments[{index}].pointer))"
    if cpp_type.replace("const ", "") in ("int64_t", "long", "bool", "int32_t"):
        return f"static_cast<{cpp_type}>(arguments[{index}].integer)"
    if cpp_type.replace("const ", "") in ("float", "double"):
        return f"static_cast<{cpp_type}>(arguments[{index}].real)"
    raise NotImplementedError(f"accinte: a compiled kernel parameter of type {cpp_type}")
# LITERALINCLUDE END: CH13_ENTRY


# LITERALINCLUDE START: CH13_SCHEDULING
class AccinteScheduling(CppScheduling):
    """Inductor's C++ scheduling, whose kernels accinte launches."""

    def define_kernel(self, src_code: str, nodes: Any, kernel_args: Any = None) -> str:
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        fused = (
            get_fused_kernel_name(nodes, config.cpp.descriptive_names)
            if config.cpp.descriptive_names
            else ""
        )
        kernel_name = "_".join(["cpp", fused, wrapper.next_kernel_suffix()])
        wrapper.src_to_kernel[src_code] = kernel_name

        args = self.kernel_group.args if kernel_args is None else kernel_args
        _, _, arg_types = args.cpp_argdefs()
        source = src_code.replace(str(Placeholder.KERNEL_NAME), _BODY)
        source = source.replace(str(Placeholder.DESCRIPTIVE_NAME), kernel_name)
        source = source.replace("#pragma CMT", "//")
        source += _ENTRY_POINT.format(  # LITERALINCLUDE EMPHASIZE
            body=_BODY,
            arguments=", ".join(_unpack(i, t) for i, t in enumerate(arg_types)),
        )
        wrapper.define_kernel(
            kernel_name, f"async_compile.cpp(r'''\n{source}\n''')", gpu=False
        )
        return kernel_name
# LITERALINCLUDE END: CH13_SCHEDULING


# LITERALINCLUDE START: CH13_CACHE_KEY
class AccinteCacheKey(CustomGraphModulePass):
    """A device pass that changes no graph: its uuid() puts this module's
    source in the key of Inductor's caches.

    NB: Inductor's FX graph cache keys hash Inductor's own sources, not a
    backend's, so a changed code generator would be handed code that the old
    one generated. Inductor adds the uuid of a device's custom pass to the
    key, and this one hashes the code generator.
    """

    def __call__(self, graph_module: torch.fx.GraphModule) -> None:
        pass

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))
# LITERALINCLUDE END: CH13_CACHE_KEY


# LITERALINCLUDE START: CH13_PY_LAUNCH
def launch_kernel(kernel: Any, name: str, stream: int, *args: Any) -> None:
    """Enqueues `kernel` (a compiled entry point) on the raw `stream`."""
    # NB: the address is converted once per kernel and kept on the ctypes
    # function; a cast at every launch would add about a microsecond to
    # each one.
    try:
        entry = kernel.accinte_entry
    except AttributeError:
        entry = kernel.accinte_entry = ctypes.cast(kernel, ctypes.c_void_p).value
    _C._launch_compiled_kernel(entry, name, stream, args)
# LITERALINCLUDE END: CH13_PY_LAUNCH


# LITERALINCLUDE START: CH13_WRAPPER
class _LaunchOnStream:
    """Writes each accinte kernel call as a launch on the current stream."""

    def _generate_kernel_call_helper(
        self, kernel_name: str, call_args: Any, *, device: Any = None,
        triton: bool = True, **kwargs: Any,
    ) -> None:
        device = device or V.graph.get_current_device_or_throw()
        if triton or device.type != "accinte":
            return super()._generate_kernel_call_helper(
                kernel_name, call_args, device=device, triton=triton, **kwargs
            )
        stream_idx = kwargs.get("current_stream_idx")
        if stream_idx is not None and stream_idx != DEFAULT_STREAM_IDX:
            # Inside a stream context of the compiled code: read the stream
            # at the launch, not the one the call started on.
            self.write_get_raw_stream_header()
            stream = "raw_stream"
            self.writeline(f"{stream} = get_raw_stream({device.index})")
        else:
            stream = self.write_get_raw_stream(device.index, kwargs.get("graph_name", ""))
        self.write_launch_import_once()
        args = ", ".join(str(arg) for arg in call_args)
        self.writeline(
            f"launch_kernel({kernel_name}, {kernel_name!r}, {stream}, {args})"
        )

    def write_launch_import_once(self) -> None:
        line = "from torch_accinte.inductor import launch_kernel"
        if not self.imports.contains(line):
            self.imports.writeline(line)


class AccinteWrapperCodegen(_LaunchOnStream, PythonWrapperCodegen):
    """The Python wrapper code of a graph on accinte."""

    @staticmethod
    def create(
        is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any,
        partition_signatures: Any = None,
    ) -> PythonWrapperCodegen:
        if is_subgraph:
            return AccinteSubgraphWrapperCodegen(
                subgraph_name, parent_wrapper, partition_signatures
            )
        return AccinteWrapperCodegen()


class AccinteSubgraphWrapperCodegen(_LaunchOnStream, SubgraphPythonWrapperCodegen):
    """The same for a subgraph (the branches of ``torch.cond``, ...)."""
# LITERALINCLUDE END: CH13_WRAPPER


# LITERALINCLUDE START: CH13_DEVICE_CHECKS
# NB: where Inductor's code depends on the kind of device, it asks the device
# type, and knows only its own. For any other type, get_current_backend()
# answers "triton", the scheduler's is_cpu() says no C++ code, and
# device_need_guard() says no device guard. accinte's kernels are C++ code,
# so the C++ generator was driven as if it were Triton's (a vectorized cast
# lost its dtype; a loop reindexing multiplied the C++ loop groups as
# numbers); and without a guard, the wrapper allocated the buffers of a graph
# on accinte:1 on the current device. Needed on 2.13 to 2.15;
# tests/ch13_compile checks that each release still needs it.
def _get_current_backend_for_accinte(get_current_backend: Any) -> Any:
    def get_current_backend_or_cpp(device_type: str | None = None) -> str:
        if (device_type or V.graph.get_current_device_or_throw().type) == "accinte":
            return "cpp"
        return get_current_backend(device_type)

    return get_current_backend_or_cpp


def _is_cpu_for_accinte(is_cpu: Any) -> Any:
    def is_cpu_or_accinte(node: Any) -> bool:
        device = node.get_device()
        return is_cpu(node) or (device is not None and device.type == "accinte")

    return is_cpu_or_accinte


def _device_need_guard_for_accinte(device_need_guard: Any) -> Any:
    def device_need_guard_or_accinte(device: str) -> bool:
        return device == "accinte" or device_need_guard(device)

    return device_need_guard_or_accinte


def fix_device_type_checks() -> None:
    """Makes Inductor's device-type checks answer for accinte as they
    should: C++ code, with a device guard."""
    import importlib

    from torch._inductor import scheduler, utils

    get_current_backend = _get_current_backend_for_accinte(utils.get_current_backend)
    for name in (
        "torch._inductor.utils",
        "torch._inductor.codegen.common",
        "torch._inductor.scheduler",
        "torch._inductor.kernel.mm_common",
    ):
        importlib.import_module(name).get_current_backend = get_current_backend
    scheduler.BaseSchedulerNode.is_cpu = _is_cpu_for_accinte(
        scheduler.BaseSchedulerNode.is_cpu
    )
    scheduler.device_need_guard = _device_need_guard_for_accinte(
        utils.device_need_guard
    )
# LITERALINCLUDE END: CH13_DEVICE_CHECKS


# LITERALINCLUDE START: CH13_INDUCTOR_REGISTER
def register() -> None:
    """Registers accinte's backend with Inductor; this module's import does."""
    from torch._inductor.codegen.common import (
        register_backend_for_device,
        register_device_op_overrides,
    )

    register_backend_for_device(
        "accinte",
        AccinteScheduling,
        AccinteWrapperCodegen,
        device_custom_pass=AccinteCacheKey(),
    )
    register_device_op_overrides("accinte", AccinteDeviceOpOverrides())
    fix_device_type_checks()
# LITERALINCLUDE END: CH13_INDUCTOR_REGISTER


register()
