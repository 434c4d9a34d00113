"""The PrivateUse1 kernels: one generic wrapper per overload, a program builder per kind behind it.

The wrapper checks dtypes against the registry (the clear error), makes device operands contiguous and stick
aligned (through the device copy kernel), finds or builds the plan for the call's signature and runs it. In-place
and ``out=`` overloads run their functional overload's plan and write the result into the destination, directly when
the destination already has the result's layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ringsim.ops import errors, layout
from ringsim.ops.calls import Signature, key_of
from ringsim.ops.plan import Plan
from ringsim.ops.programs import STICK
from ringsim.ops.registry import DEVICE, DTYPE_ORDER, OpSpec

Builder = Callable[[OpSpec, torch._ops.OpOverload, Signature, list[Any], Any], Plan]

_PLANS: dict[Any, Plan] = {}
_INPLACE_CHECKED: set[Any] = set()


def aligned(t: torch.Tensor) -> bool:
    """Contiguous and starting on a stick: what a DMA can read without a restickify."""
    return t.is_contiguous() and t.data_ptr() % STICK == 0


def _prepare(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.device.type != DEVICE:
            if value.dim() == 0:
                return value
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {DEVICE} and "
                f"{value.device.type}"
            )
        return value if aligned(value) else layout.contiguous(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [_prepare(v) for v in value]
    return value


def _check_dtypes(qualname: str, spec: OpSpec, values: list[Any], sig: Signature) -> None:
    first = True
    for param, value in zip(sig.params, values, strict=True):
        tensors = value if param.kind == "tensors" and value is not None else [value]
        for t in tensors:
            if not isinstance(t, torch.Tensor) or t.device.type != DEVICE:
                continue
            if first and t.dtype not in spec.dtypes:
                raise errors.unsupported_dtype(qualname, t.dtype, spec.dtypes)
            if t.dtype not in DTYPE_ORDER:
                raise errors.unsupported_dtype(qualname, t.dtype, spec.dtypes)
        if param.kind != "other" and any(isinstance(t, torch.Tensor) for t in tensors):
            first = False


def functional_kernel(spec: OpSpec, op: torch._ops.OpOverload, build: Builder) -> Callable[..., Any]:
    """The kernel of a functional overload."""
    sig = Signature.of(op)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        values = sig.bind(args, kwargs)
        plan, values = _plan(spec, op, sig, values, build, sig.qualname)
        return plan.run(values, _device(values))

    return kernel


def _plan(
    spec: OpSpec, op: torch._ops.OpOverload, sig: Signature, values: list[Any], build: Builder, called: str
) -> tuple[Plan, list[Any]]:
    """The cached plan for this signature and the prepared operands; a new signature is first checked."""
    key = (sig.qualname, *map(key_of, values))
    plan = _PLANS.get(key)
    if plan is None:
        _check_dtypes(called, spec, values, sig)
        prepared = [_prepare(v) for v in values]
        plan = _PLANS[key] = build(spec, op, sig, prepared, key)
        return plan, prepared
    return plan, [_prepare(v) for v in values]


def _device(values: list[Any]) -> torch.device:
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == DEVICE:
            return v.device
        if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            return v[0].device
    return torch.device(DEVICE)


def inplace_kernel(spec: OpSpec, op: torch._ops.OpOverload, functional: torch._ops.OpOverload, build: Builder):
    """``add_``: the functional plan, writing into ``self`` (checked by the in-place meta kernel first)."""
    sig = Signature.of(functional)
    qualname = Signature.of(op).qualname

    def kernel(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        values = sig.bind((self, *args), kwargs)
        plan, prepared = _plan(spec, functional, sig, values, build, qualname)
        if (qualname, plan.key) not in _INPLACE_CHECKED:
            _check_inplace(op, sig, values)
            _INPLACE_CHECKED.add((qualname, plan.key))
        _write(plan, prepared, self)
        return self

    return kernel


def out_kernel(spec: OpSpec, op: torch._ops.OpOverload, functional: torch._ops.OpOverload, build: Builder):
    """``add.out``: the functional plan, resizing ``out`` as torch does and writing into it."""
    sig = Signature.of(functional)
    out_sig = Signature.of(op)
    qualname = out_sig.qualname
    names = {p.name for p in sig.params}

    def kernel(*args: Any, **kwargs: Any) -> torch.Tensor:
        named = dict(zip((p.name for p in out_sig.params), out_sig.bind(args, kwargs), strict=True))
        out = named.pop("out")
        values = [named[p.name] for p in sig.params if p.name in names]
        plan, values = _plan(spec, functional, sig, values, build, qualname)
        shape = plan.outputs[0].shape
        if tuple(out.shape) != shape:
            out.resize_(shape)
        _write(plan, values, out)
        return out

    return kernel


def _check_inplace(op: torch._ops.OpOverload, sig: Signature, values: list[Any]) -> None:
    """Let torch's meta kernel refuse what the in-place op refuses (broadcast to self, lossy casts)."""
    meta = [
        torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
        if isinstance(v, torch.Tensor) and v.device.type == DEVICE
        else v
        for v in values
    ]
    sig.invoke(op, meta)


def _write(plan: Plan, values: list[Any], dest: torch.Tensor) -> None:
    spec = plan.outputs[0]
    if len(plan.outputs) == 1 and dest.dtype == spec.dtype and aligned(dest) and tuple(dest.shape) == spec.shape:
        plan.run(values, dest.device, into=[dest])
    else:
        result = plan.run(values, dest.device)
        dest.copy_(result if isinstance(result, torch.Tensor) else result[0])
