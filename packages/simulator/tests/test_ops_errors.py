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
    ],
    ids=["add", "mul", "exp", "sum", "mm", "softmax"],
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


def test_integer_work_is_exact_but_float_math_on_integers_is_refused() -> None:
    x = torch.arange(-5, 6, dtype=torch.int64)
    assert torch.equal((ring(11, dtype=torch.int64) * x.to(DEVICE) - x.to(DEVICE)).cpu(), x * 0)
    with pytest.raises(NotImplementedError, match=r"^ring: aten::exp is not supported for dtype int64"):
        torch.exp(ring(3, dtype=torch.int64))


def test_float64_is_held_and_compared_but_not_computed_in() -> None:
    x = torch.tensor([1.5, -2.0, float("nan")], dtype=torch.float64)
    d = x.to(DEVICE)
    torch.testing.assert_close(torch.cat([d, d]).cpu(), torch.cat([x, x]), equal_nan=True, rtol=0, atol=0)
    assert torch.equal((d > 0).cpu(), x > 0)
    assert d.abs().max().isnan().item()
    with pytest.raises(NotImplementedError, match=r"^ring: aten::add.Tensor is not supported for dtype float64"):
        d + d


@pytest.mark.parametrize(
    ("call", "op"),
    [
        (lambda x: torch.fft.fft(x), "_fft_r2c"),
        (lambda x: torch.linalg.inv(x.view(2, 2)), "linalg_inv_ex.inverse"),
        (lambda x: torch.nn.functional.grid_sample(x.view(1, 1, 2, 2), x.view(1, 1, 2, 2)), "grid_sampler_2d"),
        (lambda x: torch.polar(x, x), "polar.out"),
        (lambda x: torch.nn.functional.conv1d(x.view(1, 1, 4), x.view(1, 1, 4)), "convolution_overrideable"),
    ],
    ids=["fft", "inv", "grid_sample", "polar", "conv1d"],
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


@pytest.mark.parametrize(
    "call",
    [torch.copysign, torch.add, torch.maximum],
    ids=["copysign", "add", "maximum"],
)
def test_a_host_scalar_leading_the_call_does_not_lend_its_dtype(call) -> None:
    x = ring(3, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="for dtype float64"):
        call(x, torch.tensor(1.0))
    with pytest.raises(NotImplementedError, match="for dtype float64"):
        call(torch.tensor(1.0), x)
    assert call(torch.tensor(1.0, dtype=torch.float64), ring(3)).dtype == torch.float32


def test_a_row_too_long_for_one_scratchpad_is_refused_by_name() -> None:
    x = torch.empty(1, 1 << 20, device=DEVICE)  # one softmax row of 4 MiB: more than a core's scratchpad
    with pytest.raises(NotImplementedError, match=r"^ring: aten::_softmax: the operands of one row need more than"):
        torch.softmax(x, -1)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, out: torch.neg(t, out=out),  # a unary op's out must have the input's dtype
        lambda t, out: torch.floor(t, out=out),
        lambda t, out: torch.add(t, 1.5, out=out.to(torch.int64)),  # an unsafe cast into out
        lambda t, out: t.to(torch.int32).add_(1.5),  # an in-place op cannot hold its result
    ],
    ids=["neg", "floor", "add-out", "add_"],
)
def test_a_result_dtype_the_destination_cannot_take_is_refused_in_cpu_words(call) -> None:
    with pytest.raises(RuntimeError) as on_cpu:
        call(torch.ones(3), torch.empty(0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=f"^{re.escape(str(on_cpu.value))}$"):
        call(ring(3), torch.empty(0, dtype=torch.float64, device=DEVICE))


@pytest.mark.parametrize(
    "call",
    [
        lambda t: torch.median(t, 1),
        lambda t: torch.nanmedian(t, 1),
        lambda t: torch.kthvalue(t, 1, 1),
        lambda t: torch.mode(t, 1),
    ],
    ids=["median", "nanmedian", "kthvalue", "mode"],
)
def test_a_value_for_each_empty_row_is_refused_in_cpu_words(call) -> None:
    with pytest.raises(IndexError) as on_cpu:
        call(torch.empty(2, 0, 4))
    with pytest.raises(IndexError, match=f"^{re.escape(str(on_cpu.value))}$"):
        call(torch.empty(2, 0, 4).to(DEVICE))
    assert call(torch.empty(2, 0, 4).to(DEVICE).transpose(1, 2))[0].shape == (2, 0)  # over a full dim: no rows


@pytest.mark.parametrize("op", [torch.floor_divide, torch.remainder, torch.fmod], ids=lambda op: op.__name__)
def test_a_destination_cpu_accepts_takes_the_cast_result_integer_division_included(op) -> None:
    a, b = torch.tensor([7, -7, 9], dtype=torch.int32), torch.tensor([2, 2, 4], dtype=torch.int32)
    expected = op(a, b, out=torch.empty(3, dtype=torch.int64))
    got = op(a.to(DEVICE), b.to(DEVICE), out=torch.empty(3, dtype=torch.int64, device=DEVICE))
    assert torch.equal(got.cpu(), expected)  # asking CPU about the cast must not divide by zero


def test_a_lossy_in_place_cast_of_0_dim_tensors_is_refused_as_cpu_refuses_it() -> None:
    # meta's mul_ lets an int32 0-dim *= a float32 0-dim through; CPU refuses it
    x, y = torch.tensor(1.5).to("ring"), torch.tensor(3, dtype=torch.int32).to("ring")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        y *= x
    x *= y
    assert x.cpu().item() == 4.5


@pytest.mark.parametrize(
    "call",
    [
        lambda t: torch.special.xlog1py(t, 5),
        lambda t: torch.special.xlog1py(5, t),
        lambda t: torch.xlogy(5.0, t),
    ],
    ids=["tensor_number", "number_tensor", "xlogy_number_tensor"],
)
def test_a_number_torch_wraps_for_a_tensor_parameter_is_computed(call) -> None:
    # torch hands the kernel `special_xlog1py(Tensor, Tensor)` its wrapped scalar as a number
    host = torch.tensor([0.5, 2.0, 3.0])
    got = call(host.to("ring"))
    assert got.dtype == call(host).dtype
    torch.testing.assert_close(got.cpu(), call(host))
