"""Work division: the mandatory span split comes first, matmuls are divided by the cost model."""

from __future__ import annotations

import dataclasses

import pytest
from ring_inductor.plan import divide
from ring_inductor.plan.cost import CostModel
from ring_inductor.plan.examples import matmul_graph
from ring_inductor.plan.graph import Graph
from ringsim.engine import DEFAULT_MODEL


def test_the_large_matmul_input_is_split_two_ways_first():
    plan = divide.divide(matmul_graph(8192, 32768, 4096))
    assert plan.splits == {"a": divide.TensorSplit("a", 0, 2)}
    chosen = plan.matmuls["mm"]
    assert chosen.m_parts % 2 == 0
    assert chosen == plan.considered["mm"][0]
    assert all(chosen.estimate <= other.estimate for other in plan.considered["mm"])


def test_the_cost_model_prefers_sharing_the_left_operand_over_the_ring_when_memory_bound():
    chosen = divide.divide(matmul_graph(8192, 32768, 4096)).matmuls["mm"]
    assert chosen.scheme == "ring"
    grids = [d for d in divide.divide(matmul_graph(8192, 32768, 4096)).considered["mm"] if d.scheme == "grid"]
    assert chosen.traffic < min(g.traffic for g in grids)


def test_span_is_read_from_the_device_model():
    small = CostModel(dataclasses.replace(DEFAULT_MODEL, addressable_span_bytes=64 * 1024))
    splits = divide.mandatory_splits(matmul_graph(256, 512, 128), small)
    assert splits["a"].parts == 4
    assert splits["b"].parts == 2
    assert divide.mandatory_splits(matmul_graph(256, 512, 128)) == {}


def test_row_ops_use_the_cores_that_divide_their_rows():
    graph = Graph()
    graph.tensor("x", (48, 64))
    graph.pointwise("exp", "exp", ["x"], "y")
    plan = divide.divide(graph)
    assert plan.rows["exp"].cores == 24


@pytest.mark.parametrize("shape", [(128, 128, 512), (1024, 1024, 1024)])
def test_every_candidate_tile_fits_the_scratchpad(shape):
    cost = CostModel()
    for candidate in divide.divide(matmul_graph(*shape)).considered["mm"]:
        assert candidate.tile.footprint(cost.stick) <= cost.scratchpad


def test_no_candidate_reaches_beyond_one_cores_span():
    graph = matmul_graph(8192, 32768, 4096)
    cost = CostModel()
    considered = divide.divide(graph).considered["mm"]
    assert considered
    assert all(divide.core_span(d, 8192, 4096, 32768, 2, 32) <= cost.span for d in considered)
    # a 2 x 16 grid would give each core 4096 full rows of the left operand: 256 MiB before the right one
    assert not any(d.scheme == "grid" and d.m_parts == 2 for d in considered)


def _linear(stick: int) -> Graph:
    graph = Graph()
    graph.tensor("a", (256, 1024))
    graph.tensor("w", (1024, 4096), stick=stick)  # a linear layer's weight, [n, k] row-major when stick is 0
    graph.matmul("mm", "a", "w", "c")
    graph.outputs = ["c"]
    return graph


def test_a_right_operand_stored_along_k_is_read_whole_k_and_not_priced_as_a_relayout():
    along_k = divide.divide(_linear(0)).matmuls["mm"]
    along_n = divide.divide(_linear(1)).matmuls["mm"]
    assert along_k.scheme == "ring"
    assert along_k.tile.k == 1024  # each core's band of w's rows, as stored
    assert along_n.tile.k < 1024 or along_n.scheme == "grid"
    # along N every division relays B into its blocks first, which its estimate carries
    assert along_k.estimate < along_n.estimate
