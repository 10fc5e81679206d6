"""A small allocator library for the tests of ``AccintePluggableAllocator``:
device memory from the emulator's ``accinteMalloc``, with counters the tests
read through ctypes. Compiled with the system C compiler against the
emulator's header and the stage's ``libaccinte.so``."""

import ctypes
import pathlib
import subprocess

import torch_accinte

SOURCE = r"""
#include <accinte/runtime.h>
#include <sys/types.h>

static long alloc_calls, free_calls;
static ssize_t last_alloc_size, last_free_size;
static void* last_freed;
static int last_free_device = -1;

void* test_alloc(ssize_t size, int device, accinteStream_t stream) {
  (void)stream;
  int previous = 0;
  void* ptr = 0;
  accinteGetDevice(&previous);
  accinteSetDevice(device);
  if (accinteMalloc(&ptr, (size_t)size) != accinteSuccess) {
    ptr = 0;
  }
  accinteSetDevice(previous);
  ++alloc_calls;
  last_alloc_size = size;
  return ptr;
}

void test_free(void* ptr, ssize_t size, int device, accinteStream_t stream) {
  (void)stream;
  accinteFree(ptr);
  ++free_calls;
  last_free_size = size;
  last_freed = ptr;
  last_free_device = device;
}

/* Refuses every request: the allocator's out-of-memory path. */
void* test_alloc_none(ssize_t size, int device, accinteStream_t stream) {
  (void)size; (void)device; (void)stream;
  return 0;
}

long test_alloc_calls(void) { return alloc_calls; }
long test_free_calls(void) { return free_calls; }
ssize_t test_last_alloc_size(void) { return last_alloc_size; }
ssize_t test_last_free_size(void) { return last_free_size; }
void* test_last_freed(void) { return last_freed; }
int test_last_free_device(void) { return last_free_device; }
"""


def build(directory: pathlib.Path) -> pathlib.Path:
    """Compiles the library into ``directory``; returns its path."""
    root = pathlib.Path(__file__).resolve().parents[2]
    lib_dir = pathlib.Path(torch_accinte.__file__).resolve().parent / "lib"
    source = directory / "test_allocator.c"
    source.write_text(SOURCE)
    library = directory / "libtest_allocator.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source),
         f"-I{root / 'common' / 'include'}", f"-L{lib_dir}", "-laccinte",
         f"-Wl,-rpath,{lib_dir}"],
        check=True, capture_output=True, text=True)
    return library


class Counters:
    """The library's counters, read through its own handle."""

    def __init__(self, path: pathlib.Path):
        self._library = ctypes.CDLL(str(path))
        for name in ("test_alloc_calls", "test_free_calls"):
            getattr(self._library, name).restype = ctypes.c_long
        for name in ("test_last_alloc_size", "test_last_free_size"):
            getattr(self._library, name).restype = ctypes.c_ssize_t
        self._library.test_last_freed.restype = ctypes.c_void_p
        self._library.test_last_free_device.restype = ctypes.c_int

    def __getattr__(self, name):
        return getattr(self._library, f"test_{name}")()
