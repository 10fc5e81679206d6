// Copies and memsets: every direction, their checks, and their ordering.

#include "test_util.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::Gate;

namespace {

std::vector<int> iota(size_t count, int first) {
  std::vector<int> values(count);
  std::iota(values.begin(), values.end(), first);
  return values;
}

TEST(Copy, HostToDeviceToHostRoundTrip) {
  const auto input = iota(1000, 7);
  std::vector<int> output(1000, 0);
  const size_t bytes = input.size() * sizeof(int);
  DeviceBuffer buffer(bytes);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteMemcpy(buffer.ptr(), input.data(), bytes,
                          accinteMemcpyHostToDevice));
  ASSERT_OK(accinteMemcpy(output.data(), buffer.ptr(), bytes,
                          accinteMemcpyDeviceToHost));
  EXPECT_EQ(output, input);
}

TEST(Copy, HostToHostAndDefaultKind) {
  const auto input = iota(64, 1);
  std::vector<int> output(64, 0);
  const size_t bytes = input.size() * sizeof(int);
  ASSERT_OK(accinteMemcpy(output.data(), input.data(), bytes,
                          accinteMemcpyHostToHost));
  EXPECT_EQ(output, input);

  DeviceBuffer buffer(bytes);
  ASSERT_OK(buffer.status());
  std::vector<int> back(64, 0);
  ASSERT_OK(
      accinteMemcpy(buffer.ptr(), input.data(), bytes, accinteMemcpyDefault));
  ASSERT_OK(
      accinteMemcpy(back.data(), buffer.ptr(), bytes, accinteMemcpyDefault));
  EXPECT_EQ(back, input);
}

TEST(Copy, DeviceToDeviceOnOneDeviceAndAcrossDevices) {
  const auto input = iota(256, 100);
  const size_t bytes = input.size() * sizeof(int);
  DeviceBuffer first(bytes);
  DeviceBuffer second(bytes);
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer other(bytes);
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(first.status());
  ASSERT_OK(second.status());
  ASSERT_OK(other.status());

  ASSERT_OK(accinteMemcpy(first.ptr(), input.data(), bytes,
                          accinteMemcpyHostToDevice));
  ASSERT_OK(accinteMemcpy(second.ptr(), first.ptr(), bytes,
                          accinteMemcpyDeviceToDevice));
  ASSERT_OK(accinteMemcpy(other.ptr(), second.ptr(), bytes,
                          accinteMemcpyDeviceToDevice));
  std::vector<int> output(input.size(), 0);
  ASSERT_OK(accinteMemcpy(output.data(), other.ptr(), bytes,
                          accinteMemcpyDeviceToHost));
  EXPECT_EQ(output, input);

  // Asynchronously, on a stream of the destination's device.
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteMemsetAsync(first.ptr(), 0, bytes, stream));
  ASSERT_OK(accinteMemcpyAsync(first.ptr(), other.ptr(), bytes,
                               accinteMemcpyDeviceToDevice, stream));
  std::vector<int> again(input.size(), 0);
  ASSERT_OK(accinteMemcpyAsync(again.data(), first.ptr(), bytes,
                               accinteMemcpyDeviceToHost, stream));
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_EQ(again, input);
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Copy, SynchronousCrossDeviceCopyWaitsForTheSourceDevice) {
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer source(sizeof(int));
  ASSERT_OK(source.status());
  Gate gate;
  ASSERT_OK(gate.block(nullptr)); // Device 1's default stream.
  auto* value = source.as<int>();
  ASSERT_OK(accinte::launchKernel(nullptr, {value}, [value] { *value = 42; }));
  ASSERT_OK(accinteSetDevice(0));
  DeviceBuffer destination(sizeof(int));
  ASSERT_OK(destination.status());
  // Release from another thread once the copy must be waiting.
  std::thread releaser([&gate] { gate.release(); });
  ASSERT_OK(accinteMemcpy(destination.ptr(), source.ptr(), sizeof(int),
                          accinteMemcpyDeviceToDevice));
  releaser.join();
  int result = 0;
  ASSERT_OK(accinteMemcpy(&result, destination.ptr(), sizeof(int),
                          accinteMemcpyDeviceToHost));
  EXPECT_EQ(result, 42);
}

