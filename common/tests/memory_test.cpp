// Device memory, pinned host memory and pointer attributes.

#include "test_util.h"

#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::runScenario;

namespace {

TEST(Memory, MallocAndFree) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMalloc(&ptr, 1000));
  ASSERT_NE(ptr, nullptr);
  size_t free = 0;
  size_t total = 0;
  ASSERT_OK(accinteMemGetInfo(&free, &total));
  EXPECT_EQ(total, size_t{8} << 30);
  EXPECT_EQ(total - free, 1000u); // Requested bytes are accounted.
  ASSERT_OK(accinteFree(ptr));
  ASSERT_OK(accinteMemGetInfo(&free, &total));
  EXPECT_EQ(free, total);
  EXPECT_EQ(accinteMemGetInfo(nullptr, &total), accinteErrorInvalidValue);
  EXPECT_EQ(accinteMemGetInfo(&free, nullptr), accinteErrorInvalidValue);
}

TEST(Memory, ZeroBytesGivesNullAndNullFreeIsANoOp) {
  void* ptr = reinterpret_cast<void*>(0x1234);
  ASSERT_OK(accinteMalloc(&ptr, 0));
  EXPECT_EQ(ptr, nullptr);
  EXPECT_OK(accinteFree(nullptr));
  EXPECT_EQ(accinteMalloc(nullptr, 16), accinteErrorInvalidValue);
}

TEST(Memory, AllocationsBelongToTheCurrentDevice) {
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  size_t free = 0;
  size_t total = 0;
  ASSERT_OK(accinteMemGetInfo(&free, &total));
  EXPECT_EQ(total - free, 64u);
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(accinteMemGetInfo(&free, &total));
  EXPECT_EQ(free, total);
  accintePointerAttributes attributes;
  ASSERT_OK(accintePointerGetAttributes(&attributes, buffer.ptr()));
  EXPECT_EQ(attributes.device, 1);
}

TEST(Memory, FreeRejectsUnknownInteriorAndDoubleFreedPointers) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMalloc(&ptr, 256));
  EXPECT_EQ(accinteFree(static_cast<char*>(ptr) + 8),
            accinteErrorInvalidDevicePointer);
  int local = 0;
  EXPECT_EQ(accinteFree(&local), accinteErrorInvalidDevicePointer);
  void* pinned = nullptr;
  ASSERT_OK(accinteMallocHost(&pinned, 64));
  EXPECT_EQ(accinteFree(pinned), accinteErrorInvalidDevicePointer);
  ASSERT_OK(accinteFreeHost(pinned));
  ASSERT_OK(accinteFree(ptr));
  EXPECT_EQ(accinteFree(ptr), accinteErrorInvalidDevicePointer);
}

TEST(Memory, FreeWaitsForWorkUsingTheAllocation) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMalloc(&ptr, sizeof(int)));
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  auto* value = static_cast<int*>(ptr);
  bool finished = false;
  // The kernel would fault if accinteFree unmapped the memory under it.
  ASSERT_OK(accinte::launchKernel(stream, {ptr}, [value, &finished] {
    for (int i = 0; i < 100000; ++i) {
      *static_cast<volatile int*>(value) = i;
    }
    finished = true;
  }));
  ASSERT_OK(accinteFree(ptr));
  EXPECT_TRUE(finished);
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Memory, PointerAttributesOfInteriorPointers) {
  DeviceBuffer buffer(4096 + 100);
  ASSERT_OK(buffer.status());
  auto* base = buffer.as<char>();
  accintePointerAttributes attributes;
  for (size_t offset : {size_t{0}, size_t{1}, size_t{4096}, size_t{4195}}) {
    ASSERT_OK(accintePointerGetAttributes(&attributes, base + offset));
    EXPECT_EQ(attributes.type, accinteMemoryTypeDevice);
    EXPECT_EQ(attributes.device, 0);
    EXPECT_EQ(attributes.base, base);
    EXPECT_EQ(attributes.size, 4196u);
  }
  // One past the requested end is not part of the allocation.
  ASSERT_OK(accintePointerGetAttributes(&attributes, base + 4196));
  EXPECT_EQ(attributes.type, accinteMemoryTypeUnregistered);
  EXPECT_EQ(attributes.device, -1);
  EXPECT_EQ(attributes.base, nullptr);
  EXPECT_EQ(attributes.size, 0u);

  int local = 0;
  ASSERT_OK(accintePointerGetAttributes(&attributes, &local));
  EXPECT_EQ(attributes.type, accinteMemoryTypeUnregistered);
  ASSERT_OK(accintePointerGetAttributes(&attributes, nullptr));
  EXPECT_EQ(attributes.type, accinteMemoryTypeUnregistered);
  EXPECT_EQ(accintePointerGetAttributes(nullptr, base),
            accinteErrorInvalidValue);
}

