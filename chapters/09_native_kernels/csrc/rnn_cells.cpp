// Chapter 09: the fused LSTM and GRU cells. On every device but the CPU,
// ATen's recurrent layers and cells compute each time step with one fused
// operator (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`), and autograd
// computes its gradient with another; the CPU has no kernel for any of them,
// so the CPU fallback cannot serve them. These are the kernels a vendor
// writes for them: one launch per call, an elementwise loop over device
// memory on the stream's worker.

#include <01_minimal_ops/csrc/kernel.h>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <tuple>

namespace accinte {
namespace {

using at::Tensor;
using OptionalTensor = std::optional<Tensor>;

// Gates per cell: LSTM's input, forget, cell and output gates; GRU's reset,
// update ("input") and new gates. The gate tensors are [batch, gates *
// hidden_size], gate after gate along dimension 1, as the weights stack them.
constexpr int64_t kLstmGates = 4;
constexpr int64_t kGruGates = 3;
// NB: what the GRU forward keeps for its backward, per element: the three
// gates, the previous hidden state and the hidden gate of the new gate
// before the reset gate scales it. CUDA's layout, which autograd hands back
// to the backward as it is.
constexpr int64_t kGruWorkspaceColumns = 5;

/** A tensor argument and the name its error messages use. */
struct Argument {
  const char* name;
  const Tensor& tensor;
};

// LITERALINCLUDE START: CH09_RNN_DEVICE_DTYPE
/**
 * The checks every cell kernel makes on the host, before anything is
 * queued: the defined tensors are on one accinte device and share one
 * floating-point dtype.
 */
void checkDeviceAndDtype(const char* op, std::initializer_list<Argument> args) {
  const Argument* first = nullptr;
  for (const Argument& arg : args) {
    if (!arg.tensor.defined()) {
      continue;
    }
    if (first == nullptr && arg.tensor.is_privateuseone()) {
      first = &arg;
    }
  }
  // NB: the dispatcher chose this kernel because one of them is accinte.
  TORCH_INTERNAL_ASSERT(first != nullptr);
  for (const Argument& arg : args) {
    if (!arg.tensor.defined()) {
      continue;
    }
    TORCH_CHECK(arg.tensor.device() == first->tensor.device(),
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                first->tensor.device(), " and ", arg.tensor.device(),
                "! (when checking argument ", arg.name, " of aten::", op, ")");
    TORCH_CHECK(arg.tensor.scalar_type() == first->tensor.scalar_type(), op,
                ": expected ", arg.name, " to have the dtype of ", first->name,
                " (", first->tensor.scalar_type(), "), but got ",
                arg.tensor.scalar_type());
  }
  const at::ScalarType dtype = first->tensor.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble ||
                  dtype == at::kHalf || dtype == at::kBFloat16,
              op,
              ": expected float32, float64, float16 or bfloat16 tensors, "
              "but got ",
              dtype);
}
// LITERALINCLUDE END: CH09_RNN_DEVICE_DTYPE

// LITERALINCLUDE START: CH09_RNN_CHECKS
/**
 * The sizes a forward cell takes, as CUDA's checks them: gate tensors
 * [batch, gates * hidden_size], optional biases of gates * hidden_size
 * elements (both or neither), and a previous state of batch * hidden_size
 * elements. Returns {batch, hidden_size}.
 */
std::pair<int64_t, int64_t> checkForwardSizes(const char* op, int64_t gates,
                                              const Tensor& input_gates,
                                              const Tensor& hidden_gates,
                                              const Tensor& previous,
                                              const char* previous_name,
                                              const Tensor& input_bias,
                                              const Tensor& hidden_bias) {
  checkDeviceAndDtype(op, {{"input_gates", input_gates},
                           {"hidden_gates", hidden_gates},
                           {previous_name, previous},
                           {"input_bias", input_bias},
                           {"hidden_bias", hidden_bias}});
  TORCH_CHECK(input_gates.dim() == 2, op,
              ": expected input_gates of 2 dimensions [batch, ", gates,
              " * hidden_size], but got sizes ", input_gates.sizes());
  TORCH_CHECK(hidden_gates.sizes() == input_gates.sizes(), op,
              ": expected hidden_gates of the sizes of input_gates (",
              input_gates.sizes(), "), but got ", hidden_gates.sizes());
  const int64_t batch = input_gates.size(0);
  const int64_t gates_size = input_gates.size(1);
  TORCH_CHECK(gates_size % gates == 0, op, ": expected input_gates.size(1) (",
              gates_size, ") to be a multiple of ", gates, " gates");
  TORCH_CHECK(input_bias.defined() == hidden_bias.defined(), op,
              ": expected input_bias and hidden_bias to be both given or both "
              "omitted");
  for (const Tensor* bias : {&input_bias, &hidden_bias}) {
    TORCH_CHECK(
        !bias->defined() || (bias->dim() == 1 && bias->numel() == gates_size),
        op, ": expected biases of sizes [", gates_size, "], but got ",
        bias->sizes());
  }
  const int64_t hidden_size = gates_size / gates;
  TORCH_CHECK(previous.numel() == batch * hidden_size, op, ": expected ",
              previous_name, " of ", batch, " * ", hidden_size,
              " elements (batch * hidden_size), but got sizes ",
              previous.sizes());
  return {batch, hidden_size};
}
// LITERALINCLUDE END: CH09_RNN_CHECKS

/** Checks that `tensor` has exactly `expected` sizes. */
void checkSizes(const char* op, const char* name, const Tensor& tensor,
                at::IntArrayRef expected) {
  TORCH_CHECK(tensor.sizes() == expected, op, ": expected ", name, " of sizes ",
              expected, ", but got ", tensor.sizes());
}

/** A KernelTensor of `tensor`, or nothing for an undefined one. */
std::optional<KernelTensor> kernelTensor(const Tensor& tensor) {
  if (!tensor.defined()) {
    return std::nullopt;
  }
  return KernelTensor(tensor);
}

const void* bufferOf(const std::optional<KernelTensor>& tensor) {
  return tensor.has_value() ? tensor->buffer() : nullptr;
}

/**
 * On the worker: the device memory of a matrix (or a vector, as one row) as
 * the kernel indexes it, through its strides, read and written in the
 * kernel's precision. An absent optional tensor reads as zeros: a cell
 * without biases, an output gradient autograd does not have.
 */
template <typename scalar_t>
class Elements {
 public:
  using acc_t = at::opmath_type<scalar_t>;

