// Chapter 15: the accinte graph behind torch.accelerator.Graph and
// torch.accinte.AccinteGraph, its private memory pool and its capture-safe
// random numbers.

#include <15_graphs/csrc/graph.h>

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/runtime.h>
#include <07_memory/csrc/caching_allocator.h>
#include <08_generator/csrc/generator.h>

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace accinte {

// LITERALINCLUDE START: CH15_GENERATOR_STATE
/** A generator as one graph sees it: where its replays read their (seed,
 * offset), and how far one replay advances its offset. */
struct AccinteGraph::GeneratorState {
  c10::intrusive_ptr<c10::GeneratorImpl> generator;
  // {seed, offset} in device memory, written on the replay stream before
  // each launch; the captured kernels read it when they run.
  uint64_t* device_state = nullptr;
  // The numbers the captured launches reserved, counted during capture.
  uint64_t increment = 0;
};
// LITERALINCLUDE END: CH15_GENERATOR_STATE

namespace {

using GeneratorStates = std::vector<AccinteGraph::GeneratorState*>;

/** The captures under way, by the emulator's capture id: what a random
 * operator on a capturing stream looks its generator up in. */
struct Captures {
  std::mutex mutex;
  std::unordered_map<unsigned long long, const GeneratorStates*> by_id;

  static Captures& instance() {
    // NB: leaked: a graph may be dropped at exit, after static destructors.
    static auto* captures = new Captures();
    return *captures;
  }
};

/** The capture id of `stream`, 0 if it is not capturing. */
unsigned long long captureId(accinteStream_t stream) {
  accinteStreamCaptureStatus status = accinteStreamCaptureStatusNone;
  unsigned long long id = 0;
  ACCINTE_CHECK(accinteStreamGetCaptureInfo(stream, &status, &id));
  return status == accinteStreamCaptureStatusNone ? 0 : id;
}

// LITERALINCLUDE START: CH15_RESERVE_IN_CAPTURE
/**
 * Chapter 08's PhiloxCaptureHook: a random operator enqueued on a capturing
 * stream gets, instead of numbers, the place where each replay will have
 * written the generator's (seed, offset), and its position within the
 * graph's own draws.
 */
PhiloxState reserveInCapture(AccinteGeneratorImpl& generator,
                             uint64_t increment) {
  const c10::DeviceIndex device = generator.device().index();
  const unsigned long long id = captureId(nativeStream(currentStream(device)));
  Captures& captures = Captures::instance();
  std::lock_guard<std::mutex> lock(captures.mutex);
  const auto it = captures.by_id.find(id);
  TORCH_CHECK(it != captures.by_id.end(),
              "accinte: a random operator was captured on a stream whose "
              "capture was not begun by an accinte graph; its numbers would "
              "repeat at every replay");
  for (AccinteGraph::GeneratorState* state : *it->second) {
    if (state->generator.get() == &generator) {
      const PhiloxState reserved{0, state->increment, state->device_state};
      state->increment += increment; // LITERALINCLUDE EMPHASIZE
      return reserved;
    }
  }
  TORCH_CHECK(false,
              "accinte: a random operator drew from a generator this graph "
              "does not know; register it before capture with "
              "graph.register_generator_state(generator), or its numbers "
              "would repeat at every replay");
}
// LITERALINCLUDE END: CH15_RESERVE_IN_CAPTURE

accinteStreamCaptureMode nativeMode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Default: // NB: CUDA's default is global too
    case at::GraphCaptureMode::Global:
      return accinteStreamCaptureModeGlobal;
    case at::GraphCaptureMode::ThreadLocal:
      return accinteStreamCaptureModeThreadLocal;
    case at::GraphCaptureMode::Relaxed:
      return accinteStreamCaptureModeRelaxed;
  }
  TORCH_CHECK(false, "accinte graph: unknown capture mode ",
              static_cast<int>(mode));
}

std::atomic<int64_t> next_pool_id{1};

struct RegisterCaptureHook {
  RegisterCaptureHook() {
    registerPhiloxCaptureHook(&reserveInCapture);
  }
} register_capture_hook;

} // namespace

c10::MempoolId_t newGraphPoolId() {
  return {next_pool_id.fetch_add(1), 0};
}

size_t capturesUnderway() {
  Captures& captures = Captures::instance();
  std::lock_guard<std::mutex> lock(captures.mutex);
  return captures.by_id.size();
}

AccinteGraph::AccinteGraph(const at::GraphImplArgs& args)
    : keep_graph_(args.keep_graph) {}

AccinteGraph::~AccinteGraph() {
  releaseResources();
}

