"""A compiled matmul's pointwise consumers join its kernel when the co-optimiser keeps the product resident."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ringsim
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ring_inductor import config
from ring_inductor.checking import compiled_kernels, compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess

torch.manual_seed(0)
X = torch.randn(1024, 512, dtype=torch.float16)
W = (torch.randn(512, 256) / 23).half()
BIAS = torch.randn(256, dtype=torch.float16)
RESIDUAL = torch.randn(1024, 256, dtype=torch.float16)


def _bound(dtype: torch.dtype = torch.float16) -> Any:
    # one matmul (K = 512, |a| |b| about 4 x 0.2), then a rounded or transcendental epilogue: twice the matmul's bound
    matmul = device_bound(dtype, "matmul", k=512, scale=1.0)
    return type(matmul)(2 * matmul.rtol, 2 * matmul.atol)


def _cycles(fn: Callable[..., Any], *inputs: torch.Tensor) -> tuple[int, dict[str, int]]:
    """The simulated cycles of the second call (the first compiles) and the kernels it ran."""
    compiled_run(fn, *inputs)
    _, kernels = compiled_run(fn, *inputs)
    return ringsim.stats()["cycles"]["total"], compiled_kernels(kernels)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_gelu_of_a_product_is_one_kernel_and_matches_float64(dtype: torch.dtype) -> None:
    fn = lambda x, w: F.gelu(x @ w)  # noqa: E731
    x, w = X.to(dtype), W.to(dtype)
    out, kernels = compiled_run(fn, x, w)
    (kernel,) = compiled_kernels(kernels)
    assert kernel.startswith("ring_mm_"), kernels
    assert excess(out, float64_reference(fn, x, w), _bound(dtype)) <= 0


def test_a_linear_layer_with_bias_activation_and_residual_fuses_all_three() -> None:
    # linear reads its weight transposed (relaid first), adds the bias row in the device's addmm; relu and the
    # residual (a second full operand) run on the product's tile
    fn = lambda x, w, b, r: torch.relu(F.linear(x, w, b)) + r  # noqa: E731
    weight = W.t().contiguous()  # nn.Linear's [out, in]
    out, kernels = compiled_run(fn, X, weight, BIAS, RESIDUAL)
    fused = [k for k in compiled_kernels(kernels) if k.startswith("ring_addmm_")]
    assert fused, kernels
    assert "add" in fused[0], kernels
    assert "relu" in fused[0], kernels
    assert not any(k.startswith("ring_add_relu") for k in kernels), kernels
    assert excess(out, float64_reference(fn, X, weight, BIAS, RESIDUAL), _bound()) <= 0


def test_fusing_takes_fewer_cycles_than_spilling_the_product(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = lambda x, w: torch.sigmoid(x @ w) * 3  # noqa: E731
    fused, fused_kernels = _cycles(fn, X, W)
    monkeypatch.setattr(config, "fuse_matmul_epilogues", False)
    spilled, spilled_kernels = _cycles(fn, X, W)
    assert len(fused_kernels) == 1, fused_kernels
    assert len(spilled_kernels) == 2, spilled_kernels
    assert fused < spilled, (fused, spilled)


def test_a_product_read_elsewhere_is_also_stored() -> None:
    fn = lambda x, w: (lambda p: (p, torch.tanh(p) + 1))(x @ w)  # noqa: E731
    (product, activated), kernels = compiled_run(fn, X, W)
    assert len(compiled_kernels(kernels)) == 1, kernels
    reference = float64_reference(fn, X, W)
    assert excess(product, reference[0], _bound()) <= 0
    assert excess(activated, reference[1], _bound()) <= 0


def test_a_consumer_storing_the_product_transposed_still_fuses() -> None:
    # the consumer reads the product in order and writes its own output strided (written back by a relayout)
    fn = lambda x, w: (x @ w).t() + 1  # noqa: E731
    out, kernels = compiled_run(fn, X, W)
    assert len(compiled_kernels(kernels)) == 1, kernels
    assert excess(out, float64_reference(fn, X, W), _bound()) <= 0


@pytest.mark.parametrize(
    ("fn", "inputs"),
    [
        (lambda x, w: (x @ w)[:, ::2] * 2, (X, W)),  # the consumer reads every other column of the product
        (lambda x, w: F.gelu(x @ w), (X[:64], torch.randn(512, 2048).half())),  # B (2 MiB) overflows a core
        (lambda x, w: torch.softmax(x @ w, -1), (X, W)),  # a reduction never joins a template
    ],
    ids=["view", "planned", "reduction"],
)
def test_a_product_that_cannot_stay_resident_spills_and_stays_correct(fn: Any, inputs: tuple[Any, ...]) -> None:
    out, kernels = compiled_run(fn, *inputs)
    assert len(compiled_kernels(kernels)) >= 2, kernels
    bound = device_bound(torch.float16, "matmul", k=512, scale=4.0)
    assert excess(out, float64_reference(fn, *inputs), type(bound)(2 * bound.rtol, 2 * bound.atol)) <= 0


def test_the_dump_records_the_co_optimisers_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    compiled_run(lambda x, w: torch.relu(x @ w), X, W)
    (decisions_file,) = tmp_path.glob("ring_mm_relu_*.decisions.json")
    verdict = json.loads(decisions_file.read_text())["fusion"]
    assert verdict["fused"], verdict
    assert verdict["hand_over"][0]["transition"] == "resident", verdict
    assert verdict["splits"][1].startswith("adopt"), verdict
    program = json.loads(decisions_file.with_name(decisions_file.name.replace(".decisions", "")).read_text())
    fns = [i.get("fn") for i in program["cores"][0]["instructions"] if i["op"] == "compute"]
    assert fns[:2] == ["mm", "relu"], fns
    # A, B and the relu's output: the product itself is never a buffer
    assert {"mm_a", "mm_b"} < set(program["buffers"]), program["buffers"]
    assert len(program["buffers"]) == 3, program["buffers"]


#: Epilogue steps the fuzz chains: each takes the value so far, the bias row and the residual.
STEPS: dict[str, Callable[..., torch.Tensor]] = {
    "relu": lambda y, b, r: torch.relu(y),
    "sigmoid": lambda y, b, r: torch.sigmoid(y),
    "tanh": lambda y, b, r: torch.tanh(y),
    "gelu": lambda y, b, r: F.gelu(y),
    "silu": lambda y, b, r: F.silu(y),
    "bias": lambda y, b, r: y + b,
    "residual": lambda y, b, r: y * r,
    "scale": lambda y, b, r: y * 0.5 - 1,
}


def _fuzz(steps: list[str], m: int, k: int, n: int, dtype: torch.dtype) -> None:
    """Compile the chain of `steps` on x @ w: one kernel fused, agreeing with the spilled kernels."""

    # resident or spilled, the product is rounded to its dtype once and the consumers' steps are the same; only the
    # matmul's summation order may differ (the host computes each chunk of rows, or each K-chunk, as one product)
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        y = x @ w
        for step in steps:
            y = STEPS[step](y, b, r)
        return y

    generator = torch.Generator().manual_seed(m * k + n)
    inputs = [torch.randn(*shape, generator=generator).to(dtype) for shape in ((m, k), (k, n), (n,), (m, n))]
    inputs[1] /= k**0.5
    fused, kernels = compiled_run(fn, *inputs)
    assert len([k for k in compiled_kernels(kernels) if not k.startswith("ring_relayout_")]) == 1, kernels
    config.fuse_matmul_epilogues = False
    try:
        spilled, _ = compiled_run(fn, *inputs)
    finally:
        config.fuse_matmul_epilogues = True
    fused, spilled = fused.cpu().double(), spilled.cpu().double()
    allowed = 4 * device_bound(dtype, "matmul", k=k).rtol * spilled.abs().max()
    assert (fused - spilled).abs().max() <= allowed, steps


#: chains without a full operand: a planned division relays a full one into its tiles, and may rather spill
UNARY = sorted(step for step in STEPS if step != "residual")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4),
    m=st.sampled_from([64, 100, 256]),
    k=st.sampled_from([128, 512]),
    n=st.sampled_from([128, 384]),
    dtype=st.sampled_from([torch.float16, torch.float32]),
)
def test_fuzzed_epilogues_fuse_and_agree_with_the_spilled_kernels(
    steps: list[str], m: int, k: int, n: int, dtype: torch.dtype
) -> None:
    _fuzz(steps, m, k, n, dtype)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.sampled_from(UNARY), min_size=1, max_size=3),
    m=st.sampled_from([64, 256]),
    n=st.sampled_from([1024, 1536]),
    dtype=st.sampled_from([torch.float16, torch.float32]),
)
def test_fuzzed_epilogues_of_planned_matmuls_fuse_and_agree(steps: list[str], m: int, n: int, dtype: torch.dtype):
    # B of 1024 x n overflows a core: the planned division's tiles carry the chain
    _fuzz(steps, m, 1024, n, dtype)
