#include "config.h"
#include "graph.h"
#include "lifecycle.h"
#include "stream.h"
#include "trace.h"

#include <accinte/runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

using namespace accinte::emulator;

namespace {

/** Runtime version 1.0, encoded as documented. */
constexpr int kRuntimeVersion = 1000 * 1 + 10 * 0;

} // namespace

accinteError_t accinteRuntimeGetVersion(int* version) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (version == nullptr) {
    return accinteErrorInvalidValue;
  }
  *version = kRuntimeVersion;
  return accinteSuccess;
}

accinteError_t accinteGetDeviceCount(int* count) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (count == nullptr) {
    return accinteErrorInvalidValue;
  }
  *count = config().deviceCount;
  return accinteSuccess;
}

accinteError_t accinteGetDevice(int* device) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (device == nullptr) {
    return accinteErrorInvalidValue;
  }
  *device = currentDevice();
  return accinteSuccess;
}

accinteError_t accinteSetDevice(int device) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  ACCINTE_RETURN_IF_ERROR(checkDevice(device));
  setCurrentDevice(device);
  return accinteSuccess;
}

accinteError_t accinteGetDeviceProperties(accinteDeviceProp* prop, int device) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (prop == nullptr) {
    return accinteErrorInvalidValue;
  }
  ACCINTE_RETURN_IF_ERROR(checkDevice(device));
  *prop = accinteDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "AccInte Emulated Device %d",
                device);
  prop->totalGlobalMem = config().deviceMemory;
  prop->major = 1;
  prop->minor = 0;
  // hardware_concurrency() may return 0 when it cannot tell.
  prop->multiProcessorCount =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return accinteSuccess;
}

accinteError_t accinteDeviceSynchronize(void) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteDeviceSynchronize");
  ACCINTE_RETURN_IF_ERROR(checkNotOnStreamWorker());
  ACCINTE_RETURN_IF_ERROR(checkBlockingAllowed());
  const auto streams = StreamRegistry::instance().streamsOf(currentDevice());
  // NB: a capturing stream's work has not run, and will not before the
  // capture ends: a synchronize would wait for it forever.
  accinteError_t captured = accinteSuccess;
  for (const auto& stream : streams) {
    if (checkNotCapturing(*stream) != accinteSuccess) {
      captured = accinteErrorStreamCaptureUnsupported;
    }
  }
  ACCINTE_RETURN_IF_ERROR(captured);
  accinteError_t firstFailure = accinteSuccess;
  std::string firstMessage;
  for (auto& stream : streams) {
    const accinteError_t status = stream->synchronize();
    if (firstFailure == accinteSuccess && status != accinteSuccess) {
      firstFailure = status;
      firstMessage = accinteGetLastFailureMessage();
    }
  }
  // NB: every failing stream told this thread its message; the one reported
  // is the first's.
  if (firstFailure != accinteSuccess) {
    setLastFailureMessage(std::move(firstMessage));
  }
  return firstFailure;
}
