"""Layout (stick) assignment: choose each tensor's stick dimension and insert the fewest restickify ops.

A tensor's stick dimension is the innermost dimension of its device layout (128-byte sticks run along it). Op
constraints: a pointwise op's inputs agree with its output's stick dim (an input broadcast along that dim, size 1,
is exempt: the vector unit repeats it); a reduction runs along the stick, so its input's stick dim is the reduced
dim; a matmul reads its left operand along K and writes its output along N (dim 1 each), and reads its right
operand along N (`mm`) or along K (`linear`, as a linear layer's weight is stored), whichever it has. Graph inputs
arrive as they are stored (the host's layout, stick on the last dim, unless a tensor says otherwise), and graph
outputs leave in the host's layout.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass

from .graph import Graph, Op, OpKind, Tensor

#: Assignments tried exhaustively up to this many; beyond it coordinate descent (reported as not exact).
EXHAUSTIVE_LIMIT = 1 << 16


@dataclass(frozen=True, slots=True)
class LayoutPlan:
    sticks: dict[str, int]
    #: (tensor, from stick dim, to stick dim) for every restickify inserted.
    restickifies: tuple[tuple[str, int, int], ...]
    restickified_bytes: int
    exact: bool
    examined: int

    @property
    def count(self) -> int:
        return len(self.restickifies)


def candidates(tensor: Tensor) -> list[int]:
    """Dims a stick may run along: those longer than one element (else the last)."""
    dims = [dim for dim, size in enumerate(tensor.shape) if size > 1]
    return dims or [len(tensor.shape) - 1]


def host_stick(tensor: Tensor) -> int:
    """The stick dim `tensor` is stored with: its own, else the host's (the last dim)."""
    return tensor.stick if tensor.stick is not None else len(tensor.shape) - 1


def requirements(graph: Graph, sticks: dict[str, int]) -> dict[str, set[int]]:
    """The stick dims each tensor's consumers (and the host, for outputs) need it in, given the op outputs' dims."""
    needed: dict[str, set[int]] = defaultdict(set)
    for op in graph.ops:
        for name, stick in _input_sticks(graph, op, sticks):
            if stick is not None:
                needed[name].add(stick)
    for name in graph.outputs:
        needed[name].add(len(graph.tensors[name].shape) - 1)
    return needed


def _input_sticks(graph: Graph, op: Op, sticks: dict[str, int]) -> list[tuple[str, int | None]]:
    out_stick = sticks[op.output]
    if op.kind is OpKind.MATMUL:
        right = op.inputs[1]
        stored_along_k = graph.tensors[right].stick == 0  # a graph input, read as it is stored
        return [(op.inputs[0], 1), (right, 0 if stored_along_k else 1)]
    if op.kind is OpKind.REDUCTION:
        return [(op.inputs[0], op.dim)]
    if op.kind is OpKind.POINTWISE:
        out = graph.tensors[op.output]
        return [
            (name, None if graph.tensors[name].shape[out_stick] == 1 < out.shape[out_stick] else out_stick)
            for name in op.inputs
        ]
    return [(op.inputs[0], None)]


def _output_choices(graph: Graph, op: Op) -> list[int]:
    if op.kind is OpKind.MATMUL:
        return [1]
    return candidates(graph.tensors[op.output])


def restickifies(graph: Graph, sticks: dict[str, int]) -> list[tuple[str, int, int]]:
    """Every (tensor, from, to) conversion the assignment needs: one per tensor and distinct required dim."""
    needed = requirements(graph, sticks)
    return [
        (name, sticks[name], want) for name in graph.tensors for want in sorted(needed[name]) if want != sticks[name]
    ]


def _cost(graph: Graph, sticks: dict[str, int]) -> tuple[int, int]:
    conversions = restickifies(graph, sticks)
    return len(conversions), sum(graph.tensors[name].nbytes for name, _, _ in conversions)


def solve(graph: Graph, limit: int = EXHAUSTIVE_LIMIT) -> LayoutPlan:
    """The assignment with the fewest restickify ops (then fewest bytes): exhaustive when small, else descent."""
    fixed = {name: host_stick(graph.tensors[name]) for name in graph.inputs}
    choices = {op.output: _output_choices(graph, op) for op in graph.ops}
    names = list(choices)
    space = math.prod(len(options) for options in choices.values())
    if space <= limit:
        best = None
        for combo in itertools.product(*(choices[name] for name in names)):
            sticks = {**fixed, **dict(zip(names, combo, strict=True))}
            cost = _cost(graph, sticks)
            if best is None or cost < best[0]:
                best = (cost, sticks)
        assert best is not None
        sticks, exact = best[1], True
    else:
        sticks, exact = _descend(graph, fixed, choices), False
    conversions = restickifies(graph, sticks)
    return LayoutPlan(
        sticks=sticks,
        restickifies=tuple(conversions),
        restickified_bytes=sum(graph.tensors[name].nbytes for name, _, _ in conversions),
        exact=exact,
        examined=space if exact else 0,
    )


def _descend(graph: Graph, fixed: dict[str, int], choices: dict[str, list[int]]) -> dict[str, int]:
    """Coordinate descent from every output on its first choice: change one tensor at a time while it helps."""
    sticks = {**fixed, **{name: options[0] for name, options in choices.items()}}
    improved = True
    while improved:
        improved = False
        for name, options in choices.items():
            for option in options:
                trial = {**sticks, name: option}
                if _cost(graph, trial) < _cost(graph, sticks):
                    sticks, improved = trial, True
    return sticks


def assign(graph: Graph, limit: int = EXHAUSTIVE_LIMIT) -> tuple[Graph, LayoutPlan]:
    """Solve the layout and return the graph with restickify ops inserted where consumers need another stick dim."""
    plan = solve(graph, limit)
    sticks = dict(plan.sticks)
    for name, _, want in plan.restickifies:
        tensor = graph.tensors[name]
        converted = Tensor(f"{name}.stick{want}", tensor.shape, tensor.dtype)
        readers = [op for op in graph.consumers(name) if dict(_input_sticks(graph, op, sticks)).get(name) == want]
        first = readers[0] if readers else None
        op = Op(f"restickify.{name}.{want}", OpKind.RESTICKIFY, "restickify", (name,), converted.name)
        graph = _insert(graph, op, first, converted, readers)
        sticks[converted.name] = want
        if name in graph.outputs and want == len(tensor.shape) - 1:
            graph.outputs = [converted.name if out == name else out for out in graph.outputs]
    return graph, LayoutPlan(sticks, plan.restickifies, plan.restickified_bytes, plan.exact, plan.examined)


def _insert(graph: Graph, op: Op, before: Op | None, output: Tensor, readers: list[Op]) -> Graph:
    if before is not None:
        return graph.with_op(op, before, output, readers)
    extended = Graph({**graph.tensors, output.name: output}, [*graph.ops, op], list(graph.outputs))
    return extended