void AccinteGraph::registerGenerator(const at::Generator& generator) {
  TORCH_CHECK(!capturing_,
              "accinte graph: register generators before capture_begin()");
  auto* impl = at::check_generator<AccinteGeneratorImpl>(generator);
  const bool known = std::any_of(generators_.begin(), generators_.end(),
                                 [&](const GeneratorState* state) {
                                   return state->generator.get() == impl;
                                 });
  if (!known) {
    generators_.push_back(new GeneratorState{generator.getIntrusivePtr()});
  }
}

// LITERALINCLUDE START: CH15_CAPTURE_BEGIN
void AccinteGraph::capture_begin(c10::MempoolId_t pool,
                                 at::GraphCaptureMode mode) {
  TORCH_CHECK(!capturing_ && !captured_,
              "accinte graph: this graph already holds a capture; reset() "
              "it, or create another graph, to capture again");
  const c10::DeviceIndex device = currentDevice();
  const c10::Stream stream = currentStream(device);
  // LITERALINCLUDE EMPHASIZE NEXT 3
  TORCH_CHECK(stream != defaultStream(device),
              "accinte graphs must be captured on a non-default stream. "
              "(However, after capture, it's ok to replay them on the "
              "default stream.)");
  registerGenerator(defaultGenerator(device));
  // NB: the generators' device memory is reserved before the capture
  // begins: accinteMalloc is a blocking call, which a capture refuses.
  for (GeneratorState* state : generators_) {
    TORCH_CHECK(state->generator->device().index() == device,
                "accinte graph: a generator of ", state->generator->device(),
                " cannot be registered with a graph captured on device ",
                static_cast<int>(device));
    if (state->device_state == nullptr) {
      void* memory = nullptr;
      ACCINTE_CHECK(accinteMalloc(&memory, 2 * sizeof(uint64_t)));
      state->device_state = static_cast<uint64_t*>(memory);
    }
    state->increment = 0;
  }
  const accinteStream_t native = nativeStream(stream);
  ACCINTE_CHECK(accinteStreamBeginCapture(native, nativeMode(mode)));
  device_ = device;
  capture_stream_ = stream.id();
  capture_id_ = captureId(native);
  capturing_ = true;
  {
    Captures& captures = Captures::instance();
    std::lock_guard<std::mutex> lock(captures.mutex);
    captures.by_id[capture_id_] = &generators_;
  }
  // LITERALINCLUDE EMPHASIZE NEXT 6
  pool_ = pool == c10::MempoolId_t{0, 0} ? newGraphPoolId() : pool;
  const unsigned long long id = capture_id_;
  beginAllocateToPool(device, pool_, [id](accinteStream_t stream) {
    return captureId(stream) == id;
  });
  holds_pool_ = true;
}
// LITERALINCLUDE END: CH15_CAPTURE_BEGIN

// LITERALINCLUDE START: CH15_CAPTURE_END
void AccinteGraph::capture_end() {
  TORCH_CHECK(capturing_,
              "accinte graph: capture_end() without capture_begin()");
  TORCH_CHECK(currentStream(device_).id() == capture_stream_,
              "Capture must end on the same stream it began on.");
  endCapture(/*report=*/true);
  size_t nodes = 0;
  ACCINTE_CHECK(accinteGraphGetNodeCount(graph_, &nodes));
  if (nodes == 0) {
    TORCH_WARN(
        "accinte graph: the captured graph is empty; was the work "
        "enqueued on another device or stream than the capture's?");
  }
  if (!keep_graph_) {
    instantiate();
    if (!debug_) {
      (void)accinteGraphDestroy(graph_);
      graph_ = nullptr;
    }
  }
}
// LITERALINCLUDE END: CH15_CAPTURE_END

void AccinteGraph::endCapture(bool report) {
  const c10::Stream stream(c10::Stream::UNSAFE,
                           c10::Device(c10::DeviceType::PrivateUse1, device_),
                           capture_stream_);
  accinteGraph_t graph = nullptr;
  const accinteError_t status =
      accinteStreamEndCapture(nativeStream(stream), &graph);
  capturing_ = false;
  {
    Captures& captures = Captures::instance();
    std::lock_guard<std::mutex> lock(captures.mutex);
    captures.by_id.erase(capture_id_);
  }
  // NB: the pool stays referenced (holds_pool_) until reset(): what the
  // capture allocated is what the graph's replays write to.
  endFilteredAllocateToPool(device_, pool_);
  if (status == accinteSuccess) {
    graph_ = graph;
    captured_ = true;
    return;
  }
  if (report) {
    TORCH_CHECK(
        status != accinteErrorStreamCaptureInvalidated,
        "accinte graph: the capture was invalidated by an operation that "
        "cannot be captured (a synchronize, a query, a copy with pageable "
        "host memory, a blocking allocation, or an operator that falls back "
        "to the CPU); its own error was raised where it ran. (",
        accinteGetErrorName(status), ")");
    ACCINTE_CHECK(status);
  }
}

