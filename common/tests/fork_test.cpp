// fork(): a child of a process that used the runtime cannot use it; a child
// of a process that never did can.

#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

using accinte::testing::DeviceBuffer;
using accinte::testing::runScenario;

namespace {

/** Releases nothing; counts calls, to check deleters run in the child too. */
int deleterCalls = 0;
void countDeleterCall(void*) {
  ++deleterCalls;
}
accinteError_t emptyKernel(void*) {
  return accinteSuccess;
}

/** The checks run in a forked child of an initialised process; returns the
 * number of the first failed check, 0 if all passed. */
int checkRuntimeIsDisabled() {
  int value = 0;
  void* ptr = nullptr;
  accinteStream_t stream = nullptr;
  accinteEvent_t event = nullptr;
  accintePointerAttributes attributes;
  size_t free = 0;
  size_t total = 0;
  const accinteError_t results[] = {
      accinteGetDeviceCount(&value),
      accinteGetDevice(&value),
      accinteSetDevice(0),
      accinteRuntimeGetVersion(&value),
      accinteMalloc(&ptr, 16),
      accinteFree(ptr),
      accinteMallocHost(&ptr, 16),
      accinteMemGetInfo(&free, &total),
      accintePointerGetAttributes(&attributes, &value),
      accinteStreamCreate(&stream),
      accinteStreamSynchronize(nullptr),
      accinteStreamQuery(nullptr),
      accinteDeviceSynchronize(),
      accinteEventCreate(&event),
      accinteMemcpy(&value, &free, sizeof(value), accinteMemcpyHostToHost),
      accinteLaunchKernel(nullptr, &emptyKernel, nullptr, &countDeleterCall,
                          nullptr, 0),
      accinteActivityEnable(0),
      accinteActivityDisable(),
      accinteActivityIsEnabled(&value),
      accinteActivityTake(nullptr, 0, &free),
      accinteActivityPushExternalCorrelationId(1),
      accinteActivityPushName("kernel"),
  };
  for (size_t i = 0; i < std::size(results); ++i) {
    if (results[i] != accinteErrorForkedChild) {
      return static_cast<int>(i) + 1;
    }
  }
  if (deleterCalls != 1) {
    return 100;
  }
  // The error-string functions keep working.
  if (std::strcmp(accinteGetErrorName(accinteErrorForkedChild),
                  "accinteErrorForkedChild") != 0) {
    return 101;
  }
  return 0;
}

TEST(Fork, ChildOfAnInitialisedProcessGetsForkedChildErrors) {
  // Make sure this process owns workers and memory.
  DeviceBuffer buffer(64);
  ASSERT_OK(buffer.status());
  ASSERT_OK(accinteMemsetAsync(buffer.ptr(), 0, 64, nullptr));
  ASSERT_OK(accinteStreamSynchronize(nullptr));

  const pid_t pid = fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    // NB: _exit, not exit or a gtest assertion: the child must not run the
    // parent's exit handlers or report test results.
    _exit(checkRuntimeIsDisabled());
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "first failed check in the child";

  // The parent is unaffected.
  EXPECT_OK(accinteMemsetAsync(buffer.ptr(), 1, 64, nullptr));
  EXPECT_OK(accinteStreamSynchronize(nullptr));
}

/** Uses the whole runtime and returns 0 if everything worked. */
int useRuntime() {
  const std::vector<int> input = {1, 2, 3, 4};
  std::vector<int> output(4, 0);
  void* ptr = nullptr;
  if (accinteMalloc(&ptr, sizeof(int) * 4) != accinteSuccess ||
      accinteMemcpy(ptr, input.data(), sizeof(int) * 4,
                    accinteMemcpyHostToDevice) != accinteSuccess) {
    return 1;
  }
  auto* values = static_cast<int*>(ptr);
  if (accinte::launchKernel(nullptr, {values}, [values] {
        for (int i = 0; i < 4; ++i) {
          values[i] *= 2;
        }
      }) != accinteSuccess) {
    return 2;
  }
  if (accinteMemcpy(output.data(), ptr, sizeof(int) * 4,
                    accinteMemcpyDeviceToHost) != accinteSuccess ||
      accinteStreamSynchronize(nullptr) != accinteSuccess ||
      accinteFree(ptr) != accinteSuccess) {
    return 3;
  }
  return output == std::vector<int>{2, 4, 6, 8} ? 0 : 4;
}

ACCINTE_SCENARIO(ForkBeforeInitialisation) {
  // Reading the configuration is not initialisation.
  int count = 0;
  SCENARIO_CHECK(accinteGetDeviceCount(&count) == accinteSuccess);
  const pid_t pid = fork();
  SCENARIO_CHECK(pid != -1);
  if (pid == 0) {
    _exit(useRuntime());
  }
  int status = 0;
  SCENARIO_CHECK(waitpid(pid, &status, 0) == pid);
  SCENARIO_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // And the parent can still initialise afterwards.
  SCENARIO_CHECK(useRuntime() == 0);
  return 0;
}

TEST(Fork, ChildOfAnUninitialisedProcessWorks) {
  EXPECT_EQ(runScenario("ForkBeforeInitialisation", {}), 0);
}

} // namespace
