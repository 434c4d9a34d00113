"""The one declared op set of the Ring-32 device: which aten ops it executes, for which dtypes, and how.

Everything that answers "does the device run X for dtype D?" reads this table: kernel registration, the
clear NotImplementedError, ``ringsim.capabilities()``, the test framework's ``supported_ops`` and the tests.

Dtype rule (an inference accelerator, not a general CPU):
- Floating arithmetic runs on float16 (primary), bfloat16 and float32 only, computed in float32 and rounded once.
- The integer unit does exact integer work on uint8, int8, int16, int32 and int64 and bool: comparisons, logic,
  bitwise ops, add/sub/mul, min/max, sums and indices. That is what torch's own test helpers (``assert_close``,
  ``make_tensor``, printing) run on the device under test, besides the op under test.
- float64 is *held*, not computed in: it can be stored, copied, compared, selected and rounded up (``ceil``) bit-exactly
  (torch's printing widens to it on the device, and formats it so), and division is the one arithmetic op that
  accepts it. No complex, anywhere.
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
    ALONG_DIM = "along_dim"
    GENERAL = "general"
    INDEXING = "indexing"
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
    ALONG_DIM = "along_dim"
    GENERAL = "general"
    INDEXING = "indexing"
    STATISTICAL = "statistical"


FLOATS: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32)
INTS: tuple[torch.dtype, ...] = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
NUMBERS: tuple[torch.dtype, ...] = (*FLOATS, *INTS)
ALL: tuple[torch.dtype, ...] = (*NUMBERS, torch.bool)
BITS: tuple[torch.dtype, ...] = (*INTS, torch.bool)
#: Ops that only compare or select values accept held float64 too.
HELD: tuple[torch.dtype, ...] = (*ALL, torch.float64)
ARANGE: tuple[torch.dtype, ...] = NUMBERS
DTYPE_ORDER: tuple[torch.dtype, ...] = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
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
    "asinh",
    "acosh",
    "atanh",
    "erfc",
    "erfinv",
    "lgamma",
    "digamma",
    "logit",
    "sinc",
)

_R = Tolerance.REDUCTION


def _op(aten: str, kind: Kind, *overloads: str, tol: Tolerance = _E, dtypes=FLOATS) -> OpSpec:
    return OpSpec(aten, overloads or ("default",), kind, tol, dtypes)


SPECIAL_BINARY = (
    "igamma",
    "igammac",
    "special_zeta",
    "special_xlog1py",
    *(f"special_{kind}_polynomial_{v}" for kind in ("chebyshev", "shifted_chebyshev") for v in "tuvw"),
    "special_hermite_polynomial_h",
    "special_hermite_polynomial_he",
    "special_laguerre_polynomial_l",
    "special_legendre_polynomial_p",
)

SPECS: tuple[OpSpec, ...] = (
    # binary arithmetic: one fp32 operation, one rounding (integers: exact)
    _ew("add", "Tensor", "Scalar", dtypes=ALL),
    _ew("sub", "Tensor", "Scalar", dtypes=NUMBERS),
    _ew("rsub", "Tensor", "Scalar", dtypes=NUMBERS),
    _ew("mul", "Tensor", "Scalar", dtypes=ALL),
    _ew("div", "Tensor", "Scalar", "Tensor_mode", "Scalar_mode", dtypes=(*NUMBERS, torch.float64)),
    _ew("floor_divide", "default", "Scalar", dtypes=NUMBERS),
    _ew("maximum", dtypes=ALL),
    _ew("minimum", dtypes=ALL),
    _ew("fmax"),
    _ew("fmin"),
    _ew("fmod", "Tensor", "Scalar", dtypes=NUMBERS),
    _ew("remainder", "Tensor", "Scalar", "Scalar_Tensor", dtypes=NUMBERS),
    _ew("pow", "Tensor_Tensor", "Tensor_Scalar", "Scalar", tol=_T, dtypes=NUMBERS),
    _ew("atan2", tol=_T),
    _ew("hypot", tol=_T),
    _ew("logaddexp", tol=_T),
    _ew("logaddexp2", tol=_T),
    _ew("xlogy", "Tensor", "Scalar_Other", "Scalar_Self", tol=_T),
    _ew("copysign", "Tensor", "Scalar", tol=_E),
    _ew("heaviside", tol=_E, dtypes=ALL),
    # self * 2**other in fp32, then one rounding (a float exponent makes 2**other a transcendental); torch's
    # composite fallback for devices without an ldexp kernel computes 2**other in self's dtype, overflowing float16
    _ew("ldexp", "Tensor", tol=_T),
    # special functions of two arguments: fp32 library functions, then one rounding
    *(_ew(name, tol=_T) for name in SPECIAL_BINARY),
    # integer and bit operations: exact
    *(
        _ew(name, "Tensor", "Scalar", "Scalar_Tensor", tol=_E, dtypes=BITS)
        for name in ("bitwise_and", "bitwise_or", "bitwise_xor")
    ),
    _ew("bitwise_not", tol=_E, dtypes=BITS),
    _ew("bitwise_left_shift", "Tensor", "Tensor_Scalar", "Scalar_Tensor", tol=_E, dtypes=INTS),
    _ew("bitwise_right_shift", "Tensor", "Tensor_Scalar", "Scalar_Tensor", tol=_E, dtypes=INTS),
    # Python's << and >> (and <<=, >>=): the same shifts under their operator names
    _ew("__lshift__", "Tensor", "Scalar", tol=_E, dtypes=INTS),
    _ew("__rshift__", "Tensor", "Scalar", tol=_E, dtypes=INTS),
    _ew("gcd", tol=_E, dtypes=INTS),
    _ew("lcm", tol=_E, dtypes=INTS),
    # unary arithmetic
    _ew("neg", tol=_E, dtypes=(*NUMBERS, torch.float64)),
    _ew("abs", tol=_E, dtypes=(*NUMBERS, torch.float64)),
    _ew("sign", tol=_E, dtypes=ALL),
    _ew("sgn", tol=_E, dtypes=ALL),
    _ew("signbit", tol=_E, dtypes=NUMBERS),
    _ew("floor", tol=_E, dtypes=NUMBERS),
    _ew("ceil", tol=_E, dtypes=(*NUMBERS, torch.float64)),  # exact; printing a held float64 tensor needs it
    _ew("trunc", tol=_E, dtypes=NUMBERS),
    _ew("round", "default", "decimals"),
    _ew("frac"),
    _ew("reciprocal"),
    _ew("sqrt"),
    _ew("rsqrt", tol=_T),
    _ew("clamp", "default", "Tensor", tol=_E, dtypes=NUMBERS),
    _ew("clamp_min", "default", "Tensor", tol=_E, dtypes=NUMBERS),
    _ew("clamp_max", "default", "Tensor", tol=_E, dtypes=NUMBERS),
    # transcendental: fp32 library functions, then one rounding
    *(_ew(name, tol=_T) for name in TRANSCENDENTAL),
    # ternary
    _ew("addcmul", tol=Tolerance.FUSED),
    _ew("addcdiv", tol=Tolerance.FUSED),
    _ew("lerp", "Scalar", "Tensor", tol=Tolerance.FUSED),
    # activations
    _ew("relu", tol=_E, dtypes=NUMBERS),
    _ew("hardtanh", tol=_E),
    _ew("leaky_relu"),
    _ew("hardsigmoid"),
    _ew("hardswish"),
    _ew("gelu", tol=_T),
    _ew("silu", tol=_T),
    _ew("mish", tol=_T),
    _ew("elu", tol=_T),
    _ew("softplus", tol=_T),
    # comparisons, logic and classification: bool results, exact
    *(_ew(name, "Tensor", "Scalar", tol=_E, dtypes=HELD) for name in ("eq", "ne", "lt", "le", "gt", "ge")),
    *(_ew(name, tol=_E, dtypes=HELD) for name in ("logical_and", "logical_or", "logical_xor", "logical_not")),
    _ew("isnan", tol=_E, dtypes=HELD),
    _ew("isinf", tol=_E, dtypes=HELD),
    _ew("isposinf", tol=_E, dtypes=HELD),
    _ew("isneginf", tol=_E, dtypes=HELD),
    # masks
    OpSpec("where", ("self",), Kind.DATA_MOVEMENT, _E, HELD),
    OpSpec("masked_fill", ("Scalar", "Tensor"), Kind.DATA_MOVEMENT, _E, HELD),
    # reductions: fp32 accumulator, one rounding (integers: int64 accumulator, exact)
    _op("sum", Kind.REDUCTION, "dim_IntList", tol=_R, dtypes=ALL),
    _op("nansum", Kind.REDUCTION, tol=_R),
    _op("mean", Kind.REDUCTION, "dim", tol=_R),
    _op("prod", Kind.REDUCTION, "default", "dim_int", tol=_R, dtypes=ALL),
    _op("amax", Kind.REDUCTION, dtypes=HELD),
    _op("amin", Kind.REDUCTION, dtypes=HELD),
    _op("aminmax", Kind.REDUCTION, dtypes=NUMBERS),
    _op("max", Kind.REDUCTION, "default", "dim", dtypes=HELD),
    _op("min", Kind.REDUCTION, "default", "dim", dtypes=HELD),
    _op("argmax", Kind.REDUCTION, dtypes=NUMBERS),
    _op("argmin", Kind.REDUCTION, dtypes=NUMBERS),
    _op("all", Kind.REDUCTION, "default", "dim", "dims", dtypes=HELD),
    _op("any", Kind.REDUCTION, "default", "dim", "dims", dtypes=HELD),
    _op("count_nonzero", Kind.REDUCTION, "dim_IntList", dtypes=ALL),
    _op("var", Kind.REDUCTION, "correction", tol=Tolerance.STATISTICAL),
    _op("std", Kind.REDUCTION, "correction", tol=Tolerance.STATISTICAL),
    _op("var_mean", Kind.REDUCTION, "correction", tol=Tolerance.STATISTICAL),
    _op("std_mean", Kind.REDUCTION, "correction", tol=Tolerance.STATISTICAL),
    _op("logsumexp", Kind.REDUCTION, tol=Tolerance.NORMALIZATION),
    _op("linalg_vector_norm", Kind.REDUCTION, tol=_R),
    # along one dim: sorting, selection and scans, rows split across cores
    _op("sort", Kind.ALONG_DIM, "default", "stable", dtypes=ALL),
    _op("topk", Kind.ALONG_DIM, dtypes=NUMBERS),
    _op("kthvalue", Kind.ALONG_DIM, dtypes=NUMBERS),
    _op("median", Kind.ALONG_DIM, "default", "dim", dtypes=NUMBERS),
    _op("nanmedian", Kind.ALONG_DIM, "default", "dim"),
    _op("mode", Kind.ALONG_DIM, dtypes=NUMBERS),
    _op("cumsum", Kind.ALONG_DIM, tol=_R, dtypes=ALL),
    _op("cumprod", Kind.ALONG_DIM, tol=_R, dtypes=ALL),
    _op("cummax", Kind.ALONG_DIM, dtypes=ALL),
    _op("cummin", Kind.ALONG_DIM, dtypes=ALL),
    _op("logcumsumexp", Kind.ALONG_DIM, tol=Tolerance.NORMALIZATION),
    # matmul: fp32 accumulator over K, one rounding
    OpSpec("mm", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("bmm", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("addmm", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("dot", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    OpSpec("addmv", ("default",), Kind.MATMUL, Tolerance.MATMUL),
    _op("trace", Kind.GENERAL, tol=_R, dtypes=NUMBERS),
    # row-wise normalization
    OpSpec("_softmax", ("default",), Kind.NORMALIZATION, Tolerance.NORMALIZATION),
    OpSpec("_log_softmax", ("default",), Kind.NORMALIZATION, Tolerance.NORMALIZATION),
    OpSpec("native_layer_norm", ("default",), Kind.NORMALIZATION, Tolerance.NORMALIZATION),
    # pooling: one core per call, windows on the scratchpad
    _op("max_pool2d_with_indices", Kind.GENERAL),
    _op("max_pool3d_with_indices", Kind.GENERAL),
    _op("avg_pool2d", Kind.GENERAL, tol=_R),
    _op("avg_pool3d", Kind.GENERAL, tol=_R),
    _op("_adaptive_avg_pool2d", Kind.GENERAL, tol=_R),
    _op("_adaptive_avg_pool3d", Kind.GENERAL, tol=_R),
    _op("adaptive_max_pool2d", Kind.GENERAL),
    # data movement
    OpSpec("cat", ("default",), Kind.DATA_MOVEMENT, _E, HELD),
    OpSpec("index_select", ("default",), Kind.DATA_MOVEMENT, _E, HELD),
    OpSpec("gather", ("default",), Kind.DATA_MOVEMENT, _E, HELD),
    _op("flip", Kind.GENERAL, dtypes=HELD),
    _op("roll", Kind.GENERAL, dtypes=HELD),
    _op("tril", Kind.GENERAL, dtypes=HELD),
    _op("triu", Kind.GENERAL, dtypes=HELD),
    _op("take", Kind.GENERAL, dtypes=HELD),
    _op("put", Kind.GENERAL, tol=_R, dtypes=ALL),
    _op("scatter", Kind.GENERAL, "src", "value", "reduce", "value_reduce", tol=_R, dtypes=ALL),
    _op("scatter_add", Kind.GENERAL, tol=_R, dtypes=ALL),
    _op("scatter_reduce", Kind.GENERAL, "two", tol=_R, dtypes=NUMBERS),
    _op("index_add", Kind.GENERAL, tol=_R, dtypes=ALL),
    _op("index_copy", Kind.GENERAL, dtypes=HELD),
    _op("index_fill", Kind.GENERAL, "int_Scalar", "int_Tensor", dtypes=HELD),
    _op("masked_scatter", Kind.GENERAL, dtypes=HELD),
    _op("isin", Kind.GENERAL, "Tensor_Tensor", "Tensor_Scalar", dtypes=NUMBERS),
    _op("bucketize", Kind.GENERAL, "Tensor", dtypes=NUMBERS),
    _op("searchsorted", Kind.GENERAL, "Tensor", dtypes=NUMBERS),
    _op("histc", Kind.GENERAL),
    # indexing with tensors, and results whose size depends on the data (a count first, then the program)
    _op("index", Kind.INDEXING, "Tensor", dtypes=HELD),
    _op("_index_put_impl_", Kind.INDEXING, dtypes=HELD),
    _op("nonzero", Kind.INDEXING, dtypes=HELD),
    _op("nonzero_static", Kind.INDEXING, dtypes=HELD),  # the caller's size: no count, so out= and replay as usual
    _op("masked_select", Kind.INDEXING, dtypes=HELD),
    _op("unique_consecutive", Kind.INDEXING, dtypes=ALL),
    _op("_unique2", Kind.INDEXING, dtypes=ALL),
    # creation
    OpSpec("fill_", ("Scalar", "Tensor"), Kind.CREATION, _E, HELD),
    OpSpec("zero_", ("default",), Kind.CREATION, _E, HELD),
    OpSpec("arange", ("start_out",), Kind.CREATION, _E, ARANGE),
    OpSpec("linspace", ("out",), Kind.CREATION, Tolerance.ROUNDED, NUMBERS),
    OpSpec("logspace", ("out",), Kind.CREATION, _T, NUMBERS),
    OpSpec("range", ("out",), Kind.CREATION, _E, NUMBERS),
    # random, from the device generator
    OpSpec("uniform_", ("default",), Kind.RANDOM, _E),
    OpSpec("normal_", ("default",), Kind.RANDOM, _E),
    OpSpec("random_", ("default", "from", "to"), Kind.RANDOM, _E, ALL),
    OpSpec("bernoulli_", ("float", "Tensor"), Kind.RANDOM, _E, ALL),
    OpSpec("exponential_", ("default",), Kind.RANDOM, _E),
    OpSpec("geometric_", ("default",), Kind.RANDOM, _E, NUMBERS),
    OpSpec("cauchy_", ("default",), Kind.RANDOM, _E),
    OpSpec("log_normal_", ("default",), Kind.RANDOM, _E),
    OpSpec("randperm", ("generator_out",), Kind.RANDOM, _E, NUMBERS),
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
            "floor_divide",
            "fmax",
            "fmin",
            "logaddexp",
            "logaddexp2",
            "xlogy",
            "copysign",
            "heaviside",
            "ldexp",
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
            "bitwise_not",
            "bitwise_left_shift",
            "bitwise_right_shift",
            "gcd",
            "lcm",
            "signbit",
            "isinf",
            "isposinf",
            "isneginf",
            "nansum",
            "aminmax",
            "all",
            "any",
            "count_nonzero",
            "var_mean",
            "std_mean",
            "sort",
            "topk",
            "kthvalue",
            "median",
            "nanmedian",
            "mode",
            "cumsum",
            "cumprod",
            "cummax",
            "cummin",
            "logcumsumexp",
            "trace",
            "flip",
            "roll",
            "tril",
            "triu",
            "take",
            "put",
            "scatter",
            "scatter_add",
            "index_add",
            "index_copy",
            "index_fill",
            "masked_scatter",
            "isin",
            "bucketize",
            "searchsorted",
            "histc",
            "nonzero",
            "nonzero_static",
            "masked_select",
            "unique_consecutive",
        )
    },
    "isfinite": ("isinf", "isnan", "logical_not"),
    "igamma": ("igamma",),
    "igammac": ("igammac",),
    **{"special." + name.removeprefix("special_"): (name,) for name in SPECIAL_BINARY if name.startswith("special_")},
    "argsort": ("sort",),
    "msort": ("sort",),
    "fliplr": ("flip",),
    "flipud": ("flip",),
    "unique": ("_unique2",),
    "index_put": ("_index_put_impl_",),
    "__getitem__": ("index",),
    "linalg.vector_norm": ("linalg_vector_norm",),
    "var_mean.unbiased": ("var_mean",),
    "std_mean.unbiased": ("std_mean",),
    **{f"scatter_reduce.{r}": ("scatter_reduce",) for r in ("sum", "prod", "mean", "amax", "amin")},
    "nn.functional.max_pool2d": ("max_pool2d_with_indices",),
    "nn.functional.max_pool3d": ("max_pool3d_with_indices",),
    "nn.functional.avg_pool1d": ("avg_pool2d",),
    "nn.functional.avg_pool2d": ("avg_pool2d",),
    "nn.functional.avg_pool3d": ("avg_pool3d",),
    "nn.functional.adaptive_avg_pool1d": ("_adaptive_avg_pool2d",),
    "nn.functional.adaptive_avg_pool2d": ("_adaptive_avg_pool2d",),
    "nn.functional.adaptive_avg_pool3d": ("_adaptive_avg_pool3d",),
    "nn.functional.adaptive_max_pool1d": ("adaptive_max_pool2d",),
    "nn.functional.adaptive_max_pool2d": ("adaptive_max_pool2d",),
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
    return sort_dtypes(common - {torch.float64})  # held, not computed in
