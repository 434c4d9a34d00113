"""The kernel graphs the benchmark and the tests plan: a row softmax and a single matmul, built one way."""

from __future__ import annotations

from ring_inductor.plan.graph import Graph


def softmax_graph(rows: int, cols: int) -> Graph:
    """max -> sub -> exp -> sum -> div along the rows of a (rows, cols) input `x`, output `y`."""
    graph = Graph()
    graph.tensor("x", (rows, cols))
    graph.reduction("max", "amax", "x", 1, "m")
    graph.pointwise("sub", "sub", ["x", "m"], "d")
    graph.pointwise("exp", "exp", ["d"], "e")
    graph.reduction("sum", "sum", "e", 1, "s")
    graph.pointwise("div", "div", ["e", "s"], "y")
    graph.outputs = ["y"]
    return graph


def matmul_graph(m: int, k: int, n: int) -> Graph:
    """c = a @ b with a (m, k) and b (k, n): the op is `mm`."""
    graph = Graph()
    graph.tensor("a", (m, k))
    graph.tensor("b", (k, n))
    graph.matmul("mm", "a", "b", "c")
    graph.outputs = ["c"]
    return graph