  explicit Elements(const KernelTensor& tensor) {
    const Tensor view = tensor.cpuView();
    data_ = view.mutable_data_ptr<scalar_t>();
    column_stride_ = view.stride(-1);
    row_stride_ = view.dim() == 2 ? view.stride(0) : 0;
  }

  explicit Elements(const std::optional<KernelTensor>& tensor) {
    if (tensor.has_value()) {
      *this = Elements(*tensor);
    }
  }

  acc_t read(int64_t row, int64_t column) const {
    return data_ == nullptr ? acc_t(0) : acc_t(*at(row, column));
  }

  acc_t read(int64_t index) const {
    return read(0, index);
  }

  void write(int64_t row, int64_t column, acc_t value) const {
    *at(row, column) = static_cast<scalar_t>(value);
  }

 private:
  scalar_t* at(int64_t row, int64_t column) const {
    return data_ + row * row_stride_ + column * column_stride_;
  }

  scalar_t* data_ = nullptr;
  int64_t row_stride_ = 0;
  int64_t column_stride_ = 0;
};

template <typename scalar_t>
at::opmath_type<scalar_t> sigmoid(at::opmath_type<scalar_t> x) {
  return 1 / (1 + std::exp(-x));
}

/**
 * Runs `element(b, j)` for every batch row b and hidden unit j, rows split
 * among ATen's intra-op threads: the kernel's grid, each call one thread of
 * it.
 */
template <typename Element>
void forEachElement(int64_t batch, int64_t hidden_size, Element&& element) {
  const int64_t rows_per_task =
      std::max<int64_t>(1, at::internal::GRAIN_SIZE / hidden_size);
  at::parallel_for(0, batch, rows_per_task, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t j = 0; j < hidden_size; ++j) {
        element(b, j);
      }
    }
  });
}

