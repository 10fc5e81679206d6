#include "graph.h"

#include "event.h"
#include "handle_table.h"
#include "lifecycle.h"
#include "telemetry.h"
#include "trace.h"

#include <accinte/runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <utility>

namespace accinte::emulator {

namespace {

/** The capture mode of each host thread
 * (accinteThreadExchangeStreamCaptureMode()). */
thread_local accinteStreamCaptureMode threadCaptureMode =
    accinteStreamCaptureModeGlobal;

/** Every capture that has begun and not ended, for the blocking calls to
 * check against. */
class ActiveCaptures {
 public:
  static ActiveCaptures& instance() {
    // NB: leaked on purpose, see MemoryRegistry::instance().
    static ActiveCaptures* captures = new ActiveCaptures();
    return *captures;
  }

  void add(std::shared_ptr<Capture> capture) {
    std::lock_guard<std::mutex> lock(mutex_);
    captures_.push_back(std::move(capture));
    count_.store(captures_.size(), std::memory_order_relaxed);
  }

  void remove(const Capture* capture) {
    std::lock_guard<std::mutex> lock(mutex_);
    captures_.erase(std::remove_if(captures_.begin(), captures_.end(),
                                   [&](const auto& entry) {
                                     return entry.get() == capture;
                                   }),
                    captures_.end());
    count_.store(captures_.size(), std::memory_order_relaxed);
  }

  /** True if no capture is active: the blocking calls' fast path. */
  bool none() const {
    return count_.load(std::memory_order_relaxed) == 0;
  }

  /** The captures that forbid blocking calls to a thread `self` in `mode`. */
  std::vector<std::shared_ptr<Capture>> forbidding(
      std::thread::id self, accinteStreamCaptureMode mode) {
    std::vector<std::shared_ptr<Capture>> found;
    if (mode == accinteStreamCaptureModeRelaxed) {
      return found;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& capture : captures_) {
      const bool own = capture->owner() == self &&
                       capture->mode() != accinteStreamCaptureModeRelaxed;
      const bool global = mode == accinteStreamCaptureModeGlobal &&
                          capture->mode() == accinteStreamCaptureModeGlobal;
      if (own || global) {
        found.push_back(capture);
      }
    }
    return found;
  }

 private:
  ActiveCaptures() = default;

  std::mutex mutex_;
  std::vector<std::shared_ptr<Capture>> captures_;
  std::atomic<size_t> count_{0};
};

uint64_t newCaptureId() {
  static std::atomic<uint64_t> nextId{1};
  return nextId.fetch_add(1);
}

} // namespace

Capture::Capture(std::shared_ptr<Stream> origin, accinteStreamCaptureMode mode)
    : id_(newCaptureId()),
      mode_(mode),
      owner_(std::this_thread::get_id()),
      origin_(std::move(origin)) {
  frontier_.emplace(origin_.get(), std::vector<size_t>{});
  members_.push_back(origin_);
}

accinteStreamCaptureStatus Capture::status() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) {
    return accinteStreamCaptureStatusNone;
  }
  return invalidated_ ? accinteStreamCaptureStatusInvalidated
                      : accinteStreamCaptureStatusActive;
}

bool Capture::ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

void Capture::invalidate() {
  std::lock_guard<std::mutex> lock(mutex_);
  invalidated_ = true;
}

accinteError_t Capture::addNode(const Stream& stream,
                                std::unique_ptr<Operation> operation,
                                NodeInfo info) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto member = frontier_.find(&stream);
  // NB: a capture another thread just ended has no members left.
  if (invalidated_ || member == frontier_.end()) {
    return accinteErrorStreamCaptureInvalidated;
  }
  auto& next = member->second;
  nodes_.push_back({std::shared_ptr<Operation>(std::move(operation)),
                    std::move(next), std::move(info)});
  next = {nodes_.size() - 1};
  return accinteSuccess;
}

accinteError_t Capture::frontier(const Stream& stream,
                                 std::vector<size_t>* dependencies) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto member = frontier_.find(&stream);
  if (invalidated_ || member == frontier_.end()) {
    return accinteErrorStreamCaptureInvalidated;
  }
  *dependencies = member->second;
  return accinteSuccess;
}

