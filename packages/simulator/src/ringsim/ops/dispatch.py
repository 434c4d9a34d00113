"""The PrivateUse1 kernels: one generic wrapper per overload, a program builder per kind behind it.

The wrapper checks dtypes against the registry (the clear error), makes device operands contiguous and stick
aligned (through the device copy kernel), finds or builds the plan for the call's signature and runs it. In-place
and ``out=`` overloads run their functional overload's plan and write the result into the destination, directly when
the destination already has the result's layout; a destination sharing memory with an input is refused where CPU
refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ringsim.ops import caller_warnings, errors, layout
from ringsim.ops.calls import Signature, key_of
from ringsim.ops.elementwise import meta_args
from ringsim.ops.plan import Plan
from ringsim.ops.programs import STICK
from ringsim.ops.registry import DEVICE, DTYPE_ORDER, Kind, OpSpec
from ringsim.torchbridge import OpOverload, schema

Builder = Callable[[OpSpec, OpOverload, Signature, list[Any], Any], Plan]

_PLANS: dict[Any, Plan] = {}
_INPLACE_CHECKED: set[Any] = set()
_RESULT_SHAPES: dict[Any, tuple[tuple[int, ...], ...]] = {}
_SLOTS: dict[Any, tuple[int, ...]] = {}


def aligned(t: torch.Tensor) -> bool:
    """Contiguous and starting on a stick: what a DMA can read without a restickify."""
    return t.is_contiguous() and t.data_ptr() % STICK == 0


def _prepare(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_cpu or value.device.type != DEVICE:
            if value.dim() == 0:
                return value
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, {DEVICE} and "
                f"{value.device.type}"
            )
        return value if value.is_contiguous() and value.data_ptr() % STICK == 0 else layout.contiguous(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [_prepare(v) for v in value]
    return value


def _tensor_slots(values: list[Any]) -> tuple[int, ...]:
    """The argument positions holding tensors (or lists of them): the only ones a cached call prepares."""
    return tuple(i for i, v in enumerate(values) if isinstance(v, (torch.Tensor, list, tuple)))


def _check_dtypes(qualname: str, spec: OpSpec, values: list[Any], sig: Signature) -> None:
    """The first device operand's dtype is the op's: a host 0-dim operand is a scalar, whichever place it takes
    (`copysign(tensor(1.0), ring_float64)` computes in float64 as `copysign(ring_float64, 1.0)` does)."""
    first = True
    for param, value in zip(sig.params, values, strict=True):
        tensors = value if param.kind == "tensors" and value is not None else [value]
        on_device = [t for t in tensors if isinstance(t, torch.Tensor) and t.device.type == DEVICE]
        for t in on_device:
            if first and t.dtype not in spec.dtypes:
                raise errors.unsupported_dtype(qualname, t.dtype, spec.dtypes)
            if t.dtype not in DTYPE_ORDER:
                raise errors.unsupported_dtype(qualname, t.dtype, spec.dtypes)
        if param.kind != "other" and on_device:
            first = False


def functional_kernel(spec: OpSpec, op: OpOverload, build: Builder) -> Callable[..., Any]:
    """The kernel of a functional overload."""
    sig = Signature.of(op)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        values = sig.bind(args, kwargs)
        plan, values = _plan(spec, op, sig, values, build, sig.qualname)
        return plan.run(values, _device(values))

    return kernel


def _plan(
    spec: OpSpec, op: OpOverload, sig: Signature, values: list[Any], build: Builder, called: str
) -> tuple[Plan, list[Any]]:
    """The cached plan for this signature and the prepared operands; a new signature is first checked."""
    key = (sig.qualname, torch.get_default_dtype(), *map(key_of, values))  # the default dtype decides result dtypes
    plan = _PLANS.get(key)
    if plan is None:
        _check_dtypes(called, spec, values, sig)
        prepared = [_prepare(v) for v in values]
        plan = _PLANS[key] = build(spec, op, sig, prepared, key)
        _SLOTS[key] = _tensor_slots(values)
        return plan, prepared
    prepared = list(values)
    slots = _SLOTS.get(key)
    for i in _tensor_slots(values) if slots is None else slots:
        prepared[i] = _prepare(values[i])
    return plan, prepared


def _device(values: list[Any]) -> torch.device:
    for v in values:
        if isinstance(v, torch.Tensor) and v.device.type == DEVICE:
            return v.device
        if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            return v[0].device
    return torch.device(DEVICE)


def inplace_kernel(spec: OpSpec, op: OpOverload, functional: OpOverload, build: Builder):
    """``add_``: the functional plan, writing into ``self`` (checked by the in-place meta kernel first)."""
    sig = Signature.of(functional)
    qualname = Signature.of(op).qualname

    def kernel(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        values = sig.bind((self, *args), kwargs)
        plan, prepared = _plan(spec, functional, sig, values, build, qualname)
        direct = _check_overlap(spec, self, values[1:])
        if (qualname, plan.key) not in _INPLACE_CHECKED:
            _check_inplace(op, sig, values, plan.outputs[0].dtype)
            _INPLACE_CHECKED.add((qualname, plan.key))
        _write(plan, prepared, [self], _result_shapes(plan, functional, sig, values), direct=direct)
        return self

    return kernel


def out_kernel(spec: OpSpec, op: OpOverload, functional: OpOverload, build: Builder):
    """``add.out`` (or ``max.dim_max``): the functional plan, resizing each out as torch does and writing into it."""
    sig = Signature.of(functional)
    out_sig = Signature.of(op)
    qualname = out_sig.qualname
    out_names = [a.name for a in schema(op).arguments if a.is_out]

    def kernel(*args: Any, **kwargs: Any) -> torch.Tensor | tuple[torch.Tensor, ...]:
        named = dict(zip((p.name for p in out_sig.params), out_sig.bind(args, kwargs), strict=True))
        outs = [named[name] for name in out_names]
        values = [named[p.name] for p in sig.params]
        plan, prepared = _plan(spec, functional, sig, values, build, qualname)
        _check_out_dtypes(plan, op, out_sig, named)
        direct = all([_check_overlap(spec, out, values) for out in outs])  # a list: every out is checked
        shapes = _result_shapes(plan, functional, sig, values)
        for out, shape in zip(outs, shapes, strict=True):
            caller_warnings.resize_output(out, shape)
        _write(plan, prepared, outs, shapes, direct=direct)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return kernel


def _result_shapes(
    plan: Plan, functional: OpOverload, sig: Signature, values: list[Any]
) -> tuple[tuple[int, ...], ...]:
    """The op's output shapes, from its meta kernel once per plan: a plan's buffers may be flattened rows."""
    shapes = _RESULT_SHAPES.get(plan.key)
    if shapes is None:
        result = sig.invoke(functional, meta_args(values))
        results = [result] if isinstance(result, torch.Tensor) else list(result)
        shapes = _RESULT_SHAPES[plan.key] = tuple(tuple(r.shape) for r in results)
    return shapes


# The kinds whose CPU kernels (TensorIterator, cat, index_select, gather) refuse an input overlapping the output.
_CPU_REFUSES_OVERLAP = (Kind.ELEMENTWISE, Kind.DATA_MOVEMENT)
# These refuse any overlap (assert_no_overlap), not only a partial one.
_NO_OVERLAP = frozenset({"cat", "index_select", "gather"})
_OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation."
)


def _check_overlap(spec: OpSpec, dest: torch.Tensor, values: list[Any]) -> bool:
    """Raise CPU's error where CPU refuses an input overlapping `dest`; False when `dest` must not be written directly.

    Live allocations (device memory is host memory) never share addresses, so byte ranges alone find the tensors
    that share memory with `dest`, on any device; only those get torch's full test.
    """
    start = dest.data_ptr()
    end = start + dest.nbytes
    direct = True
    for value in values:
        for t in value if isinstance(value, list) else (value,):
            if isinstance(t, torch.Tensor):
                begin = t.data_ptr()
                if begin < end and start < begin + t.nbytes:
                    direct &= _shared(spec, dest, t)
    return direct


def _shared(spec: OpSpec, dest: torch.Tensor, t: torch.Tensor) -> bool:
    """An input within `dest`'s byte range: torch's get_overlap_status decides, CPU's rule for the kind applies.

    Full overlap (same memory, same strides) is allowed, a partial one refused, where CPU refuses; a non-dense
    operand is too hard for torch, which lets it pass (kernels read it through a contiguous copy, and a non-dense
    dest is written by a copy). Where CPU does not refuse (reductions, matmul, softmax), the result is computed
    whole before it is written, so no core reads an input another core has already overwritten.
    """
    if dest.numel() == 0 or t.numel() == 0 or not (_dense(dest) and _dense(t)):
        return True
    full = dest.data_ptr() == t.data_ptr() and dest.nbytes == t.nbytes and dest.stride() == t.stride()
    if spec.kind in _CPU_REFUSES_OVERLAP:
        if not full or spec.aten in _NO_OVERLAP:
            raise RuntimeError(_OVERLAP_MESSAGE)
        return True
    return False


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense (a permutation of a contiguous layout), as torch decides it."""
    if t.is_contiguous():
        return True
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride(), strict=True) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _check_out_dtypes(plan: Plan, op: OpOverload, sig: Signature, named: dict[str, Any]) -> None:
    """Outs of another dtype than the result: CPU's refusal, word for word (an unsafe cast, a unary op's same-dtype
    rule, a (values, indices) op's index dtype; each op words it its own way), found by running the call on CPU
    zero tensors; only when a dtype differs, and only if CPU refuses it."""
    outs = [named[a.name] for a in schema(op).arguments if a.is_out]
    if all(spec.dtype == out.dtype for spec, out in zip(plan.outputs, outs, strict=True)):
        return
    sig.invoke_on_cpu(op, [named[p.name] for p in sig.params])