TEST(Memory, PointerAttributesForgetFreedMemory) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMalloc(&ptr, 64));
  ASSERT_OK(accinteFree(ptr));
  accintePointerAttributes attributes;
  ASSERT_OK(accintePointerGetAttributes(&attributes, ptr));
  EXPECT_EQ(attributes.type, accinteMemoryTypeUnregistered);
}

TEST(PinnedMemory, IsOrdinaryHostMemoryKnownToTheRuntime) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMallocHost(&ptr, 10000));
  ASSERT_NE(ptr, nullptr);
  std::memset(ptr, 0x5a, 10000); // Readable and writable from the host.
  EXPECT_EQ(static_cast<unsigned char*>(ptr)[9999], 0x5a);

  int pinned = -1;
  ASSERT_OK(accinteHostIsPinned(static_cast<char*>(ptr) + 5000, &pinned));
  EXPECT_EQ(pinned, 1);
  int local = 0;
  ASSERT_OK(accinteHostIsPinned(&local, &pinned));
  EXPECT_EQ(pinned, 0);
  EXPECT_EQ(accinteHostIsPinned(ptr, nullptr), accinteErrorInvalidValue);

  accintePointerAttributes attributes;
  ASSERT_OK(
      accintePointerGetAttributes(&attributes, static_cast<char*>(ptr) + 123));
  EXPECT_EQ(attributes.type, accinteMemoryTypeHost);
  EXPECT_EQ(attributes.device, -1);
  EXPECT_EQ(attributes.base, ptr);
  EXPECT_EQ(attributes.size, 10000u);

  EXPECT_EQ(accinteFreeHost(static_cast<char*>(ptr) + 1),
            accinteErrorInvalidHostPointer);
  ASSERT_OK(accinteFreeHost(ptr));
  ASSERT_OK(accinteHostIsPinned(ptr, &pinned));
  EXPECT_EQ(pinned, 0);
  EXPECT_EQ(accinteFreeHost(ptr), accinteErrorInvalidHostPointer);
}

TEST(PinnedMemory, ZeroBytesNullAndDeviceMemory) {
  void* ptr = reinterpret_cast<void*>(0x1234);
  ASSERT_OK(accinteMallocHost(&ptr, 0));
  EXPECT_EQ(ptr, nullptr);
  EXPECT_OK(accinteFreeHost(nullptr));
  EXPECT_EQ(accinteMallocHost(nullptr, 8), accinteErrorInvalidValue);
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  EXPECT_EQ(accinteFreeHost(buffer.ptr()), accinteErrorInvalidHostPointer);
}

// A stray host dereference of device memory faults, as on a real device,
// including after the runtime opened and closed the memory for a copy.
TEST(MemoryDeathTest, HostDereferenceOfDeviceMemoryFaults) {
  void* ptr = nullptr;
  ASSERT_OK(accinteMalloc(&ptr, 64));
  ASSERT_OK(accinteMemsetAsync(ptr, 1, 64, nullptr));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  auto* bytes = static_cast<volatile unsigned char*>(ptr);
#ifdef ACCINTE_TEST_SANITIZED
  // The sanitizer (ASan or TSan) catches the SIGSEGV, reports it and exits.
  EXPECT_DEATH((void)bytes[0], "SEGV");
#else
  EXPECT_EXIT((void)bytes[0], ::testing::KilledBySignal(SIGSEGV), "");
#endif
  ASSERT_OK(accinteFree(ptr));
}

