"""Emission of row-wise kernels: chains of pointwise ops and last-dim reductions over [rows, columns] tensors.

Rows are divided over the cores, each core's rows cut into blocks (double-buffered: the next block loads while
this one computes). The block's tiles are placed by a scratchpad solver from their live intervals, so an op may write
over an input it reads last. Intermediates either stay resident in the scratchpad (one pass per block) or, as eager
execution does, round-trip through device memory (one pass per op over all blocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cost import DEFAULT_COST, CostModel
from .emit import Emitted, Tiles, compute, dma_in, dma_out, document, flat
from .graph import DTYPE_BYTES, Graph, Op, OpKind
from .scratchpad import Buffer, Placement, allocate
from .tiling import TilingError, row_block

#: Blocks per core the tiling aims for, so loads, compute and stores overlap.
PIPELINE_DEPTH = 4


@dataclass(frozen=True, slots=True)
class RowKernel:
    """A row-wise graph's plan: cores, rows per block, where the block's tiles live, resident or round trip."""

    cores: int
    block_rows: int
    resident: bool
    placement: Placement

    @property
    def slot_bytes(self) -> int:
        return self.placement.peak


def _check(graph: Graph) -> None:
    for op in graph.ops:
        rank = len(graph.tensors[op.output].shape)
        if op.kind not in (OpKind.POINTWISE, OpKind.REDUCTION) or rank != 2 or (op.dim not in (None, 1)):
            raise TilingError(f"op {op.name!r}: row-wise kernels take 2-D pointwise ops and last-dim reductions")


def row_bytes(graph: Graph, name: str) -> int:
    tensor = graph.tensors[name]
    return tensor.shape[1] * DTYPE_BYTES[tensor.dtype]


def block_buffers(graph: Graph, block_rows: int) -> list[Buffer]:
    """One block's tiles with live intervals in op steps (op i runs at step i + 1; inputs load at step 0)."""
    birth = {name: 0 for name in graph.inputs}
    birth.update({op.output: index + 1 for index, op in enumerate(graph.ops)})
    death = dict.fromkeys(birth, 0)
    for index, op in enumerate(graph.ops):
        for name in op.inputs:
            death[name] = max(death[name], index + 1)
    final = len(graph.ops) + 2
    buffers = []
    for name, start in birth.items():
        end = final if name in graph.outputs else max(death[name], start + 1)
        size = block_rows * row_bytes(graph, name)
        buffers.append(Buffer(name, size, start, end, traffic=2 * size))
    return buffers


def plan_rows(
    graph: Graph, cores: int, resident: bool = True, solver: str = "best-fit", cost: CostModel = DEFAULT_COST
) -> RowKernel:
    """The largest block (rows dividing each core's share, whole sticks for every tensor) whose two slots fit."""
    _check(graph)
    rows = graph.tensors[graph.ops[0].output].shape[0]
    if rows % cores:
        raise TilingError(f"{rows} rows do not divide over {cores} cores")
    share = rows // cores
    grain = max(cost.stick // min(row_bytes(graph, name) for name in graph.tensors), 1)

    def placed(block: int) -> Placement:
        return allocate(block_buffers(graph, block), cost.scratchpad // 2, solver)

    block = row_block(share, lambda b: not placed(b).spilled, grain, PIPELINE_DEPTH)
    return RowKernel(cores, block, resident, placed(block))


def emit_rows(graph: Graph, kernel: RowKernel, name: str) -> Emitted:
    """The program: every core runs its share of rows, block by block."""
    share = graph.tensors[graph.ops[0].output].shape[0] // kernel.cores
    blocks = share // kernel.block_rows
    stored = set(graph.tensors) if not kernel.resident else {*graph.inputs, *graph.outputs}
    buffers = {t: {"dtype": graph.tensors[t].dtype, "shape": list(graph.tensors[t].shape)} for t in sorted(stored)}
    cores = []
    for core in range(kernel.cores):
        tiles = Tiles()
        for slot in (0, 1):
            for tensor, offset in kernel.placement.offsets.items():
                spec = graph.tensors[tensor]
                shape = [kernel.block_rows, spec.shape[1]]
                tiles.add(f"{tensor}#{slot}", spec.dtype, shape, slot * kernel.slot_bytes + offset)

        def at(tensor: str, block: int, core: int = core) -> int:
            return (core * share + block * kernel.block_rows) * row_bytes(graph, tensor)

        if kernel.resident:
            code = _pipelined(blocks, graph.inputs, graph.ops, graph.outputs, at)
        else:
            code = []
            for op in graph.ops:
                code += _pipelined(blocks, list(dict.fromkeys(op.inputs)), [op], [op.output], at)
        cores.append({"core": core, "tiles": tiles.specs, "instructions": code})
    emitted = Emitted(document(name, buffers, cores))
    emitted.layouts = {tensor: [(tensor, flat)] for tensor in graph.inputs}
    emitted.readers = {tensor: (lambda bound, tensor=tensor: bound[tensor]) for tensor in graph.outputs}
    return emitted


def _pipelined(blocks: int, loads: list[str], ops: list[Op], stores: list[str], at) -> list[dict[str, Any]]:
    """Load block b+1 into the other slot before computing and storing block b."""

    def load(block: int) -> list[dict[str, Any]]:
        return [dma_in(tensor, at(tensor, block), f"{tensor}#{block % 2}") for tensor in loads]

    code = load(0)
    for block in range(blocks):
        if block + 1 < blocks:
            code += load(block + 1)
        slot = block % 2
        for op in ops:
            inputs = [f"{name}#{slot}" for name in op.inputs]
            attrs = {"dim": [-1], "keepdim": True} if op.kind is OpKind.REDUCTION else {}
            code.append(compute(op.fn, inputs, f"{op.output}#{slot}", **attrs))
        code += [dma_out(f"{tensor}#{slot}", tensor, at(tensor, block)) for tensor in stores]
    return code
