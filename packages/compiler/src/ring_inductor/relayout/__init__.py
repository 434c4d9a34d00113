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

__all__ = ["SCHEMES", "STORE_SCHEMES", "Chosen", "Relayout", "choose", "contiguous", "cycles", "normalized",
           "readable", "stick_aligned", "store"]  # fmt: skip

SCHEMES: dict[str, Callable[[Relayout], list[dict[str, Any]]]] = {
    "blocks": blocks_program,
    "ring": ring_program,
}
#: Writing a contiguous result into a strided view: the blocks the other way round.
STORE_SCHEMES: dict[str, Callable[[Relayout], list[dict[str, Any]]]] = {
    "blocks": functools.partial(blocks_program, store=True),
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
def choose(layout: Relayout, store: bool = False) -> Chosen:
    """Build every scheme that fits `layout`, time each on the simulator's model, keep the fastest. `src` is the
    view's storage and `out` the contiguous result; with `store`, `src` is the contiguous values and `out` the
    view's storage they are written into."""
    name = _name(layout) + "_store" * store
    strided = {"dtype": dtype_name(layout.dtype), "shape": [layout.span]}
    dense = {"dtype": dtype_name(layout.dtype), "shape": [layout.numel]}
    buffers = {"src": dense, "out": strided} if store else {"src": strided, "out": dense}
    candidates: list[dict[str, Any]] = []
    best: tuple[float, Program, dict[str, Any]] | None = None
    for scheme, build in (STORE_SCHEMES if store else SCHEMES).items():
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


def cycles(view: torch.Tensor) -> float | None:
    """The simulated cycles of the fastest program making `view` contiguous (None: no scheme fits), as a planner
    weighing a relayout prices it; `view` may be a meta tensor."""
    chosen = choose(Relayout(normalized(tuple(view.shape), tuple(view.stride())), view.dtype))
    return min((c["cycles"] for c in chosen.candidates if "cycles" in c), default=None)


def readable(t: torch.Tensor) -> bool:
    """Whether a DMA can read `t` as it is: contiguous and starting on a stick."""
    return t.is_contiguous() and runtime.device_address(t) % STICK == 0


def _programmable(t: torch.Tensor) -> bool:
    return bool(config.relayout_programs and t.numel() and runtime.device_address(t) % STICK == 0)


def _storage(t: torch.Tensor, layout: Relayout) -> torch.Tensor:
    """The bytes of `t`'s storage its view spans, as one flat tensor (a program buffer)."""
    return runtime.host_view(torch.as_strided(t, (layout.span,), (1,), t.storage_offset()))


def store(target: torch.Tensor, values: torch.Tensor) -> None:
    """`target.copy_(values)` for a strided ring view `target` and contiguous, stick-aligned `values`: by the
    chosen store program, else by the device's copy."""
    layout = Relayout(normalized(tuple(target.shape), tuple(target.stride())), target.dtype)
    values = stick_aligned(values)
    chosen = choose(layout, store=True) if _programmable(target) else None
    if chosen is None or chosen.program is None:
        target.copy_(values)
        return
    launch(chosen.program, {"src": runtime.host_view(values), "out": _storage(target, layout)},
           key=("ring_inductor", chosen.name))  # fmt: skip


def contiguous(t: torch.Tensor, into: torch.Tensor | None = None) -> torch.Tensor:
    """`t`'s values in a new contiguous, stick-aligned ring tensor (or `into`, one of its shape): by the chosen
    relayout program, else by the device's copy (which the simulator does not time)."""
    layout = Relayout(normalized(tuple(t.shape), tuple(t.stride())), t.dtype)
    chosen = choose(layout) if _programmable(t) else None
    if chosen is None or chosen.program is None:
        if into is not None:
            return into.copy_(t)
        return t.contiguous() if not t.is_contiguous() else t.clone()
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device) if into is None else into
    launch(chosen.program, {"src": _storage(t, layout), "out": runtime.host_view(out)},
           key=("ring_inductor", chosen.name))  # fmt: skip
    return out


def stick_aligned(t: torch.Tensor) -> torch.Tensor:
    """`t` itself when a DMA can read it as it is (contiguous, on a stick), else `contiguous(t)`."""
    return t if readable(t) else contiguous(t)