TEST(Copy, PinnedMemoryIsHostMemory) {
  void* pinned = nullptr;
  ASSERT_OK(accinteMallocHost(&pinned, 64));
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  std::memset(pinned, 9, 64);
  ASSERT_OK(accinteMemcpyAsync(buffer.ptr(), pinned, 64,
                               accinteMemcpyHostToDevice, nullptr));
  EXPECT_EQ(accinteMemcpyAsync(pinned, buffer.ptr(), 64,
                               accinteMemcpyDeviceToDevice, nullptr),
            accinteErrorInvalidMemcpyDirection);
  ASSERT_OK(accinteMemsetAsync(buffer.ptr(), 3, 32, nullptr));
  ASSERT_OK(accinteMemcpyAsync(pinned, buffer.ptr(), 64, accinteMemcpyDefault,
                               nullptr));
  ASSERT_OK(accinteStreamSynchronize(nullptr));
  auto* bytes = static_cast<unsigned char*>(pinned);
  EXPECT_EQ(bytes[0], 3);
  EXPECT_EQ(bytes[31], 3);
  EXPECT_EQ(bytes[32], 9);
  ASSERT_OK(accinteFreeHost(pinned));
}

TEST(Copy, KindMustMatchThePointers) {
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  char host[64] = {};
  void* device = buffer.ptr();
  EXPECT_EQ(accinteMemcpy(host, host + 32, 8, accinteMemcpyHostToDevice),
            accinteErrorInvalidMemcpyDirection);
  EXPECT_EQ(accinteMemcpy(device, device, 8, accinteMemcpyHostToDevice),
            accinteErrorInvalidMemcpyDirection);
  EXPECT_EQ(accinteMemcpy(host, host, 8, accinteMemcpyDeviceToHost),
            accinteErrorInvalidMemcpyDirection);
  EXPECT_EQ(accinteMemcpy(device, host, 8, accinteMemcpyDeviceToHost),
            accinteErrorInvalidMemcpyDirection);
  EXPECT_EQ(accinteMemcpy(device, host, 8, accinteMemcpyDeviceToDevice),
            accinteErrorInvalidMemcpyDirection);
  EXPECT_EQ(accinteMemcpy(host, device, 8, accinteMemcpyHostToHost),
            accinteErrorInvalidMemcpyDirection);
  EXPECT_EQ(
      accinteMemcpyAsync(host, host, 8, accinteMemcpyDeviceToDevice, nullptr),
      accinteErrorInvalidMemcpyDirection);
  // A kind outside the enum, as a C caller could pass it.
  using CMemcpy = accinteError_t (*)(void*, const void*, size_t, int);
  auto memcpyWithIntKind = reinterpret_cast<CMemcpy>(&accinteMemcpy);
  EXPECT_EQ(memcpyWithIntKind(host, host + 32, 8, 99),
            accinteErrorInvalidValue);
}

TEST(Copy, DeviceRangeMustLieInsideOneAllocation) {
  DeviceBuffer buffer(100);
  ASSERT_OK(buffer.status());
  char host[200] = {};
  auto* device = buffer.as<char>();
  EXPECT_OK(accinteMemcpy(device + 90, host, 10, accinteMemcpyHostToDevice));
  EXPECT_EQ(accinteMemcpy(device + 90, host, 11, accinteMemcpyHostToDevice),
            accinteErrorInvalidMemoryRange);
  EXPECT_EQ(accinteMemcpy(host, device, 101, accinteMemcpyDeviceToHost),
            accinteErrorInvalidMemoryRange);
  EXPECT_EQ(accinteMemcpyAsync(host, device + 1, 100, accinteMemcpyDeviceToHost,
                               nullptr),
            accinteErrorInvalidMemoryRange);
  EXPECT_EQ(accinteMemsetAsync(device + 50, 0, 51, nullptr),
            accinteErrorInvalidMemoryRange);
  EXPECT_EQ(accinteMemcpy(host, device, SIZE_MAX, accinteMemcpyDeviceToHost),
            accinteErrorInvalidMemoryRange);
}

