// Chapter 08: ATen's random operators on accinte. ATen's own device-generic
// implementations check the arguments and reach a DispatchStub per
// distribution; the stubs registered here launch kernels that compute every
// element's value from the generator's (seed, offset) and the element's
// index. randperm and native_dropout have no device-generic implementation
// and get kernels of their own.

#include <01_minimal_ops/csrc/kernel.h>
#include <08_generator/csrc/generator.h>

#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/TransformationHelper.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/bernoulli_native.h>
#include <ATen/ops/cauchy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exponential_native.h>
#include <ATen/ops/geometric_native.h>
#include <ATen/ops/log_normal_native.h>
#include <ATen/ops/multinomial_native.h>
#include <ATen/ops/normal_native.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/random_native.h>
#include <ATen/ops/uniform_native.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace accinte {
namespace {

// NB: large enough that small tensors stay on the stream's worker thread;
// the values do not depend on it (see launchElementwise()).
constexpr int64_t kGrainSize = 32768;

/** The `pair`-th 64-bit word (0 or 1) of a Philox block. */
uint64_t word64(const PhiloxBlock& block, int pair) {
  return (static_cast<uint64_t>(block[2 * pair + 1]) << 32) | block[2 * pair];
}

/** A uniform double in [0, 1) from 53 random bits. */
double uniform01(const PhiloxBlock& block, int pair) {
  return static_cast<double>(word64(block, pair) >> 11) * 0x1.0p-53;
}

/** A uniform double in (0, 1): never 0 (for logarithms) nor 1. */
double openUniform01(const PhiloxBlock& block, int pair) {
  return (static_cast<double>(word64(block, pair) >> 11) + 0.5) * 0x1.0p-53;
}

/** A standard normal value, by the Box-Muller transform of one block. */
double standardNormal(const PhiloxBlock& block) {
  const double radius = std::sqrt(-2.0 * std::log(openUniform01(block, 0)));
  return radius * std::cos(2.0 * M_PI * uniform01(block, 1));
}

// LITERALINCLUDE START: CH08_LAUNCH_ELEMENTWISE
/**
 * Fills `self` with `sample(block)` for each element, on the current stream
 * of its device, `block` being the element's Philox block.
 *
 * NB: an element is identified by its row-major index, whatever the
 * tensor's strides, and its value depends on nothing else: not on the
 * threads that at::parallel_for splits the loop over, not on the stream, not
 * on what ran before. The host only reserves the launch's (seed, offset) and
 * hands it over by value.
 */
template <typename scalar_t, typename Sample>
void launchElementwise(const at::TensorBase& self,
                       const std::optional<at::Generator>& generator,
                       Sample sample) {
  // NB: most stubs come through a TensorIterator, which has checked this;
  // `normal_stub` and `bernoulli_scalar_stub` get the bare tensor. Checked
  // on the host, the CPU's error comes from the call: in the kernel it
  // could only fail the launch, and surface at a later synchronization.
  at::assert_no_internal_overlap(self);
  if (self.numel() == 0) {
    return;
  }
  // LITERALINCLUDE EMPHASIZE NEXT
  const PhiloxState philox = reservePhilox(generator, self.device());
  const KernelTensor target{at::Tensor(self)};
  launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
      self.device().index(), {target.buffer(), philox.buffer()},
      [target, philox, sample] {
        at::Tensor out = target.cpuView();
        at::Tensor dense =
            out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
        auto* data = dense.mutable_data_ptr<scalar_t>();
        // LITERALINCLUDE EMPHASIZE NEXT
        at::parallel_for(0, dense.numel(), kGrainSize,
                         [&](int64_t begin, int64_t end) {
                           for (int64_t i = begin; i < end; ++i) {
                             // LITERALINCLUDE EMPHASIZE NEXT
                             data[i] = sample(philoxElement(philox, i));
                           }
                         });
        if (!dense.is_same(out)) {
          out.copy_(dense);
        }
      });
}
// LITERALINCLUDE END: CH08_LAUNCH_ELEMENTWISE

// LITERALINCLUDE START: CH08_UNIFORM_STUB
/**
 * The accinte kernel of `uniform_stub`. ATen's `uniform_` has checked the
 * bounds and built `iter` over the accinte tensor.
 *
 * NB: the dtype is dispatched on the host, so an unsupported dtype fails at
 * the call; the kernel is compiled once per dtype.
 */