def _check_inplace(op: OpOverload, sig: Signature, values: list[Any], result: torch.dtype) -> None:
    """Refuse what the in-place op refuses (broadcast to self, lossy casts): torch's meta kernel finds it, and a CPU
    run on ones words it as CPU does (meta's words differ, e.g. for an int tensor's `add_(1.5)`). Meta lets some
    lossy casts through (`int_0dim *= float_0dim`), so a `result` dtype other than self's asks CPU as well."""
    meta = [
        torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
        if isinstance(v, torch.Tensor) and v.device.type == DEVICE
        else v
        for v in values
    ]
    try:
        sig.invoke(op, meta)
    except RuntimeError:
        sig.invoke_on_cpu(op, values)
        raise
    if result != values[0].dtype:
        sig.invoke_on_cpu(op, values)


def _write(
    plan: Plan, values: list[Any], dests: list[torch.Tensor], shapes: tuple[tuple[int, ...], ...], *, direct: bool
) -> None:
    """Run the plan into the destinations: directly where one has the result's layout, else through a copy."""
    into: list[torch.Tensor | None] = [None] * len(dests)
    for i, (dest, spec, shape) in enumerate(zip(dests, plan.outputs, shapes, strict=False)):
        fits = dest.dtype == spec.dtype and tuple(dest.shape) == shape and math.prod(spec.shape) == dest.numel()
        if direct and len(dests) == len(plan.outputs) and fits and aligned(dest):
            into[i] = dest.view(spec.shape)
    result = plan.run(values, dests[0].device, into=into)
    for dest, r in zip(dests, [result] if isinstance(result, torch.Tensor) else result, strict=True):
        if r.data_ptr() != dest.data_ptr() or r.shape != dest.shape or r.stride() != dest.stride():
            dest.copy_(r)  # not written in place (or written in the plan's row order, which finish permuted)