accinteError_t Capture::join(const std::shared_ptr<Stream>& stream,
                             const std::vector<size_t>& dependencies) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) {
      return accinteErrorStreamCaptureIsolation;
    }
    if (invalidated_) {
      return accinteErrorStreamCaptureInvalidated;
    }
    auto [entry, added] = frontier_.try_emplace(stream.get());
    if (added) {
      members_.push_back(stream);
    }
    for (size_t node : dependencies) {
      if (std::find(entry->second.begin(), entry->second.end(), node) ==
          entry->second.end()) {
        entry->second.push_back(node);
      }
    }
  }
  // NB: outside mutex_: a stream's lock is never taken under a capture's.
  stream->setCapture(shared_from_this());
  return accinteSuccess;
}

accinteError_t Capture::end(std::shared_ptr<const GraphBody>* body) {
  std::vector<std::shared_ptr<Stream>> members;
  std::vector<GraphNode> nodes;
  std::vector<size_t> originFrontier;
  bool invalidated = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    invalidated = invalidated_;
    members = std::move(members_);
    nodes = std::move(nodes_);
    originFrontier = std::move(frontier_.at(origin_.get()));
    frontier_.clear();
  }
  // NB: the rest runs without the lock: a kernel's arguments released here
  // (a capture that gives no graph) may call the runtime, which may look at
  // this capture again.
  for (const auto& member : members) {
    member->setCapture(nullptr);
  }
  ActiveCaptures::instance().remove(this);
  if (invalidated) {
    return accinteErrorStreamCaptureInvalidated;
  }
  // Joined means every node comes before the end of the origin stream: mark
  // what the origin's frontier depends on, transitively. A node depends only
  // on earlier ones, so one backward pass marks them all.
  std::vector<bool> joined(nodes.size(), false);
  for (size_t node : originFrontier) {
    joined[node] = true;
  }
  for (size_t i = nodes.size(); i-- > 0;) {
    if (joined[i]) {
      for (size_t dependency : nodes[i].dependencies) {
        joined[dependency] = true;
      }
    }
  }
  if (std::find(joined.begin(), joined.end(), false) != joined.end()) {
    return accinteErrorStreamCaptureUnjoined;
  }
  auto result = std::make_shared<GraphBody>();
  result->device = origin_->device();
  result->nodes = std::move(nodes);
  for (const GraphNode& node : result->nodes) {
    for (const AllocationRef& ref : node.info.allocations) {
      const bool known = std::any_of(
          result->allocations.begin(), result->allocations.end(),
          [&](const AllocationRef& seen) { return seen.serial == ref.serial; });
      if (!known) {
        result->allocations.push_back(ref);
      }
    }
  }
  *body = std::move(result);
  return accinteSuccess;
}

accinteError_t checkBlockingAllowed() {
  if (ActiveCaptures::instance().none()) {
    return accinteSuccess;
  }
  const auto forbidding = ActiveCaptures::instance().forbidding(
      std::this_thread::get_id(), threadCaptureMode);
  for (const auto& capture : forbidding) {
    capture->invalidate();
  }
  return forbidding.empty() ? accinteSuccess
                            : accinteErrorStreamCaptureUnsupported;
}

accinteError_t checkNotCapturing(Stream& stream) {
  const auto capture = stream.capture();
  if (!capture) {
    return accinteSuccess;
  }
  capture->invalidate();
  return accinteErrorStreamCaptureUnsupported;
}

namespace {

/** An executable graph: a body, and the completion of its latest launch,
 * which the next launch waits for. */
struct GraphExec {
  std::shared_ptr<const GraphBody> body;
  std::mutex mutex;
  /** Needs mutex. */
  std::shared_ptr<EventCompletion> lastLaunch;
};

/** Every live graph and executable graph of the process, by handle. */
struct GraphRegistry {
  static GraphRegistry& instance() {
    // NB: leaked on purpose, see MemoryRegistry::instance().
    static GraphRegistry* registry = new GraphRegistry();
    return *registry;
  }

