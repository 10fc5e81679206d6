#pragma once

/**
 * @file
 * `accl`, the torch.distributed backend of accinte tensors.
 *
 * The emulated device has no interconnect, so a collective runs in three
 * steps, all queued on a communication stream of the device: the tensors are
 * copied into pinned host buffers, a kernel runs the collective on those
 * buffers with a host backend (gloo, passed in from Python), and the results
 * are copied back. A vendor replaces the middle step with its collective
 * library, which reads and writes device memory directly.
 */

#include <accinte/export.h>

#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace accinte {

/** The c10d backend of accinte tensors, registered as "accl". */
class ProcessGroupAccl final : public c10d::Backend {
 public:
  /**
   * The backend of rank `rank` in a group of `size` processes, moving the
   * bytes with `hostBackend`, a backend of CPU tensors over the same group.
   */
  ProcessGroupAccl(int rank, int size,
                   c10::intrusive_ptr<c10d::Backend> hostBackend);

  /** "accl". */
  const std::string getBackendName() const override;

  /** The Work of a collective; see ProcessGroupAccl::collective. */
  class AcclWork;

  /** In place; supports SUM, AVG, PRODUCT, MIN and MAX. */
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override;
  /** In place, from `opts.rootRank`. */
  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override;
  /** In place on `opts.rootRank`. */
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts) override;
  /** One input per rank into a list of outputs (`all_gather`). */
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  /** Into one tensor of `size` inputs (`all_gather_into_tensor`). */
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  /** `reduce_scatter_tensor`; supports the reductions of allreduce(). */
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  /** `all_to_all_single`, with or without split sizes. */
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& outputSplitSizes,
      std::vector<int64_t>& inputSplitSizes,
      const c10d::AllToAllOptions& opts) override;
  /** Each tensor in place, in one collective (`all_reduce_coalesced` and
   * `all_reduce` under `_coalescing_manager`). */
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  /** One list of `size` outputs per input (`all_gather_coalesced`). */
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  /** `all_gather_into_tensor` of each pair, in one collective. */
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  /** `reduce_scatter_tensor` of each pair, in one collective. */
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  /** Into a list of `size` outputs on `opts.rootRank` (`gather`). */
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  /** From a list of `size` inputs on `opts.rootRank` (`scatter`). */
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  /** `reduce_scatter` of a list of `size` inputs; the reductions of
   * allreduce(). */
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  /** `all_to_all` of lists of `size` tensors. */
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  /** Point to point. */
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dstRank, int tag) override;
  /** Point to point. */
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int srcRank, int tag) override;
  /** From whichever rank sends first; the Work's `sourceRank()` says which
   * (and waits for the receive to know it). */
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  /** Blocks the host until every rank's communication stream reached it. */
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override;

  /** Delegated to the host backend, which keeps the group's count. */
  void setSequenceNumberForGroup() override;
  /** Delegated to the host backend. */
  uint64_t getSequenceNumberForGroup() override;

 private:
  /** Runs one collective of the host backend to its end on pinned copies
   * of `reads` and `writes`; see the file comment. `staleInputs` says that
   * this rank's inputs may come from failed work (see collective()). */
  using HostCollective = std::function<void(std::vector<at::Tensor>& hostReads,
                                            std::vector<at::Tensor>& hostWrites,
                                            bool staleInputs)>;

  c10::intrusive_ptr<c10d::Work> collective(
      c10d::OpType type, std::optional<c10::Device> device,
      const std::vector<at::Tensor>& reads,
      const std::vector<at::Tensor>& writes, HostCollective run,
      bool blocksHost = false,
      std::shared_ptr<std::atomic<int>> sourceRank = nullptr);

  c10::Stream commStream(c10::DeviceIndex device);

  /** A collective's place in the group's order; see collective(). */
  class Turn;

  c10::intrusive_ptr<c10d::Backend> hostBackend_;
  std::mutex streamsMutex_;
  std::unordered_map<c10::DeviceIndex, c10::Stream> commStreams_;
  /** Held while a collective takes its turn and is launched, so that turns
   * follow the order of the launches on every communication stream. */
  std::mutex orderMutex_;
  /** The turn of the last collective called, which the next one waits for
   * (on its stream) before it calls the host backend. */
  std::shared_ptr<Turn> lastTurn_;
};

/** A ProcessGroupAccl (see its constructor), as the c10d::Backend that
 * torch.distributed holds. */
ACCINTE_EXPORT c10::intrusive_ptr<c10d::Backend> createProcessGroupAccl(
    int rank, int size, c10::intrusive_ptr<c10d::Backend> hostBackend);

} // namespace accinte
