// Chapter 09: scaled dot-product attention as one fused kernel. On a
// PrivateUse1 device, `scaled_dot_product_attention` asks the device which
// backend to take through `_fused_sdp_choice_stub`; a device that answers
// "overrideable" gets `_scaled_dot_product_fused_attention_overrideable`,
// whose derivative is `_scaled_dot_product_fused_attention_overrideable_
// backward`. These are accinte's kernels for both: checks on the host, then
// one launch on the current stream whose body computes the whole attention
// from the device memory, the way a vendor's fused attention kernel does.

#include <01_minimal_ops/csrc/kernel.h>

#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/SDPBackend.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

namespace accinte {
namespace {

using at::Tensor;

constexpr const char* kForward =
    "_scaled_dot_product_fused_attention_overrideable";
constexpr const char* kBackward =
    "_scaled_dot_product_fused_attention_overrideable_backward";

bool isFusedDtype(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16;
}

// LITERALINCLUDE START: CH09_SDPA_CHOICE
/**
 * Whether the fused kernel computes `scaled_dot_product_attention` for these
 * arguments exactly as the math path would. Sizes only, never data: under
 * `torch.compile` the arguments are fake tensors.
 */
bool fusedKernelTakes(const Tensor& query, const Tensor& key,
                      const Tensor& value, const std::optional<Tensor>& mask,
                      double dropout_p, bool is_causal) {
  // NB: dropout is left to the math path, which draws its mask from the
  // device's generator with the native dropout kernel; the fused kernel
  // would need a counter-based generator of its own (CUDA's Philox seed and
  // offset, which the schema returns for the backward to replay).
  if (dropout_p > 0.0) {
    return false;
  }
  for (const Tensor* t : {&query, &key, &value}) {
    if (t->dim() != 4 || t->is_nested() || !isFusedDtype(t->scalar_type())) {
      return false;
    }
  }
  // (batch, heads, length, embedding). Different head counts (grouped-query
  // attention) are the math path's: the fused operator has no enable_gqa.
  for (int64_t d : {0, 1}) {
    if (key.sym_size(d) != query.sym_size(d) ||
        value.sym_size(d) != query.sym_size(d)) {
      return false;
    }
  }
  if (key.sym_size(3) != query.sym_size(3) ||
      value.sym_size(2) != key.sym_size(2)) {
    return false;
  }
  if (mask.has_value()) {
    // The math path refuses a mask with is_causal, and one that does not
    // broadcast to the scores: it gives those errors.
    const c10::SymInt scores[] = {query.sym_size(0), query.sym_size(1),
                                  query.sym_size(2), key.sym_size(2)};
    if (is_causal || mask->dim() > 4 || mask->device() != query.device() ||
        !at::is_expandable_to(mask->sym_sizes(), scores)) {
      return false;
    }
    // PyTorch takes a float32 mask with a bfloat16 or float16 query (and
    // converts a boolean one to the query's dtype before the fused call);
    // the fused kernel adds a bias of the query's dtype: the math path
    // takes any other.
    if (mask->scalar_type() != at::kBool &&
        mask->scalar_type() != query.scalar_type()) {
      return false;
    }
  }
  return true;
}

/**
 * `_fused_sdp_choice` for accinte tensors: the fused kernel when it takes
 * the arguments and `sdpa_kernel` allows it, else the math path.
 */
int64_t fusedSdpChoice(const Tensor& query, const Tensor& key,
                       const Tensor& value, const std::optional<Tensor>& mask,
                       double dropout_p, bool is_causal,
                       std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  const at::Context& context = at::globalContext();
  if (context.userEnabledOverrideableSDP() &&
      fusedKernelTakes(query, key, value, mask, dropout_p, is_causal)) {
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  }
  TORCH_CHECK(context.userEnabledMathSDP(),
              "scaled_dot_product_attention: no backend is enabled for these "
              "arguments on accinte: the fused kernel is disabled or does not "
              "take them, and the math backend is disabled");
  return static_cast<int64_t>(at::SDPBackend::math);
}
// LITERALINCLUDE END: CH09_SDPA_CHOICE

/** Checks the tensors of a fused attention call, as a direct call sees it. */
void checkAttentionArguments(const char* op, const Tensor& query,
                             const Tensor& key, const Tensor& value,
                             const Tensor& bias) {
  const std::pair<const char*, const Tensor*> args[] = {{"query", &query},
                                                        {"key", &key},
                                                        {"value", &value},
                                                        {"attn_bias", &bias}};
  for (const auto& [name, tensor] : args) {
    if (!tensor->defined()) {
      continue;
    }
    TORCH_CHECK(tensor->device() == query.device(),
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                query.device(), " and ", tensor->device(),
                "! (when checking argument ", name, " of aten::", op, ")");
    TORCH_CHECK(tensor->scalar_type() == query.scalar_type(), op, ": expected ",
                name, " to have the dtype of query (", query.scalar_type(),
                "), but got ", tensor->scalar_type());
  }
  TORCH_CHECK(isFusedDtype(query.scalar_type()), op,
              ": accinte's fused attention takes float32, float16 or "
              "bfloat16 tensors, but got ",
              query.scalar_type());
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4, op,
              ": expected query, key and value of 4 dimensions (batch, heads, "
              "length, embedding), but got sizes ",
              query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(key.size(0) == query.size(0) && value.size(0) == query.size(0) &&
                  key.size(1) == query.size(1) &&
                  value.size(1) == query.size(1),
              op,
              ": expected query, key and value with the same batch size and "
              "number of heads, but got sizes ",
              query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(key.size(3) == query.size(3), op,
              ": expected key with the embedding size of query (",
              query.size(3), "), but got ", key.size(3));
  TORCH_CHECK(value.size(2) == key.size(2), op,
              ": expected value with the length of key (", key.size(2),
              "), but got ", value.size(2));
  if (bias.defined()) {
    const std::array<int64_t, 4> scores = {query.size(0), query.size(1),
                                           query.size(2), key.size(2)};
    TORCH_CHECK(bias.dim() <= 4 && at::is_expandable_to(bias.sizes(), scores),
                op, ": expected attn_bias that broadcasts to the scores ",
                at::IntArrayRef(scores), ", but got sizes ", bias.sizes());
  }
}

/**
 * The output's layout, as PyTorch's Meta function of the fused operator
 * gives it to a traced program: the query's own when the sizes agree, else
 * the query's order of strides.
 */
Tensor allocateOutput(const Tensor& query, int64_t value_embedding) {
  std::vector<int64_t> sizes = query.sizes().vec();
  sizes[3] = value_embedding;
  if (sizes == query.sizes()) {
    return at::empty_like(query);
  }
  std::array<int64_t, 4> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return query.stride(a) > query.stride(b);
  });
  std::vector<int64_t> strides(4);
  int64_t stride = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    strides[*d] = stride;
    stride *= sizes[*d];
  }
  return at::empty_strided(sizes, strides, query.options());
}

