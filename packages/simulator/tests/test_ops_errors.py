"""What the device does not do fails loudly, naming the op, the dtype and the device: never a silent CPU fallback."""

from __future__ import annotations

import re

import pytest
import torch

DEVICE = "ring"


def ring(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(shape, dtype=dtype).to(DEVICE)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64])
@pytest.mark.parametrize(
    ("call", "op"),
    [
        (lambda x: x + x, "add.Tensor"),
        (lambda x: x * 2, "mul.Tensor"),
        (lambda x: torch.exp(x), "exp"),
        (lambda x: x.sum(0), "sum.dim_IntList"),
        (lambda x: x @ x, "mm"),
        (lambda x: torch.softmax(x, -1), "_softmax"),
        (lambda x: torch.cat([x, x]), "cat"),
    ],
    ids=["add", "mul", "exp", "sum", "mm", "softmax", "cat"],
)
def test_registered_op_refuses_an_unsupported_dtype_by_name(call, op: str, dtype: torch.dtype) -> None:
    x = torch.empty(2, 2, dtype=dtype, device=DEVICE)
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(NotImplementedError) as info:
        call(x)
    message = str(info.value)
    assert message.startswith(f"ring: aten::{op} is not supported for dtype {name} (supported: ")
    assert "float16" in message
    assert "\n" not in message


def test_integer_arithmetic_is_refused() -> None:
    with pytest.raises(NotImplementedError, match=r"^ring: aten::add.Tensor is not supported for dtype int64"):
        ring(3, dtype=torch.int64) + ring(3, dtype=torch.int64)


@pytest.mark.parametrize(
    ("call", "op"),
    [
        (lambda x: torch.fft.fft(x), "_fft_r2c"),
        (lambda x: torch.sort(x), "sort.values_stable"),
        (lambda x: torch.cumsum(x, 0), "cumsum.out"),
        (lambda x: torch.topk(x, 1), "topk.values"),
        (lambda x: torch.nn.functional.conv1d(x.view(1, 1, 4), x.view(1, 1, 4)), "convolution_overrideable"),
    ],
    ids=["fft", "sort", "cumsum", "topk", "conv1d"],
)
def test_unregistered_op_is_refused_by_name(call, op: str) -> None:
    with pytest.raises(NotImplementedError) as info:
        call(ring(4))
    assert re.fullmatch(
        rf"ring: aten::{re.escape(op)} is not implemented on this device \(see `ringsim capabilities` for the op set\)",
        str(info.value),
    )


def test_no_host_fallback_leaves_the_destination_untouched() -> None:
    out = ring(3, dtype=torch.float64)
    with pytest.raises(NotImplementedError):
        torch.add(out, out, out=out)
    assert torch.equal(out.cpu(), torch.ones(3, dtype=torch.float64))


def test_host_tensor_mixed_in_is_refused() -> None:
    with pytest.raises(RuntimeError, match="same device"):
        torch.ops.aten.add.Tensor(ring(3), torch.ones(3))


def test_a_row_too_long_for_one_scratchpad_is_refused_by_name() -> None:
    x = torch.empty(1, 1 << 20, device=DEVICE)  # one softmax row of 4 MiB: more than a core's scratchpad
    with pytest.raises(NotImplementedError, match=r"^ring: aten::_softmax: the operands of one row need more than"):
        torch.softmax(x, -1)
