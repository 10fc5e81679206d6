"""Chapter 13 with chapter 09's fused attention: a compiled program that
calls ``scaled_dot_product_attention`` on accinte keeps the fused operator
(Inductor leaves it to the device's kernel) and agrees with eager and CPU."""

import pytest
import torch
import torch.nn.functional as F

from compiling import assert_three_way, fresh_dynamo, seeded  # noqa: F401

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"


def attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q.sin(), k, v, attn_mask=mask).cos()


@pytest.mark.parametrize("masked", [False, True])
def test_compiled_attention_takes_the_fused_kernel(masked):
    with seeded(0):
        inputs = [torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)]
        mask = torch.randn(5, 7) > -0.5 if masked else None
    runs = {}
    for name, device in (("compiled", "accinte"), ("eager", "accinte"), ("cpu", "cpu")):
        leaves = [x.to(device).requires_grad_() for x in inputs]
        call = torch.compile(attention) if name == "compiled" else attention
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = call(*leaves, None if mask is None else mask.to(device))
            out.sum().backward()
        names = {event.name for event in prof.events()}
        if device == "accinte":
            assert FUSED in names and FUSED + "_backward" in names, name
        runs[name] = (out, [x.grad for x in leaves])
    assert_three_way(runs["compiled"], runs["eager"], runs["cpu"])
