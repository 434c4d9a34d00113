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
from ringsim.ops.dispatch import aligned
from ringsim.ops.programs import Operand, Step, row_program
from ringsim.ops.registry import OpSpec

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


def fill_kernel(spec: OpSpec, qualname: str):
    def fill_(self: torch.Tensor, value: Any) -> torch.Tensor:
        _check(spec, qualname, self)
        if self.numel() == 0:
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


def random_kernel(spec: OpSpec, qualname: str, draw: Callable[[torch.Tensor, Any, Any, torch.Generator], Any]):
    """uniform_/normal_: the device generator's Philox stream feeds the cores, which round into the destination.

    The random unit is modelled by the device generator (``torch.ring.manual_seed`` / ``get_rng_state``), so
    seeding the device reproduces the values; the kernel streams them through the cores like any other operand.
    """

    def random_(self: torch.Tensor, a: Any = 0.0, b: Any = 1.0, *, generator: torch.Generator | None = None):
        _check(spec, qualname, self)
        if self.numel() == 0:
            return self
        source = torch.empty(self.shape, dtype=torch.float32)
        draw(
            source,
            a,
            b,
            generator
            if generator is not None and generator.device.type == "cpu"
            else runtime.cpu_generator(self.device.index or 0),
        )
        key = ("random", self.dtype, self.numel())
        operands = [Operand("source", torch.float32, ()), Operand("out", self.dtype, (), role="out")]
        steps = [Step("copy", ("source",), ("out",))]
        _launch(key, lambda: row_program(qualname, self.numel(), operands, steps), self, {"source": source.reshape(-1)})
        return self

    return random_


def uniform(source: torch.Tensor, low: Any, high: Any, generator: torch.Generator) -> None:
    source.uniform_(low, high, generator=generator)


def normal(source: torch.Tensor, mean: Any, std: Any, generator: torch.Generator) -> None:
    source.normal_(mean, std, generator=generator)
