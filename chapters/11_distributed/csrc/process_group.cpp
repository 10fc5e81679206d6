#include <11_distributed/csrc/process_group.h>

#include <01_minimal_ops/csrc/exception.h>
#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/core/ivalue.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>

#include <algorithm>
#include <condition_variable>
#include <numeric>
#include <tuple>
#include <utility>

namespace accinte {
namespace {

constexpr c10::DeviceType kAccinte = c10::DeviceType::PrivateUse1;

/** The one accinte device of a collective's tensors, checked as NCCL checks
 * its own: on the device, dense and contiguous. */
std::optional<c10::Device> deviceOf(const std::vector<at::Tensor>& reads,
                                    const std::vector<at::Tensor>& writes) {
  std::optional<c10::Device> device;
  for (const auto* tensors : {&reads, &writes}) {
    for (const at::Tensor& tensor : *tensors) {
      TORCH_CHECK(tensor.device().type() == kAccinte,
                  "accl: collectives take accinte tensors, got a tensor on ",
                  tensor.device(),
                  " (use a 'cpu:gloo,accinte:accl' group "
                  "for CPU tensors)");
      TORCH_CHECK(tensor.layout() == c10::kStrided && tensor.is_contiguous(),
                  "accl: tensors must be dense and contiguous");
      TORCH_CHECK(!device.has_value() || *device == tensor.device(),
                  "accl: the tensors of one collective must be on one "
                  "device, got ",
                  *device, " and ", tensor.device());
      device = tensor.device();
    }
  }
  return device;
}

/** A pinned host buffer of the shape and dtype of `tensor`. */
at::Tensor pinnedLike(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(),
                   tensor.options().device(c10::kCPU).pinned_memory(true));
}

/** The CPU views a kernel makes of the pinned buffers it was given (see
 * accinte::KernelTensor for why kernels own nothing). */
std::vector<at::Tensor> cpuViews(const std::vector<KernelTensor>& buffers) {
  std::vector<at::Tensor> views;
  views.reserve(buffers.size());
  for (const KernelTensor& buffer : buffers) {
    views.push_back(buffer.cpuView());
  }
  return views;
}

/**
 * The reduction the host backend runs for `op`, and whether the result is
 * then divided by the group's size: gloo has no AVG, so AVG is a SUM
 * followed by a division, done on the host buffers inside the kernel.
 */
std::pair<c10d::ReduceOp, bool> hostReduction(const c10d::ReduceOp& op,
                                              const at::Tensor& tensor) {
  TORCH_CHECK(op != c10d::ReduceOp::PREMUL_SUM,
              "accl: ReduceOp.PREMUL_SUM is not supported");
  if (op != c10d::ReduceOp::AVG) {
    return {op, false};
  }
  TORCH_CHECK(at::isFloatingType(tensor.scalar_type()) ||
                  at::isComplexType(tensor.scalar_type()),
              "accl: ReduceOp.AVG needs floating-point or complex tensors, "
              "got ",
              tensor.scalar_type());
  return {c10d::ReduceOp::SUM, true};
}

/** Checks that every tensor of `tensors` has the dtype and the number of
 * elements of `like`, as the collective named `what` needs. */
void checkLike(const at::Tensor& like, const std::vector<at::Tensor>& tensors,
               const char* what) {
  for (const at::Tensor& tensor : tensors) {
    TORCH_CHECK(tensor.scalar_type() == like.scalar_type() &&
                    tensor.numel() == like.numel(),
                "accl: ", what, " needs tensors of the dtype and size of ",
                "its input (", like.scalar_type(), ", ", like.numel(),
                " elements), got ", tensor.scalar_type(), ", ", tensor.numel(),
                " elements");
  }
}

/** Checks that a list of per-rank tensors has one tensor per rank. */
void checkOnePerRank(const std::vector<at::Tensor>& tensors, int size,
                     const char* what) {
  TORCH_CHECK(tensors.size() == static_cast<size_t>(size), "accl: ", what,
              " needs one tensor per rank (", size, "), got ", tensors.size());
}

/**
 * Runs on host buffers: reduces `whole` across the ranks and keeps this
 * rank's `size`-th of it in `out`, the reduce-scatter of every reduction.
 *
 * NB: an allreduce of which each rank keeps its own chunk. It moves more
 * bytes than a reduce-scatter, but honours every reduction: gloo's
 * reduce-scatter always sums.
 */
void reduceKeepingOwnChunk(c10d::Backend& host,
                           const c10d::AllreduceOptions& opts, bool average,
                           int size, int rank, at::Tensor whole,
                           at::Tensor& out) {
  std::vector<at::Tensor> tensors{std::move(whole)};
  host.allreduce(tensors, opts)->wait();
  out.copy_(tensors[0].flatten().chunk(size)[rank].view_as(out));
  if (average) {
    out.div_(size);
  }
}

// LITERALINCLUDE START: CH11_STALE_INPUTS
/**
 * Whether the work before a collective's kernel on `stream` failed, so that
 * the inputs it staged may never have been written. Asked by the kernel,
 * which leaves the failure for the user's next synchronize to report.
 */
bool inputsMayBeStale(accinteStream_t stream) {
  int failed = 0;
  ACCINTE_CHECK(accinteStreamPeekFailure(stream, &failed));
  return failed != 0;
}

/**
 * Runs on the host buffers of a collective of all ranks, before it: tells
 * the peers whether this rank's inputs may be stale and learns theirs. If
 * any are, no rank runs the collective, and every rank's kernel fails, so
 * that no rank reads a result made of another's stale bytes.
 *
 * NB: every rank takes part, stale or not, so the group stays in step and
 * the next collective works. CUDA cannot do this: an error there is sticky,
 * the failed rank's collective never runs, and its peers wait until the
 * collective library's watchdog ends them.
 */
void refuseStaleInputs(c10d::Backend& host, c10d::OpType type, bool stale) {
  at::Tensor mine = at::full({1}, stale ? 1 : 0, at::kInt);
  at::Tensor all = at::empty({host.getSize()}, at::kInt);
  host._allgather_base(all, mine)->wait();
  if (all.sum().item<int>() == 0) {
    return;
  }
  std::string ranks;
  for (int64_t rank = 0; rank < all.numel(); ++rank) {
    if (all[rank].item<int>() != 0) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  TORCH_CHECK(false, "accl: ", c10d::opTypeToString(type),
              " not run: the inputs of rank(s) ", ranks,
              " may come from failed work, which that rank reports; no rank "
              "used them");
}
// LITERALINCLUDE END: CH11_STALE_INPUTS

} // namespace

// LITERALINCLUDE START: CH11_WORK
/**
 * The Work of an accl collective: the event recorded on the communication
 * stream after the collective's last copy.
 *
 * NB: as with NCCL, waiting does not block the host. It makes the caller's
 * current stream wait for the event, so that what the caller queues next
 * sees the results; only a barrier blocks the host.
 */
class ProcessGroupAccl::AcclWork final : public c10d::Work {
 public:
  AcclWork(int rank, c10d::OpType type, c10::Stream stream,
           std::vector<at::Tensor> outputs, bool blocksHost,
           std::shared_ptr<std::atomic<int>> sourceRank)
      : c10d::Work(rank, type),
        stream_(stream),
        outputs_(std::move(outputs)),
        blocksHost_(blocksHost),
        sourceRank_(std::move(sourceRank)),
        done_(kAccinte) {
    done_.record(stream_); // LITERALINCLUDE EMPHASIZE
    // NB: completed at once, under the communication stream, as
    // ProcessGroupNCCL completes its futures: c10::ivalue::Future records an
    // event on each device's current stream, which a waiter's stream waits
    // for, so DDP's callbacks are ordered after the collective.
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()),
        std::vector<c10::Device>{stream_.device()});
    const c10::StreamGuard guard(stream_);
    future_->markCompleted(at::IValue(outputs_)); // LITERALINCLUDE EMPHASIZE
  }
  // LITERALINCLUDE END: CH11_WORK

  // LITERALINCLUDE START: CH11_AWAIT
  bool isCompleted() override {
    // NB: if the collective failed, the query raises its failure, once, as
    // a query of any event after failed work does.
    return done_.query();
  }

  void synchronize() override {
    // LITERALINCLUDE EMPHASIZE NEXT
    done_.block(currentStream(stream_.device_index()));
    if (blocksHost_) {
      // NB: the current stream, not the event: a failed collective is
      // reported by the stream that waited for it (see the emulator page).
      // LITERALINCLUDE EMPHASIZE NEXT
      synchronizeCurrentStream(stream_.device_index());
    }
  }

  bool wait(std::chrono::milliseconds /*timeout*/) override {
    // NB: the host backend's timeout, set when the group was created,
    // bounds the collective itself; a failure is reported by the next
    // synchronization of the stream, with the host backend's message.
    synchronize();
    return true;
  }

  std::vector<at::Tensor> result() override {
    return outputs_;
  }

  int sourceRank() const override {
    TORCH_CHECK(sourceRank_,
                "accl: only a receive from any source has a "
                "source rank");
    // NB: known once the receive ran on the communication stream, so the
    // host waits for it here; a failed receive raises its failure instead.
    done_.synchronize();
    return sourceRank_->load();
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

 private:
  const c10::Stream stream_;
  const std::vector<at::Tensor> outputs_;
  const bool blocksHost_;
  const std::shared_ptr<std::atomic<int>> sourceRank_;
  c10::Event done_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};
