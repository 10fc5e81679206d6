#include <11_distributed/csrc/process_group.h>

#include <01_minimal_ops/csrc/extensions.h>
#include <01_minimal_ops/csrc/kernel.h>
#include <01_minimal_ops/csrc/runtime.h>

#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>

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
           std::vector<at::Tensor> outputs, bool blocksHost)
      : c10d::Work(rank, type),
        stream_(stream),
        outputs_(std::move(outputs)),
        blocksHost_(blocksHost),
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

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

 private:
  const c10::Stream stream_;
  const std::vector<at::Tensor> outputs_;
  const bool blocksHost_;
  c10::Event done_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};
// LITERALINCLUDE END: CH11_WORK

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
    HostCollective run, bool blocksHost) {
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
  launchOnCurrentStream(
      device->index(), {}, [run = std::move(run), readBuffers, writeBuffers] {
        std::vector<at::Tensor> reads = cpuViews(readBuffers);
        std::vector<at::Tensor> writes = cpuViews(writeBuffers);
        run(reads, writes);
      });

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
  return c10::make_intrusive<AcclWork>(rank_, type, comm, writes, blocksHost);
}
// LITERALINCLUDE END: CH11_COLLECTIVE

// LITERALINCLUDE START: CH11_ALLREDUCE
c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "accl: allreduce takes one tensor");
  const auto [op, average] = hostReduction(opts.reduceOp, tensors[0]);
  c10d::AllreduceOptions hostOpts = opts;
  hostOpts.reduceOp = op;
  return collective(c10d::OpType::ALLREDUCE, std::nullopt, tensors, tensors,
                    [host = hostBackend_, hostOpts, average, size = size_](
                        auto& reads, auto&) {
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
                    [host = hostBackend_, opts](auto& reads, auto&) {
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
                     rank = rank_](auto& reads, auto&) {
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
  return collective(c10d::OpType::ALLGATHER, std::nullopt, inputs, outputs[0],
                    [host = hostBackend_, opts](auto& reads, auto& writes) {
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
  return collective(c10d::OpType::_ALLGATHER_BASE, std::nullopt, {input},
                    {output},
                    [host = hostBackend_, opts](auto& reads, auto& writes) {
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
  // NB: an allreduce of the staged input, of which each rank keeps its own
  // chunk. It moves more bytes than a reduce-scatter, but honours every
  // reduction: gloo's reduce-scatter of one tensor always sums.
  return collective(
      c10d::OpType::_REDUCE_SCATTER_BASE, std::nullopt, {input}, {output},
      [host = hostBackend_, hostOpts, average, size = size_, rank = rank_](
          auto& reads, auto& writes) {
        host->allreduce(reads, hostOpts)->wait();
        writes[0].copy_(
            reads[0].flatten().chunk(size)[rank].view_as(writes[0]));
        if (average) {
          writes[0].div_(size);
        }
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
                     opts](auto& reads, auto& writes) mutable {
                      host->alltoall_base(writes[0], reads[0], outputSplitSizes,
                                          inputSplitSizes, opts)
                          ->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::send(
    std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return collective(c10d::OpType::SEND, std::nullopt, tensors, {},
                    [host = hostBackend_, dstRank, tag](auto& reads, auto&) {
                      host->send(reads, dstRank, tag)->wait();
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupAccl::recv(
    std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return collective(c10d::OpType::RECV, std::nullopt, {}, tensors,
                    [host = hostBackend_, srcRank, tag](auto&, auto& writes) {
                      host->recv(writes, srcRank, tag)->wait();
                    });
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
      [host = hostBackend_](auto&, auto&) { host->barrier()->wait(); },
      /*blocksHost=*/true);
}

void ProcessGroupAccl::setSequenceNumberForGroup() {
  hostBackend_->setSequenceNumberForGroup();
}

uint64_t ProcessGroupAccl::getSequenceNumberForGroup() {
  return hostBackend_->getSequenceNumberForGroup();
}

} // namespace accinte
