"""torch.compile on ring: pointwise, reductions and matmul against a float64 CPU reference, within the device bound."""

from __future__ import annotations

import pytest
import torch
from ring_inductor.checking import compiled_kernels as own_kernels
from ring_inductor.checking import compiled_run
from ring_inductor.checking import float64_reference as reference
from ring_inductor.tolerance import device_bound, excess

DTYPES = [torch.float16, torch.bfloat16, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_pointwise_is_one_ring_kernel_within_bound(dtype: torch.dtype) -> None:
    a, b = torch.randn(512, 256, dtype=dtype), torch.randn(512, 256, dtype=dtype)
    fn = lambda x, y: torch.tanh(x * 2 - y) + torch.exp(y * 0.5)  # noqa: E731
    out, kernels = compiled_run(fn, a, b)
    assert out.device.type == "ring"
    assert out.dtype == dtype
    assert out.shape == a.shape
    assert sum(own_kernels(kernels).values()) == 1, kernels
    assert excess(out, reference(fn, a, b), device_bound(dtype, "transcendental", scale=4)) <= 0


def test_broadcast_and_transposed_operands() -> None:
    x, bias = torch.randn(64, 128, dtype=torch.float16), torch.randn(128, dtype=torch.float16)
    fn = lambda x, b: x.t().t() * 3 + b + x.t().contiguous().t()  # noqa: E731
    out, kernels = compiled_run(fn, x, bias)
    assert own_kernels(kernels)
    assert excess(out, reference(fn, x, bias), device_bound(torch.float16, "rounded", scale=8)) <= 0


def test_transposed_read_is_gathered_correctly() -> None:
    x = torch.randn(96, 160, dtype=torch.float32)
    fn = lambda x: x.t() + 1  # noqa: E731
    out, _ = compiled_run(fn, x)
    assert out.shape == (160, 96)
    assert excess(out, reference(fn, x), device_bound(torch.float32, "rounded", scale=4)) <= 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "amax", "amin", "mean"])
def test_last_dim_reduction(dtype: torch.dtype, op: str) -> None:
    x = torch.randn(1024, 192, dtype=dtype)
    fn = lambda x: getattr(torch, op)(x * 1.5, -1)  # noqa: E731
    out, kernels = compiled_run(fn, x)
    assert out.device.type == "ring"
    assert out.shape == (1024,)
    assert sum(own_kernels(kernels).values()) == 1, kernels
    scale = 1.5 * float(x.double().abs().sum(-1).max()) / (192 if op == "mean" else 1)
    assert excess(out, reference(fn, x), device_bound(dtype, "reduction", k=192, scale=scale)) <= 0


def test_reduction_over_leading_dim_and_whole_tensor() -> None:
    x = torch.randn(48, 80, dtype=torch.float32)
    fn = lambda x: x.sum(0) + x.amax()  # noqa: E731
    out, _ = compiled_run(fn, x)
    scale = float(x.double().abs().sum(0).max())
    assert excess(out, reference(fn, x), device_bound(torch.float32, "reduction", k=80, scale=scale)) <= 0


@pytest.mark.parametrize(
    ("name", "fn", "shapes"),
    [
        ("mm", lambda a, b: a @ b, [(64, 96), (96, 48)]),
        ("mm", lambda a, b: a @ b, [(1024, 64), (64, 64)]),
        ("mm", lambda a, b: a @ b.t(), [(128, 64), (32, 64)]),
        ("bmm", lambda a, b: torch.bmm(a, b), [(3, 32, 64), (3, 64, 16)]),
        ("addmm", lambda c, a, b: torch.addmm(c, a, b), [(40,), (24, 64), (64, 40)]),
        ("addmm", lambda c, a, b: torch.addmm(c, a, b), [(24, 40), (24, 64), (64, 40)]),
    ],
    ids=["mm", "mm_multicore", "mm_transposed_b", "bmm", "addmm_row_bias", "addmm_full_bias"],
)
def test_matmul_is_a_ring_inductor_program(name: str, fn, shapes: list[tuple[int, ...]]) -> None:
    inputs = [torch.randn(*s, dtype=torch.float16) for s in shapes]
    out, kernels = compiled_run(fn, *inputs)
    assert out.device.type == "ring"
    assert any(k.startswith(f"ring_{name}_") for k in kernels), kernels
    k = inputs[-2].shape[-1]
    assert excess(out, reference(fn, *inputs), device_bound(torch.float16, "matmul", k=k, scale=16)) <= 0
