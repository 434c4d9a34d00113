"""The one declared op set of the Ring-32 device: which aten ops it executes, for which dtypes, and how.

Everything that answers "does the device run X for dtype D?" reads this table: kernel registration, the
clear NotImplementedError, ``ringsim.capabilities()``, the test framework's ``supported_ops`` and the tests.

Dtype rule (an inference accelerator, not a general CPU):
- Arithmetic runs on float16 (primary), bfloat16 and float32 only. No float64 and no complex, anywhere.
- int64 and bool exist as indices and masks, never as arithmetic: comparisons and ``argmax``/``argmin``
  *produce* them, ``where``/``masked_fill`` consume bool masks, ``index_select``/``gather`` consume int64
  indices, and the byte-moving ops (``cat``, ``index_select``, ``gather``, ``where``) and creation ops
  (``fill_``, ``zero_``, ``arange``) also accept int64/bool data because they do no arithmetic on it.
- Index operands may also be int32 (as torch allows); they are widened to int64 by the copy kernel where needed.
- The dtypes listed for an op are the dtypes of its data operand (``self``); index and mask operands follow
  the rule above and are checked by the kernel.

Each entry names functional overloads; the in-place (``add_``) and ``out=`` variants of the same overloads are
registered with it, because torch's composite kernels (``abs``, ``logical_and``, ``masked_fill``...) call them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

import torch

DEVICE = "ring"


class Kind(StrEnum):
    """How a kernel divides the work across cores; selects the program builder."""

    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    MATMUL = "matmul"
    NORMALIZATION = "normalization"
    DATA_MOVEMENT = "data_movement"
    CREATION = "creation"
    RANDOM = "random"


class Tolerance(StrEnum):
    """Numerics class of an op; ``ringsim.ops.numerics`` gives each class its documented error bound."""

    EXACT = "exact"
    ROUNDED = "rounded"
    TRANSCENDENTAL = "transcendental"
    FUSED = "fused"
    REDUCTION = "reduction"
    MATMUL = "matmul"
    NORMALIZATION = "normalization"
    STATISTICAL = "statistical"


FLOATS: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32)
BYTES: tuple[torch.dtype, ...] = (*FLOATS, torch.int64, torch.bool)
LOGICAL: tuple[torch.dtype, ...] = (*FLOATS, torch.bool)
ARANGE: tuple[torch.dtype, ...] = (*FLOATS, torch.int64)
DTYPE_ORDER: tuple[torch.dtype, ...] = (
    torch.bool,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
)


@dataclass(frozen=True)
class OpSpec:
    """One aten operator the device executes."""

    aten: str  # operator packet, e.g. "add"
    overloads: tuple[str, ...]  # functional overloads, e.g. ("Tensor", "Scalar"); "default" for none
    kind: Kind
    tolerance: Tolerance
    dtypes: tuple[torch.dtype, ...] = FLOATS

    @property
    def names(self) -> tuple[str, ...]:
        """Qualified overload names, e.g. ``add.Tensor``."""
        return tuple(self.aten if o == "default" else f"{self.aten}.{o}" for o in self.overloads)


def _ew(aten: str, *overloads: str, tol: Tolerance = Tolerance.ROUNDED, dtypes=FLOATS) -> OpSpec:
    return OpSpec(aten, overloads or ("default",), Kind.ELEMENTWISE, tol, dtypes)


_T = Tolerance.TRANSCENDENTAL
_E = Tolerance.EXACT


# Transcendental functions: fp32 library functions, then one rounding; each is also the OpInfo entry of its name.
TRANSCENDENTAL = (
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
)

SPECS: tuple[OpSpec, ...] = (
    # binary arithmetic: one fp32 operation, one rounding
    _ew("add", "Tensor", "Scalar"),
    _ew("sub", "Tensor", "Scalar"),
    _ew("rsub", "Tensor", "Scalar"),
    _ew("mul", "Tensor", "Scalar"),
    _ew("div", "Tensor", "Scalar", "Tensor_mode", "Scalar_mode"),
    _ew("maximum"),
    _ew("minimum"),
    _ew("fmod", "Tensor", "Scalar"),
    _ew("remainder", "Tensor", "Scalar"),
    _ew("pow", "Tensor_Tensor", "Tensor_Scalar", tol=_T),
    _ew("atan2", tol=_T),
    _ew("hypot", tol=_T),
    # unary arithmetic
    _ew("neg", tol=_E),
    _ew("abs", tol=_E),
    _ew("sign", tol=_E),
    _ew("sgn", tol=_E),
    _ew("floor", tol=_E),
    _ew("ceil", tol=_E),
    _ew("trunc", tol=_E),
    _ew("round", "default", "decimals"),
    _ew("frac"),
    _ew("reciprocal"),
    _ew("sqrt"),
    _ew("rsqrt", tol=_T),
    _ew("clamp", "default", "Tensor", tol=_E),
    _ew("clamp_min", "default", "Tensor", tol=_E),
    _ew("clamp_max", "default", "Tensor", tol=_E),
    # transcendental: fp32 library functions, then one rounding
    *(_ew(name, tol=_T) for name in TRANSCENDENTAL),
    # ternary
    _ew("addcmul", tol=Tolerance.FUSED),
    _ew("addcdiv", tol=Tolerance.FUSED),
    _ew("lerp", "Scalar", "Tensor", tol=Tolerance.FUSED),
    # activations
    _ew("relu", tol=_E),
    _ew("hardtanh", tol=_E),
    _ew("leaky_relu"),
    _ew("hardsigmoid"),
    _ew("hardswish"),
    _ew("gelu", tol=_T),
    _ew("silu", tol=_T),
    _ew("mish", tol=_T),
    _ew("elu", tol=_T),
    _ew("softplus", tol=_T),
    # comparisons and logic: bool results
    *(_ew(name, "Tensor", "Scalar", tol=_E) for name in ("eq", "ne", "lt", "le", "gt", "ge")),
    *(_ew(name, tol=_E, dtypes=LOGICAL) for name in ("logical_and", "logical_or", "logical_xor", "logical_not")),
    _ew("isnan", tol=_E),
    # masks
    OpSpec("where", ("self",), Kind.DATA_MOVEMENT, _E, BYTES),
    OpSpec("masked_fill", ("Scalar", "Tensor"), Kind.DATA_MOVEMENT, _E, BYTES),
    # reductions: fp32 accumulator, one rounding
    OpSpec("sum", ("dim_IntList",), Kind.REDUCTION, Tolerance.REDUCTION),
    OpSpec("mean", ("dim",), Kind.REDUCTION, Tolerance.REDUCTION),
    OpSpec("prod", ("default", "dim_int"), Kind.REDUCTION, Tolerance.REDUCTION),
    OpSpec("amax", ("default",), Kind.REDUCTION, _E),
    OpSpec("amin", ("default",), Kind.REDUCTION, _E),
    OpSpec("max", ("default", "dim"), Kind.REDUCTION, _E),
    OpSpec("min", ("default", "dim"), Kind.REDUCTION, _E),
    OpSpec("argmax", ("default",), Kind.REDUCTION, _E),
    OpSpec("argmin", ("default",), Kind.REDUCTION, _E),
    OpSpec("var", ("correction",), Kind.REDUCTION, Tolerance.STATISTICAL),
    OpSpec("std", ("correction",), Kind.REDUCTION, Tolerance.STATISTICAL),
    OpSpec("logsumexp", ("default",), Kind.REDUCTION, Tolerance.NORMALIZATION),
    # matmul: fp32 accumulator over K, one rounding
    OpSpec("mm", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("bmm", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("addmm", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("dot", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("addmv", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    # row-wise normalization
    OpSpec("_softmax", ("default",), Kind.NORMALIZATION, Tolerance.NORMALIZATION),
    OpSpec("_log_softmax", ("default",), Kind.NORMALIZATION, Tolerance.NORMALIZATION),
    OpSpec("native_layer_norm", ("default",), Kind.NORMALIZATION, Tolerance.NORMALIZATION),
    # data movement
    OpSpec("cat", ("default",), Kind.DATA_MOVEMENT, _E, BYTES),
    OpSpec("index_select", ("default",), Kind.DATA_MOVEMENT, _E, BYTES),
    OpSpec("gather", ("default",), Kind.DATA_MOVEMENT, _E, BYTES),
    # creation
    OpSpec("fill_", ("Scalar", "Tensor"), Kind.CREATION, _E, BYTES),
    OpSpec("zero_", ("default",), Kind.CREATION, _E, BYTES),
    OpSpec("arange", ("start_out",), Kind.CREATION, _E, ARANGE),
    # random, from the device generator
    OpSpec("uniform_", ("default",), Kind.RANDOM, _E),
    OpSpec("normal_", ("default",), Kind.RANDOM, _E),
)

# OpInfo (torch.testing._internal op_db) entries the device serves, and the registry ops each one needs on the
# device besides metadata/copy kernels. An OpInfo entry is supported for a dtype when all of them support it.
OPINFO_NEEDS: dict[str, tuple[str, ...]] = {
    **{
        n: (n,)
        for n in (
            "add",
            "sub",
            "mul",
            "maximum",
            "minimum",
            "fmod",
            "remainder",
            "atan2",
            "hypot",
            "neg",
            "abs",
            "sign",
            "sgn",
            "floor",
            "ceil",
            "trunc",
            "frac",
            "reciprocal",
            "sqrt",
            "rsqrt",
            "clamp_min",
            "clamp_max",
            *TRANSCENDENTAL,
            "addcmul",
            "addcdiv",
            "lerp",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "logical_and",
            "logical_or",
            "logical_xor",
            "logical_not",
            "isnan",
            "amax",
            "amin",
            "argmax",
            "argmin",
            "prod",
            "mm",
            "bmm",
            "addmm",
            "dot",
            "cat",
            "index_select",
            "gather",
            "where",
            "masked_fill",
            "zero_",
            "logsumexp",
            "pow",
        )
    },
    "clamp": ("clamp", "clamp_min", "clamp_max"),
    "true_divide": ("div",),
    "div.no_rounding_mode": ("div",),
    "div.floor_rounding": ("div",),
    "div.trunc_rounding": ("div",),
    "round": ("round",),
    "round.decimals_0": ("round",),
    "round.decimals_3": ("round",),
    "rsub": ("rsub",),
    "sum": ("sum",),
    "mean": ("mean", "sum"),
    "var": ("var",),
    "std": ("std",),
    "max.reduction_no_dim": ("max",),
    "max.reduction_with_dim": ("max",),
    "max.binary": ("maximum",),
    "min.reduction_no_dim": ("min",),
    "min.reduction_with_dim": ("min",),
    "min.binary": ("minimum",),
    "stack": ("cat",),
    "hstack": ("cat",),
    "vstack": ("cat",),
    "matmul": ("mm", "bmm", "dot", "addmv"),
    "mv": ("addmv",),
    "addmv": ("addmv",),
    "nn.functional.linear": ("addmm", "mm", "bmm", "add"),
    "softmax": ("_softmax",),
    "log_softmax": ("_log_softmax",),
    "nn.functional.layer_norm": ("native_layer_norm",),
    "native_layer_norm": ("native_layer_norm",),
    "nn.functional.relu": ("relu",),
    "nn.functional.gelu": ("gelu",),
    "nn.functional.silu": ("silu",),
    "nn.functional.mish": ("mish",),
    "nn.functional.elu": ("elu",),
    "nn.functional.leaky_relu": ("leaky_relu",),
    "nn.functional.hardtanh": ("hardtanh",),
    "nn.functional.hardsigmoid": ("hardsigmoid",),
    "nn.functional.hardswish": ("hardswish",),
    "nn.functional.softplus": ("softplus",),
    "fill": ("fill_",),
    "zeros_like": ("fill_", "zero_"),
    "ones_like": ("fill_",),
    "full_like": ("fill_",),
}


# OpInfo entries whose samples may legitimately be integer/bool on the device (they do no arithmetic).
_NON_FLOAT_OPINFO = frozenset(
    {
        "cat",
        "stack",
        "hstack",
        "vstack",
        "index_select",
        "gather",
        "where",
        "masked_fill",
        "logical_and",
        "logical_or",
        "logical_xor",
        "logical_not",
    }
)


@cache
def by_name() -> dict[str, OpSpec]:
    """Every registered overload name (``add.Tensor``, ``abs``) -> its spec."""
    return {name: spec for spec in SPECS for name in spec.names}


@cache
def by_packet() -> dict[str, OpSpec]:
    """Operator packet (``add``) -> its spec."""
    return {spec.aten: spec for spec in SPECS}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``float16``."""
    return str(dtype).removeprefix("torch.")


def sort_dtypes(dtypes) -> list[torch.dtype]:
    """Dtypes in the device's fixed order, so every export is deterministic."""
    return sorted(set(dtypes), key=DTYPE_ORDER.index)


def opinfo_dtypes(opinfo_name: str) -> list[torch.dtype]:
    """Dtypes for which every registry op an OpInfo entry needs is supported (empty if not served)."""
    needs = OPINFO_NEEDS.get(opinfo_name)
    if not needs:
        return []
    common = set(DTYPE_ORDER)
    for packet in needs:
        common &= set(by_packet()[packet].dtypes)
    return sort_dtypes(common & set(FLOATS) if opinfo_name not in _NON_FLOAT_OPINFO else common)
