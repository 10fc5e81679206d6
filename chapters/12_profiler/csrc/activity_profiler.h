#pragma once

/**
 * @file
 * accinte's activity profiler: the plug-in through which Kineto, the library
 * behind `torch.profiler`, collects what the device did during a profile.
 *
 * A PyTorch profile is assembled by Kineto from activity sources. PyTorch
 * itself is one: it records the CPU operators, each with a correlation id.
 * On CUDA, CUPTI is another: it records kernels and copies, each tagged with
 * the id of the operator that launched it. For a PrivateUse1 device, the
 * backend registers an `IActivityProfiler` (REGISTER_PRIVATEUSE1_PROFILER);
 * Kineto asks it for a session per profile, starts and stops the session with
 * the profile, hands it each operator's correlation id as the operator runs,
 * and finally has it log the device's activities into the trace.
 *
 * Here the device's tracer is the emulator's activity API (runtime.h,
 * "Activity tracing"), which plays CUPTI's part: it records every kernel,
 * copy, memset and runtime call, with the id the launching thread had pushed.
 */

#include <accinte/runtime.h>

#include <IActivityProfiler.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace accinte {

/**
 * Converts timestamps of the emulator's clock (`CLOCK_MONOTONIC`) to the
 * profile's (nanoseconds since the Unix epoch), with the offset between the
 * two clocks sampled once, when the session starts.
 */
class ClockConverter {
 public:
  /** Samples both clocks. */
  ClockConverter();

  /** `monotonic` (ns of `CLOCK_MONOTONIC`) as ns since the Unix epoch. */
  int64_t toUnixNanoseconds(uint64_t monotonic) const {
    return static_cast<int64_t>(monotonic) + offset_;
  }

 private:
  int64_t offset_;
};

/**
 * One profile's view of the device: enables the emulator's tracing on
 * start(), takes the records on stop(), and turns them into Kineto
 * activities in processTrace().
 */
class ActivityProfilerSession final
    : public libkineto::IActivityProfilerSession {
 public:
  /** A session that records `activityTypes` (a subset of
   * ActivityProfiler::availableActivities()). */
  explicit ActivityProfilerSession(
      std::set<libkineto::ActivityType> activityTypes);
  /** Ends tracing if the session is destroyed while still recording. */
  ~ActivityProfilerSession() override;

  /** Starts the emulator's tracing. */
  void start() override;
  /** Ends the emulator's tracing and takes its records. */
  void stop() override;
  /** What went wrong while recording (records dropped for want of room). */
  std::vector<std::string> errors() override;

  /** Logs the activities with no link to the CPU operators. */
  void processTrace(libkineto::ActivityLogger& logger) override;
  /** Logs the activities, each linked to the CPU operator that launched it
   * (`getLinkedActivity` finds an operator by its correlation id). */
  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback getLinkedActivity,
                    int64_t startTime, int64_t endTime) override;

  /** The first device that ran work; the others are logged by
   * processTrace(). */
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  /** One row per stream that ran work. */
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  /** The activities processTrace() made, handed over to Kineto, which keeps
   * them as long as the trace. */
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;

  /** Called by PyTorch, through Kineto, as each operator starts: the work
   * the operator enqueues carries `id`. */
  void pushCorrelationId(uint64_t id) override;
  /** Called as each operator ends. */
  void popCorrelationId() override;
  /** Called as each `record_function` range starts. */
  void pushUserCorrelationId(uint64_t id) override;
  /** Called as each `record_function` range ends. */
  void popUserCorrelationId() override;

  /** The devices' properties, as JSON objects for the trace's header. */
  std::string getDeviceProperties() override;

 private:
  /** A stream that ran work in this profile. */
  struct StreamRow {
    /** The device the stream belongs to. */
    int device;
  };

  /** The runtime's buffer, in records: ACCINTE_PROFILER_BUFFER_RECORDS, or
   * the runtime's default. */
  static size_t bufferCapacity();
  /** The drain thread's loop: takes the records every 20 ms. */
  void drain();
  /** Ends the drain thread. */
  void stopDrain();
  /** Moves the runtime's records into `records_`. */
  void takeRecords();
  void logDeviceRows(libkineto::ActivityLogger& logger, int64_t time) const;
  void addActivity(
      const accinteActivityRecord& record,
      const libkineto::getLinkedActivityCallback& getLinkedActivity);
  void addUserAnnotations(
      const libkineto::getLinkedActivityCallback& getLinkedActivity);

  std::set<libkineto::ActivityType> activityTypes_;
  bool recording_ = false;
  /** The runtime's buffer in this session, in records. */
  size_t capacity_ = ACCINTE_ACTIVITY_DEFAULT_CAPACITY;
  ClockConverter clock_;
  std::vector<accinteActivityRecord> records_;
  std::vector<std::string> errors_;

  /** Empties the runtime's buffer into `records_` while recording; the only
   * thread that touches `records_` and `errors_` until stop() joins it. */
  std::thread drainer_;
  std::mutex drainMutex_;
  std::condition_variable drainWake_;
  bool stopping_ = false;
  std::map<uintptr_t, StreamRow> streams_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;

  /** Per operator correlation id, the innermost `record_function` range
   * open when the operator started, pushed from the threads that run
   * operators; read in processTrace(). */
  std::mutex userRangesMutex_;
  std::unordered_map<uint64_t, uint64_t> userRangeOfOperator_;
};

/**
 * The activity profiler Kineto creates once per process, and asks for a
 * session per profile.
 */
class ActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  /** "accinte". */
  const std::string& name() const override;
  /** Kernels, copies, memsets, `record_function` ranges on the device, and
   * runtime calls. */
  const std::set<libkineto::ActivityType>& availableActivities() const override;
  /** A session, or none if the profile asks for none of this profiler's
   * activities. */
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activityTypes,
      const libkineto::Config& config) override;
  /** The same; a scheduled start changes nothing for the emulator. */
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t startTimeMs, int64_t durationMs,
      const std::set<libkineto::ActivityType>& activityTypes,
      const libkineto::Config& config) override;
};

} // namespace accinte