void uniformKernel(at::TensorIteratorBase& iter, double from, double to,
                   std::optional<at::Generator> generator) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, iter.dtype(), "uniform_", [&] {
        const auto low = static_cast<scalar_t>(from);
        const auto high = static_cast<scalar_t>(to);
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator, [low, high](const PhiloxBlock& b) {
              const auto value = static_cast<scalar_t>(
                  at::transformation::uniform_real<scalar_t>(word64(b, 0), low,
                                                             high));
              // NB: rounding to scalar_t can reach `to`, which [from, to)
              // excludes; CUDA maps that value to `from` as well.
              return value < high ? value : low;
            });
      });
}
// LITERALINCLUDE END: CH08_UNIFORM_STUB

void normalKernel(const at::TensorBase& self, double mean, double std,
                  std::optional<at::Generator> generator) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, self.scalar_type(), "normal_", [&] {
        launchElementwise<scalar_t>(
            self, generator, [mean, std](const PhiloxBlock& b) {
              return static_cast<scalar_t>(mean + std * standardNormal(b));
            });
      });
}

void logNormalKernel(at::TensorIteratorBase& iter, double mean, double std,
                     std::optional<at::Generator> generator) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, iter.dtype(), "log_normal_", [&] {
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator, [mean, std](const PhiloxBlock& b) {
              return static_cast<scalar_t>(
                  std::exp(mean + std * standardNormal(b)));
            });
      });
}

void exponentialKernel(at::TensorIteratorBase& iter, double lambda,
                       std::optional<at::Generator> generator) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, iter.dtype(), "exponential_", [&] {
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator, [lambda](const PhiloxBlock& b) {
              return static_cast<scalar_t>(-std::log(openUniform01(b, 0)) /
                                           lambda);
            });
      });
}

void cauchyKernel(at::TensorIteratorBase& iter, double median, double sigma,
                  std::optional<at::Generator> generator) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, iter.dtype(), "cauchy_", [&] {
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator,
            [median, sigma](const PhiloxBlock& b) {
              return static_cast<scalar_t>(
                  median +
                  sigma * std::tan(M_PI * (openUniform01(b, 0) - 0.5)));
            });
      });
}

void geometricKernel(at::TensorIteratorBase& iter, double p,
                     std::optional<at::Generator> generator) {
  AT_DISPATCH_ALL_TYPES_AND2(
      at::kHalf, at::kBFloat16, iter.dtype(), "geometric_", [&] {
        const double log_failure = std::log1p(-p);
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator,
            [log_failure](const PhiloxBlock& b) {
              return static_cast<scalar_t>(
                  std::ceil(std::log(openUniform01(b, 0)) / log_failure));
            });
      });
}

// LITERALINCLUDE START: CH08_RANDOM_STUBS
void randomFromToKernel(at::TensorIteratorBase& iter, uint64_t range,
                        int64_t base, std::optional<at::Generator> generator) {
  AT_DISPATCH_V2(
      iter.dtype(), "random_from_to", AT_WRAP([&] {
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator,
            [range, base](const PhiloxBlock& b) {
              // LITERALINCLUDE EMPHASIZE NEXT 2
              return at::transformation::uniform_int_from_to<scalar_t>(
                  word64(b, 0), range, base);
            });
      }),
      AT_EXPAND(AT_ALL_TYPES), at::kBool, at::kHalf, at::kBFloat16,
      AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
}

void randomFullRangeKernel(at::TensorIteratorBase& iter,
                           std::optional<at::Generator> generator) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kLong, at::kBFloat16, iter.dtype(), "random_full_64_bits_range", [&] {
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator, [](const PhiloxBlock& b) {
              // LITERALINCLUDE EMPHASIZE NEXT 2
              return at::transformation::uniform_int_full_range<scalar_t>(
                  word64(b, 0));
            });
      });
}