/**
 * On the worker: one (batch, head) slice of a 4-dimensional tensor as a
 * matrix, indexed through its strides, read in the kernel's precision.
 */
template <typename scalar_t>
struct Slice {
  using acc_t = at::opmath_type<scalar_t>;

  Slice(const Tensor& view, int64_t b, int64_t h)
      : data(view.defined() ? view.mutable_data_ptr<scalar_t>() +
                                  b * view.stride(0) + h * view.stride(1)
                            : nullptr),
        row_stride(view.defined() ? view.stride(2) : 0),
        column_stride(view.defined() ? view.stride(3) : 0) {}

  acc_t read(int64_t row, int64_t column) const {
    return acc_t(data[row * row_stride + column * column_stride]);
  }

  void write(int64_t row, int64_t column, acc_t value) const {
    data[row * row_stride + column * column_stride] =
        static_cast<scalar_t>(value);
  }

  scalar_t* data;
  int64_t row_stride;
  int64_t column_stride;
};

/** The sizes and flags every slice of one call shares. */
struct Problem {
  int64_t batch, heads, query_length, key_length, embedding, value_embedding;
  double scale;
  bool is_causal;
};

/**
 * Row `i` of the scores, scale * q_i . k_j + bias[i, j], with -inf where
 * causal masking hides key j; returns their maximum.
 */
