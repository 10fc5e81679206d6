// Many host threads driving many streams at once, with results checked
// exactly.

#include "test_util.h"

#include <array>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

using accinte::testing::DeviceBuffer;

namespace {

constexpr int kThreads = 4;
constexpr int kStreamsPerThread = 3;
constexpr int kIterations = 150;
constexpr int kElements = 512;

TEST(Stress, ThreadsTimesStreamsOfCopyKernelCopy) {
  // One read-only table shared by every kernel on every stream, so that the
  // same allocation is opened and closed concurrently all the time.
  std::vector<int> tableHost(kElements);
  for (int i = 0; i < kElements; ++i) {
    tableHost[i] = 3 * i + 1;
  }
  DeviceBuffer table(sizeof(int) * kElements);
  ASSERT_OK(table.status());
  ASSERT_OK(accinteMemcpy(table.ptr(), tableHost.data(),
                          sizeof(int) * kElements, accinteMemcpyHostToDevice));

  std::atomic<int> mismatches{0};
  std::atomic<int> errors{0};
  auto worker = [&](int threadIndex) {
    // Half the threads work on device 1; the table stays on device 0, so
    // they read it through a device-to-device copy first.
    const int device = threadIndex % 2;
    if (accinteSetDevice(device) != accinteSuccess) {
      ++errors;
      return;
    }
    DeviceBuffer localTable(sizeof(int) * kElements);
    if (localTable.status() != accinteSuccess ||
        accinteMemcpy(localTable.ptr(), table.ptr(), sizeof(int) * kElements,
                      accinteMemcpyDeviceToDevice) != accinteSuccess) {
      ++errors;
      return;
    }
    const int* sharedTable =
        device == 0 ? table.as<int>() : localTable.as<int>();
    std::array<accinteStream_t, kStreamsPerThread> streams{};
    std::vector<std::unique_ptr<DeviceBuffer>> buffers;
    std::vector<std::vector<int>> inputs(kStreamsPerThread,
                                         std::vector<int>(kElements));
    std::vector<std::vector<int>> outputs(kStreamsPerThread,
                                          std::vector<int>(kElements));
    for (int s = 0; s < kStreamsPerThread; ++s) {
      if (accinteStreamCreate(&streams[s]) != accinteSuccess) {
        ++errors;
        return;
      }
      buffers.push_back(
          std::make_unique<DeviceBuffer>(sizeof(int) * kElements));
    }
    for (int iteration = 0; iteration < kIterations; ++iteration) {
      for (int s = 0; s < kStreamsPerThread; ++s) {
        auto& input = inputs[s];
        for (int i = 0; i < kElements; ++i) {
          input[i] = threadIndex * 100000 + iteration * 100 + s + i;
        }
        int* data = buffers[s]->as<int>();
        const int addend = iteration + s;
        bool ok = accinteMemcpyAsync(
                      data, input.data(), sizeof(int) * kElements,
                      accinteMemcpyHostToDevice, streams[s]) == accinteSuccess;
        ok = ok &&
             accinte::launchKernel(
                 streams[s], {data, sharedTable}, [data, sharedTable, addend] {
                   for (int i = 0; i < kElements; ++i) {
                     data[i] = data[i] * 2 + sharedTable[i] + addend;
                   }
                 }) == accinteSuccess;
        ok = ok && accinteMemcpyAsync(
                       outputs[s].data(), data, sizeof(int) * kElements,
                       accinteMemcpyDeviceToHost, streams[s]) == accinteSuccess;
        if (!ok) {
          ++errors;
        }
      }
      for (int s = 0; s < kStreamsPerThread; ++s) {
        if (accinteStreamSynchronize(streams[s]) != accinteSuccess) {
          ++errors;
          continue;
        }
        for (int i = 0; i < kElements; ++i) {
          const int expected = inputs[s][i] * 2 + tableHost[i] + iteration + s;
          if (outputs[s][i] != expected) {
            ++mismatches;
          }
        }
      }
    }
    for (auto stream : streams) {
      if (accinteStreamDestroy(stream) != accinteSuccess) {
        ++errors;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(worker, t);
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

} // namespace
