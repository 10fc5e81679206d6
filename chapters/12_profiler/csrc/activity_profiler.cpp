// Chapter 12: accinte's activity profiler for Kineto (activity_profiler.h).

#include <12_profiler/csrc/activity_profiler.h>

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <accinte/runtime.h>

#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

namespace accinte {
namespace {

using libkineto::ActivityType;

/** Nanoseconds since the Unix epoch, now. */
int64_t unixNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/** The emulator's clock, now; the runtime cannot fail to read it. */
uint64_t monotonicNanoseconds() {
  uint64_t now = 0;
  accinteActivityGetTimestamp(&now);
  return now;
}

/** A runtime error as a sentence for the profile's error list. */
std::string describe(accinteError_t error, const char* call) {
  return fmt::format("accinte profiler: {} failed: {}", call,
                     accinteGetErrorString(error));
}

// LITERALINCLUDE START: CH12_KINDS
/** The Kineto activity type of a record of kind `kind`. */
ActivityType activityTypeOf(accinteActivityKind kind) {
  switch (kind) {
    case accinteActivityKindKernel:
      return ActivityType::CONCURRENT_KERNEL;
    case accinteActivityKindMemcpy:
      return ActivityType::GPU_MEMCPY;
    case accinteActivityKindMemset:
      return ActivityType::GPU_MEMSET;
    case accinteActivityKindRuntime:
      return ActivityType::PRIVATEUSE1_RUNTIME;
  }
  TORCH_INTERNAL_ASSERT(false, "accinte profiler: unknown record kind ",
                        static_cast<int>(kind));
}
// LITERALINCLUDE END: CH12_KINDS

/** The innermost `record_function` ranges open on this thread. */
thread_local std::vector<uint64_t> user_ranges;

} // namespace

ClockConverter::ClockConverter() {
  // NB: the two clocks cannot be read at the same instant; of three tries,
  // the one whose monotonic readings bracket the wall-clock reading most
  // tightly gives the offset with the smallest error.
  uint64_t best_gap = std::numeric_limits<uint64_t>::max();
  offset_ = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint64_t before = monotonicNanoseconds();
    const int64_t wall = unixNanoseconds();
    const uint64_t after = monotonicNanoseconds();
    if (after - before < best_gap) {
      best_gap = after - before;
      offset_ = wall - static_cast<int64_t>(before + (after - before) / 2);
    }
  }
}

// ---------------------------------------------------------------------------
// The session
// ---------------------------------------------------------------------------

ActivityProfilerSession::ActivityProfilerSession(
    std::set<ActivityType> activityTypes)
    : activityTypes_(std::move(activityTypes)) {}

ActivityProfilerSession::~ActivityProfilerSession() {
  if (recording_) {
    accinteActivityDisable();
    stopDrain();
  }
}

// LITERALINCLUDE START: CH12_START_STOP
void ActivityProfilerSession::start() {
  clock_ = ClockConverter();
  capacity_ = bufferCapacity();
  const accinteError_t error = accinteActivityEnable(capacity_);
  if (error != accinteSuccess) {
    errors_.push_back(describe(error, "accinteActivityEnable"));
    status_ = libkineto::TraceStatus::ERROR;
    return;
  }
  recording_ = true;
  // NB: the runtime's buffer is bounded, as CUPTI's buffers are; a thread
  // empties it while the profile records, so that a long profile loses
  // nothing unless the device outruns it.
  stopping_ = false;
  drainer_ = std::thread([this] { drain(); });
  status_ = libkineto::TraceStatus::RECORDING;
}

void ActivityProfilerSession::stop() {
  if (!recording_) {
    return;
  }
  // NB: no synchronize here. Work still queued when the profile stops is
  // not traced (torch.profiler synchronizes the device before it stops
  // Kineto), and a synchronize would take an asynchronous failure away from
  // the user's next synchronize, which must report it.
  accinteActivityDisable();
  recording_ = false;
  stopDrain();
  takeRecords();
  uint64_t dropped = 0;
  accinteActivityGetDropped(&dropped);
  if (dropped > 0) {
    errors_.push_back(fmt::format(
        "accinte profiler: {} device activities were dropped because the "
        "runtime's buffer ({} records) filled up faster than it was emptied; "
        "set ACCINTE_PROFILER_BUFFER_RECORDS higher",
        dropped, capacity_));
    // NB: a profile that silently misses work would mislead; Kineto keeps
    // a session's errors to itself, so the user is told here.
    TORCH_WARN(errors_.back());
  }
  status_ = libkineto::TraceStatus::PROCESSING;
}
// LITERALINCLUDE END: CH12_START_STOP