void randomKernel(at::TensorIteratorBase& iter,
                  std::optional<at::Generator> generator) {
  AT_DISPATCH_ALL_TYPES_AND3(
      at::kBool, at::kHalf, at::kBFloat16, iter.dtype(), "random_", [&] {
        launchElementwise<scalar_t>(
            iter.tensor_base(0), generator, [](const PhiloxBlock& b) {
              // LITERALINCLUDE EMPHASIZE NEXT
              return at::transformation::uniform_int<scalar_t>(word64(b, 0));
            });
      });
}
// LITERALINCLUDE END: CH08_RANDOM_STUBS

void bernoulliScalarKernel(const at::TensorBase& self, double p,
                           std::optional<at::Generator> generator) {
  AT_DISPATCH_ALL_TYPES_AND3(
      at::kBool, at::kHalf, at::kBFloat16, self.scalar_type(), "bernoulli_",
      [&] {
        launchElementwise<scalar_t>(self, generator, [p](const PhiloxBlock& b) {
          return static_cast<scalar_t>(uniform01(b, 0) < p);
        });
      });
}

// LITERALINCLUDE START: CH08_BERNOULLI_TENSOR
/**
 * The accinte kernel of `bernoulli_tensor_stub`: element i is 1 with
 * probability p[i], `p` broadcast to `self` (and possibly on the CPU, as
 * PyTorch allows).
 *
 * NB: probabilities outside [0, 1] are an error on the CPU. A kernel cannot
 * raise one, so the check runs on the host before the launch, at the price
 * of a synchronization; CUDA instead stops at a device-side assertion.
 */
void bernoulliTensorKernel(const at::TensorBase& self, const at::TensorBase& p_,
                           std::optional<at::Generator> generator) {
  at::Tensor p = at::Tensor(p_).to(self.device());
  TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()),
              "bernoulli_: the probabilities of shape ", p.sizes(),
              " cannot be broadcast to the shape of self, ", self.sizes());
  TORCH_CHECK(((p >= 0) & (p <= 1)).all().item<bool>(),
              "bernoulli_ expects p to be in [0, 1], but got a tensor with "
              "values outside it");
  if (self.numel() == 0) {
    return;
  }
  p = p.expand(self.sizes());
  // LITERALINCLUDE EMPHASIZE NEXT
  const PhiloxState philox = reservePhilox(generator, self.device());
  const KernelTensor target{at::Tensor(self)};
  const KernelTensor probabilities(p);
  AT_DISPATCH_ALL_TYPES_AND3(
      at::kBool, at::kHalf, at::kBFloat16, self.scalar_type(), "bernoulli_",
      [&] {
        launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
            self.device().index(),
            {target.buffer(), probabilities.buffer(), philox.buffer()},
            [target, probabilities, philox] {
              const at::Tensor chances =
                  probabilities.cpuView().to(at::kDouble).contiguous();
              const double* chance = chances.const_data_ptr<double>();
              at::Tensor out = target.cpuView();
              at::Tensor dense = at::empty(out.sizes(), out.options());
              auto* data = dense.mutable_data_ptr<scalar_t>();
              at::parallel_for(
                  0, dense.numel(), kGrainSize,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                      // LITERALINCLUDE EMPHASIZE NEXT 2
                      data[i] = static_cast<scalar_t>(
                          uniform01(philoxElement(philox, i), 0) < chance[i]);
                    }
                  });
              out.copy_(dense);
            });
      });
}
// LITERALINCLUDE END: CH08_BERNOULLI_TENSOR

// LITERALINCLUDE START: CH08_MULTINOMIAL
/**
 * The accinte kernel of `multinomial_with_replacement_stub`: sample s of
 * distribution r inverts the cumulative weights of row r at a uniform draw
 * of element r * n_sample + s.
 *
 * NB: ATen's `multinomial` validates the weights itself only on its path
 * without replacement; here they are validated the same way before the
 * launch (a synchronization), so that both paths fail alike.
 */
