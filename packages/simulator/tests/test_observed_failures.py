"""Regressions from the upstream observation run: device bugs that upstream test files found. CPU eager is the
reference."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import ringsim
import torch
from ringsim.engine import compute

DEVICE = "ring"


# --- the shared zero buffer that shapes are inferred on holds whole items of every dtype -----------------------------


def test_cat_after_an_odd_sized_bool_cat_matches_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute, "_ZEROS", torch.zeros(0, dtype=torch.uint8))
    flags = torch.ones(7, dtype=torch.bool)
    torch.cat([flags.to(DEVICE), flags.to(DEVICE)])  # grows the zero buffer to 14 bytes
    x = torch.randn(1)
    torch.testing.assert_close(torch.stack([x.to(DEVICE), x.to(DEVICE)]).cpu(), torch.stack([x, x]))


# --- a byte mask index warns once per call, at the caller's line, as on CPU ------------------------------------------


def _byte_mask_warnings(device: str) -> list[str]:
    v = torch.ones(3, device=device)
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        v[mask]
        v[mask]
    # CPU's text ends with where in aten it was raised: "(Triggered internally at ...)"
    return [f"{w.filename}:{w.lineno}: {str(w.message).partition(' (Triggered')[0]}" for w in caught]


def test_byte_mask_indexing_warns_like_cpu() -> None:
    assert _byte_mask_warnings(DEVICE) == _byte_mask_warnings("cpu")


# --- index shape errors are CPU's: indices that do not broadcast, values that do not fit the indexed places ----------


def _raised(fn, device: str) -> tuple[type, str]:
    with pytest.raises((IndexError, RuntimeError)) as info:
        fn(device)
    return info.type, str(info.value)


def _mismatched_indices(device: str) -> None:
    torch.zeros(5, 5, device=device)[[0, 1], [0, 1, 2]]


def _false_with_a_list(device: str) -> None:
    torch.ones(2, 3, 4, device=device)[False, [0, 1], ...]


def _values_too_few(device: str) -> None:
    a = torch.arange(4, device=device)
    a[a > -1] = torch.tensor([], dtype=a.dtype, device=device)


def _values_too_many(device: str) -> None:
    a = torch.arange(4, device=device)[:1]
    a[a > -1] = torch.tensor([1, 2, 3], device=device)


@pytest.mark.parametrize("fn", [_mismatched_indices, _false_with_a_list, _values_too_few, _values_too_many])
def test_index_shape_errors_match_cpu(fn) -> None:
    assert _raised(fn, DEVICE) == _raised(fn, "cpu")


def test_values_with_leading_ones_still_assign() -> None:
    a, b = torch.arange(4), torch.arange(4, device=DEVICE)
    a[a > 1] = torch.tensor([[7, 8]])
    b[b > 1] = torch.tensor([[7, 8]], device=DEVICE)
    torch.testing.assert_close(b.cpu(), a)


# --- ldexp scales in float32 and rounds once, so float16 results at the ends of its range are CPU's ------------------


def test_ldexp_float16_range_ends_match_cpu() -> None:
    mantissas = torch.tensor([-2, 2**-10, 3], dtype=torch.half)
    exponents = torch.tensor([-25, 20, 2])
    result = torch.ldexp(mantissas.to(DEVICE), exponents.to(DEVICE))
    torch.testing.assert_close(result.cpu(), torch.ldexp(mantissas, exponents), rtol=0, atol=0)


# --- dim=[]: all/any reduce nothing (one result per element), nansum reduces every dim, as on CPU -------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("fn", [torch.all, torch.any, torch.nansum])
def test_empty_dim_list_reductions_match_cpu(fn, keepdim: bool) -> None:
    x = torch.tensor([[0.0, 1.0], [float("nan"), 3.0]])
    expected = fn(x, dim=[], keepdim=keepdim)
    torch.testing.assert_close(fn(x.to(DEVICE), dim=[], keepdim=keepdim).cpu(), expected, equal_nan=True)


# --- a complex scalar operand makes a complex result: refused by name, not a KeyError in the program builder ---------


@pytest.mark.parametrize(
    "fn", [lambda x: x**1j, lambda x: (2j) ** x, lambda x: x * (1 + 1j)], ids=["pow", "rpow", "mul"]
)
def test_complex_results_are_refused_as_unsupported_dtypes(fn) -> None:
    with pytest.raises(NotImplementedError, match=r"ring: aten::\S+ is not supported for dtype complex64"):
        fn(torch.rand(3, device=DEVICE))


# --- fill_/zero_ with a number write an overlapping (expanded, 0-stride) destination, as CPU's fill_.Scalar does -----


@pytest.mark.parametrize(("shape", "strides"), [((4, 3, 2), (10, 0, 3)), ((3, 2), (0, 0)), ((4, 3, 2), (10, 1, 2))])
def test_fill_of_an_overlapping_view_matches_cpu(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    def filled(device: str) -> torch.Tensor:
        base = torch.full((60,), 7.0, device=device)
        base.as_strided(shape, strides, 1).fill_(1.0)
        base.as_strided(shape, strides, 5).zero_()
        return base.cpu()

    torch.testing.assert_close(filled(DEVICE), filled("cpu"))


def test_fill_with_a_tensor_value_refuses_overlap_as_cpu_does() -> None:
    def fill(device: str) -> None:
        torch.zeros(3, device=device).expand(2, 3).fill_(torch.tensor(1.0, device=device))

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor") as cpu:
        fill("cpu")
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor") as ring:
        fill(DEVICE)
    assert str(ring.value) == str(cpu.value)


# --- fmod/remainder take a Python number in the tensor's reduced dtype, as CPU's kernels do --------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fn", [torch.fmod, torch.remainder])
def test_fmod_remainder_with_a_float_number_match_cpu(fn, dtype: torch.dtype) -> None:
    x = torch.linspace(-9, 9, 101).to(dtype)
    torch.testing.assert_close(fn(x.to(DEVICE), 2.3).cpu(), fn(x, 2.3), rtol=0, atol=0)
    torch.testing.assert_close(torch.remainder(2.3, x.to(DEVICE)).cpu(), torch.remainder(2.3, x), rtol=0, atol=0)


# --- trunc division in float16/bfloat16 truncates the quotient rounded to the dtype, as CPU's kernel does -----------


DIVISORS = {
    "tensor": lambda dtype: torch.tensor([9320.0, 119.0, 32.875, 2.0, 3.0], dtype=dtype),
    "one-element": lambda dtype: torch.tensor([3.3], dtype=dtype),
    "number": lambda dtype: 3.3,
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("divisor", DIVISORS)
def test_trunc_division_matches_cpu(dtype: torch.dtype, divisor: str) -> None:
    a = torch.tensor([-27952.0, 25104.0, -27904.0, 7.0, -5.5], dtype=dtype)
    b = DIVISORS[divisor](dtype)
    on_ring = b.to(DEVICE) if isinstance(b, torch.Tensor) else b
    result = torch.div(a.to(DEVICE), on_ring, rounding_mode="trunc")
    torch.testing.assert_close(result.cpu(), torch.div(a, b, rounding_mode="trunc"), rtol=0, atol=0)


# --- an out= tensor holding elements of the wrong shape is resized with torch's deprecation warning -----------------


def _resize_warnings(device: str) -> list[str]:
    a = torch.ones(3, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.add(a, a, out=torch.empty(0, device=device))
        torch.add(a, a, out=torch.empty(2, 2, device=device))
    return [str(w.message).partition(" (Triggered")[0] for w in caught]


def test_out_resize_warns_like_cpu() -> None:
    assert _resize_warnings(DEVICE) == _resize_warnings("cpu")


# --- a call torch's meta function refuses raises CPU's error for it (type and words) --------------------------------

REFUSED_CALLS = {
    "roll-dim": lambda t: t.roll(1, 4),
    "roll-align": lambda t: t.roll(shifts=(1, 2), dims=(1,)),
    "sum-repeated-dim": lambda t: torch.sum(t, dim=(0, 0)),
    "mean-repeated-negative-dim": lambda t: torch.mean(t, dim=(0, -4)),
}


@pytest.mark.parametrize("name", REFUSED_CALLS)
def test_refused_calls_raise_cpus_error(name: str) -> None:
    fn = REFUSED_CALLS[name]
    x = torch.randn(3, 3, 3, 3)
    with pytest.raises((RuntimeError, IndexError)) as cpu:
        fn(x)
    with pytest.raises(cpu.type) as ring:
        fn(x.to(DEVICE))
    assert str(ring.value) == str(cpu.value)


# --- (values, indices) out= tensors of the wrong dtype are refused with CPU's error ----------------------------------

WRONG_OUTS = {
    "max-values": lambda d: torch.max(torch.ones(5, 5, device=d), 0, out=(_out(d, torch.int32), _out(d, torch.int64))),
    "min-indices": lambda d: torch.min(torch.ones(5, 5, device=d), 0, out=(_out(d, torch.float32), _out(d))),
    "mode-values": lambda d: torch.mode(
        torch.ones(5, dtype=torch.uint8, device=d), -1, True, out=(_out(d, torch.int8), _out(d, torch.int64))
    ),
}


def _out(device: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.empty(5, dtype=dtype, device=device)


@pytest.mark.parametrize("name", WRONG_OUTS)
def test_wrong_out_dtypes_raise_cpus_error(name: str) -> None:
    with pytest.raises(RuntimeError) as cpu:
        WRONG_OUTS[name]("cpu")
    with pytest.raises(RuntimeError) as ring:
        WRONG_OUTS[name](DEVICE)
    assert str(ring.value) == str(cpu.value)


# --- a reduction along a dim of a tensor with more than 64 dims is refused, as CPU's dim mask requires -----------


@pytest.mark.parametrize("fn", [torch.argmax, torch.sum, torch.logsumexp, torch.amin])
def test_reductions_along_a_dim_need_at_most_64_dims(fn) -> None:
    with pytest.raises(RuntimeError, match="only tensors with up to 64 dims are supported"):
        fn(torch.ones([1] * 65, device=DEVICE), dim=0)


# --- cat keeps the memory format its inputs share, as CPU's cat does --------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, 3])
def test_cat_of_channels_last_inputs_is_channels_last(dim: int) -> None:
    x = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    result = torch.cat((x.to(DEVICE), x.to(DEVICE)), dim)
    expected = torch.cat((x, x), dim)
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0)


def test_cat_of_mixed_formats_is_contiguous() -> None:
    x = torch.randn(2, 3, 4, 4)
    result = torch.cat((x.to(DEVICE), x.contiguous(memory_format=torch.channels_last).to(DEVICE)))
    assert result.is_contiguous()


# --- nonzero_static (torch 2.14's combinations calls it): CPU's rows, truncation and fill, with its out= form --------

_NONZERO = torch.tensor([[1, 0, 2], [0, 0, 3], [4, 0, 0]])
NONZERO_STATIC = {
    "pads": lambda d: torch.nonzero_static(_NONZERO.to(d), size=7),
    "pads-with-a-fill-value": lambda d: torch.nonzero_static(_NONZERO.to(d), size=6, fill_value=9),
    "exact": lambda d: torch.nonzero_static(_NONZERO.to(d), size=4),
    "truncates": lambda d: torch.nonzero_static(_NONZERO.to(d), size=2, fill_value=5),
    "size-0": lambda d: torch.nonzero_static(_NONZERO.to(d), size=0),
    "0-dim-nonzero": lambda d: torch.nonzero_static(torch.tensor(2.5, device=d), size=3),
    "0-dim-zero": lambda d: torch.nonzero_static(torch.tensor(0, device=d), size=3),
    "empty": lambda d: torch.nonzero_static(torch.zeros(0, 3, device=d), size=4),
    "all-zero": lambda d: torch.nonzero_static(torch.zeros(2, 5, device=d), size=3, fill_value=-7),
    "transposed": lambda d: torch.nonzero_static(_NONZERO.to(d).t(), size=5),
    "out-resized": lambda d: torch.nonzero_static(
        _NONZERO.to(d), size=6, out=torch.empty(0, dtype=torch.int64, device=d)
    ),
    "out-in-place": lambda d: torch.nonzero_static(
        _NONZERO.to(d), size=3, out=torch.full((3, 2), 8, dtype=torch.int64, device=d)
    ),
}


@pytest.mark.parametrize("name", NONZERO_STATIC)
def test_nonzero_static_matches_cpu(name: str) -> None:
    result = NONZERO_STATIC[name](DEVICE)
    assert result.device.type == DEVICE
    torch.testing.assert_close(result.cpu(), NONZERO_STATIC[name]("cpu"), rtol=0, atol=0)


@pytest.mark.parametrize(
    "dtype",
    [
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    ],
)
@pytest.mark.parametrize("size", [0, 10, 40, 200])
def test_nonzero_static_of_each_dtype_matches_cpu(dtype: torch.dtype, size: int) -> None:
    x = (torch.rand(4, 5, 6) > 0.6).to(dtype) * (torch.randn(4, 5, 6) * 3).to(dtype)
    for _ in range(2):  # the second call is the native replay's
        expected = torch.nonzero_static(x, size=size)
        torch.testing.assert_close(torch.nonzero_static(x.to(DEVICE), size=size).cpu(), expected, rtol=0, atol=0)
        x = x.flip(0)


NONZERO_STATIC_REFUSED = {
    "negative-size": lambda d: torch.nonzero_static(torch.ones(3, device=d), size=-1),
    "out-of-the-wrong-dtype": lambda d: torch.nonzero_static(
        torch.ones(3, device=d), size=2, out=torch.empty(2, 1, device=d)
    ),
}


@pytest.mark.parametrize("name", NONZERO_STATIC_REFUSED)
def test_nonzero_static_refuses_what_cpu_refuses(name: str) -> None:
    with pytest.raises(RuntimeError) as cpu:
        NONZERO_STATIC_REFUSED[name]("cpu")
    with pytest.raises(RuntimeError) as ring:
        NONZERO_STATIC_REFUSED[name](DEVICE)
    assert str(ring.value) == str(cpu.value)


def test_nonzero_static_out_warns_like_cpu_when_resizing() -> None:
    def warned(device: str) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.nonzero_static(_NONZERO.to(device), size=4, out=torch.empty(3, dtype=torch.int64, device=device))
        return [str(w.message).partition(" (Triggered")[0] for w in caught]

    assert warned(DEVICE) == warned("cpu")


@pytest.mark.parametrize(("r", "with_replacement"), [(2, False), (3, False), (3, True), (2, True)])
def test_nonzero_static_as_torch_2_14_combinations_calls_it(r: int, with_replacement: bool) -> None:
    """torch 2.14's combinations: an r-dim triangular mask, nonzero_static of its known count, then an index."""

    def combinations(device: str) -> torch.Tensor:
        x = torch.arange(5.0, device=device)
        axis = torch.arange(5, device=device)
        grids = [axis.view([-1 if i == j else 1 for j in range(r)]).expand([5] * r) for i in range(r)]
        mask = torch.full([5] * r, True, device=device)
        for a, b in itertools.pairwise(grids):
            mask.mul_(a <= b if with_replacement else a < b)
        size = math.comb(5 + r - 1, r) if with_replacement else math.comb(5, r)
        return x[torch.nonzero_static(mask, size=size)]

    expected = torch.combinations(torch.arange(5.0), r, with_replacement=with_replacement)
    torch.testing.assert_close(combinations(DEVICE).cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(combinations("cpu"), expected, rtol=0, atol=0)


def test_nonzero_static_is_in_the_capabilities_export() -> None:
    ops = {op["name"]: [d["name"] for d in op.get("dtypes", ())] for op in ringsim.capabilities()["aten_ops"]}
    assert ops["aten::nonzero"]
    assert ops["aten::nonzero_static"] == ops["aten::nonzero"]  # every dtype nonzero takes
    assert ops["aten::nonzero_static.out"] == ops["aten::nonzero"]
    served = {op["name"]: op["dtypes"] for op in ringsim.capabilities()["supported_ops"]}
    assert served["nonzero_static"] == served["nonzero"]


# --- a non-contiguous index tensor (test_noncontiguous_samples of index_put): read contiguous, not refused ---------


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_a_noncontiguous_index(accumulate: bool) -> None:
    index = torch.tensor([[0, 9], [2, 9]])[:, 0]
    values = torch.arange(10.0).reshape(2, 5)
    expected = torch.zeros(4, 5).index_put_((index,), values, accumulate=accumulate)
    device_index = torch.tensor([[0, 9], [2, 9]], device=DEVICE)[:, 0]
    assert not device_index.is_contiguous()
    got = torch.zeros(4, 5, device=DEVICE).index_put_((device_index,), values.to(DEVICE), accumulate=accumulate)
    assert torch.equal(got.cpu(), expected)
    assert torch.equal(got[device_index].cpu(), expected[index])
