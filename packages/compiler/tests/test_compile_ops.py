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


#: Every pointwise op the device has eagerly, with an input domain where the op is well conditioned.
_UNARY_DOMAIN = {
    "acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atan": (-3, 3), "acosh": (1.1, 4), "asinh": (-3, 3),
    "atanh": (-0.9, 0.9), "cosh": (-3, 3), "sinh": (-3, 3), "tan": (-1.2, 1.2), "log2": (0.1, 8),
    "log10": (0.1, 8), "lgamma": (0.5, 6), "digamma": (0.5, 6), "erfinv": (-0.9, 0.9),
}  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(_UNARY_DOMAIN))
def test_unary_transcendental_is_a_ring_kernel_within_bound(dtype: torch.dtype, op: str) -> None:
    low, high = _UNARY_DOMAIN[op]
    x = (torch.rand(64, 96) * (high - low) + low).to(dtype)
    fn = getattr(torch, op)
    out, kernels = compiled_run(fn, x)
    assert sum(own_kernels(kernels).values()) == 1, kernels
    assert excess(out, reference(fn, x), device_bound(dtype, "transcendental", scale=8)) <= 0


@pytest.mark.parametrize("op", ["round", "isinf", "signbit", "fmod", "remainder", "hypot", "copysign"])
def test_exact_and_binary_pointwise_ops(op: str) -> None:
    x = torch.randn(40, 70) * 4
    x[0, :3] = torch.tensor([float("inf"), -float("inf"), -0.0])
    y = x.flip(0).abs() + 0.5
    fn = getattr(torch, op)
    args = (x, y) if op in ("fmod", "remainder", "hypot", "copysign") else (x,)
    out, kernels = compiled_run(fn, *args)
    assert own_kernels(kernels), kernels
    torch.testing.assert_close(out.cpu(), fn(*args), rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("op", ["bitwise_not", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"])
def test_integer_bitwise_ops_are_exact(op: str) -> None:
    a, b = torch.randint(-1000, 1000, (24, 36)), torch.randint(0, 5, (24, 36))
    fn = (lambda x, y: getattr(torch, op)(x)) if op == "bitwise_not" else (lambda x, y: getattr(torch, op)(x, y))
    out, kernels = compiled_run(fn, a, b)
    assert own_kernels(kernels), kernels
    assert torch.equal(out.cpu(), fn(a, b))


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("fill_", lambda t: t.clone().fill_(2.5)),
        ("full_like", lambda t: torch.full_like(t, -3.0) * t),
        ("zeros_like bool", lambda t: (torch.zeros_like(t, dtype=torch.bool) | (t > 0)).to(t.dtype)),
        ("row broadcast", lambda t: t.sum(-1, keepdim=True).expand(t.shape).contiguous()),
        ("column broadcast", lambda t: t[:1].expand(t.shape).contiguous() * 2),
    ],
)
def test_broadcasting_stores_fill_every_element(name: str, fn) -> None:
    x = torch.randn(12, 130, dtype=torch.float16)
    out, kernels = compiled_run(fn, x)
    assert own_kernels(kernels), (name, kernels)
    assert excess(out, reference(fn, x), device_bound(torch.float16, "reduction", k=130, scale=130)) <= 0


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("any of an expanded scalar", lambda t: (t[0, 0] > 0).expand(64, 128).any(-1)),
        ("sum of an expanded column", lambda t: t[:, :1].expand(64, 128).sum(-1)),
        ("amax of an expanded row", lambda t: t[:1].expand(64, 128).amax(-1)),
    ],
)
def test_reductions_of_broadcast_values_reduce_every_element(name: str, fn) -> None:
    x = torch.randn(64, 128)
    out, kernels = compiled_run(fn, x)
    assert own_kernels(kernels), (name, kernels)
    assert out.shape == (64,)
    expected = reference(fn, x)
    if expected.dtype == torch.bool:
        assert torch.equal(out.cpu(), expected)
    else:
        assert excess(out, expected, device_bound(torch.float32, "reduction", k=128)) <= 0


@pytest.mark.parametrize("op", ["floor_divide", "fmod", "remainder", "lcm", "trunc_divide"])
def test_integer_division_family_is_exact(op: str) -> None:
    a = torch.randint(-50, 50, (5, 7))
    b = torch.randint(1, 9, (5, 7)) * torch.where(torch.rand(5, 7) > 0.5, 1, -1)
    fn = (lambda x, y: torch.div(x, y, rounding_mode="trunc")) if op == "trunc_divide" else getattr(torch, op)
    out, kernels = compiled_run(fn, a, b)
    assert own_kernels(kernels), kernels
    assert torch.equal(out.cpu(), fn(a, b))


def test_a_tensor_literal_made_inside_the_graph() -> None:
    """torch 2.14 captures torch.tensor([...]) as lift_fresh_copy of a row constant stored into a full buffer."""

    def fn(scale: torch.Tensor) -> torch.Tensor:
        x = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.14], device="ring", dtype=torch.float32)
        return torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0) * scale

    out, _ = compiled_run(fn, torch.ones(4))
    torch.testing.assert_close(out.cpu(), torch.tensor([1.0, 2.0, -2.0, 3.14]))


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1)])
def test_flipped_reads_have_negative_strides(dims: tuple[int, ...]) -> None:
    """flip's index (`n - 1 - i`) is a strided read with negative strides, which as_strided refuses."""
    x = torch.randn(7, 130, dtype=torch.float16)
    fn = lambda t: torch.flip(t, dims) * 2 + t  # noqa: E731
    out, kernels = compiled_run(fn, x)
    assert own_kernels(kernels), kernels
    assert excess(out, reference(fn, x), device_bound(torch.float16, "rounded", scale=8)) <= 0