size_t ActivityProfilerSession::bufferCapacity() {
  const char* records = std::getenv("ACCINTE_PROFILER_BUFFER_RECORDS");
  if (records == nullptr || *records == '\0') {
    return ACCINTE_ACTIVITY_DEFAULT_CAPACITY;
  }
  char* end = nullptr;
  const unsigned long long value = std::strtoull(records, &end, 10);
  if (*end != '\0' || value == 0 || value > ACCINTE_ACTIVITY_MAX_CAPACITY) {
    // NB: a warning, not an error: this runs inside Kineto's start of the
    // profile, which an exception would leave half started.
    TORCH_WARN(
        "accinte profiler: ACCINTE_PROFILER_BUFFER_RECORDS must be a "
        "number of records from 1 to ",
        ACCINTE_ACTIVITY_MAX_CAPACITY, ", got '", records, "'; using ",
        ACCINTE_ACTIVITY_DEFAULT_CAPACITY);
    return ACCINTE_ACTIVITY_DEFAULT_CAPACITY;
  }
  return static_cast<size_t>(value);
}

void ActivityProfilerSession::drain() {
  std::unique_lock<std::mutex> lock(drainMutex_);
  while (!drainWake_.wait_for(lock, std::chrono::milliseconds(20),
                              [this] { return stopping_; })) {
    takeRecords();
  }
}

void ActivityProfilerSession::stopDrain() {
  {
    std::lock_guard<std::mutex> lock(drainMutex_);
    stopping_ = true;
  }
  drainWake_.notify_one();
  if (drainer_.joinable()) {
    drainer_.join();
  }
}

void ActivityProfilerSession::takeRecords() {
  constexpr size_t kBatch = 4096;
  size_t taken = 0;
  do {
    const size_t old_size = records_.size();
    records_.resize(old_size + kBatch);
    const accinteError_t error =
        accinteActivityTake(records_.data() + old_size, kBatch, &taken);
    records_.resize(old_size + (error == accinteSuccess ? taken : 0));
    if (error != accinteSuccess) {
      errors_.push_back(describe(error, "accinteActivityTake"));
      break;
    }
  } while (taken == kBatch);
}

std::vector<std::string> ActivityProfilerSession::errors() {
  return errors_;
}

// LITERALINCLUDE START: CH12_CORRELATION
void ActivityProfilerSession::pushCorrelationId(uint64_t id) {
  // NB: the emulator tags everything this thread enqueues from now on with
  // `id`, as CUPTI does with an external correlation id.
  accinteActivityPushExternalCorrelationId(id);
  if (!user_ranges.empty()) {
    std::lock_guard<std::mutex> lock(userRangesMutex_);
    userRangeOfOperator_[id] = user_ranges.back();
  }
}

void ActivityProfilerSession::popCorrelationId() {
  accinteActivityPopExternalCorrelationId(nullptr);
}

void ActivityProfilerSession::pushUserCorrelationId(uint64_t id) {
  user_ranges.push_back(id);
}

void ActivityProfilerSession::popUserCorrelationId() {
  if (!user_ranges.empty()) {
    user_ranges.pop_back();
  }
}
// LITERALINCLUDE END: CH12_CORRELATION

void ActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  processTrace(logger, nullptr, 0, 0);
}

// LITERALINCLUDE START: CH12_PROCESS
void ActivityProfilerSession::processTrace(
    libkineto::ActivityLogger& logger,
    libkineto::getLinkedActivityCallback getLinkedActivity, int64_t startTime,
    int64_t endTime) {
  buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  buffer_->span = libkineto::TraceSpan(startTime, endTime, "accinte");
  for (const accinteActivityRecord& record : records_) {
    if (activityTypes_.count(activityTypeOf(record.kind)) == 0) {
      continue;
    }
    addActivity(record, getLinkedActivity);
  }
  if (activityTypes_.count(ActivityType::GPU_USER_ANNOTATION) != 0) {
    addUserAnnotations(getLinkedActivity);
  }
  logDeviceRows(logger, startTime);
  for (const auto& activity : buffer_->activities) {
    logger.handleGenericActivity(*activity);
  }
  status_ = libkineto::TraceStatus::READY;
}
// LITERALINCLUDE END: CH12_PROCESS