// LITERALINCLUDE START: CH09_RNN_LSTM_FORWARD
/**
 * `_thnn_fused_lstm_cell`: one LSTM step from the two gate products.
 *
 * For hidden unit j of batch row b, gate k's pre-activation is
 * input_gates[b, k*H + j] + hidden_gates[b, k*H + j] (+ both biases), and
 *
 *     i = sigmoid(.), f = sigmoid(.), g = tanh(.), o = sigmoid(.)
 *     cy = f * cx + i * g,  hy = o * tanh(cy)
 *
 * as the CPU's unfused cell computes with separate operators. The
 * workspace keeps the four activated gates [batch, 4 * H] for the backward.
 */
std::tuple<Tensor, Tensor, Tensor> fusedLstmCell(
    const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
    const OptionalTensor& input_bias_opt,
    const OptionalTensor& hidden_bias_opt) {
  const Tensor input_bias = input_bias_opt.value_or(Tensor());
  const Tensor hidden_bias = hidden_bias_opt.value_or(Tensor());
  const std::pair<int64_t, int64_t> sizes =
      checkForwardSizes("_thnn_fused_lstm_cell", kLstmGates, input_gates,
                        hidden_gates, cx, "cx", input_bias, hidden_bias);
  const int64_t batch = sizes.first;
  const int64_t hidden_size = sizes.second;
  const at::ScalarType dtype = input_gates.scalar_type();
  const c10::DeviceGuard guard(input_gates.device());
  const auto options = input_gates.options();
  Tensor hy = at::empty(cx.sizes(), options);
  Tensor cy = at::empty(cx.sizes(), options);
  Tensor workspace = at::empty(input_gates.sizes(), options);
  if (hy.numel() == 0) {
    return {hy, cy, workspace};
  }
  // NB: the states are read and written as [batch, H] in the order of their
  // elements, whatever their shape, as CUDA's kernel does. A reshape that
  // must copy queues the copy on this stream, before the kernel.
  const KernelTensor igates(input_gates), hgates(hidden_gates),
      previous(cx.reshape({batch, hidden_size})),
      hidden_out(hy.view({batch, hidden_size})),
      cell_out(cy.view({batch, hidden_size})), saved(workspace);
  const auto ibias = kernelTensor(input_bias),
             hbias = kernelTensor(hidden_bias);
  // LITERALINCLUDE END: CH09_RNN_LSTM_FORWARD
  // LITERALINCLUDE START: CH09_RNN_FORWARD_KERNEL
  launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
      input_gates.device().index(),
      {igates.buffer(), hgates.buffer(), previous.buffer(), hidden_out.buffer(),
       cell_out.buffer(), saved.buffer(), bufferOf(ibias), bufferOf(hbias)},
      [=] {
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kHalf, at::kBFloat16, dtype, "_thnn_fused_lstm_cell", [&] {
              using acc_t = at::opmath_type<scalar_t>;
              const Elements<scalar_t> ig(igates), hg(hgates), c(previous),
                  h_out(hidden_out), c_out(cell_out), w(saved), bias_i(ibias),
                  bias_h(hbias);
              const int64_t H = hidden_size;
              forEachElement(batch, H, [&](int64_t b, int64_t j) {
                // Gate k's pre-activation at (b, j).
                auto gate = [&](int64_t k) {
                  const int64_t column = k * H + j;
                  return ig.read(b, column) + hg.read(b, column) +
                         bias_i.read(column) + bias_h.read(column);
                };
                const acc_t i = sigmoid<scalar_t>(gate(0));
                const acc_t f = sigmoid<scalar_t>(gate(1));
                const acc_t g = std::tanh(gate(2));
                const acc_t o = sigmoid<scalar_t>(gate(3));
                const acc_t cell = f * c.read(b, j) + i * g;
                c_out.write(b, j, cell);
                h_out.write(b, j, o * std::tanh(cell));
                w.write(b, j, i);
                w.write(b, H + j, f);
                w.write(b, 2 * H + j, g);
                w.write(b, 3 * H + j, o);
              });
            });
      });
  return {hy, cy, workspace};
}
// LITERALINCLUDE END: CH09_RNN_FORWARD_KERNEL

