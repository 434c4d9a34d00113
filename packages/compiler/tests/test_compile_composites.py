"""torch.compile on ring of the composites the ring decompositions cover, and of a small fp16 transformer block."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from ring_inductor.checking import TransformerBlock, compiled_kernels, compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess

COMPOSITES = {
    "softmax": lambda x, w, b: torch.softmax(x, -1),
    "log_softmax": lambda x, w, b: torch.log_softmax(x, -1),
    "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
    "rms_norm": lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, eps=1e-6),
    "gelu": lambda x, w, b: F.gelu(x),
    "gelu_tanh": lambda x, w, b: F.gelu(x, approximate="tanh"),
    "silu": lambda x, w, b: F.silu(x),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("name", COMPOSITES)
def test_composite_is_one_kernel_within_the_normalization_bound(name: str, dtype: torch.dtype) -> None:
    cols = 192
    x = torch.randn(256, cols, dtype=dtype) * 2
    w, b = torch.rand(cols, dtype=dtype) + 0.5, torch.randn(cols, dtype=dtype)
    out, kernels = compiled_run(COMPOSITES[name], x, w, b)
    assert out.device.type == "ring"
    assert out.dtype == dtype
    assert sum(compiled_kernels(kernels).values()) == 1, kernels
    assert set(kernels) == set(compiled_kernels(kernels)), f"an eager kernel ran: {kernels}"
    bound = device_bound(dtype, "normalization", k=cols, scale=4)
    assert excess(out, float64_reference(COMPOSITES[name], x, w, b), bound) <= 0


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_math_path(causal: bool) -> None:
    q, k, v = (torch.randn(2, 2, 32, 64, dtype=torch.float16) for _ in range(3))
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    out, kernels = compiled_run(fn, q, k, v)
    assert out.device.type == "ring"
    assert compiled_kernels(kernels), kernels
    # two fp16-rounded matmuls around a softmax: the matmul bound at K=64, applied twice
    bound = device_bound(torch.float16, "matmul", k=64, scale=2 * 4.0 / 8)
    assert excess(out, float64_reference(fn, q, k, v), bound) <= 0


def test_transformer_block_fp16() -> None:
    torch.manual_seed(0)
    block = TransformerBlock(64, 2).eval().half()  # the reference runs the same fp16-rounded weights in float64
    x = torch.randn(2, 16, 64, dtype=torch.float16)
    with torch.no_grad():
        reference = copy.deepcopy(block).double()(x.double())
        out, kernels = compiled_run(copy.deepcopy(block).to("ring"), x)
    assert out.device.type == "ring"
    assert out.dtype == torch.float16
    assert len(compiled_kernels(kernels)) >= 4, kernels
    # fp16 weights and activations: every layer rounds its output once; a few ulps of the output scale
    err = (out.cpu().double() - reference).abs().max().item()
    assert err <= 16 * 2.0**-11 * reference.abs().max().item(), err
