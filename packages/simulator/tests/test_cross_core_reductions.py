"""Reductions split across cores along K: rows longer than a scratchpad, or too few rows to occupy the cores.

Each core reduces its slice, the partials are combined over the ring and core 0 writes the result, so the results
must match CPU exactly for the selecting reductions and within the documented reduction bound (against a float64
reference) for the accumulating ones, and the kernel must use every core and the ring.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from ringsim import profiling
from ringsim.ops import numerics
from ringsim.ops.programs import TooLargeError
from ringsim.ops.registry import Tolerance
from ringsim.ops.split_reduction import MAX_ROWS

DEVICE = "ring"
NAN, INF = float("nan"), float("inf")

Reduce = Callable[[torch.Tensor], torch.Tensor | tuple[torch.Tensor, ...]]

ACCUMULATING: dict[str, Reduce] = {
    "sum": lambda t: t.sum(),
    "mean": lambda t: t.mean(),
    "prod": lambda t: t.prod(),
}
SELECTING: dict[str, Reduce] = {
    "amax": lambda t: t.amax(),
    "amin": lambda t: t.amin(),
    "max": lambda t: t.max(),
    "min": lambda t: t.min(),
    "argmax": lambda t: t.argmax(),
    "argmin": lambda t: t.argmin(),
}


def _run(reduce: Reduce, x: torch.Tensor) -> tuple[list[torch.Tensor], list]:
    """The reduction's results on the device (as CPU tensors) and the reports of the kernels it launched."""
    d = x.to(DEVICE)
    with profiling.profile() as prof:
        result = reduce(d)
    results = list(result) if isinstance(result, tuple) else [result]
    return [r.cpu() for r in results], prof.reports


def _split_report(reports: list):
    (report,) = [r for r in reports if r.name.endswith("/k_split")]
    return report


def _as_list(result: torch.Tensor | tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    return list(result) if isinstance(result, tuple) else [result]


def _assert_exact(reduce: Reduce, x: torch.Tensor) -> list:
    got, reports = _run(reduce, x)
    for actual, expected in zip(got, _as_list(reduce(x)), strict=True):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    return reports


def _assert_within_bound(reduce: Reduce, x: torch.Tensor, k: int) -> list:
    got, reports = _run(reduce, x)
    for actual, reference in zip(got, _as_list(reduce(x.double())), strict=True):
        limit = numerics.bound(Tolerance.REDUCTION, actual.dtype, k)
        assert limit.violations(actual, reference) == 0, (actual, reference)
    return reports


def _assert_all_cores_and_ring(reports: list) -> None:
    report = _split_report(reports)
    assert sum(1 for busy in report.per_core.values() if busy.busy > 0) == 32
    assert report.ring_bytes > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(ACCUMULATING))
def test_accumulating_full_reduction_of_a_megaelement_matches_float64_within_bound(
    name: str, dtype: torch.dtype
) -> None:
    torch.manual_seed(0)
    x = torch.randn(1024, 1024)
    if name == "prod":
        x = 1 + x * 2**-10  # a product of a million factors that neither overflows nor underflows
    reports = _assert_within_bound(ACCUMULATING[name], x.to(dtype), 1024 * 1024)
    _assert_all_cores_and_ring(reports)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(SELECTING))
def test_selecting_full_reduction_of_a_megaelement_is_exact(name: str, dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    reports = _assert_exact(SELECTING[name], torch.randn(1024, 1024).to(dtype))
    _assert_all_cores_and_ring(reports)


def test_the_whole_ones_sum_that_used_to_overflow_a_scratchpad() -> None:
    got, reports = _run(lambda t: t.sum(), torch.ones(1024, 1024))
    assert got[0].item() == 1024 * 1024
    _assert_all_cores_and_ring(reports)


def test_fp16_mean_accumulates_in_fp32_and_rounds_once() -> None:
    """The fp16 sum of a million ones is inf, but the mean divides the fp32 sum before its one rounding."""
    x = torch.ones(1024, 1024, dtype=torch.float16)
    (mean,), _ = _run(lambda t: t.mean(), x)
    (total,), _ = _run(lambda t: t.sum(), x)
    assert mean.dtype == torch.float16
    assert mean.item() == 1.0
    assert total.item() == INF


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "argmax", "argmin"])
def test_an_odd_length_not_a_multiple_of_the_stick(name: str) -> None:
    torch.manual_seed(2)
    x = torch.randn(1_000_003)
    if name in ACCUMULATING:
        reports = _assert_within_bound(ACCUMULATING[name], 1 + x * 2**-10 if name == "prod" else x, x.numel())
    else:
        reports = _assert_exact(SELECTING[name], x)
    _assert_all_cores_and_ring(reports)


