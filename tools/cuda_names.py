"""Every public name of ``torch.cuda``, classified for ``torch.accinte``.

Device-agnostic code and code ported from CUDA calls ``torch.<device>.X``,
so ``torch.accinte`` mirrors the names of ``torch.cuda`` that any
accelerator can have. This module is the one list of them: each public name
that ``dir(torch.cuda)`` shows on a supported PyTorch release is in exactly
one of

- :data:`APPLICABLE`: a name any accelerator can have, with the chapter
  that adds (or is to add) its ``torch.accinte`` counterpart;
- :data:`CUDA_ONLY`: a name only CUDA can have, with the reason, one of
  :data:`REASONS`;
- :data:`NOT_API`: a name ``torch/cuda/__init__.py`` imports for its own
  use (``os``, ``Optional``, ...), which happens to show in ``dir``.

``tests/ch01_minimal_ops/test_cuda_names.py`` holds the
list to ``dir(torch.cuda)`` of the release under test (a name that a new
release adds fails until it is classified here) and to ``torch.accinte`` of
the stage under test; ``docs/output/cuda_names.py`` prints the table of the
Python API page from it.
"""

#: Why a name is CUDA's alone: the reason's key and its sentence on the page.
REASONS = {
    "graphs": "the annotations and exports of CUDA's own graph format "
              "(accinte's graphs are chapter 15's)",
    "nccl": "NCCL, NVIDIA's collective library (accinte's is chapter 11's "
            "`accl` backend of {py:mod}`torch.distributed`)",
    "nvtx": "NVTX ranges for NVIDIA's profilers",
    "profiler": "the CUDA profiler API (`cudaProfilerStart`)",
    "libraries": "handles of NVIDIA's libraries (cuBLAS, cuSOLVER)",
    "jiterator": "kernels compiled from C++ strings with NVRTC at run time",
    "green_contexts": "green contexts, a partition of an NVIDIA GPU's SMs",
    "tunable": "TunableOp, choosing among cuBLAS/hipBLASLt kernels",
    "gds": "GPUDirect Storage (cuFile)",
    "cudart": "bindings of the CUDA runtime and its error codes "
              "(accinte's errors are `torch.AcceleratorError`s)",
    "build": "the CUDA architectures and driver versions of a CUDA build",
    "number_formats": "number formats of NVIDIA tensor cores (TF32)",
    "legacy_types": "legacy typed tensor and storage classes "
                    "(`torch.cuda.FloatTensor`, ...), deprecated",
    "lazy_init": "the queue of calls made before CUDA initializes; "
                 "accinte's generators need no device, so nothing is queued",
}

#: Applicable name -> the chapter that adds its counterpart on
#: ``torch.accinte``.
APPLICABLE = {
    # Devices, streams and events: chapter 01.
    "AcceleratorError": "01_minimal_ops",
    "Event": "01_minimal_ops",
    "OutOfMemoryError": "01_minimal_ops",
    "Stream": "01_minimal_ops",
    "StreamContext": "01_minimal_ops",
    "can_device_access_peer": "01_minimal_ops",
    "current_device": "01_minimal_ops",
    "current_stream": "01_minimal_ops",
    "default_stream": "01_minimal_ops",
    "device": "01_minimal_ops",
    "device_count": "01_minimal_ops",
    "device_of": "01_minimal_ops",
    "get_device_capability": "01_minimal_ops",
    "get_device_name": "01_minimal_ops",
    "get_device_properties": "01_minimal_ops",
    "get_sync_debug_mode": "01_minimal_ops",
    "init": "01_minimal_ops",
    "is_available": "01_minimal_ops",
    "is_initialized": "01_minimal_ops",
    "set_device": "01_minimal_ops",
    "set_stream": "01_minimal_ops",
    "set_sync_debug_mode": "01_minimal_ops",
    "stream": "01_minimal_ops",
    "streams": "01_minimal_ops",
    "synchronize": "01_minimal_ops",
    # Device telemetry, measured and modelled by the emulator: chapter 01.
    "clock_rate": "01_minimal_ops",
    "memory_usage": "01_minimal_ops",
    "power_draw": "01_minimal_ops",
    "temperature": "01_minimal_ops",
    "utilization": "01_minimal_ops",
    # Mixed precision: chapter 05.
    "amp": "05_amp",
    "is_bf16_supported": "05_amp",
    # The caching allocators: chapter 07.
    "CUDAPluggableAllocator": "07_memory",
    "MemPool": "07_memory",
    "caching_allocator_alloc": "07_memory",
    "caching_allocator_delete": "07_memory",
    "caching_allocator_disabled": "07_memory",
    "caching_allocator_enable": "07_memory",
    "change_current_allocator": "07_memory",
    "device_memory_used": "07_memory",
    "empty_cache": "07_memory",
    "get_allocator_backend": "07_memory",
    "get_per_process_memory_fraction": "07_memory",
    "host_memory_stats": "07_memory",
    "host_memory_stats_as_nested_dict": "07_memory",
    "list_gpu_processes": "07_memory",
    "max_memory_allocated": "07_memory",
    "max_memory_cached": "07_memory",
    "max_memory_reserved": "07_memory",
    "mem_get_info": "07_memory",
    "memory": "07_memory",
    "memory_allocated": "07_memory",
    "memory_cached": "07_memory",
    "memory_reserved": "07_memory",
    "memory_snapshot": "07_memory",
    "memory_stats": "07_memory",
    "memory_stats_as_nested_dict": "07_memory",
    "memory_summary": "07_memory",
    "reset_accumulated_host_memory_stats": "07_memory",
    "reset_accumulated_memory_stats": "07_memory",
    "reset_max_memory_allocated": "07_memory",
    "reset_max_memory_cached": "07_memory",
    "reset_peak_host_memory_stats": "07_memory",
    "reset_peak_memory_stats": "07_memory",
    "set_per_process_memory_fraction": "07_memory",
    "use_mem_pool": "07_memory",
    # Random numbers: chapter 08.
    "default_generators": "08_generator",
    "get_rng_state": "08_generator",
    "get_rng_state_all": "08_generator",
    "initial_seed": "08_generator",
    "manual_seed": "08_generator",
    "manual_seed_all": "08_generator",
    "random": "08_generator",
    "seed": "08_generator",
    "seed_all": "08_generator",
    "set_rng_state": "08_generator",
    "set_rng_state_all": "08_generator",
    # Memory shared between processes: chapter 14.
    "ipc_collect": "14_ipc",
    # Graphs: chapter 15.
    "CUDAGraph": "15_graphs",
    "graph": "15_graphs",
    "graph_pool_handle": "15_graphs",
    "graphs": "15_graphs",
    "is_current_stream_capturing": "15_graphs",
    "make_graphed_callables": "15_graphs",
}

