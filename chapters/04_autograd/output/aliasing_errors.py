"""What autograd says when the aliasing rules are broken, in stage 04.

Each case runs on accinte and prints the error PyTorch raises.
"""

import textwrap

import torch
import torch_accinte  # noqa: F401

ops = torch.ops.accinte


def case(title, run):
    print(f"# {title}")
    try:
        run()
    except Exception as error:  # noqa: BLE001 (the error is what we show)
        # NB: without opcheck's pointer to a stack trace and autograd's hint
        # on anomaly detection, which are the same every time.
        message = str(error).split(" (scroll up")[0].split(" Hint:")[0]
        text = f"{type(error).__name__}: {message}"
        print("\n".join(textwrap.fill(line, 79, subsequent_indent="  ")
                        for line in text.splitlines()) + "\n")
    else:
        print("no error\n")


def fresh():
    """A non-leaf accinte tensor that requires grad."""
    return torch.tensor([1.0, -2.0, 3.0], device="accinte",
                        requires_grad=True).clone()


def write_result_with_grad():
    y = ops.custom_autograd_fn_aliasing(fresh())
    y.mul_(2)


def write_saved_result(view):
    def run():
        y = view(fresh())
        loss = (y * y).sum()  # autograd saves y
        with torch.no_grad():
            y.mul_(2)
        loss.backward()
    return run


def write_through_alias_of_saved_input():
    x = fresh()
    absolute = ops.custom_abs(x)  # autograd saves x
    with torch.no_grad():
        ops.custom_autograd_fn_aliasing(x).mul_(-1)
    absolute.sum().backward()


case("in-place on a custom Function's view, with grad",
     write_result_with_grad)
case("in-place on a built-in view after autograd saved it",
     write_saved_result(lambda t: t.view_as(t)))
case("in-place on custom_autograd_fn_aliasing's view after autograd saved it",
     write_saved_result(ops.custom_autograd_fn_aliasing))
case("a write through the alias changes the input that custom_abs saved",
     write_through_alias_of_saved_input)
# NB: a leaf: opcheck copies its inputs, and a copy of a non-leaf tensor
# does not require grad, which would make the check skip silently.
case("opcheck's autograd registration check on accinte",
     lambda: torch.library.opcheck(
         ops.custom_abs.default,
         (torch.ones(3, device="accinte", requires_grad=True),),
         test_utils="test_autograd_registration"))

# A kernel that returns its input unchanged, in a scratch namespace: what
# opcheck's test_schema says about it.
scratch = torch.library.Library("accinte_scratch", "DEF")
scratch.define("returns_input(Tensor(a) self) -> Tensor(a)")
scratch.impl("returns_input", lambda t: t, "CompositeExplicitAutograd")
case("opcheck test_schema: a kernel below autograd returns its input",
     lambda: torch.library.opcheck(
         torch.ops.accinte_scratch.returns_input.default,
         (torch.ones(2, device="accinte"),), test_utils="test_schema"))