  HandleTable<accinteGraph_t, const GraphBody> graphs;
  HandleTable<accinteGraphExec_t, GraphExec> execs;
};

/** Runs every node of `body` in order; see accinteGraphLaunch(). `activities`
 * holds one record per node when the launch is traced, else nothing. */
accinteError_t runGraph(
    const GraphBody& body,
    std::vector<std::unique_ptr<PendingActivity>>& activities) {
  // NB: if one was freed, this opens none of them; each node then opens its
  // own and fails alone, as it would on a stream.
  const OpenAllocations open(body.allocations);
  std::string firstFailure;
  for (size_t i = 0; i < body.nodes.size(); ++i) {
    Operation& operation = *body.nodes[i].operation;
    PendingActivity* activity =
        activities.empty() ? nullptr : activities[i].get();
    if (activity != nullptr) {
      activity->record.start = activityNow();
    }
    std::string message;
    try {
      const BusyScope busy(operation.busy());
      const accinteError_t status = operation.run();
      if (status != accinteSuccess) {
        message = failedStatusMessage(status);
      }
    } catch (const std::exception& error) {
      message = error.what();
    } catch (...) {
      message = "a kernel threw an exception that is not a std::exception";
    }
    if (activity != nullptr) {
      activity->record.end = activityNow();
      commitActivity(*activity);
    }
    if (!message.empty() && firstFailure.empty()) {
      firstFailure = "in a graph launch, operation " + std::to_string(i) +
                     " (" + body.nodes[i].info.name + "): " + message;
    }
  }
  if (!firstFailure.empty()) {
    // NB: thrown, so that the stream's failure tells which operation failed
    // and why, as a kernel's own exception does.
    throw std::runtime_error(firstFailure);
  }
  return accinteSuccess;
}

/** True for the three ::accinteStreamCaptureMode values.
 *
 * NB: read as the int a C caller may have passed (memcpy is not a load of
 * the enum type), so an out-of-range value stays well-defined in C++. */
bool isCaptureMode(const accinteStreamCaptureMode& mode) {
  int value = 0;
  static_assert(sizeof(mode) == sizeof(int), "C enums are int-sized here");
  std::memcpy(&value, &mode, sizeof(value));
  return value >= accinteStreamCaptureModeGlobal &&
         value <= accinteStreamCaptureModeRelaxed;
}

/** Escapes `text` for a double-quoted DOT string. */
std::string dotEscape(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      escaped += '\\';
    }
    escaped += c;
  }
  return escaped;
}

} // namespace

} // namespace accinte::emulator

using namespace accinte::emulator;

accinteError_t accinteStreamBeginCapture(accinteStream_t stream,
                                         accinteStreamCaptureMode mode) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (!isCaptureMode(mode)) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  if (resolved->isDefault() || resolved->capture()) {
    return accinteErrorStreamCaptureUnsupported;
  }
  auto capture = std::make_shared<Capture>(resolved, mode);
  ActiveCaptures::instance().add(capture);
  resolved->setCapture(std::move(capture));
  return accinteSuccess;
}

accinteError_t accinteStreamEndCapture(accinteStream_t stream,
                                       accinteGraph_t* graph) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (graph == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  const auto capture = resolved->capture();
  if (!capture || capture->origin() != resolved) {
    return accinteErrorStreamCaptureUnmatched;
  }
  if (capture->mode() != accinteStreamCaptureModeRelaxed &&
      capture->owner() != std::this_thread::get_id()) {
    return accinteErrorStreamCaptureWrongThread;
  }
  *graph = nullptr;
  std::shared_ptr<const GraphBody> body;
  ACCINTE_RETURN_IF_ERROR(capture->end(&body));
  *graph = GraphRegistry::instance().graphs.add(std::move(body));
  return accinteSuccess;
}

accinteError_t accinteStreamIsCapturing(accinteStream_t stream,
                                        accinteStreamCaptureStatus* status) {
  return accinteStreamGetCaptureInfo(stream, status, nullptr);
}

accinteError_t accinteStreamGetCaptureInfo(accinteStream_t stream,
                                           accinteStreamCaptureStatus* status,
                                           unsigned long long* id) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (status == nullptr) {
    return accinteErrorInvalidValue;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  const auto capture = resolved->capture();
  *status = capture ? capture->status() : accinteStreamCaptureStatusNone;
  if (id != nullptr) {
    *id = *status == accinteStreamCaptureStatusNone ? 0 : capture->id();
  }
  return accinteSuccess;
}

accinteError_t accinteThreadExchangeStreamCaptureMode(
    accinteStreamCaptureMode* mode) {
  if (mode == nullptr) {
    return accinteErrorInvalidValue;
  }
  if (!isCaptureMode(*mode)) {
    return accinteErrorInvalidValue;
  }
  std::swap(*mode, threadCaptureMode);
  return accinteSuccess;
}

accinteError_t accinteGraphGetNodeCount(accinteGraph_t graph, size_t* count) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (count == nullptr) {
    return accinteErrorInvalidValue;
  }
  const auto body = GraphRegistry::instance().graphs.find(graph);
  if (!body) {
    return accinteErrorInvalidResourceHandle;
  }
  *count = body->nodes.size();
  return accinteSuccess;
}