#: Applicable names whose ``torch.accinte`` counterpart is named after the
#: device rather than after CUDA.
RENAMED = {
    "CUDAPluggableAllocator": "AccintePluggableAllocator",
    "CUDAGraph": "AccinteGraph",
}


def counterpart(name: str) -> str:
    """The name of ``torch.cuda.NAME``'s counterpart on ``torch.accinte``."""
    return RENAMED.get(name, name)


#: CUDA-only name -> its reason, a key of :data:`REASONS`.
CUDA_ONLY = {
    "export_dot": "graphs",
    "export_graph_data": "graphs",
    "graph_annotations": "graphs",
    "comm": "nccl",
    "nccl": "nccl",
    "nvtx": "nvtx",
    "profiler": "profiler",
    "current_blas_handle": "libraries",
    "current_solver_handle": "libraries",
    "jiterator": "jiterator",
    "GreenContext": "green_contexts",
    "green_contexts": "green_contexts",
    "tunable": "tunable",
    "gds": "gds",
    "CudaError": "cudart",
    "ExternalStream": "cudart",
    "check_error": "cudart",
    "cudaStatus": "cudart",
    "cudart": "cudart",
    "get_stream_from_external": "cudart",
    "DEVICE_REQUIREMENT": "build",
    "DEVICE_REQUIREMENT_POST_JETSON_SBSA_UNIFICATION": "build",
    "PYTORCH_RELEASES_CODE_CC": "build",
    "get_arch_list": "build",
    "get_gencode_flags": "build",
    "has_half": "build",
    "has_magma": "build",
    "is_tf32_supported": "number_formats",
    "sparse": "legacy_types",
    "DeferredCudaCallError": "lazy_init",
    **{f"{kind}{suffix}": "legacy_types"
       for kind in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float",
                    "Half", "Int", "Long", "Short")
       for suffix in ("Storage", "Tensor")},
    "ComplexDoubleStorage": "legacy_types",
    "ComplexFloatStorage": "legacy_types",
}

#: Names ``torch/cuda/__init__.py`` imports or defines for its own use.
NOT_API = frozenset({
    "Any", "Callable", "Device", "Enum", "NewType", "Optional",
    "TYPE_CHECKING", "auto", "cache", "cast", "classproperty", "glob",
    "importlib", "lru_cache", "os", "platform", "threading", "torch",
    "traceback", "warnings",
})


def public_names(module) -> set:
    """The names of ``dir(module)`` that do not start with an underscore."""
    return {name for name in dir(module) if not name.startswith("_")}


def unclassified(names) -> list:
    """The names of ``names`` that this module does not classify, sorted."""
    known = APPLICABLE.keys() | CUDA_ONLY.keys() | NOT_API
    return sorted(set(names) - known)


def _check() -> None:
    """The lists are consistent: no name twice, every reason known."""
    groups = [set(APPLICABLE), set(CUDA_ONLY), set(NOT_API)]
    for i, first in enumerate(groups):
        for second in groups[i + 1:]:
            assert not first & second, f"classified twice: {sorted(first & second)}"
    assert RENAMED.keys() <= APPLICABLE.keys(), sorted(RENAMED.keys() - APPLICABLE.keys())
    assert set(CUDA_ONLY.values()) <= REASONS.keys()


_check()
