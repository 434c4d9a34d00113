"""Binding an aten call's arguments to its schema, and the cache key of a call.

Kernels are generic per kind, so they need the arguments by schema name, and a key that says when two calls can
share one program: same shapes, dtypes and non-tensor arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ringsim.ops.registry import DEVICE
from ringsim.torchbridge import OpOverload, qualname, schema


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "tensor", "tensors", "other"
    default: Any
    has_default: bool
    kwarg_only: bool


@dataclass(frozen=True)
class Signature:
    """The parameters of one overload, in schema order."""

    qualname: str  # e.g. "add.Tensor"
    params: tuple[Param, ...]
    index: dict[str, int]

    @classmethod
    def of(cls, op: OpOverload) -> Signature:
        params = []
        for arg in schema(op).arguments:
            text = str(arg.type)
            kind = (
                "tensors"
                if text.startswith(("List[Tensor", "Tensor[]", "List[Optional[Tensor"))
                else ("tensor" if text.startswith(("Tensor", "Optional[Tensor")) else "other")
            )
            params.append(Param(arg.name, kind, arg.default_value, arg.has_default_value(), arg.kwarg_only))
        return cls(qualname(op), tuple(params), {p.name: i for i, p in enumerate(params)})

    def invoke(self, op: OpOverload, values: Sequence[Any]) -> Any:
        """Call `op` (this signature's overload, or one sharing its parameters) with bound values. Torch hands a
        kernel its wrapped scalars as numbers (`special.xlog1py(t, 5)` reaches `special_xlog1py(Tensor, Tensor)`
        with 5); an overload that refuses a number there is called again with it as a 0-dim tensor on the
        call's device, of the dtype torch gives the number."""
        try:
            return self._call(op, values)
        except RuntimeError as error:
            if "Expected a value of type 'Tensor'" not in str(error):
                raise
        device = next((v.device for v in values if isinstance(v, torch.Tensor)), torch.device("cpu"))
        wrapped = [_as_tensor(v, device) if p.kind == "tensor" else v for p, v in zip(self.params, values, strict=True)]
        return self._call(op, wrapped)

    def _call(self, op: OpOverload, values: Sequence[Any]) -> Any:
        args = [v for p, v in zip(self.params, values, strict=True) if not p.kwarg_only]
        kwargs = {p.name: v for p, v in zip(self.params, values, strict=True) if p.kwarg_only}
        return op(*args, **kwargs)

    def invoke_on_cpu(self, op: OpOverload, values: Sequence[Any]) -> Any:
        """Call `op` with each ring tensor as CPU ones of its shape and dtype (ones: no division by zero) to have CPU
        refuse a call the device refuses too, in CPU's own words (each op words its refusals its own way)."""
        on_cpu = [torch.ones(v.shape, dtype=v.dtype) if _on_ring(v) else v for v in values]
        return self.invoke(op, on_cpu)

    def bind(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """Argument values in schema order, defaults filled in."""
        values = list(args)
        for param in self.params[len(values) :]:
            values.append(kwargs.get(param.name, param.default))
        return values


def _as_tensor(value: Any, device: torch.device) -> Any:
    """A number as the 0-dim tensor torch wraps it in (bool, int64, the default float or complex dtype)."""
    if isinstance(value, bool):
        return torch.tensor(value, device=device)
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.int64, device=device)
    if isinstance(value, float):
        return torch.tensor(value, dtype=torch.get_default_dtype(), device=device)
    if isinstance(value, complex):
        return torch.tensor(
            value,
            dtype=torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64,
            device=device,
        )
    return value


def key_of(value: Any) -> Any:
    """What of an argument decides the program: tensors by shape/dtype/device, other values as themselves."""
    if isinstance(value, torch.Tensor):
        if value.is_cpu:
            if value.dim() == 0:
                return ("cpu_scalar", value.dtype, key_of(value.item()))
            return ("cpu", value.dtype, value.shape)
        return (value.dtype, value.shape)  # torch.Size hashes as the tuple it is; every other tensor is on the device
    if isinstance(value, (list, tuple)):
        return tuple(key_of(v) for v in value)
    if isinstance(value, float):
        return _float_key(value)
    if isinstance(value, complex):
        return ("complex", _float_key(value.real), _float_key(value.imag))
    return (type(value).__name__, value)


def _float_key(value: float) -> Any:
    """Floats by bits, not equality: 0.0 == -0.0 would share a program baked with the wrong sign; any NaN is one."""
    return "nan" if math.isnan(value) else ("float", value.hex())


def _on_ring(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == DEVICE
