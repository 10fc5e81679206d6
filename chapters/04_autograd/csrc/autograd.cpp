// Chapter 04: autograd for the `accinte` operators. The derivative of
// chapter 03's accinte::custom_abs, registered for AutogradPrivateUse1 (and
// AutogradCPU); two operators built on torch::autograd::Function that
// return their input, or a view of it; and accinte::custom_l1_norm, a
// CompositeImplicitAutograd operator that gets its derivative from its parts.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace accinte {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// LITERALINCLUDE START: CH04_SCHEMAS
// NB: chapter 03's TORCH_LIBRARY(accinte, m) created the namespace; any
// other file adds to it as a fragment. `Tensor(a) self -> Tensor(a)` says
// that the result may alias `self` (without writing to it): the contract
// that opcheck's test_schema holds both operators to.
TORCH_LIBRARY_FRAGMENT(accinte, m) {
  m.def("custom_autograd_fn_returns_self(Tensor(a) self) -> Tensor(a)");
  m.def("custom_autograd_fn_aliasing(Tensor(a) self) -> Tensor(a)");
  m.def("custom_l1_norm(Tensor self) -> Tensor");
}
// LITERALINCLUDE END: CH04_SCHEMAS

// NB: the Function classes are named outside an anonymous namespace because
// autograd shows their names to users: a node prints as
// `torch::autograd::CppNode<accinte::CustomAbsFunction>` in error messages.

// LITERALINCLUDE START: CH04_ABS_FUNCTION
/**
 * The derivative of `accinte::custom_abs`: d|x|/dx = sign(x).
 *
 * `forward` runs the operator's backend kernel (accinte, CPU) by calling the
 * operator again below the autograd keys; `backward` is made of ATen
 * operators, so on accinte it runs on the device, and is itself
 * differentiable (double backward, gradgradcheck) without more code.
 */
struct CustomAbsFunction : torch::autograd::Function<CustomAbsFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    // NB: saved as a SavedVariable, which records `self`'s version: an
    // in-place write to `self` before backward is then an error instead of a
    // silently wrong gradient.
    ctx->save_for_backward({self}); // LITERALINCLUDE EMPHASIZE
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("accinte::custom_abs", "")
                               .typed<at::Tensor(const at::Tensor&)>();
    // LITERALINCLUDE EMPHASIZE NEXT 2
    const at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(self);
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    const at::Tensor self = ctx->get_saved_variables()[0];
    // LITERALINCLUDE EMPHASIZE NEXT
    return {at::mul(grad_outputs[0], at::sign(self))};
  }
};

/** The autograd kernel: records a CustomAbsFunction node in the graph. */
at::Tensor customAbsAutograd(const at::Tensor& self) {
  return CustomAbsFunction::apply(self);
}
// LITERALINCLUDE END: CH04_ABS_FUNCTION

// LITERALINCLUDE START: CH04_ALIAS_FUNCTIONS
/**
 * `custom_autograd_fn_returns_self`: returns its input. The gradient passes
 * through unchanged.
 *
 * NB: `forward` hands back `self` itself, without a dispatcher call, and
 * `Function::apply` turns an output that is an input into a view of it
 * (`view_as`) with this node as its grad_fn, so the caller's `self` keeps
 * its own history. Below autograd a dispatcher operator may not return an
 * input as it is (opcheck's test_schema refuses it unless the schema says
 * the input is written), so the operator's backend kernel returns a view.
 */
struct ReturnsSelfFunction : torch::autograd::Function<ReturnsSelfFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    return self; // LITERALINCLUDE EMPHASIZE
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    return {grad_outputs[0]};
  }
};

/**
 * `custom_autograd_fn_aliasing`: returns a view of its input, sharing its
 * memory and its version counter. The gradient passes through unchanged.
 *
 * NB: the guard leaves the ADInplaceOrView key on, so the `alias` that the
 * backend kernel calls is recorded as a view of `self`. Below that key too
 * (AutoDispatchBelowADInplaceOrView) the result would share `self`'s memory
 * but get a version counter of its own, and autograd could not see an
 * in-place write through one in the other.
 */
