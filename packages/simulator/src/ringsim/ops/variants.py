"""The overloads registering one registry entry covers: the functional ones, their in-place and ``out=`` forms."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from ringsim.ops.registry import SPECS, OpSpec
from ringsim.torchbridge import OpOverload, qualname, schema


@dataclass(frozen=True)
class Variant:
    qualname: str  # e.g. "add_.Tensor"
    role: str  # "functional", "inplace" or "out"
    op: OpOverload
    functional: OpOverload


def _arguments(op: OpOverload) -> tuple[tuple[str, str], ...]:
    return tuple((a.name, str(a.type)) for a in schema(op).arguments if not a.is_out)


def _outs(op: OpOverload) -> int:
    return sum(1 for a in schema(op).arguments if a.is_out)


def _overload(packet: str, name: str) -> OpOverload | None:
    pk = getattr(torch.ops.aten, packet, None)
    return getattr(pk, name, None) if pk is not None and name in pk.overloads() else None


def _inplace(spec: OpSpec, name: str, functional: OpOverload) -> OpOverload | None:
    """The in-place form of `functional`: the same overload name (``add_.Tensor``), else the one overload taking the
    same arguments (``floor_divide_.Tensor`` for ``floor_divide``, ``pow_.Scalar`` for ``pow.Tensor_Scalar``).
    Python's operators name theirs with an ``i`` (``__ilshift__`` for ``__lshift__``)."""
    packet = f"__i{spec.aten[2:]}" if spec.aten.startswith("__") else spec.aten + "_"
    if not hasattr(torch.ops.aten, packet):
        return None
    args = _arguments(functional)
    named = _overload(packet, name)
    if named is not None and _arguments(named) == args:
        return named
    # an overload name says nothing across packets when the arguments differ: `pow_.Scalar` takes a tensor and a
    # scalar exponent, `pow.Scalar` a scalar base and a tensor exponent
    same = [
        op
        for candidate in getattr(torch.ops.aten, packet).overloads()
        if (op := _overload(packet, candidate)) is not None
        and _outs(op) == 0
        and _arguments(op) == args
        and not _claimed(spec, candidate, op)
    ]
    return same[0] if len(same) == 1 else None


def _claimed(spec: OpSpec, name: str, inplace: OpOverload) -> bool:
    """Whether the in-place overload `name` is the same-named in-place form of another of the spec's overloads."""
    own = _overload(spec.aten, name) if name in spec.overloads else None
    return own is not None and _arguments(own) == _arguments(inplace)


@cache
def variants(spec: OpSpec) -> tuple[Variant, ...]:
    """Every overload of `spec`, in a stable order."""
    found: list[Variant] = []
    for name in spec.overloads:
        functional = _overload(spec.aten, name)
        if functional is None:
            raise LookupError(f"aten::{spec.aten}.{name} does not exist in this torch")
        found.append(Variant(qualname(functional), "functional", functional, functional))
        if spec.aten.endswith("_") and not spec.aten.startswith("__"):
            continue  # an in-place op itself (fill_); an operator's name (__lshift__) only ends like one
        inplace = _inplace(spec, name, functional)
        if inplace is not None:
            found.append(Variant(qualname(inplace), "inplace", inplace, functional))
        args = _arguments(functional)
        for candidate in getattr(torch.ops.aten, spec.aten).overloads():
            op = _overload(spec.aten, candidate)
            if op is not None and _outs(op) >= 1 and _arguments(op) == args and op is not functional:
                found.append(Variant(qualname(op), "out", op, functional))
    return tuple(found)


@cache
def all_variants() -> tuple[Variant, ...]:
    return tuple(v for spec in SPECS for v in variants(spec))