void AccinteGraph::instantiate() {
  TORCH_CHECK(captured_ && graph_ != nullptr,
              "accinte graph: instantiate() needs a captured graph that was "
              "kept (keep_graph=True) and not yet dropped");
  if (exec_ != nullptr) {
    (void)accinteGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  ACCINTE_CHECK(accinteGraphInstantiate(&exec_, graph_));
}

// LITERALINCLUDE START: CH15_REPLAY
void AccinteGraph::replay() {
  TORCH_CHECK(captured_,
              "Called AccinteGraph::replay without a preceding successful "
              "capture.");
  if (exec_ == nullptr) {
    instantiate(); // keep_graph=True and never instantiated
  }
  // NB: on the current stream of the capture's device, as CUDA replays.
  const c10::DeviceGuard guard(
      c10::Device(c10::DeviceType::PrivateUse1, device_));
  for (GeneratorState* state : generators_) {
    if (state->increment == 0) {
      continue; // NB: the graph draws nothing from it: no kernel reads it
    }
    auto& generator = static_cast<AccinteGeneratorImpl&>(*state->generator);
    uint64_t seed = 0;
    uint64_t offset = 0;
    {
      std::lock_guard<std::mutex> lock(generator.mutex_);
      seed = generator.current_seed();
      // LITERALINCLUDE EMPHASIZE NEXT
      offset = generator.reserve(state->increment).offset;
    }
    uint64_t* target = state->device_state;
    // LITERALINCLUDE EMPHASIZE NEXT 4
    launchOnCurrentStream(device_, {target}, [target, seed, offset] {
      target[0] = seed;
      target[1] = offset;
    });
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  ACCINTE_CHECK(
      accinteGraphLaunch(exec_, nativeStream(currentStream(device_))));
}
// LITERALINCLUDE END: CH15_REPLAY

void AccinteGraph::reset() {
  releaseResources();
}

void AccinteGraph::releaseResources() noexcept {
  // NB: noexcept: the destructor calls this, and a graph may be dropped
  // mid-capture when the captured code raised.
  try {
    if (capturing_) {
      endCapture(/*report=*/false);
    }
  } catch (const std::exception& error) {
    TORCH_WARN("accinte graph: ending an abandoned capture failed: ",
               error.what());
  }
  if (exec_ != nullptr) {
    (void)accinteGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  if (graph_ != nullptr) {
    (void)accinteGraphDestroy(graph_);
    graph_ = nullptr;
  }
  captured_ = false;
  try {
    if (holds_pool_) {
      holds_pool_ = false;
      releasePool(device_, pool_);
    }
  } catch (const std::exception& error) {
    TORCH_WARN("accinte graph: releasing its memory pool failed: ",
               error.what());
  }
  for (GeneratorState* state : generators_) {
    if (state->device_state != nullptr) {
      (void)accinteFree(state->device_state);
    }
    delete state;
  }
  generators_.clear();
}

c10::MempoolId_t AccinteGraph::pool() const {
  TORCH_CHECK(capturing_ || captured_,
              "Called AccinteGraph::pool() without a preceding successful "
              "capture.");
  return pool_;
}

void AccinteGraph::enable_debug_mode() {
  debug_ = true;
}

void AccinteGraph::debug_dump(const std::string& path) {
  TORCH_CHECK(debug_,
              "accinte graph: call enable_debug_mode() before the "
              "capture to debug_dump() it");
  TORCH_CHECK(captured_ && graph_ != nullptr,
              "accinte graph: debug_dump() needs a captured graph");
  ACCINTE_CHECK(accinteGraphDebugDotPrint(graph_, path.c_str()));
}

// LITERALINCLUDE START: CH15_REGISTER
void registerGraphImpl() {
  static std::once_flag once;
  std::call_once(once, [] {
    // LITERALINCLUDE EMPHASIZE NEXT 2
    const std::string key =
        c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
    at::GraphImplRegistry()->Register(
        key,
        [](const at::GraphImplArgs& args)
            -> std::unique_ptr<at::GraphImplInterface> {
          return std::make_unique<AccinteGraph>(args);
        });
  });
}
// LITERALINCLUDE END: CH15_REGISTER

} // namespace accinte
