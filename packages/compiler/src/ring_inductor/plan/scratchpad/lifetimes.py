"""The buffers one core holds while a divided graph runs: each activation's row share from its producer to its
last consumer, and each matmul's working tiles (accumulator, operand chunks, output tile) while it runs."""

from __future__ import annotations

from ..divide import DivisionPlan
from ..graph import DTYPE_BYTES, Graph, OpKind
from ..tiling import ACCUMULATOR_BYTES
from .buffers import Buffer


def core_buffers(graph: Graph, division: DivisionPlan, cores: int) -> list[Buffer]:
    """Op i runs at step i + 1 (graph inputs arrive at step 0); a tensor stays live through its last reader's step.

    Matmul right operands that are graph inputs (weights) are streamed chunk by chunk, so only the chunks count.
    Spilling a buffer costs its bytes out and back in.
    """
    weights = {op.inputs[1] for op in graph.ops if op.kind is OpKind.MATMUL and op.inputs[1] in graph.inputs}
    birth = {name: 0 for name in graph.inputs if name not in weights}
    birth.update({op.output: index + 1 for index, op in enumerate(graph.ops)})
    death = {name: start + 1 for name, start in birth.items()}
    for index, op in enumerate(graph.ops):
        for name in op.inputs:
            if name in death:
                death[name] = max(death[name], index + 2)
    final = len(graph.ops) + 2
    buffers = []
    for name, start in birth.items():
        share = -(-graph.tensors[name].nbytes // cores)
        end = final if name in graph.outputs else death[name]
        buffers.append(Buffer(name, share, start, end, traffic=2 * share))
    for index, op in enumerate(graph.ops):
        if op.kind is not OpKind.MATMUL:
            continue
        tile = division.matmuls[op.name].tile
        itemsize = DTYPE_BYTES[graph.tensors[op.inputs[0]].dtype]
        working = {
            "acc": tile.m * tile.n * ACCUMULATOR_BYTES,
            "left": tile.slots * tile.m * tile.k * itemsize,
            "right": 2 * tile.k * tile.n * itemsize,
            "out": tile.m * tile.n * itemsize,
        }
        for part, size in working.items():
            buffers.append(Buffer(f"{op.name}.{part}", size, index + 1, index + 2, traffic=2 * size))
    return buffers
