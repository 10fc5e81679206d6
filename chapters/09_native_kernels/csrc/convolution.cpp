// Chapter 09: the convolutions and their backward as native kernels, installed
// behind chapter 02's registration of the two operators.

#include <09_native_kernels/csrc/native_kernels.h>

#include <02_fallback/csrc/fallback.h>

#include <ATen/core/Tensor.h>
#include <ATen/native/ConvUtils.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceType.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <array>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace accinte {
namespace {

using Tensor = at::Tensor;
using In = const at::Tensor&;
using Sizes = c10::SymIntArrayRef;

/** `values` as integers, one per spatial dimension: a single value is
 * repeated, as the CPU's convolution repeats it. */
std::vector<int64_t> perDimension(Sizes values, const char* name,
                                  int64_t dims) {
  const std::vector<int64_t> given = C10_AS_INTARRAYREF_SLOW(values).vec();
  if (given.size() == 1) {
    return std::vector<int64_t>(dims, given[0]);
  }
  TORCH_CHECK(static_cast<int64_t>(given.size()) == dims, "expected ", name,
              " to be a single integer value or a list of ", dims,
              " values to match the convolution dimensions, but got ", name,
              "=", at::IntArrayRef(given));
  return given;
}

/** "torch.accinte.FloatTensor", the name CUDA's message gives a tensor type. */
std::string typeName(In tensor) {
  return "torch." + c10::get_privateuse1_backend() + "." +
         c10::toString(tensor.scalar_type()) + "Tensor";
}

/** `values` joined with " x ", as the CPU's messages print sizes. */
std::string joined(const std::vector<int64_t>& values) {
  std::ostringstream out;
  for (const auto index : c10::irange(values.size())) {
    out << (index == 0 ? "" : " x ") << values[index];
  }
  return out.str();
}

// LITERALINCLUDE START: CH09_CONVOLUTION_CHECK
/**
 * The checks of the CPU's convolution, in its words, and the output's
 * sizes: `[batch, out_channels, spatial...]`.
 *
 * NB: ATen exports no Meta function of the convolution (its fake kernel is
 * a Python one, torch/_meta_registrations.py), so the host check is written
 * by hand, and the launch asserts that the CPU kernel's result has these
 * sizes.
 */
std::vector<int64_t> convolutionOutputSizes(
    In input, In weight, const Tensor& bias, Sizes stride_, Sizes padding_,
    Sizes dilation_, bool transposed, Sizes output_padding_, int64_t groups) {
  const int64_t dims = weight.dim() - 2;
  TORCH_CHECK(dims > 0, "weight should have at least three dimensions");
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  const auto stride = perDimension(stride_, "stride", dims);
  const auto padding = perDimension(padding_, "padding", dims);
  const auto dilation = perDimension(dilation_, "dilation", dims);
  const auto output_padding =
      perDimension(output_padding_, "output_padding", dims);
  const auto any = [](const std::vector<int64_t>& values, auto predicate) {
    return std::any_of(values.begin(), values.end(), predicate);
  };
  TORCH_CHECK(!any(padding, [](int64_t p) { return p < 0; }),
              "negative padding is not supported");
  TORCH_CHECK(!any(output_padding, [](int64_t p) { return p < 0; }),
              "negative output_padding is not supported");
  TORCH_CHECK(!any(stride, [](int64_t s) { return s <= 0; }),
              "non-positive stride is not supported");
  TORCH_CHECK(!any(dilation, [](int64_t d) { return d <= 0; }),
              "non-positive dilation is not supported");
  const at::IntArrayRef w = weight.sizes();
  TORCH_CHECK(weight.dim() == input.dim(), "Expected ", weight.dim(),
              "-dimensional input for ", weight.dim(), "-dimensional weight ",
              w, ", but got ", input.dim(), "-dimensional input of size ",
              input.sizes(), " instead");
  TORCH_CHECK(w[0] >= groups, "Given groups=", groups,
              ", expected weight to be at least ", groups,
              " at dimension 0, but got weight of size ", w, " instead");
  TORCH_CHECK(w[0] % groups == 0, "Given groups=", groups,
              ", expected weight to be divisible by ", groups,
              " at dimension 0, but got weight of size [", w, "] instead");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (",
              typeName(input), ") and weight type (", typeName(weight),
              ") should be the same");
  TORCH_CHECK(!bias.defined() || input.scalar_type() == bias.scalar_type(),
              "Input type (", typeName(input), ") and bias type (",
              typeName(bias), ") should be the same");
  std::vector<int64_t> sizes = {input.size(0)};
  if (!transposed) {
    TORCH_CHECK(input.size(1) == w[1] * groups, "Given groups=", groups,
                ", weight of size ", w, ", expected input", input.sizes(),
                " to have ", w[1] * groups, " channels, but got ",
                input.size(1), " channels instead");
    TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == w[0]),
                "Given weight of size ", w,
                ", expected bias to be 1-dimensional with ", w[0],
                " elements, but got bias of size ", bias.sizes(), " instead");
    std::vector<int64_t> padded, kernel;
    bool kernel_fits = true;
    for (const auto d : c10::irange(dims)) {
      padded.push_back(input.size(d + 2) + 2 * padding[d]);
      kernel.push_back(dilation[d] * (w[d + 2] - 1) + 1);
      kernel_fits &= padded.back() >= kernel.back();
    }
    TORCH_CHECK(kernel_fits, "Calculated padded input size per channel: (",
                joined(padded), "). Kernel size: (", joined(kernel),
                "). Kernel size can't be greater than actual input size");
    // NB: with no input channel the CPU (and PyTorch's fake kernel) gives
    // no output channel either, whatever the weight holds.
    sizes.push_back(input.size(1) == 0 ? 0 : w[0]);
    for (const auto d : c10::irange(dims)) {
      sizes.push_back((padded[d] - kernel[d]) / stride[d] + 1);
    }
    return sizes;
  }
  TORCH_CHECK(input.size(1) == w[0], "Given transposed=", transposed,
              ", weight of size ", w, ", expected input", input.sizes(),
              " to have ", w[0], " channels, but got ", input.size(1),
              " channels instead");
  TORCH_CHECK(
      !bias.defined() || (bias.dim() == 1 && bias.size(0) == w[1] * groups),
      "Given transposed=", transposed, ", weight of size ", w,
      ", expected bias to be 1-dimensional with ", w[1] * groups,
      " elements, but got bias of size ", bias.sizes(), " instead");
  // NB: the CPU's transposed kernels check 2 or 3 dimensions, a 1-d
  // convolution as a 2-d one of height 1.
  bool too_much_padding = false;
  for (const auto d : c10::irange(dims)) {
    too_much_padding |=
        output_padding[d] >= stride[d] && output_padding[d] >= dilation[d];
  }
  if (too_much_padding) {
    static const char* const kNames[] = {"depth", "height", "width"};
    const int64_t shown = std::max<int64_t>(dims, 2);
    const int64_t first = 3 - shown;
    const int64_t skipped = shown - dims; // a 1-d convolution's height
    std::ostringstream message;
    message << "output padding must be smaller than either stride or "
               "dilation, but got";
    const auto print = [&](const char* what, const std::vector<int64_t>& values,
                           int64_t unit) {
      for (const auto index : c10::irange(shown)) {
        message << " " << what << "_" << kNames[first + index] << ": "
                << (index < skipped ? unit : values[index - skipped]);
      }
    };
    print("output_padding", output_padding, 0);
    print("stride", stride, 1);
    print("dilation", dilation, 1);
    TORCH_CHECK(false, message.str());
  }
  sizes.push_back(w[1] * groups);
  std::vector<int64_t> spatial;
  for (const auto d : c10::irange(dims)) {
    spatial.push_back((input.size(d + 2) - 1) * stride[d] - 2 * padding[d] +
                      dilation[d] * (w[d + 2] - 1) + output_padding[d] + 1);
  }
  TORCH_CHECK(!any(spatial, [](int64_t size) { return size < 1; }),
              "Given input size per channel: (",
              joined(input.sizes().slice(2).vec()),
              "). Calculated output size per channel: (", joined(spatial),
              "). Output size is too small");
  sizes.insert(sizes.end(), spatial.begin(), spatial.end());
  return sizes;
}
// LITERALINCLUDE END: CH09_CONVOLUTION_CHECK

