#pragma once

#include "memory.h"
#include "stream.h"

#include <accinte/runtime.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace accinte::emulator {

/** What a captured operation is: for the activity records of its launches
 * and for accinteGraphDebugDotPrint(). */
struct NodeInfo {
  accinteActivityKind kind = accinteActivityKindKernel;
  accinteActivityMemcpyKind memcpyKind = accinteActivityMemcpyNone;
  /** The kernel's name ("kernel" if it had none), or the copy's or memset's
   * activity name. */
  std::string name;
  /** Copies: device of the source, or -1 for host memory. Else -1. */
  int srcDevice = -1;
  /** Copies and memsets: device of the destination, or -1. Else -1. */
  int dstDevice = -1;
  /** Bytes copied or set; 0 for kernels. */
  uint64_t bytes = 0;
  /** The device allocations it opens when it runs. */
  std::vector<AllocationRef> allocations;
};

/** One captured operation and the operations it must follow. */
struct GraphNode {
  /** NB: shared, and run once per launch: the kernels, copies and memsets
   * the runtime makes only read what they captured, so one operation may
   * run any number of times (and in two executable graphs of one graph at
   * once); a kernel's arguments live as long as the operation. */
  std::shared_ptr<Operation> operation;
  /** Indices of the nodes this one must follow; all smaller than its own. */
  std::vector<size_t> dependencies;
  NodeInfo info;
};

/**
 * What a capture recorded: its nodes in the order they were captured.
 *
 * NB: a node only ever depends on nodes captured before it, so the capture
 * order is itself an order that keeps every dependency; a launch runs the
 * nodes in it, one after the other, on the launching stream's worker. The
 * body never changes once the capture ended, so graphs and executable
 * graphs share it.
 */
struct GraphBody {
  /** The device of the stream the capture began on. */
  int device = 0;
  std::vector<GraphNode> nodes;
  /** Every device allocation some node opens, once each. NB: a launch opens
   * them all before its first node, so each node's own open finds its
   * memory open already and costs a count, not two `mprotect` calls. */
  std::vector<AllocationRef> allocations;
};

/**
 * One capture sequence: the streams taking part, the nodes recorded so
 * far, and where each stream's next node will depend.
 */
class Capture : public std::enable_shared_from_this<Capture> {
 public:
  /** A capture begun on `origin` in `mode` by the calling thread. */
  Capture(std::shared_ptr<Stream> origin, accinteStreamCaptureMode mode);
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  /** Unique in the process, never 0. */
  uint64_t id() const {
    return id_;
  }
  /** The mode it was begun in. */
  accinteStreamCaptureMode mode() const {
    return mode_;
  }
  /** The thread that began it. */
  std::thread::id owner() const {
    return owner_;
  }
  /** The stream it was begun on. */
  const std::shared_ptr<Stream>& origin() const {
    return origin_;
  }

  /** Active or invalidated while it lasts; none once ended. */
  accinteStreamCaptureStatus status();
  /** True once accinteStreamEndCapture() ended it. */
  bool ended();
  /** Makes accinteStreamEndCapture() return no graph; every later operation
   * enqueued on its streams is refused. */
  void invalidate();

  /** Adds `operation` as the next node of `stream` (a member): it depends on
   * what the stream's work so far depends on.
   * ::accinteErrorStreamCaptureInvalidated if invalidated. */
  accinteError_t addNode(const Stream& stream,
                         std::unique_ptr<Operation> operation, NodeInfo info);
  /** Writes what a node enqueued next on `stream` would depend on: what an
   * event recorded there now marks. */
  accinteError_t frontier(const Stream& stream,
                          std::vector<size_t>* dependencies);
  /** Makes `stream`'s later nodes depend on `dependencies` too; `stream`
   * becomes a member (a fork) if it was not. */
  accinteError_t join(const std::shared_ptr<Stream>& stream,
                      const std::vector<size_t>& dependencies);
  /** Ends the capture: every member stops capturing. Writes the body, or
   * returns why there is none (invalidated, unjoined work). */
  accinteError_t end(std::shared_ptr<const GraphBody>* body);

 private:
  const uint64_t id_;
  const accinteStreamCaptureMode mode_;
  const std::thread::id owner_;
  const std::shared_ptr<Stream> origin_;

  std::mutex mutex_;
  bool invalidated_ = false;
  bool ended_ = false;
  std::vector<GraphNode> nodes_;
  /** Each member stream's dependencies for its next node. NB: the members
   * are held until the end, so the pointers stay valid; a stream cannot be
   * destroyed while it captures. */
  std::unordered_map<const Stream*, std::vector<size_t>> frontier_;
  std::vector<std::shared_ptr<Stream>> members_;
};

/** What an event record made on a capturing stream marks: a point of the
 * capture, not work that will complete. */
struct CapturedRecord {
  std::shared_ptr<Capture> capture;
  std::vector<size_t> dependencies;
};

/**
 * Enqueues `operation` on `stream`, or, if `capture` (what `stream.capture()`
 * returned) is not null, adds it to the capture as a node (`describe()` makes
 * its NodeInfo; called only then). Any activity record set on the operation
 * is dropped when it is captured: its launches are traced instead.
 *
 * NB: the caller reads `stream.capture()` once, before it builds the
 * operation, so that what it keeps aside for the node (a kernel's open
 * allocations) and what happens here follow the same reading.
 */
// LITERALINCLUDE START: EMULATOR_CAPTURE_SUBMIT
template <typename Describe>
accinteError_t submit(Stream& stream, const std::shared_ptr<Capture>& capture,
                      std::unique_ptr<Operation> operation,
                      Describe&& describe) {
  if (!capture) {
    stream.enqueue(std::move(operation));
    return accinteSuccess;
  }
  operation->takeActivity();
  return capture->addNode(stream, std::move(operation), describe());
}
// LITERALINCLUDE END: EMULATOR_CAPTURE_SUBMIT

/**
 * For a *blocking* call (see ::accinteStreamCaptureMode): while a capture
 * forbids it to the calling thread, invalidates every such capture and
 * returns ::accinteErrorStreamCaptureUnsupported; else ::accinteSuccess.
 *
 * NB: a relaxed atomic load when no capture is active, which is always
 * outside graph code.
 */
accinteError_t checkBlockingAllowed();

/** For a call that would wait for `stream`'s work (a synchronize, a query):
 * if it captures, invalidates its capture and returns
 * ::accinteErrorStreamCaptureUnsupported; else ::accinteSuccess. */
accinteError_t checkNotCapturing(Stream& stream);

} // namespace accinte::emulator
