"""Matmul kernels (mm, bmm, addmm) as ring programs: the rows of the output split across cores, B whole per core.

Inductor lowers aten.mm/bmm/addmm on ring to extern calls of the `ring_inductor::` ops defined here, whose ring
kernel builds (once per shape and dtype) a program: each core DMAs in B (and a row bias) once, then for each chunk
of its rows DMAs in A's rows, runs the systolic `mm`/`bmm`/`addmm` on the tiles (fp32 accumulation, one rounding)
and DMAs out the result rows. A right operand stored along K (`w.t()`, `k.transpose(-2, -1)`) is read as stored
and multiplied by `linear` (`sticks`); other operands that are not contiguous are made so by a relayout program
first (`relayout`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from ringsim import runtime
from ringsim.engine import FORMAT, launch

from ring_inductor import dump, relayout, sticks
from ring_inductor.emit import CORES, MIN_BYTES_PER_CORE, SCRATCHPAD, STICK, align, ceil_div, dtype_name
from ring_inductor.errors import UnsupportedError
from ring_inductor.planned_matmul import run_planned_mm


@dataclass(frozen=True)
class MatOperand:
    """A buffer of the program: split ones give the per-row shape, whole ones their full shape."""

    name: str
    shape: tuple[int, ...]
    split: bool
    is_output: bool = False

    def row_bytes(self, itemsize: int) -> int:
        return math.prod(self.shape) * itemsize


def _program(
    name: str, fn: str, rows: int, operands: Sequence[MatOperand], dtype: torch.dtype, row_by_row: bool = False
) -> dict[str, Any]:
    """Each core's rows in chunks: one `fn` compute a chunk, or with `row_by_row` one a row (a batched `linear`,
    whose weight is 2-D: each row's tiles are views into the chunk's)."""
    size = dtype.itemsize
    split = [op for op in operands if op.split]
    whole = [op for op in operands if not op.split]
    g = math.lcm(*(STICK // math.gcd(op.row_bytes(size), STICK) for op in split))
    whole_bytes = sum(align(op.row_bytes(size)) for op in whole)
    per_row = sum(op.row_bytes(size) for op in split)
    cores = max(1, min(CORES, rows * per_row // MIN_BYTES_PER_CORE, ceil_div(rows, g)))
    per_core = ceil_div(ceil_div(rows, cores), g) * g
    room = SCRATCHPAD - whole_bytes - STICK * len(split)
    span = min(rows, per_core)
    chunk = span if room // per_row >= span else (room // per_row // g) * g
    if room < 0 or chunk < 1:
        raise UnsupportedError(
            f"{fn}: B and one row of A and the output overflow a core's {SCRATCHPAD}-byte scratchpad"
        )
    buffers = {
        op.name: {"dtype": dtype_name(dtype), "shape": [rows, *op.shape] if op.split else list(op.shape)}
        for op in operands
    }
    core_programs = []
    for core, start in enumerate(range(0, rows, per_core)):
        end = min(rows, start + per_core)
        sizes = sorted({min(chunk, end - row) for row in range(start, end, chunk)}, reverse=True)
        tag = {n: "" if i == 0 else f"_{n}" for i, n in enumerate(sizes)}
        tiles, offset = {}, 0
        for op in whole:
            tiles[op.name] = {"offset": offset, "dtype": dtype_name(dtype), "shape": list(op.shape)}
            offset += align(op.row_bytes(size))
        for op in split:
            for n in sizes:
                tiles[op.name + tag[n]] = {"offset": offset, "dtype": dtype_name(dtype), "shape": [n, *op.shape]}
            if row_by_row:
                for r in range(sizes[0]):
                    row_tile = {"offset": offset + r * op.row_bytes(size), "dtype": dtype_name(dtype)}
                    tiles[f"{op.name}.{r}"] = {**row_tile, "shape": list(op.shape)}
            offset += align(op.row_bytes(size) * sizes[0])
        code: list[dict[str, Any]] = [
            {"op": "dma_in", "buffer": op.name, "offset": 0, "tile": op.name} for op in whole if not op.is_output
        ]
        for row in range(start, end, chunk):
            t = tag[min(chunk, end - row)]
            code += [
                {"op": "dma_in", "buffer": op.name, "offset": row * op.row_bytes(size), "tile": op.name + t}
                for op in split
                if not op.is_output
            ]
            if row_by_row:
                count = min(chunk, end - row)
                code += [
                    {"op": "compute", "fn": fn, "inputs": [f"{op.name}.{r}" for op in operands if not op.is_output],
                     "output": f"out.{r}"}
                    for r in range(count)
                ]  # fmt: skip
            else:
                inputs = [op.name + t if op.split else op.name for op in operands if not op.is_output]
                code.append({"op": "compute", "fn": fn, "inputs": inputs, "output": "out" + t})
            code.append(
                {"op": "dma_out", "tile": "out" + t, "buffer": "out", "offset": row * operands[-1].row_bytes(size)}
            )
        core_programs.append({"core": core, "tiles": tiles, "instructions": code})
    return {"format": FORMAT, "name": name, "buffers": buffers, "cores": core_programs}


@functools.cache
def matmul_program(
    fn: str, shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype, along_k: bool = False
) -> dict[str, Any]:
    """The program of `fn` (mm, bmm, addmm) on operands of these shapes, dumped when the option is on; with
    `along_k`, B is read as its transpose is stored ([n, k] rows) and multiplied by `linear`."""
    if fn == "bmm":
        (b, m, k), (_, _, n) = shapes
        right = MatOperand("b", (n, k) if along_k else (k, n), True)
        operands = [MatOperand("a", (m, k), True), right, MatOperand("out", (m, n), True, True)]
        rows = b
    else:
        (m, k), (_, n) = shapes[-2:]
        bias = [MatOperand("bias", shapes[0], False)] if fn == "addmm" else []
        if fn == "addmm" and shapes[0] == (m, n):
            bias = [MatOperand("bias", (n,), True)]
        a, out = MatOperand("a", (k,), True), MatOperand("out", (n,), True, True)
        # linear(a, w, bias) takes the bias last; addmm(bias, a, b) first
        operands = (
            [a, MatOperand("b", (n, k), False), *bias, out]
            if along_k
            else [*bias, a, MatOperand("b", (k, n), False), out]
        )
        rows = m
    name = f"ring_{fn}_{'_'.join('x'.join(map(str, shape)) for shape in shapes)}_{dtype_name(dtype)}"
    name += "_along_k" * along_k
    kind = "linear" if along_k else fn
    program = _program(name, kind, rows, operands, dtype, row_by_row=along_k and fn == "bmm")
    decisions = {"kernel": program["name"], "fn": fn, "shapes": [list(s) for s in shapes], "computed_by": kind,
                 "b_sticks": "along K, read as stored" if along_k else "along N"}  # fmt: skip
    dump.write(program["name"], program, decisions)
    return program


def run_matmul(fn: str, *tensors: torch.Tensor) -> torch.Tensor:
    """Launch `fn`'s program on ring tensors (made contiguous and stick-aligned first) and return the result."""
    dtype = tensors[-1].dtype
    if any(t.dtype != dtype for t in tensors) or dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise UnsupportedError(
            f"ring_inductor cannot compile aten.{fn} ({dtype_name(dtype)}): mixed or non-device dtypes"
        )
    if fn == "addmm":
        m, n = tensors[1].shape[0], tensors[2].shape[1]
        bias = tensors[0]
        tensors = (bias.reshape(n) if bias.numel() == n else bias.expand(m, n), *tensors[1:])
    shapes = tuple(tuple(t.shape) for t in tensors)
    right = tensors[-1]
    along_k = sticks.runs_along_k(tuple(right.shape), tuple(right.stride()))
    try:
        program = matmul_program(fn, shapes, dtype, along_k)
    except UnsupportedError:
        if fn == "bmm":
            raise
        # B overflows a core: the planning layer divides and tiles it, relaying each operand (a transposed weight
        # too) straight into its blocks
        out = run_planned_mm(*tensors[-2:])
        return out.add_(tensors[0]) if fn == "addmm" else out
    named = dict(zip(("bias", "a", "b")[-len(tensors) :], tensors, strict=True))
    if along_k:  # the [.., n, k] rows B's transpose is stored as: a view, its runs copied together if not dense
        named["b"] = right.transpose(-2, -1)
    out = torch.empty(program["buffers"]["out"]["shape"], dtype=dtype, device=tensors[-1].device)
    buffers = {n: runtime.host_view(relayout.stick_aligned(t)) for n, t in named.items()}
    buffers["out"] = runtime.host_view(out)
    launch(program, buffers, key=("ring_inductor", program["name"]))
    return out


_LIBRARY = torch.library.Library("ring_inductor", "DEF")
#: The ops Inductor's matmul lowerings become on ring, by the aten op they replace.
SCHEMAS = {
    "mm": "mm(Tensor a, Tensor b) -> Tensor",
    "bmm": "bmm(Tensor a, Tensor b) -> Tensor",
    "addmm": "addmm(Tensor bias, Tensor a, Tensor b) -> Tensor",
}
for _fn, _schema in SCHEMAS.items():
    _LIBRARY.define(_schema)
    _LIBRARY.impl(_fn, functools.partial(run_matmul, _fn), "PrivateUse1")
    torch.library.register_fake(f"ring_inductor::{_fn}", getattr(torch.ops.aten, _fn), lib=_LIBRARY)