template <typename scalar_t>
at::opmath_type<scalar_t> scoreRow(const Problem& p, const Slice<scalar_t>& q,
                                   const Slice<scalar_t>& k,
                                   const Slice<scalar_t>& bias, int64_t i,
                                   std::vector<at::opmath_type<scalar_t>>& s) {
  using acc_t = at::opmath_type<scalar_t>;
  acc_t max = -std::numeric_limits<acc_t>::infinity();
  for (int64_t j = 0; j < p.key_length; ++j) {
    if (p.is_causal && j > i) {
      s[j] = -std::numeric_limits<acc_t>::infinity();
      continue;
    }
    acc_t dot = 0;
    for (int64_t e = 0; e < p.embedding; ++e) {
      dot += q.read(i, e) * k.read(j, e);
    }
    s[j] = static_cast<acc_t>(p.scale) * dot +
           (bias.data != nullptr ? bias.read(i, j) : acc_t(0));
    max = std::max(max, s[j]);
  }
  return max;
}

/**
 * Runs `slice(b, h)` for every (batch, head), among ATen's threads: the
 * kernel's grid, each call one block of it. Slices are grouped so that a
 * task has about GRAIN_SIZE multiply-adds: a small attention (one token of
 * `generate`) runs on the worker alone instead of waking every thread.
 */
template <typename Body>
void forEachSlice(const Problem& p, Body&& slice) {
  const int64_t work = std::max<int64_t>(
      1, p.query_length * p.key_length * (p.embedding + p.value_embedding));
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / work);
  at::parallel_for(0, p.batch * p.heads, grain,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t n = begin; n < end; ++n) {
                       slice(n / p.heads, n % p.heads);
                     }
                   });
}

// LITERALINCLUDE START: CH09_SDPA_FORWARD
/**
 * On the worker, for each (batch, head) and query row i: the scores, then
 *
 *     logsumexp_i = log(sum_j exp(s_ij)),  out_i = sum_j exp(s_ij - lse_i) v_j
 *
 * A row that masking hides entirely gets zeros, as the math path's softmax
 * gives it, and a logsumexp of +inf, which makes its probabilities zero in
 * the backward.
 */
template <typename scalar_t>
void attentionForward(const Problem& p, const Tensor& query, const Tensor& key,
                      const Tensor& value, const Tensor& bias,
                      const Tensor& out, const Tensor& logsumexp) {
  using acc_t = at::opmath_type<scalar_t>;
  forEachSlice(p, [&](int64_t b, int64_t h) {
    const Slice<scalar_t> q(query, b, h), k(key, b, h), v(value, b, h),
        mask(bias, b, h), o(out, b, h);
    float* lse = logsumexp.mutable_data_ptr<float>() +
                 (b * p.heads + h) * p.query_length;
    std::vector<acc_t> s(p.key_length);
    std::vector<acc_t> row(p.value_embedding);
    for (int64_t i = 0; i < p.query_length; ++i) {
      const acc_t max = scoreRow(p, q, k, mask, i, s);
      std::fill(row.begin(), row.end(), acc_t(0));
      if (max == -std::numeric_limits<acc_t>::infinity()) {
        lse[i] = std::numeric_limits<float>::infinity();
      } else {
        acc_t sum = 0;
        for (int64_t j = 0; j < p.key_length; ++j) {
          sum += std::exp(s[j] - max);
        }
        const acc_t log_sum = max + std::log(sum);
        lse[i] = static_cast<float>(log_sum);
        for (int64_t j = 0; j < p.key_length; ++j) {
          const acc_t probability = std::exp(s[j] - log_sum);
          if (probability != 0) {
            for (int64_t e = 0; e < p.value_embedding; ++e) {
              row[e] += probability * v.read(j, e);
            }
          }
        }
      }
      for (int64_t e = 0; e < p.value_embedding; ++e) {
        o.write(i, e, row[e]);
      }
    }
  });
}
// LITERALINCLUDE END: CH09_SDPA_FORWARD

