"""Regressions from review: out= shapes, div without a rounding mode, the sign of zero in the program cache,
partially overlapping in-place writes, and the conformance check's dtype assertion. CPU eager is the reference."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from ringsim.ops import conformance, dispatch, rows
from ringsim.ops.calls import key_of
from ringsim.ops.registry import by_packet
from torch.testing._internal.opinfo.core import SampleInput

DEVICE = "ring"


def on(device: str, values: list[torch.Tensor]) -> list[torch.Tensor]:
    return [v.to(device) for v in values]


# --- 1. out= takes the op's output shape, not the plan's flattened rows ---------------------------------------------

OUT_CASES: dict[str, tuple[Callable[..., torch.Tensor], list[tuple[int, ...]]]] = {
    "amax-all": (lambda x, out: torch.amax(x, out=out), [(3, 4)]),
    "amax-dim": (lambda x, out: torch.amax(x, 1, out=out), [(3, 4)]),
    "sum-keepdim": (lambda x, out: torch.sum(x, (0, 1), keepdim=True, out=out), [(3, 4)]),
    "mean-dim0": (lambda x, out: torch.mean(x, 0, out=out), [(2, 3, 4)]),
    "argmax-all": (lambda x, out: torch.argmax(x, out=out), [(3, 4)]),
    "softmax-1d": (lambda x, out: torch.softmax(x, 0, out=out), [(5,)]),
    "softmax-dim0": (lambda x, out: torch.softmax(x, 0, out=out), [(3, 4)]),
    "_softmax.out": (lambda x, out: torch.ops.aten._softmax.out(x, 0, False, out=out), [(5,)]),
    "_log_softmax.out": (lambda x, out: torch.ops.aten._log_softmax.out(x, -1, False, out=out), [(2, 5)]),
    "hstack": (lambda a, b, out: torch.hstack([a, b], out=out), [(3,), (3,)]),
    "vstack": (lambda a, b, out: torch.vstack([a, b], out=out), [(3,), (3,)]),
    "stack": (lambda a, b, out: torch.stack([a, b], out=out), [(2, 3), (2, 3)]),
    "stack-dim1": (lambda a, b, out: torch.stack([a, b], 1, out=out), [(2, 3), (2, 3)]),
    "cat": (lambda a, b, out: torch.cat([a, b], 1, out=out), [(2, 3), (2, 1)]),
}


@pytest.mark.parametrize("name", sorted(OUT_CASES))
@pytest.mark.parametrize("prealloc", [False, True], ids=["empty-out", "sized-out"])
def test_out_gets_the_ops_output_shape(name: str, prealloc: bool) -> None:
    fn, shapes = OUT_CASES[name]
    inputs = [torch.randn(s) for s in shapes]
    expected = fn(*inputs, out=torch.empty(0, dtype=torch.int64 if name.startswith("argmax") else torch.float32))
    out = torch.empty(expected.shape if prealloc else (0,), dtype=expected.dtype, device=DEVICE)
    ptr = out.data_ptr()
    result = fn(*on(DEVICE, inputs), out=out)
    assert result is out
    assert out.shape == expected.shape
    if prealloc:
        assert out.data_ptr() == ptr  # a destination of the right shape is written, not replaced
    torch.testing.assert_close(out.cpu(), expected)


def test_out_with_several_results_resizes_each() -> None:
    """``max.dim_max`` (two outs) through the generic out kernel: each out gets its own result shape."""
    kernel = dispatch.out_kernel(
        by_packet()["max"], torch.ops.aten.max.dim_max, torch.ops.aten.max.dim, rows.build_reduction
    )
    x = torch.randn(3, 5)
    for keepdim in (False, True):
        values = torch.empty(0, device=DEVICE)
        indices = torch.empty(0, dtype=torch.int64, device=DEVICE)
        result = kernel(x.to(DEVICE), 1, keepdim, max=values, max_values=indices)
        expected = torch.max(x, 1, keepdim)
        assert result[0] is values
        assert result[1] is indices
        assert values.shape == expected.values.shape
        assert indices.shape == expected.indices.shape
        assert torch.equal(values.cpu(), expected.values)
        assert torch.equal(indices.cpu(), expected.indices)


# --- 2. div with rounding_mode=None ----------------------------------------------------------------------------------


def test_div_with_rounding_mode_none_is_true_division() -> None:
    a, b = torch.randn(6, 5) * 4, torch.randn(6, 5) + 3
    assert torch.equal(torch.div(a.to(DEVICE), b.to(DEVICE), rounding_mode=None).cpu(), torch.div(a, b))
    assert torch.equal(torch.div(a.to(DEVICE), 2.5, rounding_mode=None).cpu(), torch.div(a, 2.5))
    d = a.to(DEVICE)
    d.div_(b.to(DEVICE), rounding_mode=None)
    assert torch.equal(d.cpu(), a / b)
    out = torch.empty(0, device=DEVICE)
    torch.div(a.to(DEVICE), b.to(DEVICE), rounding_mode=None, out=out)
    assert torch.equal(out.cpu(), a / b)
    for mode in ("trunc", "floor"):
        assert torch.equal(
            torch.div(a.to(DEVICE), b.to(DEVICE), rounding_mode=mode).cpu(), torch.div(a, b, rounding_mode=mode)
        )


# --- 3. the program cache tells 0.0 from -0.0 ------------------------------------------------------------------------


@pytest.mark.parametrize(("first", "second", "n"), [(-0.0, 0.0, 7), (0.0, -0.0, 9)], ids=["neg-first", "pos-first"])
def test_scalar_zero_sign_is_part_of_the_program_key(first: float, second: float, n: int) -> None:
    y = torch.ones(n)  # a shape of its own per order: no plan cached by another test
    d = y.to(DEVICE)
    for scalar in (first, second):
        assert torch.equal(torch.signbit((d * scalar).cpu()), torch.signbit(y * scalar))
        assert torch.equal(torch.signbit((d + torch.tensor(scalar)).cpu() * 0), torch.signbit((y + scalar) * 0))
        assert torch.equal(torch.signbit(torch.mul(d, torch.tensor(scalar)).cpu()), torch.signbit(y * scalar))


def test_key_of_floats() -> None:
    assert key_of(0.0) != key_of(-0.0)
    assert key_of(torch.tensor(0.0)) != key_of(torch.tensor(-0.0))
    assert key_of(float("nan")) == key_of(-float("nan"))
    assert key_of(torch.tensor(float("nan"))) == key_of(torch.tensor(-float("nan")))
    assert key_of(1.0) == key_of(1.0)
    assert key_of(1) != key_of(1.0)
    assert key_of(True) != key_of(1)


# --- 4. overlapping in-place and out= writes refused as on CPU -------------------------------------------------------

OVERLAP_CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "add_-partial": lambda x: x[32:2080].add_(x[0:2048]),
    "add_-partial-behind": lambda x: x[0:2048].add_(x[32:2080]),
    "add_-self": lambda x: x.add_(x),
    "mul_-same-view": lambda x: x[:100].mul_(x[:100]),
    "add_-disjoint": lambda x: x[2048:].add_(x[:2048]),
    "add_-transposed": lambda x: x[:16].view(4, 4).add_(x[:16].view(4, 4).t()),
    "add_-broadcast-row": lambda x: x[:16].view(4, 4).add_(x[:4]),
    "add_-strided": lambda x: x[2:12:2].add_(x[0:10:2]),  # not dense: too hard for torch, which lets it pass
    "addcmul_-partial": lambda x: x[3:13].addcmul_(x[:10], x[20:30]),
    "lerp_-partial": lambda x: x[3:13].lerp_(x[:10], 0.5),
    "add-out-partial": lambda x: torch.add(x[0:2048], 1, out=x[32:2080]),
    "add-out-second-input": lambda x: torch.add(x[100:110], x[0:10], out=x[5:15]),
    "where-out-partial": lambda x: torch.where(x[:10] > 0, x[:10], x[5:15], out=x[3:13]),
    "clamp-out-partial": lambda x: torch.clamp(x[:10], x[5:15], None, out=x[3:13]),
    "cat-out-partial": lambda x: torch.cat([x[:10], x[10:20]], out=x[5:25]),
    "cat-out-full": lambda x: torch.cat([x[:10]], out=x[:10]),
    "index_select-out-full": lambda x: torch.index_select(x[:10], 0, torch.arange(10, device=x.device), out=x[:10]),
    "gather-out-partial": lambda x: torch.gather(x[:10], 0, torch.arange(10, device=x.device), out=x[5:15]),
    "sum-out-partial": lambda x: torch.sum(x[:2048].view(2, 1024), 1, out=x[1:3]),
    "mm-out-partial": lambda x: torch.mm(x[:16].view(4, 4), x[:16].view(4, 4), out=x[4:20].view(4, 4)),
}


def _outcome(fn: Callable[[torch.Tensor], Any], x: torch.Tensor) -> str | None:
    try:
        fn(x)
    except RuntimeError as error:
        return str(error)
    return None


@pytest.mark.parametrize("name", sorted(OVERLAP_CASES))
def test_overlapping_destination_is_refused_exactly_as_on_cpu(name: str) -> None:
    base = torch.randn(4096)
    cpu, ring = base.clone(), base.to(DEVICE)
    expected = _outcome(OVERLAP_CASES[name], cpu)
    assert _outcome(OVERLAP_CASES[name], ring) == expected
    if expected is not None:
        assert "refer to a single memory location" in expected
        assert torch.equal(ring.cpu(), base)  # refused before anything is written
    elif name in ("add_-self", "mul_-same-view", "add_-disjoint"):
        assert torch.equal(ring.cpu(), cpu)


def test_allowed_overlap_reads_every_input_before_writing() -> None:
    """Where CPU allows an overlapping out (matmul, reductions), ring computes the whole result before writing it."""
    y = torch.randn(64, 64)
    d = y.to(DEVICE)
    torch.mm(d, d, out=d)
    torch.testing.assert_close(d.cpu(), y @ y)
    x = torch.randn(32, 64)
    r = x.to(DEVICE)
    torch.amax(r[:, :32], 1, keepdim=True, out=r[:, 32:33])
    expected = x.clone()
    expected[:, 32:33] = x[:, :32].amax(1, keepdim=True)
    assert torch.equal(r.cpu(), expected)


# --- 5. the conformance check compares output dtypes with torch's --------------------------------------------------


class _WrongDtypeOnDevice:
    """An OpInfo-like stand-in for ``neg`` whose device kernel returns float32 for float16 input."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (-x).float() if x.device.type == DEVICE else -x


def test_conformance_reports_a_wrong_output_dtype() -> None:
    sample = SampleInput(torch.randn(8, dtype=torch.float16))
    wrong = conformance.Case(_WrongDtypeOnDevice(), "neg", torch.float16, 0, sample)
    why = conformance.check(wrong)
    assert why is not None
    assert "dtype torch.float32" in why
    assert "torch.float16" in why
    right = conformance.Case(lambda x: -x, "neg", torch.float16, 0, sample)
    assert conformance.check(right) is None
    argmax = conformance.Case(lambda x: torch.argmax(x), "argmax", torch.float16, 0, sample)
    assert conformance.check(argmax) is None


def test_out_follows_torchs_cast_rule() -> None:
    """out= refuses an unsafe cast exactly as CPU does, and allows the safe ones."""
    x = torch.randn(3)
    d = x.to("ring")
    for dtype in (torch.int64, torch.float32, torch.float16):
        cpu_out, ring_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="ring")
        try:
            torch.add(x, x, out=cpu_out)
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match=re.escape(str(error))):
                torch.add(d, d, out=ring_out)
            continue
        torch.add(d, d, out=ring_out)
        assert torch.equal(ring_out.cpu(), cpu_out)
