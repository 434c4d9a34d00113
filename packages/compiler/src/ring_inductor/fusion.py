"""A compiled matmul and its pointwise consumers as one kernel, when the co-optimiser's cost model says so.

The kernel is the consumers' own row kernel over the product's [m, n] space, with the product computed in place of
its load: each chunk of rows DMAs in its rows of A, runs the device's `mm`/`addmm` against B (loaded whole once per
core), and the consumers' steps read the product's tile, which never reaches device memory unless something else
reads it. The co-optimiser (`plan.cooptimize`) weighs that resident hand-over against the spill (the product
stored, a barrier, a second kernel reading it back), on the cost model's figures; a product that cannot stay
resident (B overflows a core, the fused chunk does not fit, the consumer reads it through a view) spills.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ring_inductor import config
from ring_inductor.emit import SCRATCHPAD, Tiles, align, plan_split
from ring_inductor.errors import UnsupportedError
from ring_inductor.graph import KernelGraph, Operand, Value
from ring_inductor.indexing import Access
from ring_inductor.plan.cooptimize import Assignment, Split, beam, hand_over
from ring_inductor.plan.cost import DEFAULT_COST
from ring_inductor.recorder import record_kernel
from ring_inductor.template import RingMatmulBuffer
from ring_inductor.torchprivate import wrapper_name

FLAT = "flat"
ROWS = "rows, B whole"


def _access(node: Any) -> Access:
    """The strided view through which a matmul input is read (contiguous: `full`, else `gather`)."""
    layout = node.get_layout()
    sizes = tuple(int(s) for s in node.get_size())
    strides = tuple(int(s) for s in layout.stride)
    contiguous = tuple(math.prod(sizes[d + 1 :]) for d in range(len(sizes)))
    kind = "full" if all(st == c for st, c, sz in zip(strides, contiguous, sizes, strict=True) if sz > 1) else "gather"
    return Access(kind, sizes, strides, int(layout.offset))


def _bias(node: Any, m: int, n: int) -> Operand:
    """addmm's bias as a column tile (one row, broadcast) or a full one (a bias per element)."""
    access = _access(node)
    steps = [st for st, sz in zip(access.strides, access.sizes, strict=True) if sz > 1]
    if math.prod(access.sizes) == n and steps in ([1], []):
        access = Access("col", (n,), (1,), access.offset)
    elif access.sizes != (m, n) or access.kind != "full":
        raise UnsupportedError(f"addmm's bias {list(access.sizes)} is neither a row of {n} nor [{m}, {n}]")
    return Operand("mm_bias", wrapper_name(node.get_name()), node.get_dtype(), access, False)


def fused_graph(buffer: RingMatmulBuffer, nodes: list[Any]) -> KernelGraph:
    """The consumers' kernel over the product's [m, n] space, the product's loads replaced by the matmul itself."""
    (m, k), (_, n) = buffer.shapes()[-2:]
    graph = record_kernel(nodes, space=(m, n))
    graph.fold_casts()
    product = buffer.get_name()
    loads = [op for op in graph.operands if op.buffer == product]
    if any(op.is_output or op.access != Access("full", op.access.sizes, op.access.strides, 0) for op in loads):
        raise UnsupportedError("a consumer reads the product through a view")
    dtype = buffer.get_dtype()
    a_node, b_node = buffer.inputs[-2:]
    a = Operand("mm_a", wrapper_name(a_node.get_name()), dtype, _access(a_node), False, cols=k)
    b = Operand("mm_b", wrapper_name(b_node.get_name()), dtype, _access(b_node), False, whole=(k, n))
    bias = [_bias(buffer.inputs[0], m, n)] if buffer.fn == "addmm" else []
    inputs = [Value("full" if op.access.kind != "col" else "col", dtype, operand=op) for op in bias]
    inputs += [Value("full", dtype, operand=a), Value("matrix", dtype, operand=b)]
    value = Value("full", dtype, buffer.fn, tuple(inputs))
    swap = lambda v: value if v.operand in loads else v  # noqa: E731
    for step in graph.steps:
        step.inputs = tuple(swap(v) for v in step.inputs)
    graph.stores = [(op, swap(v)) for op, v in graph.stores]
    graph.steps.insert(0, value)
    graph.operands = [*bias, a, b, *(op for op in graph.operands if op not in loads)]
    graph.origins.insert(0, f"aten.{buffer.fn}")
    return graph


def keep_product(graph: KernelGraph, buffer: RingMatmulBuffer) -> None:
    """Also store the product: something outside the kernel reads it."""
    m, n = (int(s) for s in buffer.get_size())
    operand = Operand("mm_out", buffer.get_name(), buffer.get_dtype(), Access("full", (m, n), (n, 1), 0), True)
    graph.operands.append(operand)
    graph.stores.append((operand, graph.steps[0]))


@dataclass(frozen=True)
class Choice:
    """The co-optimiser's verdict on one matmul and its consumers, for the scheduler and the dump."""

    fused: bool
    assignment: Assignment
    #: why the product cannot stay resident ("" when it can)
    refused: str

    def decisions(self) -> dict[str, Any]:
        return {
            "fused": self.fused,
            "refused": self.refused,
            "splits": [s.label for s in self.assignment.splits],
            "hand_over": [asdict(e) for e in self.assignment.edges],
            "cycles": self.assignment.cycles,
        }


def choose(buffer: RingMatmulBuffer, nodes: list[Any]) -> Choice:
    """Resident or spilled: the co-optimiser's beam search over the matmul's division and the consumers' split."""
    (m, k), (_, n) = buffer.shapes()[-2:]
    cost, itemsize = DEFAULT_COST, buffer.get_dtype().itemsize
    refused = ""
    if align(k * n * itemsize) > SCRATCHPAD:
        refused = "B overflows a core: the planned matmul's divisions store their product"
    else:
        try:
            graph = fused_graph(buffer, nodes)
            solver = "best-fit" if config.scratchpad_solver == "cp-sat" else config.scratchpad_solver
            plan_split(graph, Tiles(graph), solver)
        except UnsupportedError as error:
            refused = str(error)
    product = m * n * itemsize
    standalone = max(cost.matmul(m * n * k // cost.cores), cost.memory((m * k + k * n * cost.cores) * itemsize))
    vector = cost.vector(m * n // cost.cores)
    alone = cost.memory(2 * product) + vector
    options = [[Split(ROWS, ROWS, standalone)], [Split(FLAT, FLAT, alone), Split(f"adopt {ROWS}", ROWS, alone)]]
    edge = hand_over(
        lambda producer, consumer: None if refused else vector - alone,
        lambda producer, consumer: cost.barrier,
        lambda producer, consumer: None,
    )
    assignment = beam(options, [edge])
    return Choice(assignment.edges[0].transition == "resident", assignment, refused)