// LITERALINCLUDE START: CH09_SDPA_BACKWARD
/**
 * On the worker, for each (batch, head): the probabilities again, from the
 * scores and the forward's logsumexp (nothing of size L x S was saved), and
 *
 *     dP_ij = dO_i . v_j,   D_i = dO_i . O_i,   dS_ij = P_ij (dP_ij - D_i)
 *     dQ_i = scale sum_j dS_ij k_j,   dK_j = scale sum_i dS_ij q_i,
 *     dV_j = sum_i P_ij dO_i,         d attn_bias_ij = dS_ij
 *
 * Each (batch, head) owns its rows of dK and dV, so the slices need no
 * synchronization between them.
 */
template <typename scalar_t>
void attentionBackward(const Problem& p, const Tensor& grad_out,
                       const Tensor& query, const Tensor& key,
                       const Tensor& value, const Tensor& bias,
                       const Tensor& out, const Tensor& logsumexp,
                       const Tensor& grad_query, const Tensor& grad_key,
                       const Tensor& grad_value, const Tensor& grad_bias) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t E = p.embedding, Ev = p.value_embedding;
  forEachSlice(p, [&](int64_t b, int64_t h) {
    const Slice<scalar_t> q(query, b, h), k(key, b, h), v(value, b, h),
        mask(bias, b, h), o(out, b, h), d_o(grad_out, b, h),
        d_q(grad_query, b, h), d_k(grad_key, b, h), d_v(grad_value, b, h),
        d_bias(grad_bias, b, h);
    const float* lse =
        logsumexp.const_data_ptr<float>() + (b * p.heads + h) * p.query_length;
    std::vector<acc_t> s(p.key_length), dq(E);
    std::vector<acc_t> dk(p.key_length * E, 0), dv(p.key_length * Ev, 0);
    for (int64_t i = 0; i < p.query_length; ++i) {
      scoreRow(p, q, k, mask, i, s);
      acc_t D = 0;
      for (int64_t e = 0; e < Ev; ++e) {
        D += d_o.read(i, e) * o.read(i, e);
      }
      std::fill(dq.begin(), dq.end(), acc_t(0));
      for (int64_t j = 0; j < p.key_length; ++j) {
        const acc_t probability = std::exp(s[j] - acc_t(lse[i]));
        acc_t ds = 0;
        if (probability != 0) {
          acc_t dp = 0;
          for (int64_t e = 0; e < Ev; ++e) {
            dp += d_o.read(i, e) * v.read(j, e);
            dv[j * Ev + e] += probability * d_o.read(i, e);
          }
          ds = probability * (dp - D);
          const acc_t scaled = static_cast<acc_t>(p.scale) * ds;
          for (int64_t e = 0; e < E; ++e) {
            dq[e] += scaled * k.read(j, e);
            dk[j * E + e] += scaled * q.read(i, e);
          }
        }
        if (d_bias.data != nullptr) {
          d_bias.write(i, j, ds);
        }
      }
      for (int64_t e = 0; e < E; ++e) {
        d_q.write(i, e, dq[e]);
      }
    }
    for (int64_t j = 0; j < p.key_length; ++j) {
      for (int64_t e = 0; e < E; ++e) {
        d_k.write(j, e, dk[j * E + e]);
      }
      for (int64_t e = 0; e < Ev; ++e) {
        d_v.write(j, e, dv[j * Ev + e]);
      }
    }
  });
}
// LITERALINCLUDE END: CH09_SDPA_BACKWARD

Problem problemOf(const Tensor& query, const Tensor& key, const Tensor& value,
                  bool is_causal, std::optional<double> scale) {
  return Problem{
      query.size(0),
      query.size(1),
      query.size(2),
      key.size(2),
      query.size(3),
      value.size(3),
      scale.value_or(1.0 / std::sqrt(static_cast<double>(query.size(3)))),
      is_causal};
}