struct AliasingFunction : torch::autograd::Function<AliasingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& self) {
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("accinte::custom_autograd_fn_aliasing", "")
            .typed<at::Tensor(const at::Tensor&)>();
    // LITERALINCLUDE EMPHASIZE NEXT
    const at::AutoDispatchBelowAutograd below_autograd;
    return op.call(self); // LITERALINCLUDE EMPHASIZE
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    return {grad_outputs[0]};
  }
};
// LITERALINCLUDE END: CH04_ALIAS_FUNCTIONS

namespace {

// LITERALINCLUDE START: CH04_ALIAS_KERNELS
/**
 * The backend kernel of both operators, on any device: a view of `self`.
 * It runs below autograd: from AliasingFunction::forward, and whenever the
 * autograd keys are off (inference mode, other kernels, tracing).
 */
at::Tensor aliasOfSelf(const at::Tensor& self) {
  return self.alias();
}

// NB: a view touches no device memory, so one kernel serves every device:
// CompositeExplicitAutograd fills the accinte, CPU and Meta keys (FakeTensor
// uses the last) but not the autograd keys.
TORCH_LIBRARY_IMPL(accinte, CompositeExplicitAutograd, m) {
  m.impl("custom_autograd_fn_returns_self", TORCH_FN(aliasOfSelf));
  m.impl("custom_autograd_fn_aliasing", TORCH_FN(aliasOfSelf));
}
// LITERALINCLUDE END: CH04_ALIAS_KERNELS

/** The autograd kernel of `custom_autograd_fn_returns_self`. */
at::Tensor returnsSelfAutograd(const at::Tensor& self) {
  return ReturnsSelfFunction::apply(self);
}

/** The autograd kernel of `custom_autograd_fn_aliasing`. */
at::Tensor aliasingAutograd(const at::Tensor& self) {
  return AliasingFunction::apply(self);
}

// LITERALINCLUDE START: CH04_AUTOGRAD_KEYS
// NB: AutogradPrivateUse1 is the key autograd runs for accinte tensors.
// AutogradCPU gets the same kernels so that the CPU, the reference the tests
// compare against, differentiates these operators the same way; it is also
// the only device on which opcheck's test_autograd_registration can run
// (it raises NotImplementedError for devices other than CPU, CUDA and XPU).
TORCH_LIBRARY_IMPL(accinte, AutogradPrivateUse1, m) {
  m.impl("custom_abs", TORCH_FN(customAbsAutograd));
  m.impl("custom_autograd_fn_returns_self", TORCH_FN(returnsSelfAutograd));
  m.impl("custom_autograd_fn_aliasing", TORCH_FN(aliasingAutograd));
}

TORCH_LIBRARY_IMPL(accinte, AutogradCPU, m) {
  m.impl("custom_abs", TORCH_FN(customAbsAutograd));
  m.impl("custom_autograd_fn_returns_self", TORCH_FN(returnsSelfAutograd));
  m.impl("custom_autograd_fn_aliasing", TORCH_FN(aliasingAutograd));
}
// LITERALINCLUDE END: CH04_AUTOGRAD_KEYS

// LITERALINCLUDE START: CH04_COMPOSITE
/**
 * `custom_l1_norm`: the sum of the absolute values, decomposed into
 * `custom_abs` and `sum`.
 *
 * NB: a CompositeImplicitAutograd kernel runs above autograd, so each
 * operator it calls records its own node: the derivative comes from
 * custom_abs's autograd kernel and sum's, on every device, with no kernel of
 * this operator's own for accinte or for autograd.
 */
at::Tensor customL1Norm(const at::Tensor& self) {
  static const auto custom_abs =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("accinte::custom_abs", "")
          .typed<at::Tensor(const at::Tensor&)>();
  return at::sum(custom_abs.call(self));
}

TORCH_LIBRARY_IMPL(accinte, CompositeImplicitAutograd, m) {
  m.impl("custom_l1_norm", TORCH_FN(customL1Norm));
}
// LITERALINCLUDE END: CH04_COMPOSITE

} // namespace
} // namespace accinte