// LITERALINCLUDE START: CH09_RNN_LSTM_BACKWARD
/**
 * `_thnn_fused_lstm_cell_backward_impl`: the gradient of one LSTM step
 * from the forward's workspace (the activated gates i, f, g, o) and its
 * states cx and cy. Either output gradient may be missing.
 *
 *     dcy  = grad_hy * o * (1 - tanh(cy)^2) + grad_cy
 *     di   = dcy * g * i * (1 - i)      df = dcy * cx * f * (1 - f)
 *     dg   = dcy * i * (1 - g^2)        do = grad_hy * tanh(cy) * o * (1 - o)
 *     dcx  = dcy * f
 *
 * Returns the gradient of the gate pre-activations [batch, 4 * H] (the
 * input and the hidden gate products get the same one), of cx, and of the
 * biases when the cell has them (the gates' gradient summed over the batch).
 */
std::tuple<Tensor, Tensor, Tensor> fusedLstmCellBackward(
    const OptionalTensor& grad_hy_opt, const OptionalTensor& grad_cy_opt,
    const Tensor& cx, const Tensor& cy, const Tensor& workspace,
    bool has_bias) {
  static constexpr const char* op = "_thnn_fused_lstm_cell_backward_impl";
  const Tensor grad_hy = grad_hy_opt.value_or(Tensor());
  const Tensor grad_cy = grad_cy_opt.value_or(Tensor());
  if (!grad_hy.defined() && !grad_cy.defined()) {
    return {};
  }
  checkDeviceAndDtype(op, {{"grad_hy", grad_hy},
                           {"grad_cy", grad_cy},
                           {"cx", cx},
                           {"cy", cy},
                           {"workspace", workspace}});
  const Tensor& grad = grad_hy.defined() ? grad_hy : grad_cy;
  TORCH_CHECK(grad.dim() == 2, op,
              ": expected gradients of 2 dimensions [batch, hidden_size], "
              "but got sizes ",
              grad.sizes());
  const int64_t batch = grad.size(0);
  const int64_t hidden_size = grad.size(1);
  for (const Argument& state :
       {Argument{"grad_hy", grad_hy}, Argument{"grad_cy", grad_cy},
        Argument{"cx", cx}, Argument{"cy", cy}}) {
    if (state.tensor.defined()) {
      checkSizes(op, state.name, state.tensor, {batch, hidden_size});
    }
  }
  checkSizes(op, "workspace", workspace, {batch, kLstmGates * hidden_size});
  const at::ScalarType dtype = workspace.scalar_type();
  const c10::DeviceGuard guard(workspace.device());
  Tensor grad_gates = at::empty(workspace.sizes(), workspace.options());
  Tensor grad_cx = at::empty(cx.sizes(), cx.options());
  // LITERALINCLUDE END: CH09_RNN_LSTM_BACKWARD
  // LITERALINCLUDE START: CH09_RNN_BACKWARD_KERNEL
  if (grad_cx.numel() > 0) {
    const KernelTensor previous(cx), cell(cy), saved(workspace),
        gates_out(grad_gates), cx_out(grad_cx);
    const auto grad_h = kernelTensor(grad_hy), grad_c = kernelTensor(grad_cy);
    launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
        workspace.device().index(),
        {previous.buffer(), cell.buffer(), saved.buffer(), gates_out.buffer(),
         cx_out.buffer(), bufferOf(grad_h), bufferOf(grad_c)},
        [=] {
          AT_DISPATCH_FLOATING_TYPES_AND2(
              at::kHalf, at::kBFloat16, dtype, op, [&] {
                using acc_t = at::opmath_type<scalar_t>;
                const Elements<scalar_t> c(previous), c_new(cell), w(saved),
                    d_gates(gates_out), d_cx(cx_out), d_hy(grad_h),
                    d_cy(grad_c);
                const int64_t H = hidden_size;
                forEachElement(batch, H, [&](int64_t b, int64_t j) {
                  const acc_t i = w.read(b, j);
                  const acc_t f = w.read(b, H + j);
                  const acc_t g = w.read(b, 2 * H + j);
                  const acc_t o = w.read(b, 3 * H + j);
                  const acc_t tanh_cy = std::tanh(c_new.read(b, j));
                  const acc_t dcy =
                      d_hy.read(b, j) * o * (1 - tanh_cy * tanh_cy) +
                      d_cy.read(b, j);
                  d_gates.write(b, j, dcy * g * i * (1 - i));
                  d_gates.write(b, H + j, dcy * c.read(b, j) * f * (1 - f));
                  d_gates.write(b, 2 * H + j, dcy * i * (1 - g * g));
                  d_gates.write(b, 3 * H + j,
                                d_hy.read(b, j) * tanh_cy * o * (1 - o));
                  d_cx.write(b, j, dcy * f);
                });
              });
        });
  }
  // NB: a reduction over the batch, queued after the kernel on the same
  // stream: chapter 09's native sum.
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}
// LITERALINCLUDE END: CH09_RNN_BACKWARD_KERNEL

