#include "event.h"
#include "graph.h"
#include "lifecycle.h"
#include "memory.h"
#include "stream.h"
#include "trace.h"

#include <accinte/runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

using namespace accinte::emulator;

namespace {

/** A copy whose pointers have been checked against the kind and the
 * allocations, ready to be enqueued. */
struct CopyPlan {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t count = 0;
  /** Device that owns the destination, or -1 for host memory. */
  int dstDevice = -1;
  /** Device that owns the source, or -1 for host memory. */
  int srcDevice = -1;
  /** The device allocations the copy must open. */
  std::vector<AllocationRef> refs;
  /** True if either side is host memory that is not pinned: the copy reads
   * or writes it when it runs, so it cannot be captured. */
  bool pageable = false;
};

/** Reads a C enum argument as the int a C caller may have passed.
 *
 * NB: memcpy is not a load of the enum type, so an out-of-range value stays
 * well-defined (and does not trip UBSan) in C++. */
template <typename Enum>
int enumValue(Enum value) {
  int result = 0;
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized here");
  std::memcpy(&result, &value, sizeof(result));
  return result;
}

/** Checks that [ptr, ptr + count) lies inside the allocation `info`. */
accinteError_t checkRange(const void* ptr, size_t count,
                          const AllocationInfo& info) {
  const size_t offset = reinterpret_cast<uintptr_t>(ptr) - info.ref.base;
  return count > info.size - offset ? accinteErrorInvalidMemoryRange
                                    : accinteSuccess;
}

/** Copies from this size on are split among several host threads. */
constexpr size_t kParallelCopyBytes = size_t{4} << 20;
/** The most host threads one copy uses. */
constexpr unsigned kMaxCopyThreads = 4;

/**
 * Copies `count` bytes like memmove. A large copy between ranges that do not
 * overlap is split among up to kMaxCopyThreads host threads.
 *
 * NB: a device's copy engine moves data at the bandwidth of its link, not
 * of one CPU core; PyTorch's CPU copy_ of a large tensor uses every core
 * too. Threads that cannot be started leave their part to this one.
 */
void copyBytes(void* dst, const void* src, size_t count) {
  const auto dstAddress = reinterpret_cast<uintptr_t>(dst);
  const auto srcAddress = reinterpret_cast<uintptr_t>(src);
  const bool overlap =
      dstAddress < srcAddress + count && srcAddress < dstAddress + count;
  const unsigned threads = std::min(
      kMaxCopyThreads, std::max(1U, std::thread::hardware_concurrency()));
  if (count < kParallelCopyBytes || overlap || threads == 1) {
    // NB: memmove, not memcpy: a device-to-device copy within one
    // allocation may overlap, and the emulator should not corrupt data
    // where CUDA is merely unspecified.
    std::memmove(dst, src, count);
    return;
  }
  // Whole cache lines per part, so that no two threads write one line.
  const size_t part = (count / threads + 63) / 64 * 64;
  const auto copyPart = [=](unsigned index) {
    const size_t begin = std::min(count, part * index);
    const size_t end = std::min(count, begin + part);
    std::memcpy(static_cast<char*>(dst) + begin,
                static_cast<const char*>(src) + begin, end - begin);
  };
  std::vector<std::thread> helpers;
  unsigned index = 1;
  try {
    for (; index < threads; ++index) {
      helpers.emplace_back(copyPart, index);
    }
  } catch (const std::system_error&) {
    for (; index < threads; ++index) {
      copyPart(index);
    }
  }
  copyPart(0);
  for (auto& helper : helpers) {
    helper.join();
  }
}

// LITERALINCLUDE START: EMULATOR_COPY_CHECKS
/** Validates a copy of `count` (> 0) bytes and fills `plan`. */
accinteError_t planCopy(void* dst, const void* src, size_t count,
                        accinteMemcpyKind kind, CopyPlan* plan) {
  if (dst == nullptr || src == nullptr) {
    return accinteErrorInvalidValue;
  }
  auto dstInfo = MemoryRegistry::instance().find(dst);
  auto srcInfo = MemoryRegistry::instance().find(src);
  const bool dstIsDevice = dstInfo && dstInfo->type == accinteMemoryTypeDevice;
  const bool srcIsDevice = srcInfo && srcInfo->type == accinteMemoryTypeDevice;
  // Pinned and unregistered memory are both host memory.
  bool wantDstDevice = dstIsDevice;
  bool wantSrcDevice = srcIsDevice;
  switch (enumValue(kind)) {
    case accinteMemcpyHostToHost:
      wantDstDevice = wantSrcDevice = false;
      break;
    case accinteMemcpyHostToDevice:
      wantDstDevice = true;
      wantSrcDevice = false;
      break;
    case accinteMemcpyDeviceToHost:
      wantDstDevice = false;
      wantSrcDevice = true;
      break;
    case accinteMemcpyDeviceToDevice:
      wantDstDevice = wantSrcDevice = true;
      break;
    case accinteMemcpyDefault:
      break; // Inferred: whatever the pointers are.
    default:
      return accinteErrorInvalidValue;
  }
  // LITERALINCLUDE START: EMULATOR_COPY_PLAN
  // LITERALINCLUDE EMPHASIZE NEXT
  if (wantDstDevice != dstIsDevice || wantSrcDevice != srcIsDevice) {
    return accinteErrorInvalidMemcpyDirection; // LITERALINCLUDE EMPHASIZE
  }
  plan->dst = dst;
  plan->src = src;
  plan->count = count;
  plan->pageable = (!dstIsDevice && !dstInfo) || (!srcIsDevice && !srcInfo);
  if (dstIsDevice) {
    // LITERALINCLUDE EMPHASIZE NEXT
    ACCINTE_RETURN_IF_ERROR(checkRange(dst, count, *dstInfo));
    plan->dstDevice = dstInfo->device;
    plan->refs.push_back(dstInfo->ref);
  }
  if (srcIsDevice) {
    // LITERALINCLUDE EMPHASIZE NEXT
    ACCINTE_RETURN_IF_ERROR(checkRange(src, count, *srcInfo));
    plan->srcDevice = srcInfo->device;
    plan->refs.push_back(srcInfo->ref);
  }
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_COPY_PLAN

/** Performs a planned copy; runs on a stream's worker. */
accinteError_t runCopy(const CopyPlan& plan) {
  OpenAllocations open(plan.refs); // LITERALINCLUDE EMPHASIZE
  if (!open.ok()) {
    // An allocation was freed after the copy was enqueued.
    return accinteErrorLaunchFailure;
  }
  copyBytes(plan.dst, plan.src, plan.count); // LITERALINCLUDE EMPHASIZE
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_COPY_CHECKS

/** Makes everything enqueued later on `waiter` wait for the work enqueued so
 * far on `waited`. */
void orderAfter(Stream& waiter, Stream& waited) {
  auto marker = std::make_shared<EventCompletion>(waited.workerCpu());
  enqueueRecord(waited, marker);
  enqueueWait(waiter, std::move(marker));
}

/** The activity names of copies, by ::accinteActivityMemcpyKind. */
constexpr const char* kMemcpyNames[] = {"Memcpy",      "Memcpy HtoD",
                                        "Memcpy DtoH", "Memcpy DtoD",
                                        "Memcpy PtoP", "Memcpy HtoH"};

/** The direction of a planned copy, for its activity record. */
accinteActivityMemcpyKind activityKind(const CopyPlan& plan) {
  if (plan.srcDevice == -1) {
    return plan.dstDevice == -1 ? accinteActivityMemcpyHtoH
                                : accinteActivityMemcpyHtoD;
  }
  if (plan.dstDevice == -1) {
    return accinteActivityMemcpyDtoH;
  }
  return plan.srcDevice == plan.dstDevice ? accinteActivityMemcpyDtoD
                                          : accinteActivityMemcpyPtoP;
}

/** The activity record of a copy of `plan` that `call` enqueues on `stream`,
 * or null if `call` is not traced. */
std::unique_ptr<PendingActivity> copyActivity(const TracedCall& call,
                                              const CopyPlan& plan,
                                              const Stream& stream) {
  if (!call.on()) {
    return nullptr;
  }
  const accinteActivityMemcpyKind kind = activityKind(plan);
  return call.work(accinteActivityKindMemcpy, kind, kMemcpyNames[kind],
                   stream.handle(), stream.device(), plan.srcDevice,
                   plan.dstDevice, plan.count);
}

/** What a copy of `plan` keeps busy: the memory of the devices it reads or
 * writes, each once; nothing for a copy between host buffers. */
BusyMark copyBusy(const CopyPlan& plan) {
  if (plan.dstDevice == -1 && plan.srcDevice == -1) {
    return {};
  }
  return {
      BusyKind::kMemory,
      {plan.dstDevice, plan.srcDevice != plan.dstDevice ? plan.srcDevice : -1}};
}

/** True for the five ::accinteMemcpyKind values. */
bool isMemcpyKind(accinteMemcpyKind kind) {
  return enumValue(kind) >= accinteMemcpyHostToHost &&
         enumValue(kind) <= accinteMemcpyDefault;
}

} // namespace

accinteError_t accinteMemcpy(void* dst, const void* src, size_t count,
                             accinteMemcpyKind kind) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteMemcpy");
  if (count == 0) {
    return isMemcpyKind(kind) ? accinteSuccess : accinteErrorInvalidValue;
  }
  ACCINTE_RETURN_IF_ERROR(checkBlockingAllowed());
  CopyPlan plan;
  ACCINTE_RETURN_IF_ERROR(planCopy(dst, src, count, kind, &plan));
  // The default stream that orders the copy: the destination's device, else
  // the source's, else (host to host) the current device.
  int device = plan.dstDevice != -1 ? plan.dstDevice : plan.srcDevice;
  if (device == -1) {
    device = currentDevice();
  }
  std::shared_ptr<Stream> stream;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().defaultStream(device, &stream));
  if (plan.srcDevice != -1 && plan.srcDevice != device) {
    // Across devices, the source's pending writes must land first too.
    std::shared_ptr<Stream> srcStream;
    ACCINTE_RETURN_IF_ERROR(
        StreamRegistry::instance().defaultStream(plan.srcDevice, &srcStream));
    orderAfter(*stream, *srcStream);
  }
  // NB: the copy's own status is handed back through `status` rather than
  // carried by the stream: the caller is right here to receive it.
  auto status = std::make_shared<accinteError_t>(accinteSuccess);
  auto activity = copyActivity(call, plan, *stream);
  const BusyMark busy = copyBusy(plan);
  auto operation = makeOperation([plan = std::move(plan), status] {
    *status = runCopy(plan);
    return accinteSuccess;
  });
  operation->setBusy(busy);
  operation->setActivity(std::move(activity));
  const uint64_t ticket = stream->enqueue(std::move(operation));
  stream->waitUntilFinished(ticket);
  return *status;
}

