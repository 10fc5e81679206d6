#pragma once

/**
 * @file
 * Chapter 15: accinte graphs. A stream's work captured once through the
 * emulator's stream capture and replayed as one launch, behind PyTorch's
 * device-generic `at::GraphImplInterface` (what `torch.accelerator.Graph`
 * creates) and `torch.accinte.AccinteGraph`.
 */

#include <accinte/export.h>
#include <accinte/runtime.h>

#include <ATen/core/Generator.h>
#include <ATen/core/GraphImplInterface.h>
#include <c10/core/Stream.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <string>
#include <vector>

namespace accinte {

class AccinteGeneratorImpl;

// LITERALINCLUDE START: CH15_GRAPH_CLASS
/**
 * One graph of one device: captured from the current stream between
 * capture_begin() and capture_end(), replayed on the current stream of the
 * device it was captured on.
 *
 * What a capture allocates comes from a private pool of chapter 07's caching
 * allocator (its own, or one shared with other graphs), routed by capture:
 * every allocation on a stream of this capture, from any thread, goes there.
 * The pool stays reserved until the graph is reset, so that a replay writes
 * only to memory its capture owns.
 */
class ACCINTE_EXPORT AccinteGraph final : public at::GraphImplInterface {
 public:
  /** A graph with nothing captured; `keep_graph` keeps the captured graph
   * after capture_end() (instantiated on demand) instead of instantiating
   * it at once and dropping it. */
  explicit AccinteGraph(const at::GraphImplArgs& args = {});
  ~AccinteGraph() override;

  void capture_begin(
      c10::MempoolId_t pool = {0, 0},
      at::GraphCaptureMode mode = at::GraphCaptureMode::Default) override;
  void capture_end() override;
  void instantiate() override;
  void replay() override;
  void reset() override;
  c10::MempoolId_t pool() const override;
  void enable_debug_mode() override;
  void debug_dump(const std::string& path) override;

  /** Makes the graph capture-safe for `generator` too (the default
   * generator of the capture's device always is), as
   * `CUDAGraph.register_generator_state`. */
  void registerGenerator(const at::Generator& generator);
  // LITERALINCLUDE END: CH15_GRAPH_CLASS

  /** Reserves `increment` numbers of `generator` inside the capture running
   * on the current stream (chapter 08's PhiloxCaptureHook). */
  struct GeneratorState;

 private:
  void endCapture(bool report);
  void releaseResources() noexcept;

  bool keep_graph_;
  bool debug_ = false;
  bool capturing_ = false;
  bool captured_ = false;
  c10::DeviceIndex device_ = -1;
  c10::StreamId capture_stream_ = 0;
  unsigned long long capture_id_ = 0;
  c10::MempoolId_t pool_{0, 0};
  bool holds_pool_ = false;
  accinteGraph_t graph_ = nullptr;
  accinteGraphExec_t exec_ = nullptr;
  std::vector<GeneratorState*> generators_;
};

/**
 * Registers AccinteGraph with PyTorch's graph registry under the backend's
 * current name. NB: the registry is keyed by `c10::DeviceTypeName`, which
 * for PrivateUse1 is the name given by `rename_privateuse1_backend`, so this
 * runs after the rename (from the chapter's Python plug-in), not from a
 * static initializer. Registering twice is a no-op.
 */
ACCINTE_EXPORT void registerGraphImpl();

/** A fresh id for a graph's private pool, as `torch.cuda.graph_pool_handle`:
 * {n, 0}, never one of a MemPool ({0, n}). */
ACCINTE_EXPORT c10::MempoolId_t newGraphPoolId();

/** How many graphs of the process are capturing. */
ACCINTE_EXPORT size_t capturesUnderway();

} // namespace accinte