/**
 * `_thnn_fused_gru_cell`: one GRU step from the two gate products. With r,
 * z and n the reset, update and new gates (H columns each):
 *
 *     r = sigmoid(ir + hr),  z = sigmoid(ii + hi)
 *     n = tanh(in + r * hn),  hy = n + z * (hx - n)
 *
 * biases included in each term. The workspace [batch, 5 * H] keeps r, z, n,
 * hx and hn (with its bias) for the backward.
 */
std::tuple<Tensor, Tensor> fusedGruCell(const Tensor& input_gates,
                                        const Tensor& hidden_gates,
                                        const Tensor& hx,
                                        const OptionalTensor& input_bias_opt,
                                        const OptionalTensor& hidden_bias_opt) {
  const Tensor input_bias = input_bias_opt.value_or(Tensor());
  const Tensor hidden_bias = hidden_bias_opt.value_or(Tensor());
  const std::pair<int64_t, int64_t> sizes =
      checkForwardSizes("_thnn_fused_gru_cell", kGruGates, input_gates,
                        hidden_gates, hx, "hx", input_bias, hidden_bias);
  const int64_t batch = sizes.first;
  const int64_t hidden_size = sizes.second;
  const at::ScalarType dtype = input_gates.scalar_type();
  const c10::DeviceGuard guard(input_gates.device());
  const auto options = input_gates.options();
  Tensor hy = at::empty(hx.sizes(), options);
  Tensor workspace =
      at::empty({batch, kGruWorkspaceColumns * hidden_size}, options);
  if (hy.numel() == 0) {
    return {hy, workspace};
  }
  const KernelTensor igates(input_gates), hgates(hidden_gates),
      previous(hx.reshape({batch, hidden_size})),
      hidden_out(hy.view({batch, hidden_size})), saved(workspace);
  const auto ibias = kernelTensor(input_bias),
             hbias = kernelTensor(hidden_bias);
  launchOnCurrentStream(
      input_gates.device().index(),
      {igates.buffer(), hgates.buffer(), previous.buffer(), hidden_out.buffer(),
       saved.buffer(), bufferOf(ibias), bufferOf(hbias)},
      [=] {
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kHalf, at::kBFloat16, dtype, "_thnn_fused_gru_cell", [&] {
              using acc_t = at::opmath_type<scalar_t>;
              const Elements<scalar_t> ig(igates), hg(hgates), h(previous),
                  h_out(hidden_out), w(saved), bias_i(ibias), bias_h(hbias);
              const int64_t H = hidden_size;
              forEachElement(batch, H, [&](int64_t b, int64_t j) {
                // The input and hidden terms of gate k at (b, j).
                auto input_term = [&](int64_t k) {
                  return ig.read(b, k * H + j) + bias_i.read(k * H + j);
                };
                auto hidden_term = [&](int64_t k) {
                  return hg.read(b, k * H + j) + bias_h.read(k * H + j);
                };
                const acc_t r =
                    sigmoid<scalar_t>(input_term(0) + hidden_term(0));
                const acc_t z =
                    sigmoid<scalar_t>(input_term(1) + hidden_term(1));
                const acc_t hn = hidden_term(2);
                const acc_t n = std::tanh(input_term(2) + r * hn);
                const acc_t previous_h = h.read(b, j);
                h_out.write(b, j, n + z * (previous_h - n));
                w.write(b, j, r);
                w.write(b, H + j, z);
                w.write(b, 2 * H + j, n);
                w.write(b, 3 * H + j, previous_h);
                w.write(b, 4 * H + j, hn);
              });
            });
      });
  return {hy, workspace};
}