// LITERALINCLUDE END: CH11_AWAIT

// LITERALINCLUDE START: CH11_TURN
/**
 * A collective's place in the group's order: the order in which the program
 * called the group's collectives, whatever device each runs on. Its kernel
 * waits for the turn before it, then calls the host backend, then ends its
 * own.
 *
 * NB: every device has its own communication stream, but the group has one
 * host backend, which pairs the calls of the ranks in the order they reach
 * it. Without turns, that is the order in which the streams get there: a
 * collective on a device whose stream has work queued would be overtaken by
 * a later one on an idle device, and the ranks would pair different
 * collectives (different tensors, or an all-gather with an all-reduce).
 */
class ProcessGroupAccl::Turn {
 public:
  /** Blocks the calling stream's worker until the turn has ended. */
  void waitEnded() {
    std::unique_lock<std::mutex> lock(mutex_);
    endedCondition_.wait(lock, [this] { return ended_; });
  }

  /** Lets the next collective call the host backend. */
  void end() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
    }
    endedCondition_.notify_all();
  }

  /** Ends a turn on every way out of a kernel: a collective that failed or
   * was refused must not hold the group's later ones. */
  class EndOnExit {
   public:
    explicit EndOnExit(std::shared_ptr<Turn> turn) : turn_(std::move(turn)) {}
    ~EndOnExit() {
      turn_->end();
    }
    EndOnExit(const EndOnExit&) = delete;
    EndOnExit& operator=(const EndOnExit&) = delete;

   private:
    std::shared_ptr<Turn> turn_;
  };

 private:
  std::mutex mutex_;
  std::condition_variable endedCondition_;
  bool ended_ = false;
};
// LITERALINCLUDE END: CH11_TURN

