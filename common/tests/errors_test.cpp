// Error names and descriptions, and the runtime version.

#include "test_util.h"

#include <cstring>
#include <set>
#include <string>

namespace {

constexpr accinteError_t kAllErrors[] = {
    accinteSuccess,
    accinteErrorInvalidValue,
    accinteErrorMemoryAllocation,
    accinteErrorInitialization,
    accinteErrorInvalidDevice,
    accinteErrorInvalidDevicePointer,
    accinteErrorInvalidMemcpyDirection,
    accinteErrorInvalidResourceHandle,
    accinteErrorNotReady,
    accinteErrorLaunchFailure,
    accinteErrorInvalidMemoryRange,
    accinteErrorHostMemoryAllocation,
    accinteErrorTimingDisabled,
    accinteErrorEventNotRecorded,
    accinteErrorInvalidHostPointer,
    accinteErrorForkedChild,
    accinteErrorNotPermitted,
    accinteErrorInvalidIpcHandle,
    accinteErrorIpcPeerExited,
    accinteErrorOperatingSystem,
    accinteErrorStreamCaptureUnsupported,
    accinteErrorStreamCaptureInvalidated,
    accinteErrorStreamCaptureMerge,
    accinteErrorStreamCaptureUnmatched,
    accinteErrorStreamCaptureUnjoined,
    accinteErrorStreamCaptureIsolation,
    accinteErrorStreamCaptureWrongThread,
};

TEST(Errors, EveryCodeHasItsOwnNameAndDescription) {
  std::set<std::string> names;
  std::set<std::string> descriptions;
  for (accinteError_t error : kAllErrors) {
    const char* name = accinteGetErrorName(error);
    const char* description = accinteGetErrorString(error);
    ASSERT_NE(name, nullptr);
    ASSERT_NE(description, nullptr);
    EXPECT_EQ(std::strncmp(name, "accinte", 7), 0) << name;
    EXPECT_GT(std::strlen(description), 0u);
    names.insert(name);
    descriptions.insert(description);
  }
  EXPECT_EQ(names.size(), std::size(kAllErrors));
  EXPECT_EQ(descriptions.size(), std::size(kAllErrors));
  EXPECT_STREQ(accinteGetErrorName(accinteErrorInvalidValue),
               "accinteErrorInvalidValue");
  EXPECT_STREQ(accinteGetErrorName(accinteErrorForkedChild),
               "accinteErrorForkedChild");
}

TEST(Errors, UnknownCodeFromCIsNamedUnknown) {
  // NB: in C an enum argument is an int and may hold any value; C++ cannot
  // form such a value without undefined behaviour, so call through the C
  // signature the symbol really has at the ABI level.
  using CName = const char* (*)(int);
  auto name = reinterpret_cast<CName>(&accinteGetErrorName);
  auto description = reinterpret_cast<CName>(&accinteGetErrorString);
  EXPECT_STREQ(name(12345), "accinteErrorUnknown");
  EXPECT_STREQ(name(-1), "accinteErrorUnknown");
  EXPECT_NE(description(12345), nullptr);
}

TEST(Errors, RuntimeVersion) {
  int version = 0;
  ASSERT_OK(accinteRuntimeGetVersion(&version));
  EXPECT_EQ(version, 1000);
  EXPECT_EQ(accinteRuntimeGetVersion(nullptr), accinteErrorInvalidValue);
}

} // namespace