/** The memory format of the results: the one chapter 02's route gives them,
 * which PyTorch's fake convolution predicts for the device. */
at::MemoryFormat resultFormat(In input, In weight) {
  return at::native::_determine_backend_memory_format(
      input, weight, at::native::ConvBackend::Overrideable);
}

/** `convolution`: the output, in the device's memory format. */
Tensor convolutionMeta(In input, In weight, const std::optional<Tensor>& bias,
                       Sizes stride, Sizes padding, Sizes dilation,
                       bool transposed, Sizes output_padding,
                       c10::SymInt groups) {
  const std::vector<int64_t> sizes = convolutionOutputSizes(
      input, weight, bias.value_or(Tensor()), stride, padding, dilation,
      transposed, output_padding, groups.expect_int());
  return at::empty(sizes,
                   input.options().memory_format(resultFormat(input, weight)));
}

/** `convolution_backward`: the gradients `output_mask` asks for, shaped as
 * the input, the weight and a bias of one element per output channel. */
std::tuple<Tensor, Tensor, Tensor> convolutionBackwardMeta(
    In grad_output, In input, In weight, at::OptionalSymIntArrayRef bias_sizes,
    Sizes stride, Sizes padding, Sizes dilation, bool transposed,
    Sizes output_padding, c10::SymInt groups, std::array<bool, 3> output_mask) {
  const std::vector<int64_t> sizes =
      convolutionOutputSizes(input, weight, Tensor(), stride, padding, dilation,
                             transposed, output_padding, groups.expect_int());
  // NB: stricter than the CPU, which would read a wrong-sized gradient
  // with the output's sizes.
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(sizes),
              "convolution_backward: grad_output of size ", grad_output.sizes(),
              " for an output of size ", at::IntArrayRef(sizes));
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(),
              "convolution_backward: grad_output of type ",
              grad_output.scalar_type(), " for an input of type ",
              input.scalar_type());
  const at::MemoryFormat format = resultFormat(input, weight);
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input =
        at::empty(input.sizes(), input.options().memory_format(format));
  }
  if (output_mask[1]) {
    grad_weight =
        at::empty(weight.sizes(), weight.options().memory_format(format));
  }
  if (output_mask[2]) {
    // NB: the bias's elements, which are the output's channels except with
    // no input channel (see above), where the gradient is all zeros.
    const int64_t channels =
        transposed ? weight.size(1) * groups.expect_int() : weight.size(0);
    grad_bias = at::empty({channels}, grad_output.options());
  }
  return {grad_input, grad_weight, grad_bias};
}

// LITERALINCLUDE START: CH09_CONVOLUTION_INSTALL
void convolution(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  static const NativeKernel kernel(
      "convolution", "",
      c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(convolutionMeta)));
  kernel(stack);
}

void convolutionBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  static const NativeKernel kernel("convolution_backward", "",
                                   c10::KernelFunction::makeFromUnboxedFunction(
                                       TORCH_FN(convolutionBackwardMeta)));
  kernel(stack);
}

// NB: chapter 02 registers both operators' PrivateUse1 kernel (its CPU
// route); these kernels take its place through its extension point.
struct InstallConvolutionKernels {
  InstallConvolutionKernels() {
    registerConvolutionKernels({&convolution, &convolutionBackward});
  }
} install_convolution_kernels;
// LITERALINCLUDE END: CH09_CONVOLUTION_INSTALL

} // namespace
} // namespace accinte