TEST(Copy, NullPointersZeroCountsAndBadHandles) {
  DeviceBuffer buffer(16);
  ASSERT_OK(buffer.status());
  char host[16] = {};
  EXPECT_EQ(accinteMemcpy(nullptr, host, 4, accinteMemcpyHostToHost),
            accinteErrorInvalidValue);
  EXPECT_EQ(accinteMemcpy(host, nullptr, 4, accinteMemcpyDefault),
            accinteErrorInvalidValue);
  EXPECT_OK(accinteMemcpy(nullptr, nullptr, 0, accinteMemcpyDefault));
  EXPECT_OK(
      accinteMemcpyAsync(nullptr, nullptr, 0, accinteMemcpyDefault, nullptr));
  EXPECT_EQ(accinteMemsetAsync(nullptr, 0, 4, nullptr),
            accinteErrorInvalidValue);
  EXPECT_OK(accinteMemsetAsync(nullptr, 0, 0, nullptr));
  EXPECT_EQ(accinteMemsetAsync(host, 0, 4, nullptr),
            accinteErrorInvalidDevicePointer);
  auto bogus = reinterpret_cast<accinteStream_t>(uintptr_t{0xdeadbeef});
  EXPECT_EQ(accinteMemcpyAsync(buffer.ptr(), host, 4, accinteMemcpyHostToDevice,
                               bogus),
            accinteErrorInvalidResourceHandle);
  EXPECT_EQ(accinteMemsetAsync(buffer.ptr(), 0, 4, bogus),
            accinteErrorInvalidResourceHandle);
}

TEST(Copy, AsyncCopiesRunInStreamOrderAfterKernels) {
  // NB: declared so that, should an assertion fail, the gate is released and
  // the buffer's free drains the device before `output` goes away.
  std::vector<int> output(4, -1);
  DeviceBuffer buffer(sizeof(int) * 4);
  Gate gate;
  ASSERT_OK(buffer.status());
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  auto* values = buffer.as<int>();
  ASSERT_OK(gate.block(stream));
  ASSERT_OK(accinteMemsetAsync(values, 0, sizeof(int) * 4, stream));
  ASSERT_OK(accinte::launchKernel(stream, {values}, [values] {
    for (int i = 0; i < 4; ++i) {
      values[i] += i * 10;
    }
  }));
  ASSERT_OK(accinteMemcpyAsync(output.data(), values, sizeof(int) * 4,
                               accinteMemcpyDeviceToHost, stream));
  EXPECT_EQ(accinteStreamQuery(stream), accinteErrorNotReady);
  EXPECT_EQ(output, std::vector<int>(4, -1)); // Nothing ran yet.
  gate.release();
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_EQ(output, (std::vector<int>{0, 10, 20, 30}));
  ASSERT_OK(accinteStreamDestroy(stream));
}

TEST(Copy, SynchronousCopyIsOrderedAfterTheDefaultStream) {
  DeviceBuffer buffer(sizeof(int));
  ASSERT_OK(buffer.status());
  auto* value = buffer.as<int>();
  ASSERT_OK(accinteMemsetAsync(value, 0, sizeof(int), nullptr));
  ASSERT_OK(accinte::launchKernel(nullptr, {value}, [value] { *value = 7; }));
  int result = 0;
  ASSERT_OK(
      accinteMemcpy(&result, value, sizeof(int), accinteMemcpyDeviceToHost));
  EXPECT_EQ(result, 7);
}

TEST(Copy, CopyEnqueuedBeforeAFreeOnAnotherDeviceFailsCleanly) {
  // An allocation freed while a copy that names it is still queued (a use
  // after free by the caller): the copy must fail, not touch stale memory.
  ASSERT_OK(accinteSetDevice(1));
  void* source = nullptr;
  ASSERT_OK(accinteMalloc(&source, 64));
  ASSERT_OK(accinteSetDevice(0));
  DeviceBuffer destination(64);
  ASSERT_OK(destination.status());
  Gate gate;
  ASSERT_OK(gate.block(nullptr));
  ASSERT_OK(accinteMemcpyAsync(destination.ptr(), source, 64,
                               accinteMemcpyDeviceToDevice, nullptr));
  ASSERT_OK(accinteFree(source)); // Drains device 1 only.
  gate.release();
  EXPECT_EQ(accinteStreamSynchronize(nullptr), accinteErrorLaunchFailure);
  EXPECT_OK(accinteStreamSynchronize(nullptr));
}

