"""A compiled matmul and its pointwise consumers as one kernel, when the co-optimiser's cost model says so.

The kernel is the consumers' own row kernel over the product's [m, n] space, with the product computed in place of
its load: each chunk of rows DMAs in its rows of A, runs the device's `mm`/`addmm` against B (loaded whole once per
core), and the consumers' steps read the product's tile, which never reaches device memory unless something else
reads it. When B overflows a core, the planned matmul's division (ring or grid) carries the consumers instead: they
run on each output tile (`fusion_planned`). The co-optimiser (`plan.cooptimize`) weighs that resident hand-over
against the spill (the product stored, a barrier, a second kernel reading it back), on the cost model's figures,
over the matmul's divisions too: a planned matmul may take a division whose tiles leave the consumers room over its
cheapest division alone. A product that cannot stay resident (the fused chunk or tile does not fit, the consumer reads
it through a view or computes from its index) spills.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ring_inductor import fusion_planned
from ring_inductor.emit import SCRATCHPAD, Tiles, align, dtype_name, plan_split
from ring_inductor.errors import UnsupportedError
from ring_inductor.graph import KernelGraph, Operand, Value
from ring_inductor.indexing import Access
from ring_inductor.plan import divide
from ring_inductor.plan.cooptimize import Assignment, Split, beam, hand_over
from ring_inductor.plan.coplans import division_key
from ring_inductor.plan.cost import DEFAULT_COST
from ring_inductor.plan.divide import MatmulDivision, TensorSplit
from ring_inductor.planned_matmul import matmul_graph
from ring_inductor.recorder import record_kernel
from ring_inductor.sticks import as_stored, reads_along_k
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
    graph = record_kernel(nodes, space=(m, n)) if nodes else KernelGraph(m, n)
    graph.fold_casts()
    product = buffer.get_name()
    loads = [op for op in graph.operands if op.buffer == product]
    if any(op.is_output or op.access != Access("full", op.access.sizes, op.access.strides, 0) for op in loads):
        raise UnsupportedError("a consumer reads the product through a view")
    dtype = buffer.get_dtype()
    a_node, b_node = buffer.inputs[-2:]
    a = Operand("mm_a", wrapper_name(a_node.get_name()), dtype, _access(a_node), False, cols=k)
    b_access = _access(b_node)
    bias = [_bias(buffer.inputs[0], m, n)] if buffer.fn == "addmm" else []
    biases = [Value("full" if op.access.kind != "col" else "col", dtype, operand=op) for op in bias]
    if not _overflows(buffer) and reads_along_k(b_access.sizes, b_access.strides):
        # the layout pass keeps B as stored, along K: loaded whole as [n, k] rows, multiplied by linear(a, w, bias)
        b = Operand("mm_b", wrapper_name(b_node.get_name()), dtype, as_stored(b_access), False, whole=(n, k))
        inputs = [Value("full", dtype, operand=a), Value("matrix", dtype, operand=b), *biases]
        value = Value("full", dtype, "linear", tuple(inputs))
    else:
        b = Operand("mm_b", wrapper_name(b_node.get_name()), dtype, b_access, False, whole=(k, n))
        inputs = [*biases, Value("full", dtype, operand=a), Value("matrix", dtype, operand=b)]
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
    #: a planned matmul's division (ring or grid) that carries the consumers (None: B fits a core, or spilled)
    division: MatmulDivision | None = None
    split: TensorSplit | None = None

    def decisions(self) -> dict[str, Any]:
        return {
            "fused": self.fused,
            "refused": self.refused,
            "splits": [s.label for s in self.assignment.splits],
            "hand_over": [asdict(e) for e in self.assignment.edges],
            "cycles": self.assignment.cycles,
            "division": asdict(self.division) if self.division is not None else None,
        }


@dataclass(frozen=True)
class _Producers:
    """The matmul's candidate splits for the co-optimiser."""

    options: list[Split]
    #: the divisions a consumer can adopt, by split key (None: the whole-B row kernel, B fitting a core)
    carrying: dict[str, MatmulDivision | None]
    split: TensorSplit | None