ROWS: dict[str, Reduce] = {
    "sum": lambda t: t.sum(-1),
    "mean_keepdim": lambda t: t.mean(1, keepdim=True),
    "prod": lambda t: t.prod(-1),
    "amax": lambda t: t.amax(-1),
    "argmax": lambda t: t.argmax(-1),
    "argmin_keepdim": lambda t: t.argmin(1, keepdim=True),
    "max_dim": lambda t: t.max(-1),
    "min_dim": lambda t: t.min(-1),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_few_rows_too_long_for_a_scratchpad_split_each_row_across_cores(name: str) -> None:
    """Three rows of 1,000,003 elements: row starts fall inside sticks, and rows span core boundaries."""
    torch.manual_seed(3)
    x = torch.randn(3, 1_000_003)
    if name.startswith(("sum", "mean", "prod")):
        reports = _assert_within_bound(ROWS[name], 1 + x * 2**-10 if name == "prod" else x, x.shape[1])
    else:
        reports = _assert_exact(ROWS[name], x)
    _assert_all_cores_and_ring(reports)


def test_nansum_skips_nans_on_every_core() -> None:
    torch.manual_seed(7)
    x = torch.randn(1024, 1024)
    x[::7, ::5] = NAN
    _assert_all_cores_and_ring(_assert_within_bound(lambda t: t.nansum(), x, x.numel()))


def test_a_reduction_over_a_leading_dim_with_few_outputs() -> None:
    torch.manual_seed(4)
    x = torch.randn(1_000_003, 3)
    _assert_within_bound(lambda t: t.sum(0), x, x.shape[0])
    _assert_all_cores_and_ring(_assert_exact(lambda t: t.argmax(0), x))


def test_many_rows_of_a_length_the_row_kernel_cannot_tile() -> None:
    """40 rows of 80 KB: the row kernel needs whole sticks of outputs (32 rows) per chunk, which do not fit."""
    torch.manual_seed(5)
    x = torch.randn(40, 20_000)
    _assert_within_bound(lambda t: t.sum(-1), x, x.shape[1])
    _assert_exact(lambda t: t.max(-1), x)


@pytest.mark.parametrize("name", ["argmax", "argmin", "amax", "amin", "max", "min"])
def test_nan_counts_as_the_extreme_and_the_first_nan_wins(name: str) -> None:
    x = torch.randn(1_000_003)
    x[[12_345, 300_001, 999_999]] = NAN  # on three different cores
    _assert_all_cores_and_ring(_assert_exact(SELECTING[name], x))
    rows = torch.randn(3, 1_000_003)
    rows[0, 700_000], rows[0, 900_000], rows[2, 5] = NAN, NAN, NAN
    _assert_exact(lambda t: getattr(t, name)(-1), rows)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_ties_go_to_the_first_occurrence_across_and_within_cores(name: str) -> None:
    x = torch.zeros(1_000_003)
    extreme = 5.0 if name == "argmax" else -5.0
    x[[999_000, 700_001, 700_000, 400_000]] = extreme  # the first on core 12, a tie inside core 22, one on core 31
    got, _ = _run(SELECTING[name], x)
    assert got[0].item() == 400_000
    x[400_000] = 0.0  # now the first is on core 22, after a tie in that core, with a later one on core 31 (the
    (got,), _ = _run(SELECTING[name], x)  # chain running up to core 0 through 31 must keep the earlier operand)
    assert got.item() == 700_000
    rows = torch.zeros(3, 1_000_003)
    rows[1, [0, 20, 100]] = extreme  # row 1 starts inside a stick: its head is reduced apart, then combined
    rows[2, [3, 50_000]] = extreme
    _assert_exact(lambda t: getattr(t, name)(-1), rows)
    flat = torch.full((2, 600_000), extreme)  # constant rows: every element ties, so index 0
    _assert_exact(lambda t: getattr(t, name)(-1), flat)


def test_a_slice_longer_than_a_scratchpad_is_reduced_chunk_by_chunk() -> None:
    """16M elements: each core's 2 MB slice takes two scratchpad chunks, whose partials combine in order."""
    x = torch.zeros(1 << 24)
    x[[(1 << 19) + 5, (1 << 19) + 450_000, 3 << 22]] = 2.0  # a tie in core 1's first and second chunk, then core 24
    _assert_all_cores_and_ring(_assert_exact(lambda t: t.argmax(), x))
    torch.manual_seed(6)
    _assert_within_bound(lambda t: t.sum(), torch.randn(1 << 24), 1 << 24)


def test_rows_that_are_all_minus_infinity_give_index_zero() -> None:
    x = torch.full((5, 300_001), -INF)
    x[3, 200_000] = 1.0
    _assert_exact(lambda t: t.argmax(-1), x)
    _assert_exact(lambda t: t.max(-1), x)


@pytest.mark.parametrize("shape", [(4096, 64), (600, 3000)])
def test_rows_shorter_than_a_core_share_keep_the_row_kernel(shape: tuple[int, int]) -> None:
    """Rows under 64 KiB: the row kernel's cores already keep device memory busy, a K split would only add combines."""
    _, reports = _run(lambda t: t.sum(-1), torch.randn(shape))
    assert [r.name for r in reports] == ["sum.dim_IntList"]


def test_a_few_rows_of_a_core_share_each_split_to_fill_the_cores() -> None:
    x = torch.randn(16, 16_384)  # 16 rows of 64 KiB: the row kernel puts them on one core (a stick of outputs)
    reports = _assert_within_bound(lambda t: t.sum(-1), x, x.shape[1])
    report = _split_report(reports)
    assert sum(1 for busy in report.per_core.values() if busy.busy > 0) == 16


def test_an_out_variant_writes_the_split_result() -> None:
    x = torch.randn(2, 500_000)
    out = torch.empty(0, device=DEVICE)
    torch.sum(x.to(DEVICE), -1, out=out)
    assert numerics.bound(Tolerance.REDUCTION, torch.float32, x.shape[1]).violations(out, x.double().sum(-1)) == 0


def test_too_many_long_rows_and_variance_over_a_huge_row_stay_refused() -> None:
    with pytest.raises(TooLargeError, match=r"^ring: aten::sum.dim_IntList: the operands of one row need more"):
        torch.empty(MAX_ROWS + 1, 13_000, device=DEVICE).sum(-1)
    with pytest.raises(TooLargeError, match=r"^ring: aten::var.correction: the operands of one row need more"):
        torch.empty(1, 1 << 20, device=DEVICE).var()