ProcessGroupAccl::ProcessGroupAccl(
    int rank, int size, c10::intrusive_ptr<c10d::Backend> hostBackend)
    : c10d::Backend(rank, size), hostBackend_(std::move(hostBackend)) {
  TORCH_CHECK(hostBackend_, "accl: a host backend is required");
  TORCH_CHECK(
      hostBackend_->getRank() == rank && hostBackend_->getSize() == size,
      "accl: the host backend is rank ", hostBackend_->getRank(), " of ",
      hostBackend_->getSize(), ", not rank ", rank, " of ", size);
}

c10::intrusive_ptr<c10d::Backend> createProcessGroupAccl(
    int rank, int size, c10::intrusive_ptr<c10d::Backend> hostBackend) {
  return c10::make_intrusive<ProcessGroupAccl>(rank, size,
                                               std::move(hostBackend));
}

const std::string ProcessGroupAccl::getBackendName() const {
  return "accl";
}

c10::Stream ProcessGroupAccl::commStream(c10::DeviceIndex device) {
  const std::lock_guard<std::mutex> lock(streamsMutex_);
  auto found = commStreams_.find(device);
  if (found == commStreams_.end()) {
    found =
        commStreams_.emplace(device, newStream(device, /*priority=*/0)).first;
  }
  return found->second;
}

