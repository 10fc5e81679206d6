#include <accinte/runtime.h>

#include <cstring>

namespace {

/** Name and description of one error code. */
struct ErrorText {
  const char* name;
  const char* description;
};

static_assert(accinteErrorStreamCaptureWrongThread == 26,
              "a new error code needs its name and description below");

ErrorText errorText(accinteError_t error) {
  // NB: a C caller may pass any int. Reading the code as an int (memcpy is
  // not a load of the enum type) keeps that well-defined in C++ too.
  int code = 0;
  std::memcpy(&code, &error, sizeof(code));
  switch (code) {
    case accinteSuccess:
      return {"accinteSuccess", "no error"};
    case accinteErrorInvalidValue:
      return {"accinteErrorInvalidValue",
              "an argument is out of range or a required pointer is null"};
    case accinteErrorMemoryAllocation:
      return {"accinteErrorMemoryAllocation",
              "the device has not enough free memory for the request"};
    case accinteErrorInitialization:
      return {"accinteErrorInitialization",
              "ACCINTE_DEVICE_COUNT or ACCINTE_DEVICE_MEMORY is malformed"};
    case accinteErrorInvalidDevice:
      return {"accinteErrorInvalidDevice",
              "the device index is outside [0, device count)"};
    case accinteErrorInvalidDevicePointer:
      return {"accinteErrorInvalidDevicePointer",
              "the pointer is not (or no longer) a live device allocation"};
    case accinteErrorInvalidMemcpyDirection:
      return {"accinteErrorInvalidMemcpyDirection",
              "the copy kind does not match the pointers it was given"};
    case accinteErrorInvalidResourceHandle:
      return {"accinteErrorInvalidResourceHandle",
              "the stream or event handle is null, unknown or destroyed"};
    case accinteErrorNotReady:
      return {"accinteErrorNotReady", "the work has not finished yet"};
    case accinteErrorLaunchFailure:
      return {"accinteErrorLaunchFailure",
              "a kernel or copy enqueued on the stream failed"};
    case accinteErrorInvalidMemoryRange:
      return {"accinteErrorInvalidMemoryRange",
              "the range runs past the end of the allocation it starts in"};
    case accinteErrorHostMemoryAllocation:
      return {"accinteErrorHostMemoryAllocation",
              "pinned host memory could not be allocated"};
    case accinteErrorTimingDisabled:
      return {"accinteErrorTimingDisabled",
              "the event was created without timing"};
    case accinteErrorEventNotRecorded:
      return {"accinteErrorEventNotRecorded", "the event was never recorded"};
    case accinteErrorInvalidHostPointer:
      return {"accinteErrorInvalidHostPointer",
              "the pointer is not (or no longer) live pinned host memory"};
    case accinteErrorForkedChild:
      return {"accinteErrorForkedChild",
              "the runtime was initialised before fork() and cannot be used "
              "in the child process"};
    case accinteErrorNotPermitted:
      return {"accinteErrorNotPermitted",
              "the call would wait for a stream from inside a kernel running "
              "on a stream's worker thread"};
    case accinteErrorInvalidIpcHandle:
      return {"accinteErrorInvalidIpcHandle",
              "the IPC handle is malformed, was made by this process, or its "
              "memory, event or process is gone"};
    case accinteErrorIpcPeerExited:
      return {"accinteErrorIpcPeerExited",
              "the process that recorded the interprocess event exited before "
              "the record completed"};
    case accinteErrorOperatingSystem:
      return {"accinteErrorOperatingSystem",
              "a system call failed for want of a resource of the process, "
              "such as open files (its limit: ulimit -n)"};
    case accinteErrorStreamCaptureUnsupported:
      return {"accinteErrorStreamCaptureUnsupported",
              "operation not permitted when stream is capturing"};
    case accinteErrorStreamCaptureInvalidated:
      return {"accinteErrorStreamCaptureInvalidated",
              "operation failed due to a previous error during capture"};
    case accinteErrorStreamCaptureMerge:
      return {"accinteErrorStreamCaptureMerge",
              "operation would result in a merge of separate capture "
              "sequences"};
    case accinteErrorStreamCaptureUnmatched:
      return {"accinteErrorStreamCaptureUnmatched",
              "capture was not ended in the same stream as it began"};
    case accinteErrorStreamCaptureUnjoined:
      return {"accinteErrorStreamCaptureUnjoined",
              "capturing stream has unjoined work"};
    case accinteErrorStreamCaptureIsolation:
      return {"accinteErrorStreamCaptureIsolation",
              "dependency created on uncaptured work in another stream"};
    case accinteErrorStreamCaptureWrongThread:
      return {"accinteErrorStreamCaptureWrongThread",
              "attempt to terminate a thread-local capture sequence from "
              "another thread"};
  }
  return {"accinteErrorUnknown", "unknown error code"};
}

} // namespace

const char* accinteGetErrorName(accinteError_t error) {
  return errorText(error).name;
}

const char* accinteGetErrorString(accinteError_t error) {
  return errorText(error).description;
}
