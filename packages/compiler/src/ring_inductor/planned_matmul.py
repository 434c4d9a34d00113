"""Compiled matmuls whose right operand overflows one core: divided and tiled by the planning layer.

The whole-B program (`matmul`) keeps B in every core's scratchpad. When B does not fit, the planning layer
chooses instead: the mandatory span split, then the cost model's division (a grid of output blocks, or the ring
scheme rotating pieces of A round the cores), with matmul tiles streaming K-chunks of both operands
(`plan.divide`, `plan.tiling`, `plan.emit_matmul`). That program reads its operands blocked, one contiguous chunk
per DMA. The relayout into blocks and back runs on ring as relayout programs (`relayout`), timed like the matmul.
"""

from __future__ import annotations

import functools
from dataclasses import asdict

import torch
from ringsim import runtime
from ringsim.engine import launch

from ring_inductor import dump, relayout
from ring_inductor.errors import UnsupportedError
from ring_inductor.plan import divide
from ring_inductor.plan.emit import Emitted
from ring_inductor.plan.emit_matmul import emit_matmul
from ring_inductor.plan.graph import Graph
from ring_inductor.plan.tiling import TilingError


def matmul_graph(m: int, k: int, n: int, dtype: str) -> Graph:
    """The planning layer's graph of one [m, k] x [k, n] matmul `c = a @ b` of `dtype` (a dtype name)."""
    graph = Graph()
    graph.tensor("a", (m, k), dtype)
    graph.tensor("b", (k, n), dtype)
    graph.matmul("mm", "a", "b", "c")
    graph.outputs = ["c"]
    return graph


@functools.cache
def planned_program(m: int, k: int, n: int, dtype: torch.dtype) -> Emitted:
    """The planned program of an [m, k] x [k, n] matmul (once per shape and dtype), dumped when the option is on."""
    name = str(dtype).removeprefix("torch.")
    graph = matmul_graph(m, k, n, name)
    try:
        division = divide.divide(graph)
        chosen = division.matmuls["mm"]
        emitted = emit_matmul(graph, graph.ops[0], chosen, division.splits.get("a"))
    except TilingError as error:
        raise UnsupportedError(f"mm [{m}, {k}] x [{k}, {n}] ({name}): B overflows a core and {error}") from None
    emitted.program["name"] = f"ring_mm_planned_{m}x{k}_{k}x{n}_{name}"
    decisions = {
        "kernel": emitted.program["name"],
        "fn": "mm",
        "shapes": [[m, k], [k, n]],
        "division": asdict(chosen),
        "splits": {tensor: asdict(split) for tensor, split in division.splits.items()},
        "considered": [asdict(d) for d in division.considered["mm"]],
    }
    dump.write(emitted.program["name"], emitted.program, decisions)
    return emitted


def run_planned_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b on ring by the planned program: operands relaid into its blocks on ring, the result read back."""
    (m, k), n = a.shape, b.shape[1]
    emitted = planned_program(m, k, n, a.dtype)
    buffers: dict[str, torch.Tensor] = {}
    for tensor, parts in emitted.layouts.items():
        source = {"a": a, "b": b}[tensor]
        for buffer, pack in parts:
            buffers[buffer] = relayout.stick_aligned(pack(source)).reshape(-1)
    spec = emitted.program["buffers"]["c"]
    buffers["c"] = torch.empty(spec["shape"], dtype=a.dtype, device=a.device)
    views = {name: runtime.host_view(t) for name, t in buffers.items()}
    launch(emitted.program, views, key=("ring_inductor", emitted.program["name"]))
    return relayout.stick_aligned(emitted.views["c"](buffers)).reshape(m, n)