def _planned(m: int, k: int, n: int, buffer: RingMatmulBuffer, graph: KernelGraph | None) -> _Producers:
    """A planned matmul's options: its cheapest division alone (the product stored), and every ring or grid division
    whose tiles leave room for the consumers (`graph`, None when they cannot join)."""
    b = _access(buffer.inputs[-1])
    plan = matmul_graph(m, k, n, dtype_name(buffer.get_dtype()), reads_along_k(b.sizes, b.strides))
    splits = divide.mandatory_splits(plan)
    best = divide.matmul_candidates(plan, plan.ops[0], splits)[0]
    options = [Split(f"{division_key(best)} alone", "alone", best.estimate)]
    carrying = {}
    if graph is not None:
        room = fusion_planned.room(graph)
        for division in divide.matmul_candidates(plan, plan.ops[0], splits, epilogue=room):
            carrying[division_key(division)] = division
            options.append(Split(f"{division_key(division)} carrying its consumers", division_key(division),
                                 division.estimate))  # fmt: skip
    return _Producers(options, carrying, splits.get("a"))


def _overflows(buffer: RingMatmulBuffer) -> bool:
    """Whether B overflows a core (the matmul is planned)."""
    (_, k), (_, n) = buffer.shapes()[-2:]
    return align(k * n * buffer.get_dtype().itemsize) > SCRATCHPAD


def _full_loads(graph: KernelGraph | None) -> list[Operand]:
    """The consumers' operands (a bias per element among them) read over the whole product."""
    if graph is None:
        return []
    return [op for op in fusion_planned.epilogue_loads(graph) if op.access.kind in ("full", "gather")]


def planned_bias(buffer: RingMatmulBuffer) -> Choice | None:
    """A planned addmm of a bias row with no consumers: the cheapest division whose tiles add the bias (one kernel,
    not the product and then an add), or None (an mm, B fits a core, a bias per element, which would be relaid
    into the division's tiles first, or no division carries the bias)."""
    if buffer.fn != "addmm" or not _overflows(buffer) or len(buffer.shapes()[0]) > 1:
        return None
    (m, k), (_, n) = buffer.shapes()[-2:]
    try:
        producers = _planned(m, k, n, buffer, fused_graph(buffer, []))
    except UnsupportedError:
        return None
    if not producers.carrying:
        return None
    key, division = min(producers.carrying.items(), key=lambda item: item[1].estimate)
    split = Split(f"{key} adding the bias", key, division.estimate)
    assignment = Assignment((split,), (), division.estimate, complete=True, examined=len(producers.carrying))
    return Choice(True, assignment, "", division, producers.split)


def choose(buffer: RingMatmulBuffer, nodes: list[Any]) -> Choice:
    """Resident or spilled: the co-optimiser's beam search over the matmul's division and the consumers' split."""
    (m, k), (_, n) = buffer.shapes()[-2:]
    cost, itemsize = DEFAULT_COST, buffer.get_dtype().itemsize
    planned = _overflows(buffer)
    refused, graph = "", None
    try:
        graph = fused_graph(buffer, nodes)
        if planned:
            fusion_planned.check(graph)
        else:
            plan_split(graph, Tiles(graph))
    except UnsupportedError as error:
        refused, graph = str(error), None
    if planned:
        producers = _planned(m, k, n, buffer, graph)
        if graph is not None and not producers.carrying:
            refused = "no division of the planned matmul leaves its tiles room for the consumers"
    else:
        standalone = max(cost.matmul(m * n * k // cost.cores), cost.memory((m * k + k * n * cost.cores) * itemsize))
        producers = _Producers([Split(ROWS, ROWS, standalone)], {ROWS: None} if graph is not None else {}, None)
    vector = cost.vector(m * n // cost.cores)
    alone = cost.memory(2 * m * n * itemsize) + vector
    # a planned division reads each full operand blocked in its tiles (a relayout in, read and written, first),
    # but for the row ring, which loads them in whole rows as stored
    full = sum(2 * math.prod(op.access.sizes) * op.dtype.itemsize for op in _full_loads(graph)) if planned else 0

    def relaid(producer: Split) -> int:
        division = producers.carrying.get(producer.key)
        return 0 if division is not None and division.scheme == "row_ring" else full

    consumers = [Split(FLAT, FLAT, alone), *(Split(f"adopt {key}", key, alone) for key in producers.carrying)]
    edge = hand_over(
        lambda producer, consumer: None if refused else vector - alone + cost.memory(relaid(producer)),
        lambda producer, consumer: cost.barrier,
        lambda producer, consumer: None,
    )
    assignment = beam([producers.options, consumers], [edge])
    fused = assignment.edges[0].transition == "resident"
    division = producers.carrying.get(assignment.splits[0].key) if fused else None
    return Choice(fused, assignment, refused, division, producers.split if division else None)