// LITERALINCLUDE START: CH11_COLLECTIVE
c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::collective(
    c10d::OpType type, std::optional<c10::Device> device,
    const std::vector<at::Tensor>& reads, const std::vector<at::Tensor>& writes,
    HostCollective run, bool blocksHost,
    std::shared_ptr<std::atomic<int>> sourceRank) {
  const std::optional<c10::Device> tensorDevice = deviceOf(reads, writes);
  if (!device.has_value()) {
    device = tensorDevice.value_or(c10::Device(kAccinte, currentDevice()));
  }
  const c10::DeviceGuard deviceGuard(*device);
  const c10::Stream comm = commStream(device->index());

  // The collective reads what the caller's stream has queued so far.
  c10::Event ready(kAccinte);
  // LITERALINCLUDE EMPHASIZE NEXT 2
  ready.record(currentStream(device->index()));
  ready.block(comm);
  // LITERALINCLUDE END: CH11_COLLECTIVE

  // LITERALINCLUDE START: CH11_STAGING
  // Everything from here on is queued on the communication stream: the
  // copies into pinned buffers, the collective, the copies back.
  const c10::StreamGuard streamGuard(comm);
  std::vector<at::Tensor> hostReads;
  for (const at::Tensor& tensor : reads) {
    hostReads.push_back(pinnedLike(tensor));
    hostReads.back().copy_(tensor, /*non_blocking=*/true);
  }
  std::vector<at::Tensor> hostWrites;
  for (const at::Tensor& tensor : writes) {
    // NB: an in-place collective reads and writes the same buffer.
    auto same = std::find_if(reads.begin(), reads.end(),
                             [&](const auto& r) { return r.is_same(tensor); });
    hostWrites.push_back(same == reads.end() ? pinnedLike(tensor)
                                             : hostReads[same - reads.begin()]);
  }

  // LITERALINCLUDE EMPHASIZE NEXT 2
  std::vector<KernelTensor> readBuffers(hostReads.begin(), hostReads.end());
  std::vector<KernelTensor> writeBuffers(hostWrites.begin(), hostWrites.end());
  // NB: point to point tells its one peer itself (see send()); a barrier
  // moves no data.
  const bool collectiveOfAll =
      type != c10d::OpType::SEND && type != c10d::OpType::RECV &&
      type != c10d::OpType::RECVANYSOURCE && type != c10d::OpType::BARRIER;
  // NB: the turn is taken and the kernel launched under one lock, so that
  // two host threads cannot queue a later turn ahead of an earlier one on
  // the same stream, which would wait for it forever.
  {
    const std::lock_guard<std::mutex> orderLock(orderMutex_);
    auto turn = std::make_shared<Turn>();
    // LITERALINCLUDE EMPHASIZE NEXT
    std::shared_ptr<Turn> previous = std::exchange(lastTurn_, turn);
    try {
      launchOnCurrentStream(
          device->index(), {},
          [run = std::move(run), readBuffers, writeBuffers, collectiveOfAll,
           type, host = hostBackend_, stream = nativeStream(comm), previous,
           turn] {
            const Turn::EndOnExit endOnExit(turn);
            if (previous) {
              previous->waitEnded(); // LITERALINCLUDE EMPHASIZE
            }
            // LITERALINCLUDE EMPHASIZE NEXT 4
            const bool stale = inputsMayBeStale(stream);
            if (collectiveOfAll) {
              refuseStaleInputs(*host, type, stale);
            }
            std::vector<at::Tensor> reads = cpuViews(readBuffers);
            std::vector<at::Tensor> writes = cpuViews(writeBuffers);
            run(reads, writes, stale);
          });
    } catch (...) {
      // NB: a collective that was never queued has no place in the order.
      lastTurn_ = std::move(previous);
      throw;
    }
  }
  // LITERALINCLUDE END: CH11_STAGING

  // LITERALINCLUDE START: CH11_COPY_BACK
  for (size_t i = 0; i < writes.size(); ++i) {
    writes[i].copy_(hostWrites[i], /*non_blocking=*/true);
  }
  // The pinned buffers and the tensors' device memory must not be handed
  // out again before the communication stream is done with them.
  for (const auto* host : {&hostReads, &hostWrites}) {
    for (const at::Tensor& buffer : *host) {
      recordPinnedMemoryUse(buffer, comm); // LITERALINCLUDE EMPHASIZE
    }
  }
  for (const auto* tensors : {&reads, &writes}) {
    for (const at::Tensor& tensor : *tensors) {
      tensor.record_stream(comm); // LITERALINCLUDE EMPHASIZE
    }
  }
  return c10::make_intrusive<AcclWork>(rank_, type, comm, writes, blocksHost,
                                       std::move(sourceRank));
}
// LITERALINCLUDE END: CH11_COPY_BACK

