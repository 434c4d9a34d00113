"""Elementwise kernels (pointwise math, comparisons, activations, where/masked_fill): split the output across cores.

Operands of the output's shape are split flat, in whole sticks. Broadcast operands are loaded whole by every core
while the output's leading dimension is split; when a broadcast operand is too large for that, it is first expanded
into device memory by the copy kernel and the flat split applies.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from ringsim.engine.compute import TILES_AS
from ringsim.engine.dtypes import WIDENED_DTYPES
from ringsim.ops import errors
from ringsim.ops.calls import Signature
from ringsim.ops.plan import OutputSpec, Plan, Values, returns_first
from ringsim.ops.programs import Operand, Step, TooLargeError, row_program
from ringsim.ops.registry import DEVICE, DTYPE_ORDER, OpSpec
from ringsim.torchbridge import OpOverload

# Ops whose CPU kernels take a Python number operand in the tensor's dtype (TensorIterator casts it to the common
# dtype), not in float32 as add/mul/div do: fmod(x_fp16, 2.3) computes with 2.3 rounded to float16 (2.30078).
_NUMBERS_IN_DTYPE = frozenset({"fmod", "remainder"})
_OPERANDS = ("self", "other")


def meta_args(values: Values) -> list[Any]:
    """The call's arguments with device tensors (and host 0-dim ones, which torch lets mix with any device)
    replaced by meta tensors of the same shape and dtype."""

    def meta(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and (v.device.type == DEVICE or _host_scalar(v)):
            return torch.empty(v.shape, dtype=v.dtype, device="meta")
        if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            return [meta(t) for t in v]
        return v

    return [meta(v) for v in values]


def meta_outputs(op: OpOverload, values: Values) -> tuple[torch.Tensor, ...]:
    """The op's results on meta tensors; a call the meta function refuses raises CPU's error for it when CPU
    refuses it too (torch's Python meta functions word some checks differently: roll's dims, repeated dims)."""
    sig = Signature.of(op)
    try:
        result = sig.invoke(op, meta_args(values))
    except (RuntimeError, IndexError, ValueError, TypeError) as error:
        raise _cpu_error(sig, op, values) or error from None
    return (result,) if isinstance(result, torch.Tensor) else tuple(result)


def _cpu_error(sig: Signature, op: OpOverload, values: Values) -> Exception | None:
    """What CPU raises for the call on zero tensors of the same shapes and dtypes, or None if it accepts it."""

    def on_cpu(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.device.type == DEVICE:
            return torch.zeros(v.shape, dtype=v.dtype)
        if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            return [on_cpu(t) for t in v]
        return v

    try:
        sig.invoke(op, [on_cpu(v) for v in values])
    except Exception as error:
        return error
    return None


def scalar(value: Any) -> Any:
    """A CPU 0-dim tensor argument becomes the number it holds (an instruction attribute)."""
    return value.item() if isinstance(value, torch.Tensor) else value


def split_call(sig: Signature, values: Values) -> tuple[list[int], dict[str, Any], bool]:
    """Device tensors become the compute's input tiles; everything else its attrs.

    A host 0-dim tensor ahead of a device tensor (``cpu_scalar + x``) is a tile too, moved to the device, as torch
    allows; tiles that do not lead the schema (``pow(2, x)``) bind to their parameters by name (``tiles_as``). The
    flag says the call's overload cannot take the attrs as they are (a host tensor became a number, an unset
    optional was left out), so the compute names the op packet and torch picks the overload.
    """
    positional: list[int] = []
    attrs: dict[str, Any] = {}
    substituted = False
    last = max((i for i, v in enumerate(values) if _on_device(v)), default=-1)
    for i, (param, value) in enumerate(zip(sig.params, values, strict=True)):
        if _on_device(value) or (i < last and param.kind == "tensor" and _host_scalar(value)):
            positional.append(i)
        elif value is not None or param.has_default:
            attrs[param.name] = scalar(value)
            substituted |= isinstance(value, torch.Tensor) or (param.kind == "tensor" and value is not None)
        else:
            # An unset optional without a default (div.Tensor_mode's rounding_mode): programs omit None attrs, and
            # the overload requires the argument, so the packet resolves the overload that lacks it (div.Tensor).
            substituted = True
    if positional != list(range(len(positional))):
        attrs[TILES_AS] = [sig.params[i].name for i in positional]
    return positional, attrs, substituted


def _on_device(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == DEVICE


def _host_scalar(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_cpu and value.dim() == 0


def build(spec: OpSpec, op: OpOverload, sig: Signature, values: Values, key: Any) -> Plan:
    out = meta_outputs(op, values)[0]
    if out.dtype not in DTYPE_ORDER:  # a complex scalar operand (``x ** 1j``) makes a complex result
        raise errors.unsupported_dtype(sig.qualname, out.dtype, spec.dtypes)
    shape = tuple(out.shape)
    if spec.aten == "clamp" and sig.qualname == "clamp.Tensor" and (values[1] is None) != (values[2] is None):
        # One bound only: the same op as clamp_min/clamp_max, whose tiles lead the schema.
        bound = 2 if values[1] is None else 1
        one = (torch.ops.aten.clamp_max if bound == 2 else torch.ops.aten.clamp_min).Tensor
        plan = build(spec, one, Signature.of(one), [values[0], values[bound]], key)
        operands = {"in0": _arg(0), "in1": _arg(bound)}
        return replace(plan, inputs=tuple((name, operands[name]) for name, _ in plan.inputs))
    if spec.aten == "heaviside" and values[0].dtype != values[1].dtype:
        # Tiles are widened before the compute, which would hide torch's contract for this op.
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    positional, attrs, substituted = split_call(sig, values)
    if spec.aten in _NUMBERS_IN_DTYPE and out.dtype in WIDENED_DTYPES:
        attrs = {k: _in_dtype(v, out.dtype) if k in _OPERANDS else v for k, v in attrs.items()}
    fn = spec.aten if substituted else sig.qualname
    then = None
    if _truncates_rounded_quotient(spec, sig, values, attrs, out.dtype):
        attrs = {k: v for k, v in attrs.items() if k != "rounding_mode"}
        fn, then = "div", "trunc"
    device = next((i for i in positional if _on_device(values[i])), None)
    host = [i for i in positional if device is not None and _host_scalar(values[i])]
    values = [_moved(v, values[device]) if i in host else v for i, v in enumerate(values)]
    finish = returns_first
    if out.numel() == 0:
        return Plan(key, None, (), (OutputSpec("out", shape, out.dtype),), finish)
    try:
        plan = _plan(key, fn, attrs, positional, values, shape, out.dtype, then, broadcast_whole=True)
    except TooLargeError:
        plan = _plan(key, fn, attrs, positional, values, shape, out.dtype, then, broadcast_whole=False)
    if not host:
        return plan
    moving = {f"in{positional.index(i)}" for i in host}
    inputs = tuple((name, _moving(get, device) if name in moving else get) for name, get in plan.inputs)
    return replace(plan, inputs=inputs)


def _truncates_rounded_quotient(spec: OpSpec, sig: Signature, values: Values, attrs: dict, dtype: torch.dtype) -> bool:
    """Whether CPU computes this ``div(..., rounding_mode="trunc")`` in its float16/bfloat16 arithmetic, truncating
    the quotient as rounded to that dtype (as NumPy does): for a divisor of more than one element; a one-element
    divisor takes CPU's float32 path, which rounds once like the device's own rule."""
    if spec.aten != "div" or attrs.get("rounding_mode") != "trunc" or dtype not in WIDENED_DTYPES:
        return False
    divisor = values[sig.index["other"]]
    return isinstance(divisor, torch.Tensor) and divisor.numel() > 1


def _in_dtype(number: Any, dtype: torch.dtype) -> Any:
    """`number` rounded to `dtype`, as a Python number of its kind."""
    return type(number)(torch.tensor(number, dtype=dtype).item()) if isinstance(number, (int, float)) else number


def _plan(key, fn, attrs, positional, values, shape, dtype, then: str | None, *, broadcast_whole: bool) -> Plan:
    """The program of `fn` over the output's rows; `then`, if given, is a unary fn applied to `fn`'s result as
    stored in a tile of the output dtype (rounded to it)."""
    numel = math.prod(shape)
    flat = all(values[i].numel() in (1, numel) and values[i].dim() in (0, len(shape)) for i in positional) or not (
        broadcast_whole
    )
    operands, getters = [], []
    for n, i in enumerate(positional):
        t = values[i]
        name = f"in{n}"
        if flat and t.numel() == numel and tuple(t.shape) == shape:
            operands.append(Operand(name, t.dtype, ()))
            getters.append((name, _arg(i)))
        elif flat and broadcast_whole:
            operands.append(Operand(name, t.dtype, tuple(t.shape), split=False))
            getters.append((name, _arg(i)))
        elif flat:
            operands.append(Operand(name, t.dtype, ()))
            getters.append((name, _expanded(i, shape)))
        elif t.dim() == len(shape) and t.shape[0] == shape[0] and shape[0] > 1:
            operands.append(Operand(name, t.dtype, tuple(t.shape[1:])))
            getters.append((name, _arg(i)))
        else:
            operands.append(Operand(name, t.dtype, tuple(t.shape), split=False))
            getters.append((name, _arg(i)))
    rows = numel if flat else shape[0]
    tile = () if flat else shape[1:]
    operands.append(Operand("out", dtype, tile, role="out"))
    inputs = tuple(f"in{n}" for n in range(len(positional)))
    if then is None:
        steps = [Step(fn, inputs, ("out",), attrs)]
    else:
        operands.append(Operand("first", dtype, tile, role="temp"))
        steps = [Step(fn, inputs, ("first",), attrs), Step(then, ("first",), ("out",))]
    program = row_program(fn, rows, operands, steps)
    return Plan(key, program, tuple(getters), (OutputSpec("out", shape, dtype),), returns_first)


def _moved(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return value if value.device == like.device else value.to(like.device)


def _moving(get, device: int):
    """A host scalar operand's getter: the call's value, moved to the device of the call's device operand."""
    return lambda values: _moved(get(values), values[device])


def _arg(i: int):
    return lambda values: values[i]


def _expanded(i: int, shape: tuple[int, ...]):
    return lambda values: values[i].expand(shape).contiguous()