accinteError_t accinteGraphDebugDotPrint(accinteGraph_t graph,
                                         const char* path) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (path == nullptr) {
    return accinteErrorInvalidValue;
  }
  const auto body = GraphRegistry::instance().graphs.find(graph);
  if (!body) {
    return accinteErrorInvalidResourceHandle;
  }
  std::FILE* file = std::fopen(path, "w");
  if (file == nullptr) {
    return accinteErrorInvalidValue;
  }
  static constexpr const char* kKinds[] = {"", "kernel", "memcpy", "memset"};
  std::fprintf(file, "digraph accinte_graph {\n  label=\"device %d\";\n",
               body->device);
  for (size_t i = 0; i < body->nodes.size(); ++i) {
    const NodeInfo& info = body->nodes[i].info;
    std::fprintf(file, "  n%zu [label=\"%zu: %s\\n%s", i, i, kKinds[info.kind],
                 dotEscape(info.name).c_str());
    if (info.bytes != 0) {
      std::fprintf(file, "\\n%llu bytes",
                   static_cast<unsigned long long>(info.bytes));
    }
    std::fprintf(file, "\"];\n");
    for (size_t dependency : body->nodes[i].dependencies) {
      std::fprintf(file, "  n%zu -> n%zu;\n", dependency, i);
    }
  }
  std::fprintf(file, "}\n");
  return std::fclose(file) == 0 ? accinteSuccess : accinteErrorInvalidValue;
}

accinteError_t accinteGraphInstantiate(accinteGraphExec_t* exec,
                                       accinteGraph_t graph) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  if (exec == nullptr) {
    return accinteErrorInvalidValue;
  }
  auto body = GraphRegistry::instance().graphs.find(graph);
  if (!body) {
    return accinteErrorInvalidResourceHandle;
  }
  auto instance = std::make_shared<GraphExec>();
  instance->body = std::move(body);
  *exec = GraphRegistry::instance().execs.add(std::move(instance));
  return accinteSuccess;
}

// LITERALINCLUDE START: EMULATOR_GRAPH_LAUNCH
accinteError_t accinteGraphLaunch(accinteGraphExec_t exec,
                                  accinteStream_t stream) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  const TracedCall call("accinteGraphLaunch");
  const auto instance = GraphRegistry::instance().execs.find(exec);
  if (!instance) {
    return accinteErrorInvalidResourceHandle;
  }
  std::shared_ptr<Stream> resolved;
  ACCINTE_RETURN_IF_ERROR(
      StreamRegistry::instance().resolve(stream, &resolved));
  ACCINTE_RETURN_IF_ERROR(checkNotCapturing(*resolved));
  const std::shared_ptr<const GraphBody>& body = instance->body;
  if (resolved->device() != body->device) {
    return accinteErrorInvalidValue;
  }
  std::vector<std::unique_ptr<PendingActivity>> activities;
  if (call.on()) {
    for (const GraphNode& node : body->nodes) {
      const NodeInfo& info = node.info;
      activities.push_back(call.work(
          info.kind, info.memcpyKind, info.name.c_str(), resolved->handle(),
          resolved->device(), info.srcDevice, info.dstDevice, info.bytes));
    }
  }
  // NB: launches of one executable graph are ordered, whatever their
  // streams: each waits for the previous one's completion first.
  auto completion = std::make_shared<EventCompletion>(resolved->workerCpu());
  std::shared_ptr<EventCompletion> previous;
  {
    std::lock_guard<std::mutex> lock(instance->mutex);
    previous = std::exchange(instance->lastLaunch, completion);
  }
  // LITERALINCLUDE EMPHASIZE NEXT 2
  resolved->enqueue(
      makeOperation([body, previous, completion,
                     activities = std::move(activities)]() mutable {
        if (previous) {
          previous->wait();
        }
        // NB: completed however the nodes end, so the next launch never waits
        // forever for a failed one.
        struct Complete {
          EventCompletion& completion;
          ~Complete() {
            completion.complete({});
          }
        } complete{*completion};
        return runGraph(*body, activities); // LITERALINCLUDE EMPHASIZE
      }));
  return accinteSuccess;
}
// LITERALINCLUDE END: EMULATOR_GRAPH_LAUNCH

accinteError_t accinteGraphExecDestroy(accinteGraphExec_t exec) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  return GraphRegistry::instance().execs.remove(exec)
             ? accinteSuccess
             : accinteErrorInvalidResourceHandle;
}

accinteError_t accinteGraphDestroy(accinteGraph_t graph) {
  ACCINTE_RETURN_IF_ERROR(checkUsable());
  return GraphRegistry::instance().graphs.remove(graph)
             ? accinteSuccess
             : accinteErrorInvalidResourceHandle;
}