// LITERALINCLUDE START: CH12_ACTIVITY
void ActivityProfilerSession::addActivity(
    const accinteActivityRecord& record,
    const libkineto::getLinkedActivityCallback& getLinkedActivity) {
  const ActivityType type = activityTypeOf(record.kind);
  // The CPU operator that launched the work: its correlation id is what the
  // launching thread had pushed (pushCorrelationId()).
  const libkineto::ITraceActivity* op = nullptr;
  if (getLinkedActivity && record.externalCorrelationId != 0) {
    op = getLinkedActivity(static_cast<int32_t>(record.externalCorrelationId));
  }
  // NB: a kernel launched without a name of its own ("kernel") is named
  // after the operator that launched it, so that every native kernel of
  // chapter 09, every random kernel of chapter 08 and every collective of
  // chapter 11 reads as its operator, with no naming code in them. The
  // suffix keeps the kernel apart from its operator in key_averages(),
  // which groups events by name, as CUDA's kernel names are apart.
  std::string name = record.name;
  if (record.kind == accinteActivityKindKernel && name == "kernel" &&
      op != nullptr) {
    name = op->name() + " kernel";
  }
  buffer_->emplace_activity(buffer_->span, type, name);
  libkineto::GenericTraceActivity& activity = *buffer_->activities.back();
  activity.startTime = clock_.toUnixNanoseconds(record.start);
  activity.endTime = clock_.toUnixNanoseconds(record.end);
  activity.threadId = static_cast<int32_t>(record.threadId);
  activity.linked = op;
  // LITERALINCLUDE END: CH12_ACTIVITY
  // LITERALINCLUDE START: CH12_PLACEMENT
  // A runtime call sits on its host thread's row; the work on its stream's
  // row of its device, as CUPTI's records do.
  activity.flow.id = static_cast<uint32_t>(record.correlationId);
  activity.flow.type = libkineto::kLinkAsyncCpuGpu;
  if (record.kind == accinteActivityKindRuntime) {
    // NB: no correlation id on a host-side activity: PyTorch would take it
    // for an operator's (both count from 1) and give the runtime call that
    // operator's device time. The flow and the "correlation" field below
    // still pair it with its work.
    activity.device = static_cast<int32_t>(getpid());
    activity.resource = static_cast<int32_t>(record.threadId);
    activity.flow.start = true;
  } else {
    const auto stream = reinterpret_cast<uintptr_t>(record.stream);
    activity.id = static_cast<int32_t>(record.correlationId);
    activity.device = record.device;
    activity.resource = static_cast<int32_t>(stream);
    activity.flow.start = false;
    activity.addMetadata("device", record.device);
    activity.addMetadata("stream", stream);
    streams_.emplace(stream, StreamRow{record.device});
  }
  activity.addMetadata("correlation", record.correlationId);
  if (op != nullptr) {
    activity.addMetadata("External id", record.externalCorrelationId);
  }
  if (record.kind == accinteActivityKindMemcpy ||
      record.kind == accinteActivityKindMemset) {
    activity.addMetadata("bytes", record.bytes);
    const int64_t duration = activity.endTime - activity.startTime;
    if (duration > 0) {
      activity.addMetadata(
          "memory bandwidth (GB/s)",
          static_cast<double>(record.bytes) / static_cast<double>(duration));
    }
  }
  if (record.kind == accinteActivityKindMemcpy) {
    activity.addMetadata("src device", record.srcDevice);
    activity.addMetadata("dst device", record.dstDevice);
  }
}
// LITERALINCLUDE END: CH12_PLACEMENT

