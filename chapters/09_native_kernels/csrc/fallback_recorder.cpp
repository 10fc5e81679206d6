// Chapter 09: the fallback recorder. It watches operator calls through
// PyTorch's RecordFunction callbacks, the mechanism under torch.profiler, and
// counts the calls that the CPU fallback ran.

#include <09_native_kernels/csrc/fallback_recorder.h>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>

namespace accinte {
namespace {

using Clock = std::chrono::steady_clock;

/** One operator call in progress on a thread. */
struct OperatorCall : at::ObserverContext {
  std::string op;
  Clock::time_point start;
  uint64_t recording;
  /** Its place in fallback_marks. */
  size_t depth;
};

/** For each call in progress on this thread, innermost last: whether it
 * took the fallback. */
thread_local std::vector<bool> fallback_marks;

/** The state of the recording. */
struct Recording {
  std::mutex mutex;
  // NB: a call that started under one recording may end after it stopped,
  // or under the next one: each call keeps the number of its recording.
  uint64_t number = 0;
  bool running = false;
  at::CallbackHandle callback = at::INVALID_CALLBACK_HANDLE;
  std::map<std::string, FallbackCount> counts;
};

Recording& recording() {
  static Recording instance;
  return instance;
}

std::string operatorName(const at::RecordFunction& call) {
  const std::optional<c10::OperatorName> name = call.operator_name();
  if (!name.has_value()) {
    return call.name();
  }
  return name->overload_name.empty() ? name->name
                                     : name->name + "." + name->overload_name;
}

// LITERALINCLUDE START: CH09_RECORDER
// NB: at::native::cpu_fallback, which every CPU fallback of this backend
// runs, moves an operator's tensors to the host with a single call of
// `aten::_to_cpu`. Seen from RecordFunction, that call is a child of the
// operator being run on the fallback: that is the mark this recorder counts.
std::unique_ptr<at::ObserverContext> onCallStart(const at::RecordFunction& fn) {
  auto call = std::make_unique<OperatorCall>();
  call->op = operatorName(fn);
  if (call->op == "aten::_to_cpu" && !fallback_marks.empty()) {
    fallback_marks.back() = true; // LITERALINCLUDE EMPHASIZE
  }
  {
    std::lock_guard<std::mutex> lock(recording().mutex);
    call->recording = recording().number;
  }
  call->depth = fallback_marks.size();
  fallback_marks.push_back(false);
  call->start = Clock::now();
  return call;
}

void onCallEnd(const at::RecordFunction&, at::ObserverContext* context) {
  auto* call = static_cast<OperatorCall*>(context);
  const double seconds =
      std::chrono::duration<double>(Clock::now() - call->start).count();
  // NB: marks of calls whose end was never seen (a callback removed while
  // they ran) go with their parent.
  const bool took_fallback =
      call->depth < fallback_marks.size() && fallback_marks[call->depth];
  fallback_marks.resize(std::min(call->depth, fallback_marks.size()));
  if (!took_fallback) {
    return;
  }
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.running && call->recording == state.number) {
    FallbackCount& count = state.counts[call->op];
    count.op = call->op;
    count.calls += 1;         // LITERALINCLUDE EMPHASIZE
    count.seconds += seconds; // LITERALINCLUDE EMPHASIZE
  }
}
// LITERALINCLUDE END: CH09_RECORDER

} // namespace

void startFallbackRecording() {
  Recording& state = recording();
  std::lock_guard<std::mutex> lock(state.mutex);
  TORCH_CHECK(!state.running, "a fallback recording is already running");
  state.running = true;
  state.number += 1;
  state.counts.clear();
  state.callback =
      at::addGlobalCallback(at::RecordFunctionCallback(&onCallStart, &onCallEnd)
                                .scopes({at::RecordScope::FUNCTION}));
}

std::vector<FallbackCount> stopFallbackRecording() {
  Recording& state = recording();
  std::vector<FallbackCount> counts;
  at::CallbackHandle callback = at::INVALID_CALLBACK_HANDLE;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    TORCH_CHECK(state.running, "no fallback recording is running");
    state.running = false;
    std::swap(callback, state.callback);
    for (auto& [op, count] : state.counts) {
      counts.push_back(std::move(count));
    }
    state.counts.clear();
  }
  at::removeCallback(callback);
  std::sort(counts.begin(), counts.end(),
            [](const FallbackCount& a, const FallbackCount& b) {
              return a.seconds > b.seconds;
            });
  return counts;
}

} // namespace accinte
