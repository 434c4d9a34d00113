"""The co-optimiser: coordinated beats independent when hand-overs cost, beam agrees with exhaustive on small chains,
and the exhaustive search stops at its time bound."""

from __future__ import annotations

from ring_inductor.plan import cooptimize
from ring_inductor.plan.cooptimize import Split


def _edge(spill: float = 1000.0, ring: float | None = 10.0, fits: bool = True):
    return cooptimize.hand_over(
        resident=lambda a, b: 0.0 if fits else None,
        spill=lambda a, b: spill,
        relayout=lambda a, b: ring if abs(int(a.key) - int(b.key)) == 1 else None,
    )


def _chain(lengths: list[int]) -> list[list[Split]]:
    return [[Split(f"op{i}/{k}", str(k), 100.0 + 7 * ((i + k) % 3)) for k in range(n)] for i, n in enumerate(lengths)]


def test_resident_relayout_and_spill_are_priced_as_the_rule_says():
    edge = _edge()
    assert edge(Split("a", "1", 0), Split("b", "1", 0)).transition == "resident"
    assert edge(Split("a", "1", 0), Split("b", "2", 0)) == cooptimize.Edge(10.0, "relayout")
    assert edge(Split("a", "1", 0), Split("b", "5", 0)) == cooptimize.Edge(1000.0, "spill")
    assert _edge(fits=False)(Split("a", "1", 0), Split("b", "1", 0)).transition == "spill"


def test_coordination_adopts_the_neighbours_split_when_handing_over_is_dear():
    options = [
        [Split("rows", "0", 100.0), Split("cols", "3", 150.0)],
        [Split("rows", "0", 130.0), Split("cols", "3", 90.0)],
    ]
    edges = [_edge(spill=500.0, ring=None)]
    alone = cooptimize.independent(options, edges)
    together = cooptimize.beam(options, edges)
    assert [s.label for s in alone.splits] == ["rows", "cols"]
    assert alone.edges[0].transition == "spill"
    assert together.cycles < alone.cycles
    assert together.edges[0].transition == "resident"


def test_beam_matches_exhaustive_on_small_chains():
    options = _chain([3, 4, 3, 4])
    edges = [_edge(spill=40.0, ring=5.0)] * 3
    exact = cooptimize.exhaustive(options, edges)
    assert exact.complete
    assert exact.examined == 3 * 4 * 3 * 4
    assert cooptimize.beam(options, edges, width=16).cycles == exact.cycles
    assert cooptimize.beam(options, edges, width=2).cycles >= exact.cycles


def test_exhaustive_search_honours_its_time_bound():
    options = _chain([12] * 9)
    result = cooptimize.exhaustive(options, [_edge()] * 8, seconds=0.2)
    assert not result.complete
    assert 0 < result.examined < 12**9


def test_a_matmul_with_an_elementwise_consumer_is_fused_when_coordinated():
    from ring_inductor.plan import divide
    from ring_inductor.plan.coplans import FLAT, epilogue_options
    from ring_inductor.plan.graph import Graph

    graph = Graph()
    graph.tensor("x", (256, 512))
    graph.tensor("w", (512, 2048))
    graph.matmul("up", "x", "w", "u")
    graph.pointwise("gelu", "gelu", ["u"], "g")
    options, divisions = epilogue_options(graph, divide.divide(graph).considered["up"])
    alone = cooptimize.independent(options.splits, options.edges)
    together = cooptimize.beam(options.splits, options.edges)
    assert alone.splits[1].key == FLAT
    assert alone.edges[0].transition == "spill"
    assert together.edges[0].transition == "resident"
    assert together.splits[1].key == together.splits[0].key in divisions
    assert together.cycles < alone.cycles


def test_stick_blocked_reduction_hands_over_by_ring_not_memory():
    from ring_inductor.plan.coplans import blocked_reduction_options
    from ring_inductor.plan.graph import Graph

    graph = Graph()
    graph.tensor("x", (1536, 256))
    graph.pointwise("exp", "exp", ["x"], "t")
    graph.reduction("sum", "sum", "t", 1, "s")
    options = blocked_reduction_options(graph, 48, 64)
    assert [s.label for s in options.splits[1]] == ["rows 64"]  # 48 fp16 results are not whole sticks
    chosen = cooptimize.beam(options.splits, options.edges)
    assert chosen.edges[0].transition == "relayout"
    aligned = blocked_reduction_options(graph, 64, 64)
    assert cooptimize.beam(aligned.splits, aligned.edges).edges[0].transition == "resident"
