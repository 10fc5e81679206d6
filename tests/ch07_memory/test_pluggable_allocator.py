"""Chapter 07's ``change_current_allocator`` with an
``AccintePluggableAllocator``, held to what ``torch.cuda`` documents for
``CUDAPluggableAllocator``. The switch is once per process and only before
the first allocation, so each case runs in a fresh interpreter."""

import json
import pathlib

import pytest
import torch

from ch07_memory import allocator_library
from conftest import run_python


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return allocator_library.build(tmp_path_factory.mktemp("allocator"))


def run(code, library):
    tests = pathlib.Path(__file__).resolve().parents[1]
    result = run_python(code, env={"TEST_ALLOCATOR": str(library), "TESTS_DIR": str(tests)})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_tensors_come_from_the_library_and_go_back_to_it(library):
    out = run("""
        import json, os, sys, torch, torch_accinte
        sys.path.insert(0, os.environ["TESTS_DIR"])
        from ch07_memory.allocator_library import Counters
        path = os.environ["TEST_ALLOCATOR"]
        counters = Counters(path)
        allocator = torch.accinte.memory.AccintePluggableAllocator(
            path, "test_alloc", "test_free")
        torch.accinte.memory.change_current_allocator(allocator)
        out = {"backend": torch.accinte.get_allocator_backend()}
        x = torch.arange(1000, dtype=torch.float32, device="accinte")
        out["alloc"] = [counters.alloc_calls, counters.last_alloc_size]
        y = (x * 2).cpu()
        out["values"] = bool(torch.equal(y, torch.arange(1000, dtype=torch.float32) * 2))
        with torch.accinte.device(1):
            on_1 = torch.ones(3, device="accinte")
        out["on_1"] = [on_1.device.index, on_1.sum().item()]
        frees = counters.free_calls
        ptr = x.data_ptr()
        del x
        out["free"] = [counters.free_calls - frees, counters.last_free_size,
                       counters.last_freed == ptr]
        del on_1
        out["free_device"] = counters.last_free_device
        try:
            torch.accinte.memory_stats()
        except RuntimeError as error:
            out["stats"] = str(error)
        try:
            with torch.accinte.use_mem_pool(torch.accinte.MemPool()):
                pass
        except RuntimeError as error:
            out["pool"] = str(error)
        torch.accinte.empty_cache()
        print(json.dumps(out))
    """, library)
    assert out["backend"] == "pluggable"
    # One call per tensor, of exactly the tensor's bytes: no cache.
    assert out["alloc"] == [1, 4000]
    assert out["values"]
    assert out["on_1"] == [1, 3.0]
    assert out["free"] == [1, 4000, True]
    assert out["free_device"] == 1
    assert "keeps no memory statistics" in out["stats"]
    assert "change_current_allocator replaced it" in out["pool"]


def test_an_allocator_out_of_memory_raises(library):
    out = run("""
        import json, os, torch, torch_accinte
        allocator = torch.accinte.memory.AccintePluggableAllocator(
            os.environ["TEST_ALLOCATOR"], "test_alloc_none", "test_free")
        torch.accinte.memory.change_current_allocator(allocator)
        try:
            torch.empty(10, device="accinte")
        except torch.OutOfMemoryError as error:
            print(json.dumps(str(error)))
    """, library)
    assert "returned NULL for 40 bytes on device 0" in out


def test_change_after_the_first_allocation_raises(library):
    # NB: in this process the caching allocator has allocated.
    keep = torch.empty(1, device="accinte")
    allocator = torch.accinte.memory.AccintePluggableAllocator(
        str(library), "test_alloc", "test_free")
    with pytest.raises(RuntimeError, match="only be changed before the first allocation"):
        torch.accinte.memory.change_current_allocator(allocator)
    assert torch.accinte.get_allocator_backend() == "native"
    del keep


def test_bad_arguments_raise(library):
    with pytest.raises(AttributeError, match="no_such_function"):
        torch.accinte.memory.AccintePluggableAllocator(
            str(library), "no_such_function", "test_free")
    with pytest.raises(OSError):
        torch.accinte.memory.AccintePluggableAllocator(
            str(library) + ".missing", "test_alloc", "test_free")
    with pytest.raises(TypeError, match="AccintePluggableAllocator"):
        torch.accinte.memory.change_current_allocator("test_alloc")