// LITERALINCLUDE START: CH11_ALLREDUCE
c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "accl: allreduce takes one tensor");
  const auto [op, average] = hostReduction(opts.reduceOp, tensors[0]);
  c10d::AllreduceOptions hostOpts = opts;
  hostOpts.reduceOp = op;
  return collective(c10d::OpType::ALLREDUCE, std::nullopt, tensors, tensors,
                    [host = hostBackend_, hostOpts, average, size = size_](
                        auto& reads, auto&, bool) {
                      host->allreduce(reads, hostOpts)->wait();
                      if (average) {
                        reads[0].div_(size);
                      }
                    });
}
// LITERALINCLUDE END: CH11_ALLREDUCE

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "accl: broadcast takes one tensor");
  return collective(c10d::OpType::BROADCAST, std::nullopt, tensors, tensors,
                    [host = hostBackend_, opts](auto& reads, auto&, bool) {
                      host->broadcast(reads, opts)->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "accl: reduce takes one tensor");
  const auto [op, average] = hostReduction(opts.reduceOp, tensors[0]);
  c10d::ReduceOptions hostOpts = opts;
  hostOpts.reduceOp = op;
  return collective(c10d::OpType::REDUCE, std::nullopt, tensors, tensors,
                    [host = hostBackend_, hostOpts, average, size = size_,
                     rank = rank_](auto& reads, auto&, bool) {
                      host->reduce(reads, hostOpts)->wait();
                      if (average && rank == hostOpts.rootRank) {
                        reads[0].div_(size);
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
              "accl: allgather takes one input and one list of outputs");
  TORCH_CHECK(outputs[0].size() == static_cast<size_t>(size_),
              "accl: allgather needs one output per rank (", size_, "), got ",
              outputs[0].size());
  return collective(
      c10d::OpType::ALLGATHER, std::nullopt, inputs, outputs[0],
      [host = hostBackend_, opts](auto& reads, auto& writes, bool) {
        std::vector<std::vector<at::Tensor>> hostOutputs{writes};
        host->allgather(hostOutputs, reads, opts)->wait();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "accl: all_gather_into_tensor needs an output of ", size_,
              " times the input's elements, got ", output.numel(), " and ",
              input.numel());
  return collective(
      c10d::OpType::_ALLGATHER_BASE, std::nullopt, {input}, {output},
      [host = hostBackend_, opts](auto& reads, auto& writes, bool) {
        host->_allgather_base(writes[0], reads[0], opts)->wait();
      });
}

// LITERALINCLUDE START: CH11_REDUCE_SCATTER
c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "accl: reduce_scatter_tensor needs an input of ", size_,
              " times the output's elements, got ", input.numel(), " and ",
              output.numel());
  const auto [op, average] = hostReduction(opts.reduceOp, input);
  c10d::AllreduceOptions hostOpts;
  hostOpts.reduceOp = op;
  return collective(c10d::OpType::_REDUCE_SCATTER_BASE, std::nullopt, {input},
                    {output},
                    [host = hostBackend_, hostOpts, average, size = size_,
                     rank = rank_](auto& reads, auto& writes, bool) {
                      reduceKeepingOwnChunk(*host, hostOpts, average, size,
                                            rank, reads[0], writes[0]);
                    });
}
// LITERALINCLUDE END: CH11_REDUCE_SCATTER

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::alltoall_base(
    at::Tensor& output, at::Tensor& input,
    std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions& opts) {
  return collective(c10d::OpType::ALLTOALL_BASE, std::nullopt, {input},
                    {output},
                    [host = hostBackend_, outputSplitSizes, inputSplitSizes,
                     opts](auto& reads, auto& writes, bool) mutable {
                      host->alltoall_base(writes[0], reads[0], outputSplitSizes,
                                          inputSplitSizes, opts)
                          ->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
              "accl: reduce_scatter takes one output and one list of inputs");
  checkOnePerRank(inputs[0], size_, "reduce_scatter");
  checkLike(outputs[0], inputs[0], "reduce_scatter");
  const auto [op, average] = hostReduction(opts.reduceOp, outputs[0]);
  c10d::AllreduceOptions hostOpts;
  hostOpts.reduceOp = op;
  return collective(c10d::OpType::REDUCE_SCATTER, std::nullopt, inputs[0],
                    outputs,
                    [host = hostBackend_, hostOpts, average, size = size_,
                     rank = rank_](auto& reads, auto& writes, bool) {
                      std::vector<at::Tensor> flat;
                      for (const at::Tensor& read : reads) {
                        flat.push_back(read.flatten());
                      }
                      reduceKeepingOwnChunk(*host, hostOpts, average, size,
                                            rank, at::cat(flat), writes[0]);
                    });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupAccl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "accl: reduce_scatter_tensor_coalesced needs one output per "
              "input, got ",
              outputs.size(), " and ", inputs.size());
  bool average = false;
  c10d::AllreduceOptions hostOpts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_,
                "accl: reduce_scatter_tensor needs an input of ", size_,
                " times the output's elements, got ", inputs[i].numel(),
                " and ", outputs[i].numel());
    std::tie(hostOpts.reduceOp, average) =
        hostReduction(opts.reduceOp, inputs[i]);
  }
  return collective(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, std::nullopt,
                    inputs, outputs,
                    [host = hostBackend_, hostOpts, average, size = size_,
                     rank = rank_](auto& reads, auto& writes, bool) {
                      for (size_t i = 0; i < reads.size(); ++i) {
                        reduceKeepingOwnChunk(*host, hostOpts, average, size,
                                              rank, reads[i], writes[i]);
                      }
                    });
}

