"""Registers every registry op's kernels for PrivateUse1, and the fallback that names what is missing."""

from __future__ import annotations

from typing import Any

import torch

from ringsim.ops import (
    along_dim,
    creation,
    dispatch,
    elementwise,
    errors,
    fastpath,
    general,
    indexing,
    matmul,
    movement,
    rows,
)
from ringsim.ops.calls import Signature
from ringsim.ops.plan import Plan
from ringsim.ops.registry import SPECS, Kind, OpSpec
from ringsim.ops.variants import Variant, variants
from ringsim.torchbridge import OpOverload, never_traced, overload_name, qualname

#: Python's shift operators, run as the named shifts: the engine resolves compute fns by aten name, and an
#: operator's dunder name is not one there.
_SHIFTS = {"__lshift__": torch.ops.aten.bitwise_left_shift, "__rshift__": torch.ops.aten.bitwise_right_shift}


def _build_shift(spec: OpSpec, op: OpOverload, sig: Signature, values: list[Any], key: Any) -> Plan:
    """The plan of the named shift taking the same arguments (``Scalar`` is ``Tensor_Scalar`` there)."""
    named = _SHIFTS[spec.aten]
    twin = named.Tensor if overload_name(op) == "Tensor" else named.Tensor_Scalar
    return elementwise.build(spec, twin, Signature.of(twin), values, key)


_BUILDERS: dict[str, dispatch.Builder] = {
    **dict.fromkeys(_SHIFTS, _build_shift),
    "cat": movement.build_cat,
    "index_select": movement.build_index_select,
    "gather": movement.build_gather,
    "_softmax": rows.build_softmax,
    "_log_softmax": rows.build_softmax,
    "native_layer_norm": rows.build_layer_norm,
    "nonzero_static": indexing.build_nonzero_static,
}
_BY_KIND: dict[Kind, dispatch.Builder] = {
    Kind.ELEMENTWISE: elementwise.build,
    Kind.DATA_MOVEMENT: elementwise.build,
    Kind.REDUCTION: rows.build_reduction,
    Kind.MATMUL: matmul.build,
    Kind.ALONG_DIM: along_dim.build,
    Kind.GENERAL: general.build,
}

# Ops whose only non-CPU kernel is torch's composite stub that raises an unhelpful error: refused by name instead.
STUBBED = ("convolution_overrideable", "convolution_backward_overrideable")

_libraries: list[torch.library.Library] = []


def _creation_kernel(spec: OpSpec, op: OpOverload, qualname: str):
    if spec.aten == "fill_":
        return fastpath.replayed(creation.fill_kernel(spec, qualname))
    if spec.aten == "zero_":
        return fastpath.replayed(creation.zero_kernel(spec, qualname))
    if spec.aten == "arange":
        return creation.arange_kernel(spec, qualname)
    if spec.aten in ("linspace", "logspace", "range"):
        return creation.sequence_kernel(spec, op)
    if spec.aten == "randperm":
        return creation.randperm_kernel(spec, qualname)
    if qualname == "bernoulli_.Tensor":
        return creation.bernoulli_tensor_kernel(spec, qualname)
    return creation.random_kernel(spec, op)


def _unregistered(op: OpOverload, *args: Any, **kwargs: Any) -> Any:
    """PrivateUse1 fallback: everything not in the registry is refused by name, never run on the host."""
    raise errors.unsupported_op(qualname(op))


def _refuser(name: str):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise errors.unsupported_op(name)

    return refuse


def registered(spec: OpSpec, variant: Variant) -> bool:
    """Whether the device has a kernel for this variant. The out= forms of data-dependent ops (a result size only
    the data decides) stay refused by name; `ringsim capabilities` lists exactly what this admits."""
    return not (spec.kind is Kind.INDEXING and spec.aten in indexing.KERNELS and variant.role != "functional")


def register() -> None:
    """Register the kernels (once per process)."""
    if _libraries:
        return
    lib = torch.library.Library("aten", "IMPL")
    for spec in SPECS:
        for variant in variants(spec):
            if not registered(spec, variant):
                continue
            if spec.kind in (Kind.CREATION, Kind.RANDOM):
                kernel = _creation_kernel(spec, variant.op, variant.qualname)
            elif spec.kind is Kind.INDEXING and spec.aten in indexing.KERNELS:
                kernel = indexing.KERNELS[spec.aten](spec, variant.qualname)
            else:
                build = _BUILDERS.get(spec.aten) or _BY_KIND[spec.kind]
                if variant.role == "functional":
                    kernel = fastpath.replayed(dispatch.functional_kernel(spec, variant.op, build))
                    if spec.aten == "cat":
                        kernel = movement.keeping_memory_format(kernel)
                elif variant.role == "inplace":
                    kernel = fastpath.replayed(dispatch.inplace_kernel(spec, variant.op, variant.functional, build))
                else:
                    kernel = dispatch.out_kernel(spec, variant.op, variant.functional, build)
            lib.impl(variant.qualname, never_traced(kernel), "PrivateUse1")
    for name in STUBBED:
        lib.impl(name, never_traced(_refuser(name)), "PrivateUse1")
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(never_traced(_unregistered), "PrivateUse1")
    _libraries.extend([lib, fallback])
