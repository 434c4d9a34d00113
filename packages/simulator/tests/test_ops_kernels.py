"""Kernel mechanics: programs split across cores and tiled, broadcasting, scalars, in-place and out=, layouts, cache."""

from __future__ import annotations

import pytest
import torch
from ringsim import profiling
from ringsim.ops import dispatch

DEVICE = "ring"


def reports(fn):
    with profiling.profile() as p:
        result = fn()
    return result, p.reports


def test_large_elementwise_is_split_across_all_cores_and_tiled() -> None:
    x = torch.randn(1 << 21, dtype=torch.float16)  # 4 MiB per operand: more than a scratchpad per core share
    y = torch.randn(1 << 21, dtype=torch.float16)
    a, b = x.to(DEVICE), y.to(DEVICE)
    out, launched = reports(lambda: a + b)
    assert torch.equal(out.cpu(), x + y)
    (report,) = launched
    assert sum(1 for busy in report.per_core.values() if busy.busy > 0) == 32


def test_small_elementwise_runs_on_one_core() -> None:
    a = torch.randn(100).to(DEVICE)
    _, launched = reports(lambda: a * 3)
    assert sum(1 for busy in launched[0].per_core.values() if busy.busy > 0) == 1


@pytest.mark.parametrize(
    ("left", "right"), [((4, 5), (5,)), ((4, 1), (1, 5)), ((3, 4, 5), (4, 1)), ((2, 3), ()), ((), (2, 3))]
)
def test_broadcasting(left: tuple[int, ...], right: tuple[int, ...]) -> None:
    x, y = torch.randn(left), torch.randn(right)
    assert torch.equal((x.to(DEVICE) * y.to(DEVICE)).cpu(), x * y)


def test_python_and_host_scalars_and_type_promotion() -> None:
    x = torch.randn(8, dtype=torch.float16)
    d = x.to(DEVICE)
    assert torch.equal((d + 2).cpu(), x + 2)
    assert (d * 2.5).dtype == torch.float16
    assert (d + torch.tensor(1.5)).dtype == torch.float16
    mixed = d + torch.randn(8).to(DEVICE)
    assert mixed.dtype == torch.float32
    assert (d > 0).dtype == torch.bool


def test_in_place_and_out_variants_write_the_destination() -> None:
    x = torch.randn(6, 7)
    d = x.to(DEVICE)
    ptr = d.data_ptr()
    d.mul_(2).add_(1)
    assert d.data_ptr() == ptr
    assert torch.equal(d.cpu(), x * 2 + 1)
    out = torch.empty(0, device=DEVICE)
    torch.sub(d, 1, out=out)
    assert out.shape == (6, 7)
    assert torch.equal(out.cpu(), (x * 2 + 1) - 1)


def test_in_place_on_a_non_contiguous_view_writes_through() -> None:
    base = torch.zeros(4, 6)
    d = base.to(DEVICE)
    d.t()[1:3].add_(5)
    base.t()[1:3].add_(5)
    assert torch.equal(d.cpu(), base)


def test_non_contiguous_operands_are_copied_to_a_contiguous_layout_first() -> None:
    x = torch.randn(16, 32)
    d = x.to(DEVICE)
    assert torch.equal((d.t() + 1).cpu(), x.t() + 1)
    assert torch.equal(d[:, 1::2].exp().cpu(), x[:, 1::2].exp())
    assert torch.equal(d[1:].neg().cpu(), -x[1:])  # a view that does not start on a stick


def test_a_permuted_operand_is_restickified_on_the_device_once_per_call() -> None:
    x = torch.randn(16, 40)
    d = x.to(DEVICE)
    out, launched = reports(lambda: d.t() * 2)
    assert len(launched) == 2
    assert launched[0].name == "restickify"
    assert torch.equal(out.cpu(), x.t() * 2)


def test_repeat_calls_reuse_the_cached_plan() -> None:
    a = torch.randn(33).to(DEVICE)
    a.sin()
    before = len(dispatch._PLANS)
    for _ in range(5):
        a.sin()
    assert len(dispatch._PLANS) == before


def test_reductions_over_inner_and_outer_dims() -> None:
    x = torch.randn(5, 6, 7)
    d = x.to(DEVICE)
    assert torch.allclose(d.sum((0, 2)).cpu(), x.sum((0, 2)), atol=1e-5)
    values, indices = d.max(1)
    assert torch.equal(values.cpu(), x.max(1).values)
    assert torch.equal(indices.cpu(), x.max(1).indices)
    assert torch.equal(d.argmin().cpu(), x.argmin())
    assert torch.equal(d.amax(0, keepdim=True).cpu(), x.amax(0, keepdim=True))


def test_softmax_over_a_leading_dim_and_layer_norm_with_affine() -> None:
    x = torch.randn(4, 8, 16)
    d = x.to(DEVICE)
    assert torch.allclose(torch.softmax(d, 0).cpu(), torch.softmax(x, 0), atol=1e-6)
    w, b = torch.randn(16), torch.randn(16)
    got = torch.nn.functional.layer_norm(d, (16,), w.to(DEVICE), b.to(DEVICE))
    assert torch.allclose(got.cpu(), torch.nn.functional.layer_norm(x, (16,), w, b), atol=1e-5)


def test_linear_matmul_and_bmm() -> None:
    x, w, b = torch.randn(70, 24), torch.randn(12, 24), torch.randn(12)
    got = torch.nn.functional.linear(x.to(DEVICE), w.to(DEVICE), b.to(DEVICE))
    assert torch.allclose(got.cpu(), torch.nn.functional.linear(x, w, b), atol=1e-5)
    p, q = torch.randn(3, 5, 7), torch.randn(3, 7, 2)
    assert torch.allclose((p.to(DEVICE) @ q.to(DEVICE)).cpu(), p @ q, atol=1e-5)


def test_data_movement_is_exact() -> None:
    x = torch.randn(5, 6)
    d = x.to(DEVICE)
    idx = torch.tensor([4, 0, 2])
    assert torch.equal(torch.cat([d, d * 2], 1).cpu(), torch.cat([x, x * 2], 1))
    assert torch.equal(torch.stack([d, d]).cpu(), torch.stack([x, x]))
    assert torch.equal(d.index_select(1, idx.to(DEVICE)).cpu(), x.index_select(1, idx))
    gidx = torch.randint(0, 6, (5, 3))
    assert torch.equal(d.gather(1, gidx.to(DEVICE)).cpu(), x.gather(1, gidx))
    mask = x > 0
    assert torch.equal(torch.where(mask.to(DEVICE), d, -d).cpu(), torch.where(mask, x, -x))
    assert torch.equal(d.masked_fill(mask.to(DEVICE), 0.5).cpu(), x.masked_fill(mask, 0.5))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_reduced_precision_dtype_argument_computes_as_the_widened_input(dtype: torch.dtype) -> None:
    """float16/bfloat16 compute in float32: their `dtype=` widens with them (vector_norm refuses a narrowing one)."""
    x = torch.randn(3, 40, dtype=dtype)
    got = torch.linalg.vector_norm(x.to("ring"), 2.0, dim=1, dtype=dtype)
    assert got.dtype == dtype
    torch.testing.assert_close(got.cpu(), torch.linalg.vector_norm(x, 2.0, dim=1, dtype=dtype))
