"""torch's own test machinery on ring tensors, as upstream tests use it: the comparisons, make_tensor, printing and the
reductions they run on the device under test. The same call on CPU tensors is the reference, message for message."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from ringsim import profiling
from torch import _tensor_str
from torch.testing import make_tensor
from torch.testing._internal.common_utils import TestCase

DEVICE = "ring"
DTYPES = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
)
FLOATS = DTYPES[:3]
INTS = DTYPES[3:8]
Check = Callable[..., None]
COMPARERS: dict[str, Check] = {"assert_close": torch.testing.assert_close, "assertEqual": TestCase().assertEqual}


def ids(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def sample(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    """Values every dtype holds exactly (small integers for integer and bool dtypes), on CPU."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(0, 100, shape).to(dtype)


def perturbed(t: torch.Tensor) -> torch.Tensor:
    """`t` with its first and last elements changed: a few mismatches, as a failing upstream test usually has."""
    out = t.clone()
    flat = out.view(-1)
    for i in {0, flat.numel() - 1}:
        flat[i] = ~flat[i] if t.dtype == torch.bool else flat[i] + 3
    return out


def ring(value: Any) -> Any:
    """`value` with its tensors moved to the device (nested in tuples and lists as comparisons take them)."""
    if isinstance(value, torch.Tensor):
        return value.to(DEVICE)
    if isinstance(value, (list, tuple)):
        return type(value)(ring(v) for v in value)
    return value


def failure(check: Check, actual: Any, expected: Any, **options: Any) -> str | None:
    """The AssertionError message of one comparison, None when it passes (any other exception propagates)."""
    try:
        check(actual, expected, **options)
    except AssertionError as error:
        return str(error)
    return None


def same_verdict(check: Check, actual: Any, expected: Any, **options: Any) -> str | None:
    """Compare on ring and on CPU; the device must give CPU's verdict, word for word. Returns that verdict."""
    on_cpu = failure(check, actual, expected, **options)
    assert failure(check, ring(actual), ring(expected), **options) == on_cpu
    return on_cpu


