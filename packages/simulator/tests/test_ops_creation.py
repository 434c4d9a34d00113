"""Creation and random kernels: zeros/ones/full/arange through fill_ and arange.out; rand/randn from the device RNG."""

from __future__ import annotations

import pytest
import torch
from ringsim import profiling

DEVICE = "ring"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int64, torch.bool])
def test_zeros_ones_full(dtype: torch.dtype) -> None:
    assert torch.equal(torch.zeros(3, 70, dtype=dtype, device=DEVICE).cpu(), torch.zeros(3, 70, dtype=dtype))
    assert torch.equal(torch.ones(5, dtype=dtype, device=DEVICE).cpu(), torch.ones(5, dtype=dtype))
    value = True if dtype == torch.bool else 7
    assert torch.equal(
        torch.full((2, 2), value, dtype=dtype, device=DEVICE).cpu(), torch.full((2, 2), value, dtype=dtype)
    )


def test_fill_on_a_view_and_zero_like() -> None:
    d = torch.ones(4, 4, device=DEVICE)
    d[:, 1].fill_(3)
    expected = torch.ones(4, 4)
    expected[:, 1] = 3
    assert torch.equal(d.cpu(), expected)
    assert torch.equal(torch.zeros_like(d).cpu(), torch.zeros(4, 4))
    d.fill_(torch.tensor(2.0, device=DEVICE))
    assert torch.equal(d.cpu(), torch.full((4, 4), 2.0))


@pytest.mark.parametrize(
    ("args", "dtype"),
    [
        ((10,), torch.int64),
        ((2, 20, 3), torch.int64),
        ((0.0, 1.0, 0.1), torch.float32),
        ((-3, 5, 0.5), torch.float16),
        ((5000,), torch.float32),
    ],
)
def test_arange(args: tuple, dtype: torch.dtype) -> None:
    got = torch.arange(*args, dtype=dtype, device=DEVICE).cpu()
    expected = torch.arange(*args, dtype=torch.float64).to(dtype)
    assert got.shape == expected.shape
    assert torch.allclose(got.double(), expected.double(), rtol=2**-10, atol=0)


def test_arange_refuses_bool() -> None:
    with pytest.raises(NotImplementedError, match=r"arange\.start_out is not supported for dtype bool"):
        torch.arange(3, dtype=torch.bool, device=DEVICE)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_rand_and_randn_follow_the_device_seed(dtype: torch.dtype) -> None:
    torch.ring.manual_seed(1234)
    first = torch.rand(1000, dtype=dtype, device=DEVICE).cpu()
    normal = torch.randn(1000, dtype=dtype, device=DEVICE).cpu()
    torch.ring.manual_seed(1234)
    assert torch.equal(torch.rand(1000, dtype=dtype, device=DEVICE).cpu(), first)
    assert torch.equal(torch.randn(1000, dtype=dtype, device=DEVICE).cpu(), normal)
    assert float(first.min()) >= 0
    assert float(first.max()) <= 1
    assert 0.4 < float(first.float().mean()) < 0.6
    assert abs(float(normal.float().mean())) < 0.15
    assert 0.85 < float(normal.float().std()) < 1.15
    assert not torch.equal(torch.rand(1000, dtype=dtype, device=DEVICE).cpu(), first)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int64, torch.int32])
@pytest.mark.parametrize("args", [(-1, 3, 7), (0, 10, 5), (2, -3, 11), (0, 1, 1000), (5, 5, 1)])
def test_sequences_match_cpu_within_one_rounding(args: tuple[int, int, int], dtype: torch.dtype) -> None:
    """linspace/logspace run on one core in fp32 and round once, so they agree with CPU to the output dtype's ulp."""
    with profiling.profile() as prof:
        lin = torch.linspace(*args, dtype=dtype, device=DEVICE).cpu()
        log = torch.logspace(*args, dtype=dtype, device=DEVICE).cpu()
    assert [r.name for r in prof.reports] == ["linspace", "logspace"]
    tol = {"atol": 0, "rtol": 0} if not dtype.is_floating_point else {}
    torch.testing.assert_close(lin, torch.linspace(*args, dtype=dtype), **tol)
    torch.testing.assert_close(log, torch.logspace(*args, dtype=dtype), **tol, equal_nan=True)


def test_range_and_an_empty_sequence() -> None:
    assert torch.equal(torch.range(0, 4, 0.5, device=DEVICE).cpu(), torch.range(0, 4, 0.5))
    assert torch.linspace(0, 1, 0, device=DEVICE).shape == (0,)
