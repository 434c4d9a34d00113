"""Stick assignment: constraints hold, restickifies only where needed, and the exact search beats a greedy one."""

from __future__ import annotations

import pytest
from ring_inductor.plan import layout
from ring_inductor.plan.examples import softmax_graph
from ring_inductor.plan.graph import Graph, GraphError, OpKind


def test_softmax_needs_no_restickify():
    planned, plan = layout.assign(softmax_graph(64, 256))
    assert plan.count == 0
    assert plan.exact
    assert plan.sticks["y"] == 1
    assert not any(op.kind is OpKind.RESTICKIFY for op in planned.ops)


def test_column_reduction_gets_exactly_one_restickify_and_the_graph_is_rewired():
    graph = Graph()
    graph.tensor("x", (128, 64))
    graph.pointwise("exp", "exp", ["x"], "e")
    graph.reduction("colsum", "sum", "e", 0, "c")
    graph.reduction("colmax", "amax", "e", 0, "d")
    graph.outputs = ["c", "d"]
    planned, plan = layout.assign(graph)
    assert plan.count == 1
    restick = [op for op in planned.ops if op.kind is OpKind.RESTICKIFY]
    assert len(restick) == 1
    moved = restick[0].output
    assert plan.sticks[moved] == 0
    for op in planned.ops:
        if op.kind is OpKind.REDUCTION:
            assert op.inputs == (moved,) or plan.sticks[op.inputs[0]] == op.dim
    assert layout.restickifies(planned, plan.sticks) == []


def _tension() -> Graph:
    """e feeds three column reductions and one row reduction: e should take stick 0 (one conversion, for the row
    reduction) rather than inherit x's stick 1 (a conversion for the columns, shared by the three)."""
    graph = Graph()
    graph.tensor("x", (128, 64))
    graph.pointwise("exp", "exp", ["x"], "e")
    graph.pointwise("neg", "neg", ["e"], "f")
    for index in range(3):
        graph.reduction(f"col{index}", "sum", "f", 0, f"c{index}")
    graph.reduction("row", "sum", "f", 1, "r")
    graph.outputs = ["c0", "c1", "c2", "r"]
    return graph


def test_exact_search_is_never_worse_than_descent_and_reports_what_it_examined():
    graph = _tension()
    exact = layout.solve(graph)
    descent = layout.solve(graph, limit=1)
    assert exact.exact
    assert not descent.exact
    assert exact.examined > 1
    assert (exact.count, exact.restickified_bytes) <= (descent.count, descent.restickified_bytes)


def test_matmul_operands_are_read_along_k_and_n():
    graph = Graph()
    graph.tensor("a", (128, 256))
    graph.tensor("b", (256, 64))
    graph.reduction("colmax", "amax", "a", 0, "m")
    graph.matmul("mm", "a", "b", "y")
    graph.outputs = ["y", "m"]
    plan = layout.solve(graph)
    assert plan.sticks["y"] == 1
    assert plan.count == 1
    assert plan.restickifies == (("a", 1, 0),)


def test_a_matmul_reads_a_right_operand_stored_along_k_as_it_is_and_restickifies_one_that_is_not():
    for stick in (0, 1):
        graph = Graph()
        graph.tensor("a", (64, 128))
        graph.tensor("w", (128, 256), stick=stick)
        graph.matmul("mm", "a", "w", "c")
        graph.outputs = ["c"]
        plan = layout.solve(graph)
        assert plan.sticks["w"] == stick
        assert plan.restickifies == ()
    graph = Graph()
    graph.tensor("a", (64, 128))
    graph.tensor("x", (128, 256))
    graph.pointwise("exp", "exp", ["x"], "e")
    graph.reduction("colsum", "sum", "e", 0, "s")
    graph.matmul("mm", "a", "e", "c")
    graph.outputs = ["c", "s"]
    plan = layout.solve(graph)
    # e is produced, not stored along K: the matmul reads it along N and the column sum along dim 0, so whichever
    # stick e takes, one restickify gives it the other
    (conversion,) = [r for r in plan.restickifies if r[0] == "e"]
    assert {plan.sticks["e"], conversion[2]} == {0, 1}


def test_a_stick_outside_the_shape_is_refused_naming_the_tensor():
    with pytest.raises(GraphError, match="tensor 'w': stick 2"):
        Graph().tensor("w", (4, 4), stick=2)