// LITERALINCLUDE START: CH12_USER_RANGES
void ActivityProfilerSession::addUserAnnotations(
    const libkineto::getLinkedActivityCallback& getLinkedActivity) {
  // Per (range, device, stream): the span from the first to the last piece
  // of work that operators inside the range enqueued on that stream, as
  // Kineto draws CUDA's "gpu_user_annotation" rows.
  std::map<std::tuple<uint64_t, int, uintptr_t>, std::pair<uint64_t, uint64_t>>
      spans;
  {
    std::lock_guard<std::mutex> lock(userRangesMutex_);
    for (const accinteActivityRecord& record : records_) {
      if (record.kind == accinteActivityKindRuntime) {
        continue;
      }
      auto range = userRangeOfOperator_.find(record.externalCorrelationId);
      if (range == userRangeOfOperator_.end()) {
        continue;
      }
      const auto key =
          std::make_tuple(range->second, record.device,
                          reinterpret_cast<uintptr_t>(record.stream));
      auto [span, inserted] = spans.try_emplace(key, record.start, record.end);
      if (!inserted) {
        span->second.first = std::min(span->second.first, record.start);
        span->second.second = std::max(span->second.second, record.end);
      }
    }
  }
  for (const auto& [key, span] : spans) {
    const auto& [range, device, stream] = key;
    const libkineto::ITraceActivity* annotation =
        getLinkedActivity ? getLinkedActivity(static_cast<int32_t>(range))
                          : nullptr;
    if (annotation == nullptr) {
      continue;
    }
    buffer_->emplace_activity(buffer_->span, ActivityType::GPU_USER_ANNOTATION,
                              annotation->name());
    libkineto::GenericTraceActivity& activity = *buffer_->activities.back();
    activity.startTime = clock_.toUnixNanoseconds(span.first);
    activity.endTime = clock_.toUnixNanoseconds(span.second);
    activity.id = static_cast<int32_t>(range);
    activity.device = device;
    activity.resource = static_cast<int32_t>(stream);
    activity.linked = annotation;
    activity.addMetadata("External id", range);
  }
}
// LITERALINCLUDE END: CH12_USER_RANGES

// LITERALINCLUDE START: CH12_ROWS
void ActivityProfilerSession::logDeviceRows(libkineto::ActivityLogger& logger,
                                            int64_t time) const {
  std::set<int> devices;
  for (const auto& [stream, row] : streams_) {
    devices.insert(row.device);
  }
  for (int device : devices) {
    accinteDeviceProp properties{};
    accinteGetDeviceProperties(&properties, device);
    accinteStream_t default_stream = nullptr;
    accinteGetDefaultStream(device, &default_stream);
    // NB: one trace "process" per device, named as the device, with one
    // row per stream of the device; the default stream is marked.
    logger.handleDeviceInfo(
        libkineto::DeviceInfo{device, device, fmt::format("accinte {}", device),
                              properties.name},
        time);
    for (const auto& [stream, row] : streams_) {
      if (row.device != device) {
        continue;
      }
      const bool is_default =
          stream == reinterpret_cast<uintptr_t>(default_stream);
      logger.handleResourceInfo(
          libkineto::ResourceInfo{static_cast<int64_t>(stream),
                                  static_cast<int64_t>(stream), device,
                                  fmt::format("stream {}{}", stream,
                                              is_default ? " (default)" : "")},
          time);
    }
  }
}
// LITERALINCLUDE END: CH12_ROWS

std::unique_ptr<libkineto::DeviceInfo>
ActivityProfilerSession::getDeviceInfo() {
  // NB: Kineto asks a session for one device; this one may have several, so
  // processTrace() logs every device and stream itself.
  return nullptr;
}

std::vector<libkineto::ResourceInfo>
ActivityProfilerSession::getResourceInfos() {
  return {};
}

std::unique_ptr<libkineto::CpuTraceBuffer>
ActivityProfilerSession::getTraceBuffer() {
  return std::move(buffer_);
}

std::string ActivityProfilerSession::getDeviceProperties() {
  int count = 0;
  if (accinteGetDeviceCount(&count) != accinteSuccess) {
    return "";
  }
  std::string json;
  for (int device = 0; device < count; ++device) {
    accinteDeviceProp properties{};
    if (accinteGetDeviceProperties(&properties, device) != accinteSuccess) {
      continue;
    }
    json += fmt::format(
        "{}{{\"id\": {}, \"name\": \"{}\", \"totalGlobalMem\": {}}}",
        json.empty() ? "" : ", ", device, properties.name,
        properties.totalGlobalMem);
  }
  return json;
}

// ---------------------------------------------------------------------------
// The profiler
// ---------------------------------------------------------------------------

// LITERALINCLUDE START: CH12_PROFILER
const std::string& ActivityProfiler::name() const {
  static const std::string name = "accinte";
  return name;
}