void multinomialKernel(at::Tensor& result, const at::Tensor& self,
                       int64_t n_sample,
                       std::optional<at::Generator> generator) {
  TORCH_CHECK(((self.max() < std::numeric_limits<double>::infinity()) &
               (self.min() >= 0))
                  .item<bool>(),
              "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(!(self.sum(-1) == 0).any().item<bool>(),
              "invalid multinomial distribution (sum of probabilities <= 0)");
  // NB: the CPU writes even a self-overlapping `out=`, element by element;
  // the kernel's copy into one would raise on the worker and surface at a
  // later synchronization. As for randperm, it fails at the call instead.
  at::assert_no_internal_overlap(result);
  const int64_t categories = self.size(-1);
  // LITERALINCLUDE EMPHASIZE NEXT
  const PhiloxState philox = reservePhilox(generator, self.device());
  // LITERALINCLUDE END: CH08_MULTINOMIAL
  // LITERALINCLUDE START: CH08_INVERT_CDF
  const KernelTensor target(result);
  const KernelTensor weights(self);
  launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
      self.device().index(),
      {target.buffer(), weights.buffer(), philox.buffer()},
      [target, weights, philox, n_sample, categories] {
        const at::Tensor cumulative = weights.cpuView()
                                          .to(at::kDouble)
                                          .reshape({-1, categories})
                                          .cumsum(1)
                                          .contiguous();
        const double* sums = cumulative.const_data_ptr<double>();
        at::Tensor dense =
            at::empty({cumulative.size(0) * n_sample}, at::kLong);
        auto* chosen = dense.mutable_data_ptr<int64_t>();
        at::parallel_for(
            0, dense.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) {
                const double* row = sums + (i / n_sample) * categories;
                const double point = uniform01(philoxElement(philox, i), 0) *
                                     row[categories - 1];
                int64_t pick =
                    std::upper_bound(row, row + categories, point) - row;
                // NB: rounding may put the point on the total: take the last
                // category of nonzero weight, never one of zero weight.
                if (pick == categories) {
                  pick = categories - 1;
                  while (pick > 0 && row[pick] == row[pick - 1]) {
                    --pick;
                  }
                }
                chosen[i] = pick; // LITERALINCLUDE EMPHASIZE
              }
            });
        at::Tensor out = target.cpuView();
        out.copy_(dense.view(out.sizes()));
      });
}
// LITERALINCLUDE END: CH08_INVERT_CDF

/** Raises unless 0..n-1 are exact in `dtype`, with CPU's wording. */
void checkRandpermRange(int64_t n, at::ScalarType dtype) {
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "randperm", [&] {
    if constexpr (std::is_integral_v<scalar_t>) {
      TORCH_CHECK(n <= 1 || static_cast<uint64_t>(n - 1) <=
                                static_cast<uint64_t>(
                                    std::numeric_limits<scalar_t>::max()),
                  "randperm: n=", n, " is too large for result dtype ", dtype);
    } else {
      const int64_t exact =
          (int64_t{1} << std::numeric_limits<scalar_t>::digits) + 1;
      TORCH_CHECK(n <= exact, "n cannot be greater than ", exact, " for ",
                  dtype, " type.");
    }
  });
}

// LITERALINCLUDE START: CH08_RANDPERM
/**
 * `randperm.generator_out`: the permutation that sorts one random 64-bit key
 * per index.
 *
 * NB: sorting random keys is parallel and needs one draw per element, where
 * the sequential Fisher-Yates shuffle would need n dependent draws. A stable
 * sort breaks the (rare) ties between keys by index, so the result is still
 * a function of (seed, offset) alone.
 */
at::Tensor& randpermOut(int64_t n, std::optional<at::Generator> generator,
                        at::Tensor& out) {
  TORCH_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  checkRandpermRange(n, out.scalar_type());
  out.resize_({n});
  // NB: as on CUDA, whose randperm copies into a non-contiguous `out=`: a
  // self-overlapping one fails at the call (the CPU writes it anyway).
  at::assert_no_internal_overlap(out);
  if (n == 0) {
    return out;
  }
  const PhiloxState philox = reservePhilox(generator, out.device());
  const KernelTensor target(out);
  launchOnCurrentStream(
      out.device().index(), {target.buffer(), philox.buffer()},
      [target, philox, n] {
        at::Tensor keys = at::empty({n}, at::kLong);
        auto* key = keys.mutable_data_ptr<int64_t>();
        at::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            // LITERALINCLUDE EMPHASIZE NEXT
            key[i] = static_cast<int64_t>(word64(philoxElement(philox, i), 0));
          }
        });
        at::Tensor result = target.cpuView();
        // LITERALINCLUDE EMPHASIZE NEXT 2
        result.copy_(
            std::get<1>(keys.sort(std::optional<bool>(true), /*dim=*/0)));
      });
  return out;
}
// LITERALINCLUDE END: CH08_RANDPERM

