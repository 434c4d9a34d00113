"""Compute functions on scratchpad tiles, and the device numerics rule they follow.

Rule: float16/bfloat16 inputs are widened to float32, the function runs in float32 (so reductions and matmul
accumulate in float32), and each result is rounded once to its output tile's dtype. float32 and index/mask inputs
are used as they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ringsim.torchbridge import OpOverload, bound_function, schema

from .dtypes import DEVICE_DTYPES, DTYPE_NAMES, widened

ComputeFn = Callable[..., Any]

_FN_NAME = re.compile(r"^_?[a-z][a-z0-9_]*(\.[A-Za-z0-9_]+)?$")

#: Functions that run on the systolic arrays; their cost is counted in multiply-accumulates.
MATMUL_FNS = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot"})
#: Reductions: their cost is counted in input elements consumed, at the model's reduction rate.
REDUCTION_FNS = frozenset(
    {"sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "logsumexp", "norm", "all", "any"}
)
#: Composite functions that take several passes over their input on the vector unit.
VECTOR_PASSES: Mapping[str, int] = {
    "_softmax": 4,
    "_log_softmax": 4,
    "softmax": 4,
    "log_softmax": 4,
    "native_layer_norm": 5,
    "var": 2,
    "std": 2,
    "var_mean": 2,
}
#: Functions that only move data: no floating-point operations.
DATA_MOVEMENT_FNS = frozenset(
    {"copy", "cast", "clone", "t", "transpose", "permute", "cat", "stack", "index_select", "slice", "slice_scatter"}
)


def _copy(source: torch.Tensor) -> torch.Tensor:
    return source


def _cast(source: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    return source if dtype is None else source.to(dtype)


def spread_indices(indices: Sequence[Any], positions: Sequence[int]) -> list[Any]:
    """aten's index list: each index at the dim `positions` names, None for the dims taken whole."""
    full: list[Any] = [None] * (max(positions, default=-1) + 1)
    for position, index in zip(positions, indices, strict=True):
        full[position] = index
    return full


def _index_gather(source: torch.Tensor, *indices: torch.Tensor, positions: Sequence[int]) -> torch.Tensor:
    """``source[..., idx, ...]``: index tiles at the dims `positions` names, every other dim taken whole."""
    return torch.ops.aten.index.Tensor(source, spread_indices(indices, positions))


def _index_scatter(
    source: torch.Tensor, values: torch.Tensor, *indices: torch.Tensor, positions: Sequence[int], accumulate: bool
) -> torch.Tensor:
    """``source`` with ``values`` written (or added) at the indexed places."""
    return torch.ops.aten.index_put.default(source, spread_indices(indices, positions), values, accumulate)


#: The engine's own functions; `copy` keeps the dtype, `cast` rounds to the output tile's dtype; the index pair
#: gathers and scatters through index tiles at given dims (aten's index ops take a list of optional tensors, which
#: a compute's tile arguments cannot express).
ENGINE_FNS: Mapping[str, ComputeFn] = {
    "copy": _copy,
    "cast": _cast,
    "index_gather": _index_gather,
    "index_scatter": _index_scatter,
}


class FnError(ValueError):
    """A compute function that does not exist or refuses its inputs; the validator adds core and index."""


def resolve_fn(name: str) -> ComputeFn:
    """Map a program `fn` to a callable: an engine function, or an aten operator (optionally `name.overload`)."""
    if name in ENGINE_FNS:
        return ENGINE_FNS[name]
    if not _FN_NAME.match(name) or "__" in name:
        raise FnError(f"unknown fn {name!r}: not an aten operator name")
    base, _, overload = name.partition(".")
    if base.endswith("_") or overload == "out":
        raise FnError(f"fn {name!r} writes in place; compute fns must write their output tile instead")
    try:
        packet = getattr(torch.ops.aten, base)
        return getattr(packet, overload) if overload else packet
    except (AttributeError, RuntimeError):
        raise FnError(f"unknown fn {name!r}: no such aten operator or engine fn (copy, cast)") from None