// NB: the coalesced collectives below run one host collective per tensor
// inside one kernel: they are one collective of the communication stream
// with one Work, which is what their callers rely on. A vendor's library
// fuses them into one launch instead.

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  bool average = false;
  c10d::AllreduceOptions hostOpts = opts;
  for (const at::Tensor& tensor : tensors) {
    std::tie(hostOpts.reduceOp, average) = hostReduction(opts.reduceOp, tensor);
  }
  return collective(c10d::OpType::ALLREDUCE_COALESCED, std::nullopt, tensors,
                    tensors,
                    [host = hostBackend_, hostOpts, average, size = size_](
                        auto& reads, auto&, bool) {
                      for (at::Tensor& read : reads) {
                        std::vector<at::Tensor> one{read};
                        host->allreduce(one, hostOpts)->wait();
                        if (average) {
                          read.div_(size);
                        }
                      }
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  // NB: `outputs[r][i]` receives rank r's input i.
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_),
              "accl: allgather_coalesced needs one list of outputs per rank (",
              size_, "), got ", outputs.size());
  std::vector<at::Tensor> flatOutputs;
  for (const std::vector<at::Tensor>& fromRank : outputs) {
    TORCH_CHECK(fromRank.size() == inputs.size(),
                "accl: allgather_coalesced needs one output per input in "
                "each rank's list, got ",
                fromRank.size(), " and ", inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkLike(inputs[i], {fromRank[i]}, "allgather_coalesced");
    }
    flatOutputs.insert(flatOutputs.end(), fromRank.begin(), fromRank.end());
  }
  return collective(c10d::OpType::ALLGATHER_COALESCED, std::nullopt, inputs,
                    flatOutputs,
                    [host = hostBackend_, opts, size = size_](
                        auto& reads, auto& writes, bool) {
                      for (size_t i = 0; i < reads.size(); ++i) {
                        std::vector<at::Tensor> input{reads[i]};
                        std::vector<std::vector<at::Tensor>> output(1);
                        for (int rank = 0; rank < size; ++rank) {
                          output[0].push_back(writes[rank * reads.size() + i]);
                        }
                        host->allgather(output, input, opts)->wait();
                      }
                    });
}