// LITERALINCLUDE START: CH08_NATIVE_DROPOUT
/**
 * `native_dropout`, fused: one kernel draws the mask and scales the kept
 * elements, from the default generator of the input's device.
 */
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input,
                                                 double p,
                                                 std::optional<bool> train) {
  if (input.numel() == 0) {
    return {input, at::empty_like(input)};
  }
  if (train.has_value() && !*train) {
    return {input.clone(),
            at::ones_like(input, input.options().dtype(at::kBool))};
  }
  TORCH_CHECK(p >= 0 && p <= 1,
              "dropout probability has to be between 0 and 1, but got ", p);
  TORCH_CHECK(at::isFloatingType(input.scalar_type()),
              "native_dropout: expected a floating-point input, got ",
              input.scalar_type());
  // NB: laid out as the input, as the CPU's `input * mask * scale` lays out
  // its results (channels_last stays channels_last); the kernel computes in
  // the input's logical order, so the numbers drawn do not depend on it.
  at::Tensor output = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  const double keep = 1.0 - p;
  // NB: p == 1 drops everything; the scale is then 0, not infinity.
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  // LITERALINCLUDE EMPHASIZE NEXT
  const PhiloxState philox = reservePhilox(std::nullopt, input.device());
  const KernelTensor source(input);
  const KernelTensor result(output);
  const KernelTensor kept(mask);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, input.scalar_type(), "native_dropout", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        launchOnCurrentStream( // LITERALINCLUDE EMPHASIZE
            input.device().index(),
            {source.buffer(), result.buffer(), kept.buffer(), philox.buffer()},
            [source, result, kept, philox, keep, scale] {
              const at::Tensor values = source.cpuView().contiguous();
              const at::Tensor out = result.cpuView();
              const at::Tensor out_mask = kept.cpuView();
              // Written in place when contiguous, else through a buffer.
              const bool direct =
                  out.is_contiguous() && out_mask.is_contiguous();
              at::Tensor y_buffer = direct ? out : at::empty_like(values);
              at::Tensor mask_buffer =
                  direct ? out_mask : at::empty_like(values, at::kBool);
              const auto* x = values.const_data_ptr<scalar_t>();
              auto* y = y_buffer.mutable_data_ptr<scalar_t>();
              auto* flags = mask_buffer.mutable_data_ptr<bool>();
              at::parallel_for(
                  0, values.numel(), kGrainSize,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) {
                      // LITERALINCLUDE EMPHASIZE NEXT 2
                      const bool on =
                          uniform01(philoxElement(philox, i), 0) < keep;
                      flags[i] = on; // LITERALINCLUDE EMPHASIZE
                      // NB: multiplied, not selected, so that a NaN input
                      // stays NaN as on the CPU.
                      y[i] = static_cast<scalar_t>(static_cast<acc_t>(x[i]) *
                                                   static_cast<acc_t>(on) *
                                                   static_cast<acc_t>(scale));
                    }
                  });
              if (!direct) {
                out.copy_(y_buffer);
                out_mask.copy_(mask_buffer);
              }
            });
      });
  return {output, mask};
}
// LITERALINCLUDE END: CH08_NATIVE_DROPOUT

