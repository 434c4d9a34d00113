"""Compiled matmuls whose right operand overflows one core: divided and tiled by the planning layer.

The whole-B program (`matmul`) keeps B in every core's scratchpad. When B does not fit, the planning layer
chooses instead: the mandatory span split, then the cost model's division (a grid of output blocks, or the ring
scheme rotating pieces of A round the cores), with matmul tiles streaming K-chunks of both operands
(`plan.divide`, `plan.tiling`, `plan.emit_matmul`). That program reads its operands blocked, one contiguous chunk
per DMA. The planning layer's layout pass (`plan.layout`) decides B's sticks: a B stored along K (a linear layer's
weight) is read in blocks of its own rows and multiplied by `linear`, not transposed. The relayout into blocks and
back runs on ring as relayout programs (`relayout`), timed like the matmul.
"""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import Any

import torch
from ringsim import runtime
from ringsim.engine import launch

from ring_inductor import config, dump, relayout, sticks
from ring_inductor.errors import UnsupportedError
from ring_inductor.plan import divide, layout
from ring_inductor.plan.emit import Emitted
from ring_inductor.plan.emit_matmul import emit_matmul
from ring_inductor.plan.graph import Graph
from ring_inductor.plan.tiling import TilingError


def matmul_graph(m: int, k: int, n: int, dtype: str, b_along_k: bool = False) -> Graph:
    """The planning layer's graph of one [m, k] x [k, n] matmul `c = a @ b` of `dtype` (a dtype name), B stored
    with its sticks along K or N."""
    graph = Graph()
    graph.tensor("a", (m, k), dtype)
    graph.tensor("b", (k, n), dtype, stick=sticks.ALONG_K if b_along_k else sticks.ALONG_N)
    graph.matmul("mm", "a", "b", "c")
    graph.outputs = ["c"]
    return graph


def layout_decisions(graph: Graph) -> tuple[bool, dict[str, Any]]:
    """The layout pass on a matmul's graph: whether B is read along K as stored, and the plan for the dump."""
    plan = layout.solve(graph)
    along_k = plan.sticks["b"] == sticks.ALONG_K
    return along_k, {
        "sticks": plan.sticks,
        "restickifies": [list(r) for r in plan.restickifies],
        "b": "along K, read as stored (linear)" if along_k else "along N (mm)",
    }


def _packing_cycles(
    emitted: Emitted, tensor: str, shape: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype
) -> float:
    """Simulated cycles of relaying `tensor`, stored with `strides`, into the program's blocks (0: read as is)."""
    stored = torch.empty_strided(shape, strides, dtype=dtype, device="meta")
    total = 0.0
    for _, pack in emitted.layouts[tensor]:
        view = pack(stored)
        if not view.is_contiguous():
            relaid = relayout.cycles(view)
            total += float("nan") if relaid is None else relaid
    return total


@functools.cache
def planned_program(m: int, k: int, n: int, dtype: torch.dtype, b_along_k: bool = False) -> Emitted:
    """The planned program of an [m, k] x [k, n] matmul (once per shape, dtype and B's stored sticks), dumped
    when the option is on with the layout pass's decision and what relaying B into the blocks costs."""
    name = str(dtype).removeprefix("torch.")
    graph = matmul_graph(m, k, n, name, b_along_k)
    along_k, layout_plan = layout_decisions(graph)
    try:
        division = divide.divide(graph)
        chosen = division.matmuls["mm"]
        emitted = emit_matmul(graph, graph.ops[0], chosen, division.splits.get("a"), b_along_k=along_k)
    except TilingError as error:
        raise UnsupportedError(f"mm [{m}, {k}] x [{k}, {n}] ({name}): B overflows a core and {error}") from None
    emitted.program["name"] = f"ring_mm_planned_{m}x{k}_{k}x{n}_{name}" + "_along_k" * along_k
    if config.dump_dir:
        strides = (1, k) if b_along_k else (n, 1)
        layout_plan["b_packing_cycles"] = _packing_cycles(emitted, "b", (k, n), strides, dtype)
    decisions = {
        "kernel": emitted.program["name"],
        "fn": "mm",
        "shapes": [[m, k], [k, n]],
        "layout": layout_plan,
        "division": asdict(chosen),
        "splits": {tensor: asdict(split) for tensor, split in division.splits.items()},
        "considered": [asdict(d) for d in division.considered["mm"]],
    }
    dump.write(emitted.program["name"], emitted.program, decisions)
    return emitted


def run_planned_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b on ring by the planned program: operands relaid into its blocks on ring, the result read back."""
    (m, k), n = a.shape, b.shape[1]
    emitted = planned_program(m, k, n, a.dtype, sticks.reads_along_k(tuple(b.shape), tuple(b.stride())))
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
