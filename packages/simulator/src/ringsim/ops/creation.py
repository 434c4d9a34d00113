"""Creation kernels: fill_/zero_ (behind zeros, ones, full, *_like), arange, and the random fills.

Each writes a contiguous destination directly, or a fresh buffer that the copy kernel then writes into a
non-contiguous destination.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ringsim import engine, runtime
from ringsim.ops import errors
from ringsim.ops.calls import Signature
from ringsim.ops.dispatch import aligned
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import FLOATS, OpSpec
from ringsim.torchbridge import OpOverload, internal_overlap

_PROGRAMS: dict[Any, dict[str, Any]] = {}


def _launch(key: Any, build: Callable[[], dict[str, Any]], dest: torch.Tensor, inputs: dict[str, torch.Tensor]) -> None:
    """Run the program for `key` with its output bound to `dest` (via a fresh buffer if `dest` is not aligned)."""
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = build()
    target = dest if aligned(dest) else torch.empty(dest.shape, dtype=dest.dtype, device=dest.device)
    buffers = {name: runtime.host_view(t) if t.device.type != "cpu" else t for name, t in inputs.items()}
    buffers["out"] = runtime.host_view(target)
    engine.launch(program, buffers, key=key)
    if target is not dest:
        dest.copy_(target)


def _check(spec: OpSpec, qualname: str, t: torch.Tensor) -> None:
    if t.dtype not in spec.dtypes:
        raise errors.unsupported_dtype(qualname, t.dtype, spec.dtypes)


def _overlapping(t: torch.Tensor) -> bool:
    """Whether elements of `t` surely share memory (``expand``, a 0 stride): one value for them all is well defined."""
    return internal_overlap(t) == 1


def _fill_distinct(dest: torch.Tensor, value: Any) -> None:
    """Fill an overlapping `dest` as CPU does (fill_.Scalar skips the overlap check): each memory element it views
    once, written through a flat view of its storage."""
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(dest.shape, dest.stride(), strict=True):
        offsets = offsets.unsqueeze(-1) + torch.arange(size) * stride
    offsets = torch.unique(offsets + dest.storage_offset())
    flat = dest.as_strided((int(offsets[-1]) + 1,), (1,), 0)
    flat[offsets.to(dest.device)] = value


def fill_kernel(spec: OpSpec, qualname: str):
    def fill_(self: torch.Tensor, value: Any) -> torch.Tensor:
        _check(spec, qualname, self)
        if self.numel() == 0:
            return self
        if _overlapping(self) and not isinstance(value, torch.Tensor):  # fill_.Tensor refuses overlap on CPU too
            _fill_distinct(self, value)
            return self
        inputs: dict[str, torch.Tensor] = {}
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            if value.dim():
                raise RuntimeError(
                    f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
                )
            inputs["value"] = value if aligned(value) else value.clone()
            key = ("fill_.Tensor", self.dtype, self.numel(), value.dtype)
            operands = [Operand("value", value.dtype, (), split=False), Operand("out", self.dtype, (), role="out")]
            steps = [Step("fill.Tensor", ("out", "value"), ("out",))]
        else:
            number = value.item() if isinstance(value, torch.Tensor) else value
            key = ("fill_.Scalar", self.dtype, self.numel(), type(number).__name__, repr(number))
            operands = [Operand("out", self.dtype, (), role="out")]
            steps = [Step("fill.Scalar", ("out",), ("out",), {"value": number})]
        _launch(key, lambda: row_program("fill", self.numel(), operands, steps), self, inputs)
        return self

    return fill_


def zero_kernel(spec: OpSpec, qualname: str):
    fill_ = fill_kernel(spec, qualname)

    def zero_(self: torch.Tensor) -> torch.Tensor:
        return fill_(self, False if self.dtype == torch.bool else 0)

    return zero_


def arange_kernel(spec: OpSpec, qualname: str):
    """``arange.start_out``: each chunk computes start + (row + i) * step from an int64 iota, rounded once."""

    def arange_out(start: Any, end: Any, step: Any = 1, *, out: torch.Tensor) -> torch.Tensor:
        _check(spec, qualname, out)
        start, end, step = (v.item() if isinstance(v, torch.Tensor) else v for v in (start, end, step))
        n = torch.arange(start, end, step, dtype=out.dtype, device="meta").numel()
        if out.numel() != n:
            out.resize_(n)
        if n == 0:
            return out
        integral = out.dtype == torch.int64
        temp = torch.int64 if integral and all(isinstance(v, int) for v in (start, step)) else torch.float32
        operands = [
            Operand("idx", torch.int64, (), role="temp"),
            Operand("t", temp, (), role="temp"),
            Operand("out", out.dtype, (), role="out"),
        ]
        steps = [
            Step(
                "arange.start_step",
                (),
                ("idx",),
                {"start": lambda row, size: row, "end": lambda row, size: row + size, "step": 1, "dtype": torch.int64},
            ),
            Step("mul.Scalar", ("idx",), ("t",), {"other": step}),
            Step("add.Scalar", ("t",), ("out",), {"other": start}),
        ]
        key = ("arange", out.dtype, n, repr(start), repr(step))
        _launch(key, lambda: row_program("arange", n, operands, steps), out, {})
        return out

    return arange_out


def sequence_kernel(spec: OpSpec, op: OpOverload):
    """``linspace``/``logspace``/``range`` into ``out``: one core evaluates the sequence in fp32 and rounds it once.

    The points depend on the whole sequence (linspace counts from both ends), so one core computes them all on its
    scratchpad; a sequence longer than a scratchpad is refused with the device's error, like any whole operand.
    """
    sig = Signature.of(op)
    qualname = sig.qualname
    packet = getattr(torch.ops.aten, spec.aten)
    functional = packet.step if spec.aten == "range" else packet.default  # the factory taking the same arguments

    def sequence_out(*args: Any, **kwargs: Any) -> torch.Tensor:
        values = sig.bind(args, kwargs)
        out = values[sig.index["out"]]
        _check(spec, qualname, out)
        attrs = {
            p.name: v.item() if isinstance(v, torch.Tensor) else v
            for p, v in zip(sig.params, values, strict=True)
            if p.name != "out"
        }
        integral = not out.dtype.is_floating_point and spec.aten != "logspace"
        compute = torch.int64 if integral else torch.float32
        n = functional(**attrs, dtype=compute, device="meta").numel()
        if out.numel() != n:
            out.resize_(n)
        if n == 0:
            return out
        key = (qualname, out.dtype, n, tuple(sorted((k, repr(v)) for k, v in attrs.items())))
        operands = [Operand("out", out.dtype, (n,), split=False, role="out")]
        steps = [Step(functional.__name__, (), ("out",), {**attrs, "dtype": compute})]
        _launch(key, lambda: row_program(spec.aten, 1, operands, steps), out, {})
        return out

    return sequence_out


def _host_generator(generator: torch.Generator | None, device: torch.device) -> torch.Generator:
    """The CPU generator holding the random state of `generator` (or of the device's default one)."""
    if generator is None:
        return runtime.cpu_generator(device.index or 0)
    return generator if generator.device.type == "cpu" else runtime.host_generator(generator)


def _stream(qualname: str, source: torch.Tensor, dest: torch.Tensor) -> None:
    """Stream drawn values (of `dest`'s dtype) through the cores into `dest`."""
    key = ("random", qualname, dest.dtype, dest.numel())
    operands = [Operand("source", dest.dtype, ()), Operand("out", dest.dtype, (), role="out")]
    steps = [Step("copy", ("source",), ("out",))]
    _launch(key, lambda: row_program(qualname, dest.numel(), operands, steps), dest, {"source": source.reshape(-1)})


def random_kernel(spec: OpSpec, op: OpOverload):
    """In-place samplers (uniform_, normal_, random_, bernoulli_, exponential_...): the device's random unit.

    The random unit is modelled by the device generator (``torch.ring.manual_seed`` / ``get_rng_state``): the
    same distribution is drawn from its state, so seeding the device reproduces the values, and the kernel
    streams them through the cores like any other operand. Draws are made in the destination's own dtype: the
    samplers compute in float32 (or wider) and round once, and only in that dtype do they keep CPU's contract and
    stream (uniform_ never returns ``to`` after rounding, normal_ draws float16 in CPU's order), so a seeded test
    sees CPU's values.
    """
    sig = Signature.of(op)
    qualname = sig.qualname
    has_generator = "generator" in sig.index

    def sample_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        _check(spec, qualname, self)
        if self.numel() == 0:
            return self
        values = sig.bind((self, *args), kwargs)
        source = _draws(self, self.dtype)
        values[0] = source
        if has_generator:
            values[sig.index["generator"]] = _host_generator(values[sig.index["generator"]], self.device)
        sig.invoke(op, [v.item() if isinstance(v, torch.Tensor) and v is not source else v for v in values])
        _stream(qualname, source, self)
        return self

    return sample_


def _draws(dest: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A host buffer for the draws destined for `dest`, laid out like it: samplers fill elements in memory order,
    so a transposed destination gets the same value at each element as on CPU."""
    return torch.empty_like(dest, dtype=dtype, device="cpu")


def bernoulli_tensor_kernel(spec: OpSpec, qualname: str):
    """``bernoulli_(p)`` with a tensor of probabilities, as CPU draws it: one uniform per element (float64 when p is
    float64, else float32) from the device generator, then ``uniform < p`` on the device, cast into ``self``."""

    def bernoulli_(self: torch.Tensor, p: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        _check(spec, qualname, self)
        if p.dtype not in (*FLOATS, torch.float64):
            raise errors.unsupported_dtype(qualname, p.dtype, (*FLOATS, torch.float64))
        p = p.to(self.device).expand(self.shape)  # torch's error when p does not broadcast to self
        if self.numel() == 0:
            return self
        source = _draws(self, torch.float64 if p.dtype == torch.float64 else torch.float32)
        source.uniform_(0, 1, generator=_host_generator(generator, self.device))
        uniform = torch.empty(self.shape, dtype=source.dtype, device=self.device)
        _stream(qualname, source, uniform)
        self.copy_(torch.lt(uniform, p))
        return self

    return bernoulli_


def randperm_kernel(spec: OpSpec, qualname: str):
    """``randperm(n, out=...)``: a permutation drawn from the device generator, streamed into ``out``."""

    def randperm_out(n: int, *, generator: torch.Generator | None = None, out: torch.Tensor) -> torch.Tensor:
        _check(spec, qualname, out)
        if out.numel() != n:
            out.resize_(n)
        if n:
            source = torch.randperm(n, generator=_host_generator(generator, out.device), dtype=out.dtype)
            _stream(qualname, source, out)
        return out

    return randperm_out