def decode_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Turn JSON attrs into keyword arguments: a `dtype` is given by its device name (or, in-process, a torch.dtype)."""
    decoded = dict(attrs)
    if "out" in decoded:
        raise FnError("attr 'out' is not allowed: results go to the output tile")
    names = decoded.get(TILES_AS)
    if names is not None and not (isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)):
        raise FnError(f"attr {TILES_AS} must be a list of parameter names, got {names!r}")
    if names is not None:
        decoded[TILES_AS] = tuple(names)
    if "dtype" in decoded:
        dtype = decoded["dtype"]
        if isinstance(dtype, str) and dtype in DEVICE_DTYPES:
            decoded["dtype"] = DEVICE_DTYPES[dtype]
        elif not isinstance(dtype, torch.dtype) or dtype not in DTYPE_NAMES:
            raise FnError(f"attr dtype {dtype!r} is not a device dtype")
    return decoded


#: Attr naming the fn's parameters the input tiles bind to, for fns whose tensors do not lead their schema
#: (``scatter(self, dim, index, src)``); without it the tiles are the leading positional arguments.
TILES_AS = "tiles_as"


def call(fn: ComputeFn, inputs: Sequence[torch.Tensor], attrs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
    """Run `fn` with float16/bfloat16 inputs (and `dtype=`) widened to float32; return its tensor results as a
    tuple."""
    tiles, attrs = widened(inputs, attrs)
    names = attrs.get(TILES_AS)
    if names is None:
        result = fn(*tiles, **attrs)
    else:
        result = fn(**dict(zip(names, tiles, strict=True)), **{k: v for k, v in attrs.items() if k != TILES_AS})
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, (tuple, list)) and all(isinstance(item, torch.Tensor) for item in result):
        return tuple(result)
    raise FnError(f"returned {type(result).__name__}, not tensors")


_ZEROS = torch.zeros(0, dtype=torch.uint8)
#: The zero buffer grows in whole multiples of the widest item: a tile's storage is the whole buffer, and aten ops
#: that clone a tile's storage (``slice_scatter``, ``cat``'s program) assert it holds a whole number of items.
_ZEROS_GRAIN = 16


def _zero_tile(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A read-only zero tile viewed from one shared zero buffer, so checking a program allocates almost nothing."""
    global _ZEROS
    nbytes = math.prod(shape) * dtype.itemsize
    if _ZEROS.numel() < nbytes:
        _ZEROS = torch.zeros(-(-nbytes // _ZEROS_GRAIN) * _ZEROS_GRAIN, dtype=torch.uint8)
    return _ZEROS[:nbytes].view(dtype).view(shape)


@dataclass(frozen=True, slots=True)
class Signature:
    """What checking one compute learns: its result shapes, whether a result may alias an input tile, and the
    callable to execute it with (torch's C++-bound function of the same name when it gives the same results)."""

    shapes: tuple[tuple[int, ...], ...]
    returns_views: bool
    fn: ComputeFn | None = None


def _bound_twin(fn: ComputeFn, attrs: Mapping[str, Any]) -> ComputeFn | None:
    """torch's C++-bound function for an aten overload (``torch.add`` for ``aten::add.Tensor``): it resolves the same
    overload from the same arguments at a fraction of an OpOverload call's cost. Tiles bound by name do not qualify
    (the bound functions call ``self`` ``input``)."""
    if TILES_AS in attrs or not isinstance(fn, OpOverload):
        return None
    return bound_function(schema(fn).name.removeprefix("aten::"))


def _same(results: tuple[torch.Tensor, ...], twins: tuple[torch.Tensor, ...]) -> bool:
    return len(results) == len(twins) and all(
        r.shape == t.shape and r.dtype == t.dtype and torch.equal(r, t) for r, t in zip(results, twins, strict=True)
    )


def infer(fn: ComputeFn, inputs: Sequence[tuple[tuple[int, ...], torch.dtype]], attrs: Mapping[str, Any]) -> Signature:
    """Run `fn` once on zero tiles shaped like its inputs (they fit a scratchpad) to learn its result shapes.

    Unlike meta tensors this does not import torch's Python meta registrations (seconds, once per process). A
    creation fn (no input tiles) runs on meta instead, so an oversized result is refused without allocating it.
    A fn returning a view of an input (`t`, `view`, ...) is flagged: its result is copied before it is stored,
    since the output tile may overlap that input.
    """
    if not inputs:
        results = call(fn, [], {**attrs, "device": "meta"})
        return Signature(tuple(tuple(result.shape) for result in results), returns_views=False, fn=fn)
    tiles = [_zero_tile(shape, dtype) for shape, dtype in inputs]
    try:
        results = call(fn, tiles, attrs)
    except RuntimeError as error:  # integer division by the zero tiles: ones are as good for learning shapes
        if "ZeroDivisionError" not in str(error):
            raise
        tiles = [torch.ones(shape, dtype=dtype) for shape, dtype in inputs]
        results = call(fn, tiles, attrs)
    zeros = _ZEROS.untyped_storage().data_ptr()
    views = any(result.untyped_storage().data_ptr() == zeros for result in results)
    return Signature(
        shapes=tuple(tuple(result.shape) for result in results),
        returns_views=views,
        fn=_executed(fn, tiles, attrs, results),
    )


def _executed(fn: ComputeFn, tiles: list[torch.Tensor], attrs: Mapping[str, Any], results: tuple) -> ComputeFn:
    """The callable execution uses: the bound twin when it agrees with the overload on these tiles, else the fn."""
    twin = _bound_twin(fn, attrs)
    if twin is None:
        return fn
    try:
        return twin if _same(results, call(twin, tiles, attrs)) else fn
    except (TypeError, RuntimeError, ValueError, FnError):
        return fn


@dataclass(frozen=True, slots=True)
class ComputeWork:
    """What one compute instruction costs, independent of the data: elements through the vector unit (elementwise
    work and reductions, charged at their own rates), and MACs on the systolic arrays."""

    vector_elements: int
    reduced_elements: int
    macs: int
    flops: int


def work_of(name: str, inputs: Sequence[torch.Size], outputs: Sequence[torch.Size]) -> ComputeWork:
    """Count the work of one compute instruction from its tile shapes."""
    base = name.partition(".")[0]
    out_elements = sum(math.prod(shape) for shape in outputs)
    if base in MATMUL_FNS:
        operands = inputs[1:] if base in {"addmm", "baddbmm", "addmv"} else inputs
        depth = operands[0][-1] if operands and len(operands[0]) else 1
        macs = out_elements * depth
        return ComputeWork(vector_elements=0, reduced_elements=0, macs=macs, flops=2 * macs)
    elements = max([out_elements, *(math.prod(shape) for shape in inputs)])
    if base == "slice":  # reads only the slice it returns
        elements = out_elements
    elif base == "slice_scatter":  # writes only its src into its input tile; the rest is not touched
        elements = math.prod(inputs[1])
    if base in REDUCTION_FNS:
        return ComputeWork(vector_elements=0, reduced_elements=elements, macs=0, flops=elements)
    passes = VECTOR_PASSES.get(base, 1)
    flops = 0 if base in DATA_MOVEMENT_FNS else elements * passes
    return ComputeWork(vector_elements=elements * passes, reduced_elements=0, macs=0, flops=flops)
