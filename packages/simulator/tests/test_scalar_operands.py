"""Host scalars and scalar-first overloads as torch allows them, and an op's own refusal surfacing as on CPU."""

from __future__ import annotations

import pytest
import torch

DEVICE = "ring"


@pytest.mark.parametrize(
    "call",
    [
        lambda s, x: s + x,
        lambda s, x: s - x,
        lambda s, x: s * x,
        lambda s, x: torch.where(x > 0, s, x),
        lambda s, x: torch.div(x, s, rounding_mode="floor"),
        lambda s, x: torch.div(x.half(), s.double()),
    ],
    ids=["add", "sub", "mul", "where", "div_floor", "div_promotes"],
)
def test_a_host_zero_dim_tensor_mixes_with_device_tensors_anywhere(call) -> None:
    x = torch.randn(7)
    s = torch.tensor(2.5)
    result = call(s, x.to(DEVICE))
    assert result.device.type == DEVICE
    expected = call(s, x)
    assert result.dtype == expected.dtype
    assert torch.equal(result.cpu(), expected)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: torch.pow(2, x),
        lambda x: torch.remainder(7, x),
        lambda x: torch.bitwise_and(6, x),
        lambda x: torch.bitwise_left_shift(1, x),
        lambda x: torch.xlogy(2.0, x.float()),
    ],
    ids=["pow", "remainder", "bitwise_and", "shift", "xlogy"],
)
def test_scalar_first_overloads_run_on_the_device(call) -> None:
    x = torch.arange(1, 6)
    assert torch.equal(call(x.to(DEVICE)).cpu(), call(x))


def test_an_op_refusing_its_arguments_raises_torchs_error_not_a_program_error() -> None:
    a, b = torch.randn(4), torch.randn(4).half()
    with pytest.raises(RuntimeError, match=r"^heaviside is not yet implemented for tensors with different dtypes"):
        torch.heaviside(a.to(DEVICE), b.to(DEVICE))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.arange(3).to(DEVICE) // torch.zeros(3, dtype=torch.int64).to(DEVICE)


def test_the_default_dtype_decides_an_integer_and_float_result_on_every_call() -> None:
    """The same call under another default dtype has another result dtype: no cached program may keep the first."""
    u = torch.tensor([0, 0, 1], dtype=torch.uint8)
    seen = []
    try:
        for default in (torch.float32, torch.float64, torch.float32):
            torch.set_default_dtype(default)
            seen.append(((u.to(DEVICE) + 5.5).dtype, (u + 5.5).dtype))
    finally:
        torch.set_default_dtype(torch.float32)
    assert seen == [(torch.float32,) * 2, (torch.float64,) * 2, (torch.float32,) * 2]