// LITERALINCLUDE START: CH11_FUNCTIONAL_COALESCED
c10::intrusive_ptr<c10d::Work>
ProcessGroupAccl::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "accl: allgather_into_tensor_coalesced needs one output per "
              "input, got ",
              outputs.size(), " and ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_,
                "accl: all_gather_into_tensor needs an output of ", size_,
                " times the input's elements, got ", outputs[i].numel(),
                " and ", inputs[i].numel());
  }
  return collective(
      c10d::OpType::COALESCED, std::nullopt, inputs, outputs,
      [host = hostBackend_, opts](auto& reads, auto& writes, bool) {
        for (size_t i = 0; i < reads.size(); ++i) {
          host->_allgather_base(writes[i], reads[i], opts)->wait();
        }
      });
}
// LITERALINCLUDE END: CH11_FUNCTIONAL_COALESCED

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "accl: gather takes one input");
  const bool root = rank_ == opts.rootRank;
  std::vector<at::Tensor> gathered;
  if (root) {
    TORCH_CHECK(outputs.size() == 1,
                "accl: gather takes one list of outputs on the root");
    checkOnePerRank(outputs[0], size_, "gather");
    checkLike(inputs[0], outputs[0], "gather");
    gathered = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "accl: gather takes outputs only on the root");
  }
  return collective(
      c10d::OpType::GATHER, std::nullopt, inputs, gathered,
      [host = hostBackend_, opts, root](auto& reads, auto& writes, bool) {
        std::vector<std::vector<at::Tensor>> output;
        if (root) {
          output.push_back(writes);
        }
        host->gather(output, reads, opts)->wait();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "accl: scatter takes one output");
  const bool root = rank_ == opts.rootRank;
  std::vector<at::Tensor> scattered;
  if (root) {
    TORCH_CHECK(inputs.size() == 1,
                "accl: scatter takes one list of inputs on the root");
    checkOnePerRank(inputs[0], size_, "scatter");
    checkLike(outputs[0], inputs[0], "scatter");
    scattered = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "accl: scatter takes inputs only on the root");
  }
  return collective(
      c10d::OpType::SCATTER, std::nullopt, scattered, outputs,
      [host = hostBackend_, opts, root](auto& reads, auto& writes, bool) {
        std::vector<std::vector<at::Tensor>> input;
        if (root) {
          input.push_back(reads);
        }
        host->scatter(writes, input, opts)->wait();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  checkOnePerRank(outputs, size_, "all_to_all");
  checkOnePerRank(inputs, size_, "all_to_all");
  for (const auto* tensors : {&inputs, &outputs}) {
    for (const at::Tensor& tensor : *tensors) {
      TORCH_CHECK(tensor.scalar_type() == inputs[0].scalar_type(),
                  "accl: all_to_all needs tensors of one dtype, got ",
                  inputs[0].scalar_type(), " and ", tensor.scalar_type());
    }
  }
  // NB: as NCCL, the tensors to and from each rank may differ in size, which
  // gloo's list form refuses: the lists travel as one all_to_all_single
  // with split sizes.
  return collective(
      c10d::OpType::ALLTOALL, std::nullopt, inputs, outputs,
      [host = hostBackend_, opts](auto& reads, auto& writes, bool) mutable {
        std::vector<at::Tensor> flatReads;
        std::vector<int64_t> inputSplits;
        std::vector<int64_t> outputSplits;
        for (const at::Tensor& read : reads) {
          flatReads.push_back(read.flatten());
          inputSplits.push_back(read.numel());
        }
        for (const at::Tensor& write : writes) {
          outputSplits.push_back(write.numel());
        }
        at::Tensor sent = at::cat(flatReads);
        at::Tensor received =
            at::empty({std::accumulate(outputSplits.begin(), outputSplits.end(),
                                       int64_t{0})},
                      sent.options());
        // NB: copies, which the host backend may keep.
        std::vector<int64_t> outputSizes = outputSplits;
        std::vector<int64_t> inputSizes = inputSplits;
        host->alltoall_base(received, sent, outputSizes, inputSizes, opts)
            ->wait();
        const std::vector<at::Tensor> pieces =
            received.split_with_sizes(outputSplits);
        for (size_t i = 0; i < writes.size(); ++i) {
          writes[i].copy_(pieces[i].view_as(writes[i]));
        }
      });
}

// NB: point to point has one peer, which learns from a flag sent before the
// data whether the data may be stale (see refuseStaleInputs()); the data
// goes too, so that the pair stays in step.
c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::send(
    std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return collective(
      c10d::OpType::SEND, std::nullopt, tensors, {},
      [host = hostBackend_, dstRank, tag](auto& reads, auto&, bool stale) {
        std::vector<at::Tensor> flag{at::full({1}, stale ? 1 : 0, at::kInt)};
        host->send(flag, dstRank, tag)->wait();
        host->send(reads, dstRank, tag)->wait();
      });
}

namespace {

/** Receives the data after the flag `flag` from `source` and fails if the
 * sender said its data may be stale. */
void receiveUnlessStale(c10d::Backend& host, std::vector<at::Tensor>& writes,
                        const at::Tensor& flag, int source, int tag) {
  host.recv(writes, source, tag)->wait();
  TORCH_CHECK(flag.item<int>() == 0, "accl: recv from rank ", source,
              " failed: the data sent may come from failed work, which rank ",
              source, " reports");
}

} // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::recv(
    std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return collective(
      c10d::OpType::RECV, std::nullopt, {}, tensors,
      [host = hostBackend_, srcRank, tag](auto&, auto& writes, bool) {
        std::vector<at::Tensor> flag{at::empty({1}, at::kInt)};
        host->recv(flag, srcRank, tag)->wait();
        receiveUnlessStale(*host, writes, flag[0], srcRank, tag);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  auto source = std::make_shared<std::atomic<int>>(-1);
  return collective(
      c10d::OpType::RECVANYSOURCE, std::nullopt, {}, tensors,
      [host = hostBackend_, tag, source](auto&, auto& writes, bool) {
        // NB: the flag comes from any rank; the data then from that one.
        std::vector<at::Tensor> flag{at::empty({1}, at::kInt)};
        auto work = host->recvAnysource(flag, tag);
        work->wait();
        source->store(work->sourceRank());
        receiveUnlessStale(*host, writes, flag[0], work->sourceRank(), tag);
      },
      /*blocksHost=*/false, source);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::barrier(
    const c10d::BarrierOptions& opts) {
  std::optional<c10::Device> device;
  if (opts.device.has_value() && opts.device->type() == kAccinte &&
      opts.device->has_index()) {
    device = *opts.device;
  }
  return collective(
      c10d::OpType::BARRIER, device, {}, {},
      [host = hostBackend_](auto&, auto&, bool) { host->barrier()->wait(); },
      /*blocksHost=*/true);
}

void ProcessGroupAccl::setSequenceNumberForGroup() {
  hostBackend_->setSequenceNumberForGroup();
}

uint64_t ProcessGroupAccl::getSequenceNumberForGroup() {
  return hostBackend_->getSequenceNumberForGroup();
}

} // namespace accinte