# --- assert_close and TestCase.assertEqual --------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.mark.parametrize("comparer", sorted(COMPARERS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(7, 9), (), (0, 3), (1000, 500)], ids=["small", "0-dim", "empty", "large"])
def test_equal_tensors_pass_and_unequal_ones_fail_as_on_cpu(
    comparer: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    check = COMPARERS[comparer]
    a = sample(dtype, *shape)
    assert same_verdict(check, a, a.clone()) is None
    if a.numel():
        message = same_verdict(check, a, perturbed(a))
        assert message is not None
        assert message.startswith(("Tensor-likes are not", "Scalars are not"))


@pytest.mark.parametrize("comparer", sorted(COMPARERS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_non_contiguous_operands(comparer: str, dtype: torch.dtype) -> None:
    a = sample(dtype, 9, 7)
    assert not ring(a.t()).is_contiguous()
    assert same_verdict(COMPARERS[comparer], a.t(), a.t().contiguous()) is None
    assert same_verdict(COMPARERS[comparer], a.t(), perturbed(a).t()) is not None


@pytest.mark.parametrize("comparer", sorted(COMPARERS))
@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
def test_nan_inf_and_equal_nan(comparer: str, dtype: torch.dtype) -> None:
    check = COMPARERS[comparer]
    a = sample(dtype, 6, 5)
    a[1, 1], a[2, 2], a[3, 3] = float("nan"), float("inf"), -float("inf")
    b = a.clone()
    assert same_verdict(check, a, b, equal_nan=True) is None
    if comparer == "assert_close":  # assertEqual treats NaN as equal to NaN by default
        assert "Mismatched elements: 1 / 30" in same_verdict(check, a, b)
    b[2, 2] = -float("inf")
    assert same_verdict(check, a, b, equal_nan=True) is not None
    nan = torch.tensor(float("nan"), dtype=dtype)
    assert same_verdict(check, nan, nan.clone(), equal_nan=True) is None


@pytest.mark.parametrize("comparer", sorted(COMPARERS))
@pytest.mark.parametrize("dtype", [*FLOATS, *INTS], ids=ids)
def test_atol_and_rtol(comparer: str, dtype: torch.dtype) -> None:
    check = COMPARERS[comparer]
    a = sample(dtype, 4, 8)
    b = a + 2 if not dtype.is_floating_point else a + 0.25
    assert same_verdict(check, a, b, atol=3, rtol=0) is None
    assert same_verdict(check, a, b, atol=0.125, rtol=0) is not None
    assert same_verdict(check, a, a * 3, atol=0, rtol=0.5) is not None
    assert same_verdict(check, a, a * 1.001 if dtype == torch.float32 else a, atol=0, rtol=0.01) is None


@pytest.mark.parametrize("comparer", sorted(COMPARERS))
@pytest.mark.parametrize("dtype", INTS, ids=ids)
def test_integer_extremes(comparer: str, dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    a = torch.tensor([info.min, info.max, 1], dtype=dtype)
    message = same_verdict(COMPARERS[comparer], a, a.flip(0))
    assert message is not None
    assert message.startswith("Tensor-likes are not equal!")


@pytest.mark.parametrize("comparer", sorted(COMPARERS))
def test_custom_message_and_scalars(comparer: str) -> None:
    check = COMPARERS[comparer]
    a = sample(torch.float32, 3, 4)
    assert same_verdict(check, a, perturbed(a), msg="custom") is not None
    assert same_verdict(check, torch.tensor(1.5), torch.tensor(2.5)).startswith("Scalars are not close!")
    assert same_verdict(check, torch.tensor(3), torch.tensor(4)).startswith("Scalars are not equal!")


@pytest.mark.parametrize(
    ("comparer", "options"),
    [
        ("assert_close", {}),
        ("assert_close", {"check_dtype": False}),
        ("assertEqual", {}),
        ("assertEqual", {"exact_dtype": False}),
    ],
)
@pytest.mark.parametrize(("left", "right"), [(torch.float32, torch.float16), (torch.int64, torch.float32)])
def test_mismatched_dtypes(comparer: str, options: dict[str, Any], left: torch.dtype, right: torch.dtype) -> None:
    a = torch.tensor([1, 2, 3], dtype=left)
    check = COMPARERS[comparer]
    same_verdict(check, a, a.to(right), **options)
    same_verdict(check, a, (a + 1).to(right), **options)


def test_mismatched_shapes_and_strides() -> None:
    a = torch.zeros(2, 3)
    for check in COMPARERS.values():
        assert "shape" in same_verdict(check, a, torch.zeros(3, 2))
    assert "stride()" in same_verdict(torch.testing.assert_close, a, torch.zeros(3, 2).t(), check_stride=True)


def test_mismatched_devices() -> None:
    """assert_close checks the device; assertEqual (exact_device=False) compares a device result with a CPU one."""
    x = torch.tensor([1.0, 2.0, 3.0])
    expected = "The values for attribute 'device' do not match: ring:0 != cpu."
    assert failure(torch.testing.assert_close, ring(x), x) == expected
    assert failure(COMPARERS["assertEqual"], ring(x), x, exact_device=True) == expected
    assert failure(torch.testing.assert_close, ring(x), x, check_device=False) is None
    for check, options in ((torch.testing.assert_close, {"check_device": False}), (COMPARERS["assertEqual"], {})):
        assert failure(check, ring(x), x, **options) is None
        assert failure(check, ring(x), x + 1, **options) == failure(check, x, x + 1, **options)


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (torch.tensor([1.0, 2.0, 3.0]), [1.0, 2.0, 3.0]),
        (torch.tensor([1.0, 2.0, 3.0]), [1.0, 2.0, 4.0]),
        (torch.tensor(3), 3),
        (torch.tensor(3), 4),
        (torch.tensor(3.5), 3.5),
        ((torch.tensor([1, 2]), torch.tensor([True])), (torch.tensor([1, 2]), torch.tensor([True]))),
        ((torch.tensor([1, 2]), torch.tensor([True])), (torch.tensor([1, 3]), torch.tensor([True]))),
    ],
    ids=["list", "list-unequal", "int", "int-unequal", "float", "tuple", "tuple-unequal"],
)
def test_assert_equal_against_python_values(actual: Any, expected: Any) -> None:
    same_verdict(COMPARERS["assertEqual"], actual, expected)


# --- make_tensor ----------------------------------------------------------------------------------------------------

MAKE_OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "low-high": {"low": 2, "high": 5},
    "exclude_zero": {"exclude_zero": True},
    "noncontiguous": {"noncontiguous": True},
    "all": {"low": 0, "high": 3, "exclude_zero": True, "noncontiguous": True},
}


@pytest.mark.parametrize("option", sorted(MAKE_OPTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(5, 7), (), (0, 3), (300, 400)], ids=["small", "0-dim", "empty", "large"])
def test_make_tensor_on_ring_draws_what_cpu_draws(option: str, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    """Seeded alike, the device's generator gives make_tensor the same values as CPU's."""
    options = dict(MAKE_OPTIONS[option])
    if dtype == torch.bool:
        options.pop("low", None), options.pop("high", None)
    torch.manual_seed(7)
    t = make_tensor(shape, dtype=dtype, device=DEVICE, **options)
    torch.manual_seed(7)
    expected = make_tensor(shape, dtype=dtype, device="cpu", **options)
    assert t.device == torch.device(DEVICE, 0)
    assert t.dtype == dtype
    assert tuple(t.shape) == shape
    assert t.is_contiguous() == expected.is_contiguous()
    if options.get("noncontiguous") and t.numel() > 1:
        assert not t.is_contiguous()
    values = t.cpu()
    assert torch.equal(values, expected)
    if options.get("exclude_zero"):
        assert bool((values != 0).all())
    if "low" in options and dtype != torch.bool and values.numel():
        assert bool((values >= options["low"]).all())
        assert bool((values <= options["high"]).all())


@pytest.mark.parametrize("option", sorted(MAKE_OPTIONS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128], ids=ids)
@pytest.mark.parametrize("shape", [(5, 7), (0, 3)], ids=["small", "empty"])
def test_make_tensor_refuses_what_the_device_does_not_compute(
    option: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    """float64 is held, not drawn (complex128 is drawn through its float64 real view): one line names op and dtype."""
    with pytest.raises(NotImplementedError) as raised:
        make_tensor(shape, dtype=dtype, device=DEVICE, **MAKE_OPTIONS[option])
    pattern = r"ring: aten::uniform_ is not supported for dtype float64 \(supported: bfloat16, float16, float32\)"
    assert re.fullmatch(pattern, str(raised.value))


@pytest.mark.parametrize("option", ["default", "low-high", "noncontiguous"])
def test_complex_data_is_drawn_through_its_real_view(option: str) -> None:
    """The device holds complex data and computes on its real view like any float tensor (make_tensor fills a complex
    tensor through view_as_real); complex arithmetic is what it refuses, by name."""
    torch.manual_seed(7)
    t = make_tensor((5, 7), dtype=torch.complex64, device=DEVICE, **MAKE_OPTIONS[option])
    torch.manual_seed(7)
    assert torch.equal(t.cpu(), make_tensor((5, 7), dtype=torch.complex64, device="cpu", **MAKE_OPTIONS[option]))
    with pytest.raises(NotImplementedError, match=r"^ring: aten::add\.Tensor is not supported for dtype complex64"):
        t + t
    with pytest.raises(NotImplementedError, match=r"^ring: aten::eq\.Scalar is not supported for dtype complex64"):
        make_tensor((5, 7), dtype=torch.complex64, device=DEVICE, exclude_zero=True)


# --- printing -------------------------------------------------------------------------------------------------------

_SUFFIX = re.compile(r",\s+(?=\w+=)")


def with_device_suffix(cpu: torch.Tensor) -> str:
    """CPU's repr with ``device='ring:0'`` as the first suffix, wrapped by torch's own suffix layout."""
    text = repr(cpu)
    first = re.search(r",\s+\w+=", text)
    body, rest = (text[: first.start()], text[first.start() : -1]) if first else (text[:-1], "")
    suffixes = [s for s in _SUFFIX.split(rest) if s]
    return _tensor_str._add_suffixes(body, [f"device='{DEVICE}:0'", *suffixes], len("tensor("), False)


def _printed_floats(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    special = [1.5, float("nan"), float("inf"), -float("inf"), 0.0, -0.0]
    return {
        "small": torch.randn(3, 4),
        "nan-inf": torch.tensor(special),
        "large": torch.tensor([1e4, 3.0, 6.5e4]),
        "sci": torch.tensor([1e-5, 1e3, 2.0]),
        "tiny": torch.tensor([1e-30, 1.0]),
        "integral": torch.tensor([1.0, 2.0, -3.0]),
        "0-dim": torch.tensor(2.5),
        "0-dim-nan": torch.tensor(float("nan")),
        "all-nan": torch.full((5,), float("nan")),
        "empty": torch.empty(0),
        "empty-2d": torch.empty(0, 3),
        "wide": torch.randn(4, 30) * 1000,
        "summarized": torch.randn(2000),
        "summarized-3d": torch.randn(11, 12, 13),
        "summarized-large": torch.randn(1024, 1024) * 1e5,
        "non-contiguous": torch.randn(6, 8).t(),
    }


def _printed_ints(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    info = torch.iinfo(dtype)
    return {
        "small": torch.randint(0, 100, (3, 4)),
        "extremes": torch.tensor([info.min, info.max, 0]),
        "0-dim": torch.tensor(7),
        "empty": torch.empty(0),
        "summarized": torch.randint(0, 100, (2000,)),
        "summarized-2d": torch.randint(0, 100, (100, 100)),
        "non-contiguous": torch.randint(0, 100, (6, 8)).t(),
    }


def printed_cases() -> Iterator[Any]:
    for dtype in DTYPES:
        if dtype == torch.bool:
            made = {"small": torch.rand(3, 4) > 0.5, "0-dim": torch.tensor(True), "empty": torch.empty(0)}
            made["summarized"] = torch.rand(64, 64) > 0.5
        else:
            made = (_printed_floats if dtype.is_floating_point else _printed_ints)(dtype)
        for name, t in made.items():
            yield pytest.param(t.to(dtype), id=f"{ids(dtype)}-{name}")
    yield pytest.param(torch.randn(40, 40, dtype=torch.float64), id="float64-held")


@pytest.mark.parametrize("cpu", list(printed_cases()))
def test_printing_is_cpus_with_the_device_suffix(cpu: torch.Tensor, capsys: pytest.CaptureFixture[str]) -> None:
    t = cpu.to(DEVICE) if cpu.is_contiguous() else cpu.t().to(DEVICE).t()
    expected = with_device_suffix(cpu)
    assert repr(t) == expected
    assert str(t) == expected
    print(t)
    assert capsys.readouterr().out == expected + "\n"


@pytest.fixture
def sci_mode() -> Iterator[None]:
    torch.set_printoptions(sci_mode=True, precision=3)
    yield
    torch.set_printoptions(profile="default", sci_mode=None)


@pytest.mark.usefixtures("sci_mode")
@pytest.mark.parametrize("dtype", FLOATS, ids=ids)
def test_printing_with_print_options(dtype: torch.dtype) -> None:
    cpu = torch.tensor([1.5, 1e-3, 250.0, float("nan")]).to(dtype)
    assert repr(cpu.to(DEVICE)) == with_device_suffix(cpu)


# --- large reductions -----------------------------------------------------------------------------------------------


def test_sum_of_a_million_ones() -> None:
    with profiling.profile() as prof:
        total = torch.ones(1024, 1024, device=DEVICE).sum()
    assert total.device.type == DEVICE
    assert total.item() == 1024 * 1024
    assert prof.reports


REDUCTIONS: dict[str, Callable[[torch.Tensor], Any]] = {
    "max": torch.max,
    "min": torch.min,
    "argmax": torch.argmax,
    "argmin": torch.argmin,
    "amax-dim0": lambda t: t.amax(0),
    "max-dim1": lambda t: t.max(1),
    "sum": torch.sum,
    "sum-dim0": lambda t: t.sum(0),
}


@pytest.mark.parametrize("reduction", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int32, torch.int64], ids=ids)
def test_large_reductions_match_cpu(reduction: str, dtype: torch.dtype) -> None:
    """Exact where the reduction selects or adds integers; the device's fp32 accumulation otherwise (float sums)."""
    x = sample(dtype, 1024, 1024)
    fn = REDUCTIONS[reduction]
    with profiling.profile() as prof:
        actual = fn(ring(x))
    assert prof.reports
    exact = not (dtype.is_floating_point and reduction.startswith("sum"))
    tolerance = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-3, "atol": 1e-2}
    expected = fn(x) if exact else fn(x.double()).to(dtype)
    torch.testing.assert_close(ring(expected), actual, **tolerance)
