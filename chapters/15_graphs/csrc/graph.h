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

  /** Begins capturing the current stream of the current device (never its
   * default stream), its allocations routed to `pool` ({0, 0}: a new pool
   * of the graph's own), in `mode` (Default is Global, as on CUDA). */
  void capture_begin(
      c10::MempoolId_t pool = {0, 0},
      at::GraphCaptureMode mode = at::GraphCaptureMode::Default) override;
  /** Ends the capture (on the stream it began on) and, unless `keep_graph`,
   * instantiates the graph; raises if the capture was invalidated. */
  void capture_end() override;
  /** Makes the kept graph executable (again). */
  void instantiate() override;
  /** Launches the graph on the current stream of the capture's device, after
   * writing each generator's (seed, offset) for it. */
  void replay() override;
  /** Drops the graph, its executable, its generators' device state and its
   * reference to the pool; the graph may capture again. */
  void reset() override;
  /** The id of the graph's memory pool, for another capture to share. */
  c10::MempoolId_t pool() const override;
  /** Keeps the captured graph for debug_dump(); call before the capture. */
  void enable_debug_mode() override;
  /** Writes the captured graph to `path` in Graphviz's DOT language. */
  void debug_dump(const std::string& path) override;

  /** Makes the graph capture-safe for `generator` too (the default
   * generator of the capture's device always is), as
   * `CUDAGraph.register_generator_state`. */
  void registerGenerator(const at::Generator& generator);
  // LITERALINCLUDE END: CH15_GRAPH_CLASS

  /** What the graph keeps of one generator (see graph.cpp). */
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