/**
 * `_thnn_fused_gru_cell_backward`: the gradient of one GRU step from the
 * forward's workspace. The input and hidden gate products share the
 * gradients of r and z; of the new gate, the input product gets dn and the
 * hidden one dn * r.
 */
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fusedGruCellBackward(
    const Tensor& grad_hy, const Tensor& workspace, bool has_bias) {
  static constexpr const char* op = "_thnn_fused_gru_cell_backward";
  checkDeviceAndDtype(op, {{"grad_hy", grad_hy}, {"workspace", workspace}});
  TORCH_CHECK(grad_hy.dim() == 2, op,
              ": expected grad_hy of 2 dimensions [batch, hidden_size], but "
              "got sizes ",
              grad_hy.sizes());
  const int64_t batch = grad_hy.size(0);
  const int64_t hidden_size = grad_hy.size(1);
  checkSizes(op, "workspace", workspace,
             {batch, kGruWorkspaceColumns * hidden_size});
  const at::ScalarType dtype = workspace.scalar_type();
  const c10::DeviceGuard guard(workspace.device());
  const auto options = workspace.options();
  Tensor grad_input_gates =
      at::empty({batch, kGruGates * hidden_size}, options);
  Tensor grad_hidden_gates =
      at::empty({batch, kGruGates * hidden_size}, options);
  Tensor grad_hx = at::empty(grad_hy.sizes(), options);
  if (grad_hx.numel() > 0) {
    const KernelTensor grad(grad_hy), saved(workspace),
        input_out(grad_input_gates), hidden_out(grad_hidden_gates),
        hx_out(grad_hx);
    launchOnCurrentStream(
        workspace.device().index(),
        {grad.buffer(), saved.buffer(), input_out.buffer(), hidden_out.buffer(),
         hx_out.buffer()},
        [=] {
          AT_DISPATCH_FLOATING_TYPES_AND2(
              at::kHalf, at::kBFloat16, dtype, op, [&] {
                using acc_t = at::opmath_type<scalar_t>;
                const Elements<scalar_t> d_hy(grad), w(saved),
                    d_input(input_out), d_hidden(hidden_out), d_hx(hx_out);
                const int64_t H = hidden_size;
                forEachElement(batch, H, [&](int64_t b, int64_t j) {
                  const acc_t r = w.read(b, j);
                  const acc_t z = w.read(b, H + j);
                  const acc_t n = w.read(b, 2 * H + j);
                  const acc_t previous_h = w.read(b, 3 * H + j);
                  const acc_t hn = w.read(b, 4 * H + j);
                  const acc_t dy = d_hy.read(b, j);
                  const acc_t dz = dy * (previous_h - n) * (1 - z) * z;
                  const acc_t dn = dy * (1 - z) * (1 - n * n);
                  const acc_t dr = dn * hn * (1 - r) * r;
                  d_hx.write(b, j, dy * z);
                  d_input.write(b, j, dr);
                  d_input.write(b, H + j, dz);
                  d_input.write(b, 2 * H + j, dn);
                  d_hidden.write(b, j, dr);
                  d_hidden.write(b, H + j, dz);
                  d_hidden.write(b, 2 * H + j, dn * r);
                });
              });
        });
  }
  Tensor grad_input_bias, grad_hidden_bias;
  if (has_bias) {
    grad_input_bias = grad_input_gates.sum(0);
    grad_hidden_bias = grad_hidden_gates.sum(0);
  }
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
          grad_hidden_bias};
}

} // namespace

// LITERALINCLUDE START: CH09_RNN_REGISTER
// NB: `_thnn_fused_lstm_cell_backward` needs no kernel: its composite
// kernel calls `_impl` and hands the gates' gradient to both gate products.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fusedLstmCell));
  m.impl("_thnn_fused_lstm_cell_backward_impl",
         TORCH_FN(fusedLstmCellBackward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fusedGruCell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fusedGruCellBackward));
}
// LITERALINCLUDE END: CH09_RNN_REGISTER

} // namespace accinte
