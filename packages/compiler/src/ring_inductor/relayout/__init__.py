"""Strided ring tensors made contiguous by relayout programs that the simulator runs and times.

Compiled kernels read their operands contiguous and stick-aligned; `linear`'s transposed weight, attention's
`k.transpose(-2, -1)`, a slice or a planned matmul's blocks are not. The device's copy kernel would make them so
without being timed. Here each becomes a program instead, the fastest by the simulator's own timing of those that
fit its layout:

- `blocks`: the view's inner source dims are dense: cores take blocks of them, each one contiguous DMA in, a
  permute on the scratchpad into the view's order (the restickify), and stores of its output-contiguous runs; a
  batched transpose whose matrices fit a core moves a matrix (or several) a block;
- `ring`: each matrix is cut into bands of source rows, one per core; each core permutes its band, whose pieces
  travel round the ring to the cores whose band of output rows they belong to, and each core permutes the pieces
  it gathered into whole output rows: every DMA moves one contiguous band;

A view none of them fits (a start or a run off the stick, no contiguous dim) goes through the device's copy; the
dump says why. `config.relayout_programs = False` sends every view there (the untimed baseline).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from ringsim import runtime
from ringsim.engine import FORMAT, Program, ProgramError, launch, parse_program, plan

from ring_inductor import config, dump
from ring_inductor.emit import STICK, dtype_name

from .blocks import blocks_program
from .ring import ring_program
from .views import NoFit, Relayout, normalized

__all__ = ["SCHEMES", "Chosen", "Relayout", "choose", "contiguous", "normalized", "stick_aligned"]

SCHEMES: dict[str, Callable[[Relayout], list[dict[str, Any]]]] = {
    "blocks": blocks_program,
    "ring": ring_program,
}


@dataclass(frozen=True)
class Chosen:
    """The fastest scheme that fits a view (None: the device copy), and what every scheme came to, for the dump."""

    name: str
    program: Program | None
    candidates: tuple[dict[str, Any], ...]


def _name(layout: Relayout) -> str:
    dims = "_".join(f"{size}s{stride}" for size, stride in layout.dims)
    return f"ring_relayout_{dtype_name(layout.dtype)}_{dims}"


@functools.cache
def choose(layout: Relayout) -> Chosen:
    """Build every scheme that fits `layout`, time each on the simulator's model, keep the fastest."""
    name = _name(layout)
    buffers = {
        "src": {"dtype": dtype_name(layout.dtype), "shape": [layout.span]},
        "out": {"dtype": dtype_name(layout.dtype), "shape": [layout.numel]},
    }
    candidates: list[dict[str, Any]] = []
    best: tuple[float, Program, dict[str, Any]] | None = None
    for scheme, build in SCHEMES.items():
        try:
            document = {"format": FORMAT, "name": f"{name}_{scheme}", "buffers": buffers, "cores": build(layout)}
            program = parse_program(document)
            report = plan(program).report
        except (NoFit, ProgramError) as why:
            candidates.append({"scheme": scheme, "refused": str(why)})
            continue
        candidates.append({"scheme": scheme, "cycles": report.total_cycles, "cores": len(document["cores"])})
        if best is None or report.total_cycles < best[0]:
            best = (report.total_cycles, program, document)
    decisions = {"kernel": name, "dtype": dtype_name(layout.dtype), "dims": [list(d) for d in layout.dims],
                 "candidates": candidates, "chosen": best[2]["name"] if best else "device copy"}  # fmt: skip
    dump.write(name, best[2] if best else None, decisions)
    return Chosen(name, best[1] if best else None, tuple(candidates))


def contiguous(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values in a new contiguous, stick-aligned ring tensor: by the chosen relayout program, else by the
    device's copy (which the simulator does not time)."""
    layout = Relayout(normalized(tuple(t.shape), tuple(t.stride())), t.dtype)
    programmable = config.relayout_programs and t.numel() and runtime.device_address(t) % STICK == 0
    chosen = choose(layout) if programmable else None
    if chosen is None or chosen.program is None:
        return t.contiguous() if not t.is_contiguous() else t.clone()
    source = torch.as_strided(t, (layout.span,), (1,), t.storage_offset())
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    launch(chosen.program, {"src": runtime.host_view(source), "out": runtime.host_view(out)},
           key=("ring_inductor", chosen.name))  # fmt: skip
    return out


def stick_aligned(t: torch.Tensor) -> torch.Tensor:
    """`t` itself when a DMA can read it as it is (contiguous, on a stick), else `contiguous(t)`."""
    return t if t.is_contiguous() and runtime.device_address(t) % STICK == 0 else contiguous(t)