const std::set<ActivityType>& ActivityProfiler::availableActivities() const {
  // NB: the activity types PyTorch asks Kineto for when a profile includes
  // ProfilerActivity.PrivateUse1. PyTorch counts the device-side ones
  // (kernels, copies, memsets, user annotations) as device time of the
  // renamed PrivateUse1 device.
  static const std::set<ActivityType> types = {
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
      ActivityType::GPU_MEMSET, ActivityType::GPU_USER_ANNOTATION,
      ActivityType::PRIVATEUSE1_RUNTIME};
  return types;
}

std::unique_ptr<libkineto::IActivityProfilerSession>
ActivityProfiler::configure(const std::set<ActivityType>& activityTypes,
                            const libkineto::Config& config) {
  std::set<ActivityType> wanted;
  for (ActivityType type : availableActivities()) {
    if (activityTypes.count(type) != 0) {
      wanted.insert(type);
    }
  }
  if (wanted.empty()) {
    return nullptr;
  }
  return std::make_unique<ActivityProfilerSession>(std::move(wanted));
}

std::unique_ptr<libkineto::IActivityProfilerSession>
ActivityProfiler::configure(int64_t startTimeMs, int64_t durationMs,
                            const std::set<ActivityType>& activityTypes,
                            const libkineto::Config& config) {
  return configure(activityTypes, config);
}

// NB: registered when the backend library is loaded; PyTorch hands the
// factory to Kineto when Kineto starts, or at once if it already has.
REGISTER_PRIVATEUSE1_PROFILER(ActivityProfiler);
// LITERALINCLUDE END: CH12_PROFILER

// ---------------------------------------------------------------------------
// Event timing, for the profiler without Kineto
// ---------------------------------------------------------------------------

namespace {

// LITERALINCLUDE START: CH12_STUBS
/**
 * What PyTorch's profiler calls when it times operators with device events
 * instead of collecting activities: `use_kineto=False`
 * (ProfilerState.KINETO_PRIVATEUSE1_FALLBACK), CUDA's legacy mode. Each
 * operator records an event on the current stream as it starts and as it
 * ends; the time between the two is the operator's device time.
 */
class EventStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device,
              torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex current = currentDevice();
    if (device != nullptr) {
      *device = current;
    }
    // NB: created so that waiting for it never takes a failure of the
    // profiled work from the user's own synchronize.
    accinteEvent_t raw = nullptr;
    ACCINTE_CHECK(
        accinteEventCreateWithFlags(&raw, accinteEventDisableFailureReport));
    *event = std::shared_ptr<void>(raw, [](void* e) {
      accinteEventDestroy(static_cast<accinteEvent_t>(e));
    });
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    ACCINTE_CHECK(
        accinteEventRecord(raw, nativeStream(currentStream(current))));
  }

  float elapsed(
      const torch::profiler::impl::ProfilerVoidEventStub* start,
      const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    auto* first = static_cast<accinteEvent_t>(start->get());
    auto* second = static_cast<accinteEvent_t>(end->get());
    ACCINTE_CHECK(accinteEventSynchronize(first));
    ACCINTE_CHECK(accinteEventSynchronize(second));
    float milliseconds = 0;
    ACCINTE_CHECK(accinteEventElapsedTime(&milliseconds, first, second));
    return milliseconds * 1000; // PyTorch expects microseconds
  }
  // LITERALINCLUDE END: CH12_STUBS

  // LITERALINCLUDE START: CH12_STUB_RANGES
  // NB: CUDA's stubs forward these to NVTX. The emulator's kernel name stack
  // is the nearest thing: kernels launched inside a range take its name.
  void mark(const char* name) const override {}
  void rangePush(const char* name) const override {
    ACCINTE_CHECK(accinteActivityPushName(name));
  }
  void rangePop() const override {
    ACCINTE_CHECK(accinteActivityPopName());
  }

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex device = 0; device < deviceCountOrZero(); ++device) {
      const c10::DeviceIndex previous = exchangeDevice(device);
      op(device);
      setDevice(previous);
    }
  }

  void synchronize() const override {
    synchronizeDevice(currentDevice());
  }
};

// NB: PyTorch keeps a pointer to the stubs for the life of the process.
const bool event_stubs_registered = [] {
  static EventStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();
// LITERALINCLUDE END: CH12_STUB_RANGES

} // namespace

} // namespace accinte
