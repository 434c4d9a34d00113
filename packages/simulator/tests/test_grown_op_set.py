"""The ops the registry grew (sorting, scans, scatter, pooling, tensor indexing, the integer unit, the samplers) on ring
against CPU eager: exact where the op moves, selects, compares or does integer work; within assert_close's default
tolerances where it accumulates floats, against CPU computing as the device does (fp16/bf16 widened to fp32, rounded
once). Every case launches device programs, and a dtype the device does not compute in is the one-line error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from ringsim import profiling
from ringsim.engine.dtypes import WIDENED_DTYPES
from ringsim.ops.conformance import tensors
from ringsim.ops.registry import by_packet, dtype_name

DEVICE = "ring"
#: The dtypes a case runs in, where the registry declares them for its op.
TESTED = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
)
FLOATS = TESTED[:3]
INTEGERS = TESTED[3:]  # and bool: the integer unit
SIGNED = TESTED[3:7]


def values(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    """Distinct-enough values of `dtype` on CPU: floats spread over [-30, 30], integers in [-50, 50) (uint8 from 0)."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape) * 10).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -50, 50, shape, dtype=dtype)


def small(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    """Values whose running products stay representable: cumprod's input."""
    if dtype == torch.bool or not dtype.is_floating_point:
        return values(dtype, *shape) % 3 if dtype != torch.bool else values(dtype, *shape)
    return values(dtype, *shape) / 20


def moved(value: Any, device: str) -> Any:
    """The same arguments on `device`; layouts are kept, so a transposed input stays non-contiguous there."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(moved(v, device) for v in value)
    return value


def widened(value: Any) -> Any:
    """CPU inputs as the device computes them: float16/bfloat16 tensors in float32."""
    if isinstance(value, torch.Tensor) and value.dtype in WIDENED_DTYPES:
        return value.float()
    if isinstance(value, (list, tuple)):
        return type(value)(widened(v) for v in value)
    return value


@dataclass(frozen=True)
class Case:
    """One call of a grown op: `make` builds its CPU arguments for a dtype, `run` calls it."""

    packet: str  # the registry entry whose dtypes the case runs in
    run: Callable[..., Any]
    make: Callable[[torch.dtype], tuple[Any, ...]]
    accumulates: bool = False  # float results are sums/means/products, rounded once on the device
    only: tuple[torch.dtype, ...] = TESTED  # narrower than the registry where CPU has no kernel for a dtype

    def dtypes(self) -> list[torch.dtype]:
        return [d for d in self.only if d in by_packet()[self.packet].dtypes]


def check(case: Case, dtype: torch.dtype) -> None:
    """Run on CPU and on ring (seeded alike); ring launches programs and matches CPU's results and dtypes."""
    args = case.make(dtype)
    torch.manual_seed(123)
    expected = tensors(case.run(*args))
    if case.accumulates and dtype in WIDENED_DTYPES:
        torch.manual_seed(123)
        rounded = tensors(case.run(*widened(args)))
        expected = [r.to(e.dtype) for r, e in zip(rounded, expected, strict=True)]
    torch.manual_seed(123)
    with profiling.profile() as prof:
        actual = tensors(case.run(*moved(args, DEVICE)))
    assert prof.reports, "no device program ran"
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a.device.type == DEVICE
        exact = {} if case.accumulates and e.is_floating_point() else {"rtol": 0, "atol": 0}
        torch.testing.assert_close(a.cpu(), e, equal_nan=True, **exact)


def cases(table: dict[str, Case]) -> list[Any]:
    return [
        pytest.param(case, dtype, id=f"{name}-{dtype_name(dtype)}")
        for name, case in table.items()
        for dtype in case.dtypes()
    ]


# --- along one dim: every op at a middle dim and the last one, on contiguous and transposed inputs -------------------

ALONG: dict[str, tuple[str, Callable[..., Any], bool]] = {
    "sort": ("sort", lambda x, d: torch.sort(x, d), False),
    "sort-stable-descending": ("sort", lambda x, d: torch.sort(x, dim=d, stable=True, descending=True), False),
    "argsort": ("sort", lambda x, d: torch.argsort(x, dim=d, stable=True), False),
    "topk": ("topk", lambda x, d: torch.topk(x, 3, dim=d), False),
    "topk-smallest": ("topk", lambda x, d: torch.topk(x, 3, dim=d, largest=False), False),
    "kthvalue": ("kthvalue", lambda x, d: torch.kthvalue(x, 2, dim=d), False),
    "median": ("median", lambda x, d: torch.median(x, dim=d), False),
    "nanmedian": ("nanmedian", lambda x, d: torch.nanmedian(torch.where(x > 5, float("nan"), x), dim=d), False),
    "mode": ("mode", lambda x, d: torch.mode(x // 4, dim=d), False),
    "cumsum": ("cumsum", torch.cumsum, True),
    "cumprod": ("cumprod", torch.cumprod, True),
    "cummax": ("cummax", torch.cummax, False),
    "cummin": ("cummin", torch.cummin, False),
    "logcumsumexp": ("logcumsumexp", torch.logcumsumexp, True),
    "flip": ("flip", lambda x, d: torch.flip(x, (d,)), False),
    "roll": ("roll", lambda x, d: torch.roll(x, 2, d), False),
}
LAYOUTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.transpose(0, 2),
}


def along_cases() -> list[Any]:
    params = []
    for name, (packet, run, accumulates) in ALONG.items():
        source = small if name == "cumprod" else values
        for layout, arrange in LAYOUTS.items():
            for dim in (1, -1):
                case = Case(
                    packet,
                    lambda x, run=run, dim=dim: run(x, dim),
                    lambda dtype, source=source, arrange=arrange: (arrange(source(dtype, 6, 7, 8)),),
                    accumulates,
                )
                params += [
                    pytest.param(case, dtype, id=f"{name}-{layout}-dim{dim}-{dtype_name(dtype)}")
                    for dtype in case.dtypes()
                ]
    return params


@pytest.mark.parametrize(("case", "dtype"), along_cases())
def test_along_dim(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


def test_along_dim_inputs_are_really_non_contiguous_on_the_device() -> None:
    x = LAYOUTS["transposed"](values(torch.float32, 6, 7, 8)).to(DEVICE)
    assert not x.is_contiguous()


# --- general kernels: selections, triangles, take/put, scatter, index_*, search, histc, trace, pooling ---------------


def _x(dtype: torch.dtype) -> torch.Tensor:
    return values(dtype, 6, 7, 8)


def _scatter(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    x = _x(dtype)
    return x, torch.randint(0, 7, (6, 4, 8)), x[:, :4].contiguous()


def _sorted_rows(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    x = _x(dtype)
    return torch.sort(x, dim=-1).values, x[..., :3].contiguous()


def _index_source(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    x = _x(dtype)
    return x, torch.tensor([0, 2, 1, 2]), x[:, :4].contiguous()


GENERAL: dict[str, Case] = {
    "median-all": Case("median", torch.median, lambda d: (_x(d),)),
    "flip-dims": Case("flip", lambda x: torch.flip(x, (0, 2)), lambda d: (_x(d),)),
    "roll-flat": Case("roll", lambda x: torch.roll(x, 5), lambda d: (_x(d).transpose(0, 1),)),
    "roll-dims": Case("roll", lambda x: torch.roll(x, (1, -2), (0, 2)), lambda d: (_x(d),)),
    "tril": Case("tril", lambda x: torch.tril(x, 1), lambda d: (_x(d)[0],)),
    "triu-transposed": Case("triu", lambda x: torch.triu(x, -1), lambda d: (_x(d)[0].t(),)),
    "tril-batched": Case("tril", torch.tril, lambda d: (_x(d),)),
    "trace": Case("trace", torch.trace, lambda d: (_x(d)[0],), accumulates=True),
    "take": Case("take", torch.take, lambda d: (_x(d).transpose(0, 2), torch.randint(0, 336, (10,)))),
    "put": Case(
        "put", lambda x, i, v: x.clone().put_(i, v), lambda d: (_x(d), torch.randperm(336)[:10], _x(d).reshape(-1)[:10])
    ),
    "put-accumulate": Case(
        "put",
        lambda x, i, v: x.clone().put_(i, v, accumulate=True),
        lambda d: (_x(d), torch.tensor([0, 0, 3]), _x(d)[0, 0, :3]),
        accumulates=True,
    ),
    "scatter-src": Case("scatter", lambda x, i, s: x.scatter(1, i, s), _scatter),
    "scatter-value": Case("scatter", lambda x, i, s: x.scatter(1, i, 3), _scatter),
    "scatter-reduce-add": Case("scatter", lambda x, i, s: x.scatter(1, i, s, reduce="add"), _scatter, True),
    "scatter-reduce-multiply": Case("scatter", lambda x, i, s: x.scatter(1, i, s, reduce="multiply"), _scatter, True),
    "scatter-value-reduce": Case("scatter", lambda x, i, s: x.scatter(1, i, 2, reduce="add"), _scatter),
    "scatter_add": Case("scatter_add", lambda x, i, s: x.scatter_add(1, i, s), _scatter, True),
    **{
        f"scatter_reduce-{reduce}{'' if include else '-without-self'}": Case(
            "scatter_reduce",
            lambda x, i, s, reduce=reduce, include=include: x.scatter_reduce(1, i, s, reduce, include_self=include),
            _scatter,
            True,
        )
        for reduce in ("sum", "prod", "mean", "amax", "amin")
        for include in (True, False)
    },
    "index_add": Case("index_add", lambda x, i, s: x.index_add(1, i, s), _index_source, True),
    "index_add-alpha": Case(
        "index_add", lambda x, i, s: x.index_add(0, i, x[:4], alpha=2), _index_source, True, TESTED[:-1]
    ),
    "index_copy": Case(
        "index_copy", lambda x, i, s: x.index_copy(1, i, s), lambda d: (_x(d), torch.tensor([0, 3, 5, 2]), _x(d)[:, :4])
    ),
    "index_fill": Case(
        "index_fill", lambda x, i: x.index_fill(2, i, 1), lambda d: (_x(d).transpose(0, 2), torch.tensor([1, 3]))
    ),
    "index_fill-tensor": Case(
        "index_fill",
        lambda x, i, v: x.index_fill(2, i, v),
        lambda d: (_x(d), torch.tensor([1, 3]), torch.tensor(1).to(d)),
    ),
    "masked_scatter": Case(
        "masked_scatter", torch.masked_scatter, lambda d: (_x(d), torch.rand(6, 7, 8) > 0.4, _x(d).flip(0))
    ),
    "isin": Case("isin", torch.isin, lambda d: (_x(d), _x(d).reshape(-1)[:20])),
    "isin-scalar": Case("isin", lambda x: torch.isin(x, 3), lambda d: (_x(d),)),
    "isin-invert": Case(
        "isin", lambda x, y: torch.isin(x, y, invert=True), lambda d: (_x(d).transpose(0, 2), _x(d).reshape(-1)[:5])
    ),
    "bucketize": Case("bucketize", torch.bucketize, lambda d: (_x(d), torch.sort(_x(d).reshape(-1)[:9]).values)),
    "bucketize-right-int32": Case(
        "bucketize",
        lambda x, b: torch.bucketize(x, b, right=True, out_int32=True),
        lambda d: (_x(d).transpose(0, 2).contiguous(), torch.sort(_x(d).reshape(-1)[:9]).values),
    ),
    "searchsorted": Case("searchsorted", torch.searchsorted, _sorted_rows),
    "searchsorted-right": Case("searchsorted", lambda s, v: torch.searchsorted(s, v, side="right"), _sorted_rows),
    "histc": Case("histc", lambda x: torch.histc(x, 10, -20, 20), lambda d: (_x(d),), True),
    "histc-data-range": Case("histc", torch.histc, lambda d: (_x(d),), True),
}


@pytest.mark.parametrize(("case", "dtype"), cases(GENERAL))
def test_general(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


def _images(dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (values(dtype, 2, 3, 9, 10),)


def _volumes(dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (values(dtype, 2, 3, 5, 6, 7),)


POOLING: dict[str, Case] = {
    "max_pool2d": Case("max_pool2d_with_indices", lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), _images),
    "max_pool2d-transposed": Case("max_pool2d_with_indices", lambda x: F.max_pool2d(x.transpose(2, 3), 2), _images),
    "max_pool2d-dilated-ceil": Case(
        "max_pool2d_with_indices", lambda x: F.max_pool2d(x, 2, 2, 0, 2, ceil_mode=True), _images
    ),
    "max_pool2d-unbatched": Case("max_pool2d_with_indices", lambda x: F.max_pool2d(x[0], 2), _images),
    "max_pool3d": Case("max_pool3d_with_indices", lambda x: F.max_pool3d(x, 2, return_indices=True), _volumes),
    "avg_pool2d": Case("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1), _images, True),
    "avg_pool2d-exclude-pad-ceil": Case(
        "avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), _images, True
    ),
    "avg_pool1d": Case("avg_pool2d", lambda x: F.avg_pool1d(x[0], 3), _images, True),
    # CPU has no float16/bfloat16 avg_pool3d to compare with
    "avg_pool3d": Case("avg_pool3d", lambda x: F.avg_pool3d(x, 2), _volumes, True, (torch.float32,)),
    "adaptive_avg_pool2d": Case("_adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (4, 3)), _images, True),
    "adaptive_avg_pool3d": Case("_adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), _volumes, True),
    "adaptive_max_pool2d": Case(
        "adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True), _images
    ),
    "adaptive_max_pool1d": Case(
        "adaptive_max_pool2d", lambda x: F.adaptive_max_pool1d(x[0], 4, return_indices=True), _images
    ),
}


@pytest.mark.parametrize(("case", "dtype"), cases(POOLING))
def test_pooling(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


# --- tensor indexing and data-dependent sizes ---------------------------------------------------------------------


def _set(x: torch.Tensor, index: Any, value: Any) -> torch.Tensor:
    out = x.clone()
    out[index] = value
    return out


def _mask() -> torch.Tensor:
    return torch.rand(6, 7, 8) > 0.3


def _runs(dtype: torch.dtype) -> tuple[torch.Tensor]:
    """Values with repeats (and runs of them) for unique."""
    x = _x(dtype)
    return (x // 4 if not dtype.is_floating_point else x.round(),) if dtype != torch.bool else (x,)


_LONG = torch.tensor([5, 0, 2, 2])
INDEXING: dict[str, Case] = {
    "x[idx]": Case("index", lambda x, i: x[i], lambda d: (_x(d), _LONG)),
    "x[:, idx]-transposed": Case("index", lambda x, i: x[:, i], lambda d: (_x(d).transpose(0, 2), _LONG)),
    "x[idx, idx]": Case("index", lambda x, i: x[i, i], lambda d: (_x(d), _LONG)),
    "x[mask]": Case("index", lambda x, m: x[m], lambda d: (_x(d), _mask())),
    "x[mask-2d]": Case("index", lambda x, m: x[m], lambda d: (_x(d), _mask()[:, :, 0])),
    "x[idx]=v": Case("_index_put_impl_", _set, lambda d: (_x(d), _LONG[:3], _x(d)[:3].flip(0))),
    "x[mask]=scalar": Case("_index_put_impl_", lambda x, m: _set(x, m, 1), lambda d: (_x(d), _mask())),
    "x[mask]=values": Case("_index_put_impl_", lambda x, m: _set(x, m, x[m].flip(0)), lambda d: (_x(d), _mask())),
    "x[:, mask]=scalar": Case(
        "_index_put_impl_", lambda x, m: _set(x, (slice(None), m), 1), lambda d: (_x(d), _mask()[0])
    ),
    "index_put-accumulate": Case(
        "_index_put_impl_",
        lambda x, i, v: x.clone().index_put_((i,), v, accumulate=True),
        lambda d: (_x(d), torch.tensor([0, 0, 1]), _x(d)[:3]),
        accumulates=True,
    ),
    "index_put-accumulate-2-indices": Case(
        "_index_put_impl_",
        lambda x, i, v: x.clone().index_put_((i, i), v, accumulate=True),
        lambda d: (_x(d), torch.tensor([0, 0, 1]), _x(d)[0, :3]),
        accumulates=True,
    ),
    "nonzero": Case("nonzero", torch.nonzero, lambda d: (_x(d),)),
    "nonzero-as-tuple": Case("nonzero", lambda x: torch.nonzero(x, as_tuple=True), lambda d: (_x(d).transpose(0, 2),)),
    "masked_select": Case(
        "masked_select", torch.masked_select, lambda d: (_x(d).transpose(0, 2), _mask().transpose(0, 2))
    ),
    "masked_select-broadcast": Case("masked_select", torch.masked_select, lambda d: (_x(d), _mask()[0, 0])),
    "unique": Case("_unique2", lambda x: torch.unique(x, return_inverse=True, return_counts=True), _runs),
    "unique-values": Case("_unique2", torch.unique, _runs),
    "unique_consecutive": Case(
        "unique_consecutive", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True), _runs
    ),
}


@pytest.mark.parametrize(("case", "dtype"), cases(INDEXING))
def test_indexing(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


# --- the integer unit: bitwise ops and shifts, integer arithmetic, comparisons on integers, bool and float64 --------


def _pair(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Operands for binary integer ops: b is never zero (division) and small enough to shift by."""
    a = values(dtype, 5, 9)
    b = a.flip(1) if dtype == torch.bool else torch.randint(1, 8, (5, 9), dtype=dtype)
    return a, b


def _transposed_pair(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = _pair(dtype)
    return a.t(), b.t()


def _shifted(run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[..., torch.Tensor]:
    def shift(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return run(a, b % 4)

    return shift


def _ilshift(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out <<= 2
    return out


def _ifloordiv(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.clone().floor_divide_(b)


def _integer(
    packet: str,
    run: Callable[..., Any],
    make: Callable[[torch.dtype], tuple[Any, ...]] = _pair,
    only: tuple[torch.dtype, ...] = INTEGERS,
) -> Case:
    """A case of the integer unit: it runs in the integer dtypes and bool (the float forms are other tests' job)."""
    return Case(packet, run, make, only=only)


BITS: dict[str, Case] = {
    **{
        f"{name}{suffix}": _integer(name, run, make)
        for name, run in (
            ("bitwise_and", torch.bitwise_and),
            ("bitwise_or", torch.bitwise_or),
            ("bitwise_xor", torch.bitwise_xor),
            ("bitwise_not", lambda a, b: torch.bitwise_not(a)),
        )
        for suffix, make in (("", _pair), ("-transposed", _transposed_pair))
    },
    "bitwise_and-scalar": _integer("bitwise_and", lambda a, b: a & True if a.dtype == torch.bool else a & 6),
    "bitwise_left_shift": _integer("bitwise_left_shift", _shifted(torch.bitwise_left_shift)),
    "bitwise_right_shift-scalar": _integer("bitwise_right_shift", lambda a, b: torch.bitwise_right_shift(a, 2)),
    "<<": _integer("__lshift__", _shifted(lambda a, b: a << b)),
    ">>": _integer("__rshift__", _shifted(lambda a, b: a >> b), _transposed_pair),
    "<< scalar": _integer("__lshift__", lambda a, b: a << 1),
    ">> scalar": _integer("__rshift__", lambda a, b: a >> 1),
    "<<=": _integer("__lshift__", _ilshift),
}
INTEGER_ARITHMETIC: dict[str, Case] = {
    "add": _integer("add", torch.add),
    "add-alpha": _integer("add", lambda a, b: torch.add(a, b, alpha=3)),
    "add-transposed": _integer("add", torch.add, _transposed_pair),
    "sub": _integer("sub", torch.sub),
    "rsub-scalar": _integer("rsub", lambda a, b: 5 - a),
    "mul": _integer("mul", torch.mul),
    "mul-scalar": _integer("mul", lambda a, b: a * 3),
    "div": _integer("div", torch.div),
    "div-floor": _integer("div", lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "div-trunc": _integer("div", lambda a, b: torch.div(a, -b, rounding_mode="trunc"), _pair, SIGNED),
    "floor_divide": _integer("floor_divide", torch.floor_divide),
    "floor_divide-negative": _integer("floor_divide", lambda a, b: a // -b, _pair, SIGNED),
    "floor_divide-scalar": _integer("floor_divide", lambda a, b: a // 7),
    "floor_divide_": _integer("floor_divide", _ifloordiv),
    "remainder": _integer("remainder", torch.remainder),
    "remainder-negative": _integer("remainder", lambda a, b: a % -b, _pair, SIGNED),
    "remainder-scalar": _integer("remainder", lambda a, b: a % 7, _transposed_pair),
    "fmod": _integer("fmod", torch.fmod),
}


@pytest.mark.parametrize(("case", "dtype"), cases({**BITS, **INTEGER_ARITHMETIC}))
def test_integer_unit(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
HELD_OR_EXACT = (torch.float64, *INTEGERS)


def _compared(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    a = values(torch.float32, 5, 9).to(dtype) if dtype == torch.float64 else values(dtype, 5, 9)
    b = a.clone()
    b[1] = a[2]
    if dtype == torch.float64:
        a[2, 2] = float("nan")
    return a, b


COMPARING: dict[str, Case] = {
    **{name: Case(name, getattr(torch, name), _compared, only=HELD_OR_EXACT) for name in COMPARISONS},
    **{
        f"{name}-scalar-transposed": Case(
            name, lambda a, b, name=name: getattr(torch, name)(a.t(), 1), _compared, only=HELD_OR_EXACT
        )
        for name in COMPARISONS
    },
}


@pytest.mark.parametrize(("case", "dtype"), cases(COMPARING))
def test_comparisons_on_integers_bool_and_float64(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


# --- samplers: the device generator, seeded by torch.manual_seed, draws what CPU draws -------------------------------


def _empty(dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.empty(5, 7, dtype=dtype),)


def _transposed_empty(dtype: torch.dtype) -> tuple[torch.Tensor]:
    return (torch.empty(7, 5, dtype=dtype).t(),)


def _generator(t: torch.Tensor) -> torch.Generator:
    return torch.Generator(t.device).manual_seed(5)


def _bound(dtype: torch.dtype) -> int:
    return 2 if dtype == torch.bool else 10


SAMPLERS: dict[str, Case] = {
    "random_": Case("random_", lambda t: t.random_(), _empty),
    "random_-to": Case("random_", lambda t: t.random_(_bound(t.dtype)), _empty),
    "random_-from-to": Case(
        "random_", lambda t: t.random_(0 if t.dtype in (torch.bool, torch.uint8) else -5, _bound(t.dtype)), _empty
    ),
    "random_-transposed": Case("random_", lambda t: t.random_(0, 2), _transposed_empty),
    "random_-generator": Case("random_", lambda t: t.random_(0, 2, generator=_generator(t)), _empty),
    "randint": Case("random_", lambda t: torch.randint(0, 2, (4, 6), dtype=t.dtype, device=t.device), _empty),
    "bernoulli_": Case("bernoulli_", lambda t: t.bernoulli_(0.3), _empty),
    "bernoulli_-transposed": Case("bernoulli_", lambda t: t.bernoulli_(0.3), _transposed_empty),
    "bernoulli_-tensor": Case(
        "bernoulli_", lambda t, p: t.bernoulli_(p), lambda d: (*_transposed_empty(d), torch.rand(5, 7))
    ),
    "bernoulli_-float64-tensor": Case(
        "bernoulli_", lambda t, p: t.bernoulli_(p), lambda d: (*_empty(d), torch.rand(7, dtype=torch.float64))
    ),
    "bernoulli": Case("bernoulli_", torch.bernoulli, lambda d: (torch.rand(5, 7).to(d),), only=FLOATS),
    "bernoulli-p": Case("bernoulli_", lambda p: torch.bernoulli(p, 0.3), lambda d: (torch.rand(5, 7).to(d),)),
    "exponential_": Case("exponential_", lambda t: t.exponential_(2.0), _empty),
    "geometric_": Case("geometric_", lambda t: t.geometric_(0.3), _empty),
    "geometric_-transposed": Case("geometric_", lambda t: t.geometric_(0.6), _transposed_empty),
    "cauchy_": Case("cauchy_", lambda t: t.cauchy_(1.0, 2.0), _empty),
    "log_normal_": Case("log_normal_", lambda t: t.log_normal_(0.5, 0.2), _transposed_empty),
    "randperm": Case("randperm", lambda t: torch.randperm(20, dtype=t.dtype, device=t.device), _empty),
    "randperm-long": Case("randperm", lambda t: torch.randperm(300, device=t.device), _empty, only=(torch.int64,)),
    "randperm-generator": Case(
        "randperm", lambda t: torch.randperm(30, generator=_generator(t), device=t.device), _empty, only=(torch.int64,)
    ),
}


@pytest.mark.parametrize(("case", "dtype"), cases(SAMPLERS))
def test_samplers(case: Case, dtype: torch.dtype) -> None:
    check(case, dtype)


def test_manual_seed_reproduces_the_device_stream() -> None:
    draws = []
    for _ in range(2):
        torch.manual_seed(0)
        t = torch.empty(100, device=DEVICE)
        draws.append(torch.cat([t.exponential_(), t.clone().cauchy_(), t.clone().random_(0, 9)]).cpu())
    assert torch.equal(draws[0], draws[1])
    assert not torch.equal(draws[0][:100], draws[0][100:200])


# --- dtypes the device does not compute in ------------------------------------------------------------------------

REFUSED: dict[str, tuple[str, Callable[[torch.Tensor], Any], torch.dtype]] = {
    "sort": ("sort", lambda x: torch.sort(x), torch.complex64),
    "argsort": ("sort", lambda x: torch.argsort(x), torch.complex64),
    "flip": ("flip", lambda x: torch.flip(x, (0,)), torch.complex64),
    "cumsum": ("cumsum", lambda x: torch.cumsum(x, 0), torch.float64),
    "topk": ("topk", lambda x: torch.topk(x, 2), torch.float64),
    "scatter_add": (
        "scatter_add",
        lambda x: x.scatter_add(0, torch.zeros_like(x, dtype=torch.int64), x),
        torch.float64,
    ),
    "isin": ("isin", lambda x: torch.isin(x, x), torch.float64),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_dtype_is_the_one_line_error(name: str) -> None:
    packet, run, dtype = REFUSED[name]
    x = torch.ones(4, 3, dtype=dtype).to(DEVICE)
    with pytest.raises(NotImplementedError) as raised:
        run(x)
    supported = ", ".join(sorted(dtype_name(d) for d in by_packet()[packet].dtypes))
    message = str(raised.value)
    assert message.startswith(f"ring: aten::{packet}")
    assert message.endswith(f" is not supported for dtype {dtype_name(dtype)} (supported: {supported})")
    assert "\n" not in message