// A byte pattern with no period that divides a copy's parts, so that a part
// copied to the wrong offset shows.
std::vector<unsigned char> pattern(size_t count, unsigned seed) {
  std::vector<unsigned char> bytes(count);
  for (size_t i = 0; i < count; ++i) {
    bytes[i] = static_cast<unsigned char>((i * 131 + seed) % 251);
  }
  return bytes;
}

TEST(Copy, LargeCopiesInEveryDirectionAreExact) {
  // Large enough to be split among threads, of an odd size, and at odd
  // offsets, so that the parts' boundaries fall anywhere.
  const size_t bytes = (size_t{12} << 20) + 13;
  const auto input = pattern(bytes, 7);
  DeviceBuffer first(bytes + 1);
  ASSERT_OK(accinteSetDevice(1));
  DeviceBuffer other(bytes + 3);
  ASSERT_OK(accinteSetDevice(0));
  DeviceBuffer second(bytes);
  ASSERT_OK(first.status());
  ASSERT_OK(other.status());
  ASSERT_OK(second.status());
  void* pinned = nullptr;
  ASSERT_OK(accinteMallocHost(&pinned, bytes));
  std::memcpy(pinned, input.data(), bytes);
  auto* firstAtOne = static_cast<char*>(first.ptr()) + 1;
  auto* otherAtThree = static_cast<char*>(other.ptr()) + 3;

  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinteMemcpyAsync(firstAtOne, pinned, bytes,
                               accinteMemcpyHostToDevice, stream));
  ASSERT_OK(accinteMemcpyAsync(second.ptr(), firstAtOne, bytes,
                               accinteMemcpyDeviceToDevice, stream));
  ASSERT_OK(accinteStreamSynchronize(stream));
  ASSERT_OK(accinteMemcpy(otherAtThree, second.ptr(), bytes,
                          accinteMemcpyDeviceToDevice));
  std::memset(pinned, 0, bytes);
  ASSERT_OK(accinteMemcpyAsync(pinned, otherAtThree, bytes,
                               accinteMemcpyDeviceToHost, stream));
  ASSERT_OK(accinteStreamSynchronize(stream));
  EXPECT_EQ(std::memcmp(pinned, input.data(), bytes), 0);

  // Pageable host memory, and a host-to-host copy.
  std::vector<unsigned char> output(bytes, 0);
  ASSERT_OK(accinteMemcpy(second.ptr(), input.data(), bytes,
                          accinteMemcpyHostToDevice));
  ASSERT_OK(accinteMemcpy(output.data(), second.ptr(), bytes,
                          accinteMemcpyDeviceToHost));
  EXPECT_EQ(output, input);
  std::vector<unsigned char> onHost(bytes, 0);
  ASSERT_OK(accinteMemcpy(onHost.data(), output.data(), bytes,
                          accinteMemcpyHostToHost));
  EXPECT_EQ(onHost, input);

  ASSERT_OK(accinteStreamDestroy(stream));
  ASSERT_OK(accinteFreeHost(pinned));
}

TEST(Copy, LargeOverlappingCopyWithinAnAllocationMovesTheBytes) {
  // Red if overlapping ranges were split among threads: a part would read
  // bytes another part has already overwritten.
  const size_t total = size_t{16} << 20;
  const size_t count = size_t{10} << 20;
  const auto input = pattern(total, 3);
  DeviceBuffer buffer(total);
  ASSERT_OK(buffer.status());
  auto* base = static_cast<char*>(buffer.ptr());
  for (const size_t shift : {size_t{1} << 20, size_t{4097}}) {
    for (const bool forward : {true, false}) {
      ASSERT_OK(
          accinteMemcpy(base, input.data(), total, accinteMemcpyHostToDevice));
      char* dst = forward ? base + shift : base;
      const char* src = forward ? base : base + shift;
      ASSERT_OK(accinteMemcpy(dst, src, count, accinteMemcpyDeviceToDevice));
      auto expected = input;
      std::memmove(expected.data() + (dst - base),
                   expected.data() + (src - base), count);
      std::vector<unsigned char> output(total, 0);
      ASSERT_OK(
          accinteMemcpy(output.data(), base, total, accinteMemcpyDeviceToHost));
      EXPECT_EQ(output, expected)
          << "shift " << shift << " forward " << forward;
    }
  }
}

} // namespace