accinteError_t accinteMemcpyAsync(void* dst, const void* src, size_t count,
                                  accinteMemcpyKind kind,
                                  accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteMemcpyAsync");
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  if (count == 0) {
    return isMemcpyKind(kind) ? accinteSuccess : accinteErrorInvalidValue;
  }
  CopyPlan plan;
  ACCINTE_RETURN_IF_ERROR(planCopy(dst, src, count, kind, &plan));
  if (plan.pageable) {
    // NB: a launch would read or write the host memory long after this call
    // returned, which only pinned memory is promised to allow.
    ACCINTE_RETURN_IF_ERROR(checkNotCapturing(*resolved));
  }
  auto activity = copyActivity(call, plan, *resolved);
  const BusyMark busy = copyBusy(plan);
  // NB: the node of a captured copy is described before the operation takes
  // the plan; the plan's allocations are copied for it only then.
  const std::shared_ptr<Capture> capture = resolved->capture();
  NodeInfo node;
  if (capture) {
    node.kind = accinteActivityKindMemcpy;
    node.memcpyKind = activityKind(plan);
    node.name = kMemcpyNames[node.memcpyKind];
    node.srcDevice = plan.srcDevice;
    node.dstDevice = plan.dstDevice;
    node.bytes = plan.count;
    node.allocations = plan.refs;
  }
  auto operation =
      makeOperation([plan = std::move(plan)] { return runCopy(plan); });
  operation->setBusy(busy);
  operation->setActivity(std::move(activity));
  return submit(*resolved, capture, std::move(operation),
                [&] { return std::move(node); });
}