// LITERALINCLUDE START: CH08_REGISTRATIONS
// NB: ATen's implementations of these operators are device-generic: they
// check the arguments, build a TensorIterator and call the distribution's
// stub for the tensor's device type. Registering them for PrivateUse1 (and
// the stubs below) replaces the CPU fallback, which would have drawn from
// the CPU generator.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using at::Generator;
  using at::Tensor;
  using Gen = std::optional<Generator>;
  // LITERALINCLUDE EMPHASIZE NEXT
  m.impl("uniform_", TORCH_FN(at::native::uniform_));
  m.impl("normal_", TORCH_FN(at::native::normal_));
  m.impl("normal.Tensor_float",
         TORCH_FN(static_cast<Tensor (*)(const Tensor&, double, Gen)>(
             at::native::normal)));
  m.impl("normal.Tensor_float_out",
         TORCH_FN(static_cast<Tensor& (*)(const Tensor&, double, Gen, Tensor&)>(
             at::native::normal_out)));
  m.impl("normal.float_Tensor",
         TORCH_FN(static_cast<Tensor (*)(double, const Tensor&, Gen)>(
             at::native::normal)));
  m.impl("normal.float_Tensor_out",
         TORCH_FN(static_cast<Tensor& (*)(double, const Tensor&, Gen, Tensor&)>(
             at::native::normal_out)));
  m.impl("normal.Tensor_Tensor",
         TORCH_FN(static_cast<Tensor (*)(const Tensor&, const Tensor&, Gen)>(
             at::native::normal)));
  m.impl(
      "normal.Tensor_Tensor_out",
      TORCH_FN(
          static_cast<Tensor& (*)(const Tensor&, const Tensor&, Gen, Tensor&)>(
              at::native::normal_out)));
  m.impl("random_",
         TORCH_FN(static_cast<Tensor& (*)(Tensor&, Gen)>(at::native::random_)));
  m.impl(
      "random_.from",
      TORCH_FN(static_cast<Tensor& (*)(Tensor&, int64_t, std::optional<int64_t>,
                                       Gen)>(at::native::random_)));
  m.impl("random_.to", TORCH_FN(static_cast<Tensor& (*)(Tensor&, int64_t, Gen)>(
                           at::native::random_)));
  m.impl("bernoulli_.float",
         TORCH_FN(static_cast<Tensor& (*)(Tensor&, double, Gen)>(
             at::native::bernoulli_)));
  m.impl("bernoulli_.Tensor",
         TORCH_FN(static_cast<Tensor& (*)(Tensor&, const Tensor&, Gen)>(
             at::native::bernoulli_)));
  m.impl("bernoulli.out", TORCH_FN(at::native::bernoulli_out));
  m.impl("exponential_", TORCH_FN(at::native::exponential_));
  m.impl("geometric_", TORCH_FN(at::native::geometric_));
  m.impl("log_normal_", TORCH_FN(at::native::log_normal_));
  m.impl("cauchy_", TORCH_FN(at::native::cauchy_));
  m.impl("multinomial", TORCH_FN(at::native::multinomial));
  m.impl("multinomial.out", TORCH_FN(at::native::multinomial_out));
  // LITERALINCLUDE EMPHASIZE NEXT
  m.impl("randperm.generator_out", TORCH_FN(randpermOut));
  m.impl("native_dropout", TORCH_FN(nativeDropout)); // LITERALINCLUDE EMPHASIZE
}
// LITERALINCLUDE END: CH08_REGISTRATIONS

} // namespace
} // namespace accinte

// LITERALINCLUDE START: CH08_REGISTER_STUBS
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(uniform_stub, &accinte::uniformKernel)
REGISTER_PRIVATEUSE1_DISPATCH(normal_stub, &accinte::normalKernel)
REGISTER_PRIVATEUSE1_DISPATCH(log_normal_stub, &accinte::logNormalKernel)
REGISTER_PRIVATEUSE1_DISPATCH(exponential_stub, &accinte::exponentialKernel)
REGISTER_PRIVATEUSE1_DISPATCH(cauchy_stub, &accinte::cauchyKernel)
REGISTER_PRIVATEUSE1_DISPATCH(geometric_stub, &accinte::geometricKernel)
REGISTER_PRIVATEUSE1_DISPATCH(random_from_to_stub, &accinte::randomFromToKernel)
REGISTER_PRIVATEUSE1_DISPATCH(random_full_64_bits_range_stub,
                              &accinte::randomFullRangeKernel)
REGISTER_PRIVATEUSE1_DISPATCH(random_stub, &accinte::randomKernel)
REGISTER_PRIVATEUSE1_DISPATCH(bernoulli_scalar_stub,
                              &accinte::bernoulliScalarKernel)
REGISTER_PRIVATEUSE1_DISPATCH(bernoulli_tensor_stub,
                              &accinte::bernoulliTensorKernel)
REGISTER_PRIVATEUSE1_DISPATCH(multinomial_with_replacement_stub,
                              &accinte::multinomialKernel)
} // namespace at::native
// LITERALINCLUDE END: CH08_REGISTER_STUBS
