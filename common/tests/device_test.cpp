// Devices: count, current device, properties, configuration from the
// environment, and device-wide synchronisation.

#include "test_util.h"

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

using accinte::testing::Gate;
using accinte::testing::runScenario;

namespace {

TEST(Device, CountComesFromTheEnvironment) {
  int count = 0;
  ASSERT_OK(accinteGetDeviceCount(&count));
  EXPECT_EQ(count, 2); // ctest sets ACCINTE_DEVICE_COUNT=2.
  EXPECT_EQ(accinteGetDeviceCount(nullptr), accinteErrorInvalidValue);
}

TEST(Device, CurrentDeviceIsPerThread) {
  int device = -1;
  ASSERT_OK(accinteGetDevice(&device));
  EXPECT_EQ(device, 0);
  ASSERT_OK(accinteSetDevice(1));
  ASSERT_OK(accinteGetDevice(&device));
  EXPECT_EQ(device, 1);

  int otherThreadDevice = -1;
  std::thread([&] { accinteGetDevice(&otherThreadDevice); }).join();
  EXPECT_EQ(otherThreadDevice, 0);

  EXPECT_EQ(accinteSetDevice(2), accinteErrorInvalidDevice);
  EXPECT_EQ(accinteSetDevice(-1), accinteErrorInvalidDevice);
  ASSERT_OK(accinteGetDevice(&device));
  EXPECT_EQ(device, 1); // A failed set changes nothing.
  EXPECT_EQ(accinteGetDevice(nullptr), accinteErrorInvalidValue);
  ASSERT_OK(accinteSetDevice(0));
}

TEST(Device, Properties) {
  accinteDeviceProp prop;
  ASSERT_OK(accinteGetDeviceProperties(&prop, 1));
  EXPECT_STREQ(prop.name, "AccInte Emulated Device 1");
  EXPECT_EQ(prop.totalGlobalMem, size_t{8} << 30);
  EXPECT_EQ(prop.major, 1);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_GE(prop.multiProcessorCount, 1);
  EXPECT_EQ(accinteGetDeviceProperties(&prop, 2), accinteErrorInvalidDevice);
  EXPECT_EQ(accinteGetDeviceProperties(&prop, -1), accinteErrorInvalidDevice);
  EXPECT_EQ(accinteGetDeviceProperties(nullptr, 0), accinteErrorInvalidValue);
}

TEST(Device, SynchronizeWaitsForEveryStreamOfTheCurrentDeviceOnly) {
  accinteStream_t first = nullptr;
  accinteStream_t second = nullptr;
  ASSERT_OK(accinteStreamCreate(&first));
  ASSERT_OK(accinteStreamCreate(&second));
  std::atomic<int> ran{0};
  for (accinteStream_t stream : {first, second}) {
    ASSERT_OK(accinte::launchKernel(stream, {}, [&ran] { ++ran; }));
  }
  // Work blocked on device 1 must not hold up a synchronize of device 0.
  ASSERT_OK(accinteSetDevice(1));
  Gate gate;
  ASSERT_OK(gate.block(nullptr));
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(accinteDeviceSynchronize());
  EXPECT_EQ(ran.load(), 2);
  ASSERT_OK(accinteSetDevice(1));
  EXPECT_EQ(accinteStreamQuery(nullptr), accinteErrorNotReady);
  gate.release();
  ASSERT_OK(accinteDeviceSynchronize());
  ASSERT_OK(accinteSetDevice(0));
  ASSERT_OK(accinteStreamDestroy(first));
  ASSERT_OK(accinteStreamDestroy(second));
}

TEST(Device, SynchronizeReportsAndClearsKernelFailures) {
  accinteStream_t stream = nullptr;
  ASSERT_OK(accinteStreamCreate(&stream));
  ASSERT_OK(accinte::launchKernel(stream, {},
                                  [] { return accinteErrorInvalidValue; }));
  EXPECT_EQ(accinteDeviceSynchronize(), accinteErrorLaunchFailure);
  EXPECT_OK(accinteDeviceSynchronize());
  EXPECT_OK(accinteStreamQuery(stream));
  ASSERT_OK(accinteStreamDestroy(stream));
}

// --- Configuration, each read by a fresh process ---------------------------

ACCINTE_SCENARIO(DefaultConfig) {
  int count = 0;
  SCENARIO_CHECK(accinteGetDeviceCount(&count) == accinteSuccess);
  SCENARIO_CHECK(count == 2);
  size_t free = 0;
  size_t total = 0;
  SCENARIO_CHECK(accinteMemGetInfo(&free, &total) == accinteSuccess);
  SCENARIO_CHECK(total == (size_t{8} << 30));
  SCENARIO_CHECK(free == total);
  return 0;
}

TEST(Config, DefaultsAreTwoDevicesOfEightGiB) {
  EXPECT_EQ(runScenario("DefaultConfig", {}), 0);
  // An empty variable means "unset".
  EXPECT_EQ(runScenario("DefaultConfig",
                        {"ACCINTE_DEVICE_COUNT=", "ACCINTE_DEVICE_MEMORY="}),
            0);
}

ACCINTE_SCENARIO(CustomConfig) {
  int count = 0;
  SCENARIO_CHECK(accinteGetDeviceCount(&count) == accinteSuccess);
  SCENARIO_CHECK(count == 5);
  SCENARIO_CHECK(accinteSetDevice(4) == accinteSuccess);
  SCENARIO_CHECK(accinteSetDevice(5) == accinteErrorInvalidDevice);
  accinteDeviceProp prop;
  SCENARIO_CHECK(accinteGetDeviceProperties(&prop, 4) == accinteSuccess);
  SCENARIO_CHECK(prop.totalGlobalMem == 3 * 1024 * 1024);
  return 0;
}

TEST(Config, CountAndMemoryWithSuffixes) {
  EXPECT_EQ(runScenario("CustomConfig",
                        {"ACCINTE_DEVICE_COUNT=5", "ACCINTE_DEVICE_MEMORY=3M"}),
            0);
  EXPECT_EQ(runScenario("CustomConfig",
                        {"ACCINTE_DEVICE_COUNT=5", "ACCINTE_DEVICE_MEMORY=3m"}),
            0);
  EXPECT_EQ(runScenario("CustomConfig", {"ACCINTE_DEVICE_COUNT=5",
                                         "ACCINTE_DEVICE_MEMORY=3072k"}),
            0);
  EXPECT_EQ(runScenario("CustomConfig", {"ACCINTE_DEVICE_COUNT=5",
                                         "ACCINTE_DEVICE_MEMORY=3145728"}),
            0);
}

ACCINTE_SCENARIO(BadConfig) {
  // Every call that needs the devices fails cleanly, and keeps failing.
  for (int attempt = 0; attempt < 2; ++attempt) {
    int value = 0;
    void* ptr = nullptr;
    accinteStream_t stream = nullptr;
    accinteEvent_t event = nullptr;
    accintePointerAttributes attributes;
    SCENARIO_CHECK(accinteGetDeviceCount(&value) == accinteErrorInitialization);
    SCENARIO_CHECK(accinteGetDevice(&value) == accinteErrorInitialization);
    SCENARIO_CHECK(accinteSetDevice(0) == accinteErrorInitialization);
    SCENARIO_CHECK(accinteMalloc(&ptr, 16) == accinteErrorInitialization);
    SCENARIO_CHECK(accinteMallocHost(&ptr, 16) == accinteErrorInitialization);
    SCENARIO_CHECK(accinteStreamCreate(&stream) == accinteErrorInitialization);
    SCENARIO_CHECK(accinteEventCreate(&event) == accinteErrorInitialization);
    SCENARIO_CHECK(accintePointerGetAttributes(&attributes, &value) ==
                   accinteErrorInitialization);
    SCENARIO_CHECK(accinteDeviceSynchronize() == accinteErrorInitialization);
  }
  SCENARIO_CHECK(std::strcmp(accinteGetErrorName(accinteErrorInitialization),
                             "accinteErrorInitialization") == 0);
  return 0;
}

TEST(Config, MalformedDeviceCountIsAnInitializationError) {
  for (const char* value :
       {"0", "17", "-1", "abc", "2x", " 2", "1.5", "99999999999999999999999"}) {
    EXPECT_EQ(runScenario("BadConfig",
                          {std::string("ACCINTE_DEVICE_COUNT=") + value}),
              0)
        << "ACCINTE_DEVICE_COUNT=" << value;
  }
}

TEST(Config, MalformedDeviceMemoryIsAnInitializationError) {
  for (const char* value : {"0", "G", "12Q", "1GB", "-5M", "1.5G",
                            "99999999999999999999999", "17179869184G"}) {
    EXPECT_EQ(runScenario("BadConfig",
                          {std::string("ACCINTE_DEVICE_MEMORY=") + value}),
              0)
        << "ACCINTE_DEVICE_MEMORY=" << value;
  }
}

TEST(Config, MalformedSpinIsAnInitializationError) {
  for (const char* value : {"-1", "abc", "5us", " 5", "1.5", "1000001",
                            "99999999999999999999999"}) {
    EXPECT_EQ(
        runScenario("BadConfig", {std::string("ACCINTE_SPIN_US=") + value}), 0)
        << "ACCINTE_SPIN_US=" << value;
  }
}

} // namespace