accinteError_t accinteMemsetAsync(void* dst, int value, size_t count,
                                  accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteMemsetAsync");
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  if (count == 0) {
    return accinteSuccess;
  }
  if (dst == nullptr) {
    return accinteErrorInvalidValue;
  }
  auto info = MemoryRegistry::instance().find(dst);
  if (!info || info->type != accinteMemoryTypeDevice) {
    return accinteErrorInvalidDevicePointer;
  }
  ACCINTE_RETURN_IF_ERROR(checkRange(dst, count, *info));
  auto operation = makeOperation(
      [dst, value, count, refs = std::vector<AllocationRef>{info->ref}] {
        OpenAllocations open(refs);
        if (!open.ok()) {
          return accinteErrorLaunchFailure;
        }
        std::memset(dst, value, count);
        return accinteSuccess;
      });
  operation->setBusy({BusyKind::kMemory, {info->device, -1}});
  if (call.on()) {
    operation->setActivity(call.work(
        accinteActivityKindMemset, accinteActivityMemcpyNone, "Memset",
        resolved->handle(), resolved->device(), -1, info->device, count));
  }
  return submit(*resolved, resolved->capture(), std::move(operation), [&] {
    NodeInfo node;
    node.kind = accinteActivityKindMemset;
    node.name = "Memset";
    node.dstDevice = info->device;
    node.bytes = count;
    node.allocations = {info->ref};
    return node;
  });
}
