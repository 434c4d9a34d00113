"""A repeated kernel call replayed natively gives what the Python kernel gives, charges the same kernel, counts
against faults, and leaves every case it cannot take to the Python kernel."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import ringsim
import torch
from ringsim import faults, replay
from ringsim.ops import register

register()

CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
    "add": lambda x, y: x + y,
    "add_alpha": lambda x, y: torch.add(x, y, alpha=3),
    "mul_host_scalar": lambda x, y: x * 2.5,
    "exp": lambda x, y: torch.exp(x),
    "gelu_tanh": lambda x, y: torch.nn.functional.gelu(x, approximate="tanh"),
    "gt": lambda x, y: x > y,
    "where": lambda x, y: torch.where(x > 0, x, y),
    "sum_dim": lambda x, y: x.sum(-1),
    "max_dim": lambda x, y: x.max(dim=1),
    "softmax": lambda x, y: torch.softmax(x, -1),
    "layer_norm": lambda x, y: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    "mm": lambda x, y: x @ y.t().contiguous(),
    "cat": lambda x, y: torch.cat([x, y], dim=1),
    "sort": lambda x, y: torch.sort(x, dim=-1),
    "cumsum": lambda x, y: torch.cumsum(x, -1),
    "flip": lambda x, y: torch.flip(x, [0]),
    "full_sum": lambda x, y: x.sum(),
    "nonzero_static": lambda x, y: torch.nonzero_static(x, size=4000, fill_value=-3),
}


def _flat(result: object) -> list[torch.Tensor]:
    return [result] if isinstance(result, torch.Tensor) else list(result)  # type: ignore[arg-type]


def _python(fn: Callable[[], object]) -> object:
    """`fn()` through the Python kernels: an active profile keeps every call out of the replay."""
    with ringsim.profile():
        return fn()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_matches_the_python_kernel_bit_for_bit(name: str, dtype: torch.dtype) -> None:
    case = CASES[name]
    shape = (64, 96)
    x, y = (torch.randn(shape, dtype=dtype).to("ring") for _ in range(2))
    case(x, y)  # records the recipe
    x2, y2 = (torch.randn(shape, dtype=dtype).to("ring") for _ in range(2))  # new data, same signature
    before = replay.launches()
    got = case(x2, y2)
    assert replay.launches() > before, "the repeated call was not replayed"
    expected = _python(lambda: case(x2, y2))
    for g, e in zip(_flat(got), _flat(expected), strict=True):
        assert (g.device.type, g.shape, g.stride(), g.dtype) == ("ring", e.shape, e.stride(), e.dtype)
        assert torch.equal(g.cpu(), e.cpu())


def test_a_cross_core_reduction_replays_its_ring_transfers() -> None:
    x = torch.ones(1024, 1024, device="ring")
    assert x.sum().item() == 1024 * 1024
    x.fill_(2.0)
    before = replay.launches()
    assert x.sum().item() == 2 * 1024 * 1024
    assert replay.launches() > before


def test_results_are_fresh_tensors_and_in_place_returns_self() -> None:
    x, y = torch.randn(8, 128).to("ring"), torch.randn(8, 128).to("ring")
    first, second = x + y, x + y
    assert first.data_ptr() != second.data_ptr()
    expected = (x.cpu() + y.cpu()) + y.cpu()
    x.add_(y)
    before = replay.launches()
    assert x.add_(y) is x
    assert replay.launches() == before + 1
    assert torch.equal(x.cpu(), expected)


def test_stats_charge_replayed_kernels_as_python_launches() -> None:
    x = torch.randn(16, 256).to("ring")
    torch.exp(x)
    ringsim.reset_stats()
    with ringsim.profile() as profile:
        torch.exp(x)
    python = ringsim.stats()
    ringsim.reset_stats()
    torch.exp(x)
    replayed = ringsim.stats()
    assert replayed == python
    assert replayed["kernels"] == len(profile.reports) == 1


def test_a_fault_fires_at_its_kernel_when_calls_were_being_replayed() -> None:
    x = torch.ones(4, 64, device="ring")
    torch.neg(x)
    torch.neg(x)  # replayed
    faults.inject("wrong", faults.kernels_launched() + 2)
    try:
        first, second = torch.neg(x), torch.neg(x)
    finally:
        faults.clear()
    assert torch.equal(first.cpu(), -torch.ones(4, 64))
    assert not torch.equal(second.cpu(), -torch.ones(4, 64)), "the armed kernel ran unharmed"
    before = replay.launches()
    torch.neg(x)
    assert replay.launches() == before + 1, "calls stay in Python after the fault fired"


def test_an_error_raised_by_a_replayed_program_is_the_ops_own() -> None:
    a = torch.tensor([4, 9, 16], device="ring")
    torch.div(a, torch.tensor([1, 3, 4], device="ring"), rounding_mode="floor")
    zero = torch.tensor([1, 0, 4], device="ring")
    before = replay.launches()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a, zero, rounding_mode="floor")
    assert replay.launches() == before + 1, "the failing call was not the replayed one"
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.div(a.cpu(), zero.cpu(), rounding_mode="floor")


def test_an_overlapping_in_place_destination_goes_to_python() -> None:
    x = torch.arange(256, dtype=torch.float32).reshape(2, 128).to("ring")
    y = torch.ones(2, 128, device="ring")
    x.add_(y)
    x.add_(y)
    before = replay.launches()
    assert x.add_(x) is x  # full overlap: Python's rule (allowed, read before written)
    assert replay.launches() == before
    assert torch.equal(x.cpu(), 2 * (torch.arange(256.0).reshape(2, 128) + 2))


def test_ineligible_arguments_run_the_python_kernel() -> None:
    base = torch.randn(64, 64).to("ring")
    view = base.t()  # not contiguous: the kernel restickifies it first
    expected = torch.exp(base.cpu().t())
    before = replay.launches()
    for _ in range(2):
        assert torch.equal(torch.exp(view).cpu(), expected)
    assert replay.launches() == before
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        base + torch.ones(64, 64)


def test_a_call_with_aliased_arguments_records_no_recipe_for_distinct_ones() -> None:
    x = torch.randn(4, 32).to("ring")
    assert bool(torch.eq(x, x).all().item())
    a, b = torch.zeros(4, 32, device="ring"), torch.ones(4, 32, device="ring")
    for _ in range(2):  # recorded from distinct arguments, then replayed
        assert not bool(torch.eq(a, b).any().item())