/** The bias seen as the scores' shape: a view that broadcasts it. */
Tensor expandedBias(const Tensor& bias, const Problem& p) {
  if (!bias.defined()) {
    return bias;
  }
  return bias.expand({p.batch, p.heads, p.query_length, p.key_length});
}

std::optional<KernelTensor> kernelTensor(const Tensor& tensor) {
  if (!tensor.defined()) {
    return std::nullopt;
  }
  return KernelTensor(tensor);
}

const void* bufferOf(const std::optional<KernelTensor>& tensor) {
  return tensor.has_value() ? tensor->buffer() : nullptr;
}

Tensor cpuViewOf(const std::optional<KernelTensor>& tensor) {
  return tensor.has_value() ? tensor->cpuView() : Tensor();
}

// LITERALINCLUDE START: CH09_SDPA_OP
/**
 * `_scaled_dot_product_fused_attention_overrideable`: the output and the
 * logsumexp of the scores [batch, heads, L] (float32), which autograd hands
 * to the backward. Without variable-length batches or dropout, the
 * cumulative lengths and the debug mask are undefined and the Philox seed
 * and offset are zeros; max_q and max_k are L and S.
 */
std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor,
           Tensor, Tensor>
fusedAttention(const Tensor& query, const Tensor& key, const Tensor& value,
               const std::optional<Tensor>& attn_bias, double dropout_p,
               bool is_causal, bool return_debug_mask,
               std::optional<double> scale) {
  const Tensor bias = attn_bias.value_or(Tensor());
  checkAttentionArguments(kForward, query, key, value, bias);
  TORCH_CHECK(
      dropout_p == 0.0, kForward,
      ": accinte's fused attention has no dropout (got dropout_p=", dropout_p,
      "); scaled_dot_product_attention takes the math path for it");
  TORCH_CHECK(!return_debug_mask, kForward,
              ": return_debug_mask is only for dropout, which accinte's "
              "fused attention does not have");
  const Problem p = problemOf(query, key, value, is_causal, scale);
  const c10::DeviceGuard guard(query.device());
  Tensor out = allocateOutput(query, p.value_embedding);
  Tensor logsumexp = at::empty({p.batch, p.heads, p.query_length},
                               query.options().dtype(at::kFloat));
  if (out.numel() > 0) {
    const KernelTensor q(query), k(key), v(value), o(out), lse(logsumexp);
    const auto mask = kernelTensor(expandedBias(bias, p));
    const at::ScalarType dtype = query.scalar_type();
    launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
        query.device().index(),
        {q.buffer(), k.buffer(), v.buffer(), o.buffer(), lse.buffer(),
         bufferOf(mask)},
        [=] {
          AT_DISPATCH_FLOATING_TYPES_AND2(
              at::kHalf, at::kBFloat16, dtype, kForward, [&] {
                attentionForward<scalar_t>(p, q.cpuView(), k.cpuView(),
                                           v.cpuView(), cpuViewOf(mask),
                                           o.cpuView(), lse.cpuView());
              });
        });
  }
  const Tensor zero = at::zeros({}, at::dtype(at::kLong));
  return {out,          logsumexp, Tensor(), Tensor(), p.query_length,
          p.key_length, zero,      zero,     Tensor()};
}
// LITERALINCLUDE END: CH09_SDPA_OP

/**
 * `_scaled_dot_product_fused_attention_overrideable_backward`: the
 * gradients of query, key, value and, when `grad_input_mask[3]` asks for it,
 * of the bias (the scores' gradient, summed over the dimensions the bias
 * was broadcast along).
 */
