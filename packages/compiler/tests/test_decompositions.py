"""The ring decompositions compute what the ops they replace compute, in float32 rounded once, for ring only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from ring_inductor import decompositions as d
from ring_inductor.tolerance import device_bound, excess
from ring_inductor.torchprivate import inductor_decompositions

aten = torch.ops.aten
x64 = torch.randn(6, 40, dtype=torch.float64)
w64, b64 = torch.rand(40, dtype=torch.float64) + 0.5, torch.randn(40, dtype=torch.float64)
q64, k64, v64 = (torch.randn(2, 3, 8, 16, dtype=torch.float64) for _ in range(3))

CASES = {
    "softmax": (lambda x: d.softmax(x, -1, False), lambda x: torch.softmax(x, -1)),
    "log_softmax": (lambda x: d.log_softmax(x, -1, False), lambda x: torch.log_softmax(x, -1)),
    "layer_norm": (
        lambda x: d.native_layer_norm(x, [40], w64.to(x.dtype), b64.to(x.dtype), 1e-5)[0],
        lambda x: F.layer_norm(x, (40,), w64.to(x.dtype), b64.to(x.dtype)),
    ),
    "gelu": (d.gelu, F.gelu),
    "gelu_tanh": (lambda x: d.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "silu": (d.silu, F.silu),
    "rms_norm": (lambda x: d.rms_norm(x, [40], w64.to(x.dtype)), lambda x: F.rms_norm(x, (40,), w64.to(x.dtype))),
}


@pytest.mark.parametrize("name", CASES)
def test_matches_torch_in_float64(name: str) -> None:
    ours, theirs = CASES[name]
    torch.testing.assert_close(ours(x64), theirs(x64), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_half_inputs_are_computed_wide_and_rounded_once(name: str) -> None:
    ours, theirs = CASES[name]
    x16 = x64.half()
    out = ours(x16)
    assert out.dtype == torch.float16
    assert excess(out, theirs(x16.double()), device_bound(torch.float16, "normalization", k=40, scale=1)) <= 0


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_sdpa_math_path_matches_torch(causal: bool, mask: str | None) -> None:
    attn_mask = None
    if mask == "bool":
        attn_mask = torch.rand(8, 8) > 0.3
        attn_mask[:, 0] = True  # no fully masked row (torch and the math path differ on those by design)
    elif mask == "float":
        attn_mask = torch.randn(8, 8, dtype=torch.float64)
    if causal and attn_mask is not None:
        pytest.skip("torch refuses an explicit mask together with is_causal")
    ours = d.scaled_dot_product_attention(q64, k64, v64, attn_mask, is_causal=causal)
    theirs = F.scaled_dot_product_attention(q64, k64, v64, attn_mask, is_causal=causal)
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-10)


def test_table_entries_dispatch_on_the_device() -> None:
    softmax = inductor_decompositions[aten._softmax.default]
    assert getattr(softmax, "ring_inductor", False)
    cpu = torch.randn(4, 8)
    torch.testing.assert_close(softmax(cpu, -1, False), torch.softmax(cpu, -1))  # Inductor's own entry
    assert d.on_ring((torch.empty(1, device="ring"),), {})
    assert not d.on_ring((cpu,), {"other": cpu})


def test_install_is_idempotent() -> None:
    before = {op: inductor_decompositions[op] for op in d.RING_DECOMPOSITIONS}
    d.install()
    assert {op: inductor_decompositions[op] for op in d.RING_DECOMPOSITIONS} == before