ACCINTE_SCENARIO(OutOfMemory) {
  constexpr size_t kCapacity = 1 << 20;
  void* whole = nullptr;
  void* more = nullptr;
  SCENARIO_CHECK(accinteMalloc(&whole, kCapacity) == accinteSuccess);
  SCENARIO_CHECK(accinteMalloc(&more, 1) == accinteErrorMemoryAllocation);
  SCENARIO_CHECK(more == nullptr);
  size_t free = 1;
  size_t total = 0;
  SCENARIO_CHECK(accinteMemGetInfo(&free, &total) == accinteSuccess);
  SCENARIO_CHECK(free == 0 && total == kCapacity);
  // The other device has its own capacity.
  SCENARIO_CHECK(accinteSetDevice(1) == accinteSuccess);
  SCENARIO_CHECK(accinteMalloc(&more, kCapacity) == accinteSuccess);
  SCENARIO_CHECK(accinteFree(more) == accinteSuccess);
  SCENARIO_CHECK(accinteSetDevice(0) == accinteSuccess);
  // Freeing gives back exactly what was taken, every time.
  for (int round = 0; round < 3; ++round) {
    SCENARIO_CHECK(accinteFree(whole) == accinteSuccess);
    SCENARIO_CHECK(accinteMalloc(&whole, kCapacity) == accinteSuccess);
  }
  SCENARIO_CHECK(accinteFree(whole) == accinteSuccess);
  // Requested bytes, not pages, are accounted.
  void* almost = nullptr;
  void* last = nullptr;
  SCENARIO_CHECK(accinteMalloc(&almost, kCapacity - 1) == accinteSuccess);
  SCENARIO_CHECK(accinteMalloc(&last, 1) == accinteSuccess);
  SCENARIO_CHECK(accinteMalloc(&more, 1) == accinteErrorMemoryAllocation);
  SCENARIO_CHECK(accinteFree(almost) == accinteSuccess);
  SCENARIO_CHECK(accinteFree(last) == accinteSuccess);
  // A request no mapping could hold fails the same way.
  SCENARIO_CHECK(accinteMalloc(&more, SIZE_MAX) ==
                 accinteErrorMemoryAllocation);
  return 0;
}

TEST(Memory, AllocatingPastCapacityFailsAndFreeingRestoresIt) {
  EXPECT_EQ(runScenario("OutOfMemory", {"ACCINTE_DEVICE_MEMORY=1M"}), 0);
}

/** The AnonHugePages of the mapping that starts at `address`, in kB, from
 * /proc/self/smaps; -1 if no mapping starts there. */
long hugePagesOfMappingAt(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inMapping = false;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0;
    std::istringstream fields(line);
    // A mapping's first line starts "start-end perms ..."; its fields'
    // lines start with a name and a colon.
    if ((fields >> std::hex >> start) && fields.peek() == '-') {
      inMapping = start == reinterpret_cast<uintptr_t>(address);
    } else if (inMapping && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(line.find(':') + 1));
    }
  }
  return -1;
}

TEST(Memory, LargeAllocationsAskForHugePages) {
  // NB: opening and closing an allocation rewrites one page-table entry per
  // page; huge pages make a large allocation's open and close cheap. Red if
  // the runtime stops asking for them (madvise) on a kernel that has them.
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(setting, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos) {
    GTEST_SKIP() << "no transparent huge pages on this kernel";
  }
  const size_t bytes = size_t{8} << 20;
  DeviceBuffer buffer(bytes);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteMemsetAsync(buffer.ptr(), 1, bytes, nullptr));
  ASSERT_OK(accinteDeviceSynchronize());
  EXPECT_GT(hugePagesOfMappingAt(buffer.ptr()), 0);
}

} // namespace