std::tuple<Tensor, Tensor, Tensor, Tensor> fusedAttentionBackward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key,
    const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out,
    const Tensor& logsumexp, const Tensor& /*cum_seq_q*/,
    const Tensor& /*cum_seq_k*/, int64_t /*max_q*/, int64_t /*max_k*/,
    double dropout_p, bool is_causal, const Tensor& /*philox_seed*/,
    const Tensor& /*philox_offset*/, std::optional<double> scale) {
  checkAttentionArguments(kBackward, query, key, value, attn_bias);
  TORCH_CHECK(dropout_p == 0.0, kBackward,
              ": accinte's fused attention has no dropout (got dropout_p=",
              dropout_p, ")");
  const Problem p = problemOf(query, key, value, is_causal, scale);
  const std::vector<int64_t> out_sizes = {p.batch, p.heads, p.query_length,
                                          p.value_embedding};
  TORCH_CHECK(grad_out.sizes() == out_sizes && out.sizes() == out_sizes,
              kBackward, ": expected grad_out and out of sizes ",
              at::IntArrayRef(out_sizes), ", but got ", grad_out.sizes(),
              " and ", out.sizes());
  TORCH_CHECK(grad_out.scalar_type() == query.scalar_type() &&
                  out.scalar_type() == query.scalar_type(),
              kBackward, ": expected grad_out and out of dtype ",
              query.scalar_type());
  TORCH_CHECK(logsumexp.scalar_type() == at::kFloat &&
                  logsumexp.sizes() ==
                      at::IntArrayRef({p.batch, p.heads, p.query_length}),
              kBackward,
              ": expected the forward's float32 logsumexp of sizes [", p.batch,
              ", ", p.heads, ", ", p.query_length, "], but got ",
              logsumexp.scalar_type(), " of sizes ", logsumexp.sizes());
  for (const Tensor* t : {&grad_out, &out, &logsumexp}) {
    TORCH_CHECK(t->device() == query.device(),
                "Expected all tensors to be on the same device, but found at "
                "least two devices, ",
                query.device(), " and ", t->device(), "! (aten::", kBackward,
                ")");
  }
  const c10::DeviceGuard guard(query.device());
  Tensor grad_query = at::empty_like(query);
  Tensor grad_key = at::empty_like(key);
  Tensor grad_value = at::empty_like(value);
  const bool bias_grad = attn_bias.defined() && grad_input_mask[3];
  // NB: the scores' gradient, at full size; reduced to the bias's sizes
  // below, on the same stream.
  Tensor grad_scores =
      bias_grad ? at::empty({p.batch, p.heads, p.query_length, p.key_length},
                            query.options())
                : Tensor();
  if (p.batch * p.heads > 0) {
    // NB: lse.contiguous() queues a copy first if it is not contiguous,
    // since the kernel reads it as [batch * heads, L].
    const KernelTensor d_o(grad_out), q(query), k(key), v(value), o(out),
        lse(logsumexp.contiguous()), d_q(grad_query), d_k(grad_key),
        d_v(grad_value);
    const auto mask = kernelTensor(expandedBias(attn_bias, p));
    const auto d_s = kernelTensor(grad_scores);
    const at::ScalarType dtype = query.scalar_type();
    launchOnCurrentStream(
        query.device().index(),
        {d_o.buffer(), q.buffer(), k.buffer(), v.buffer(), o.buffer(),
         lse.buffer(), d_q.buffer(), d_k.buffer(), d_v.buffer(), bufferOf(mask),
         bufferOf(d_s)},
        [=] {
          AT_DISPATCH_FLOATING_TYPES_AND2(
              at::kHalf, at::kBFloat16, dtype, kBackward, [&] {
                attentionBackward<scalar_t>(
                    p, d_o.cpuView(), q.cpuView(), k.cpuView(), v.cpuView(),
                    cpuViewOf(mask), o.cpuView(), lse.cpuView(), d_q.cpuView(),
                    d_k.cpuView(), d_v.cpuView(), cpuViewOf(d_s));
              });
        });
  }
  Tensor grad_bias =
      bias_grad ? grad_scores.sum_to_size(attn_bias.sizes()) : Tensor();
  return {grad_query, grad_key, grad_value, grad_bias};
}

} // namespace

// LITERALINCLUDE START: CH09_SDPA_REGISTER
// NB: scaled_dot_product_attention asks the stub, not the operator; the
// operator `_fused_sdp_choice` answers the same for code that calls it.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fusedSdpChoice));
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         TORCH_FN(fusedAttention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(fusedAttentionBackward));
}

} // namespace accinte

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &accinte::fusedSdpChoice)
} // namespace at::native
// LITERALINCLUDE END: CH09_SDPA_REGISTER
