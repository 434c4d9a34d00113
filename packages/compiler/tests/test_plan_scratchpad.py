"""Scratchpad solvers: valid placements, LOAD as a lower bound, CP-SAT never spills more than the heuristics."""

from __future__ import annotations

import random

import pytest
from ring_inductor.plan.scratchpad import SOLVERS, Buffer, allocate, load

STICK = 128


def _random(seed: int, count: int = 24) -> list[Buffer]:
    rng = random.Random(seed)
    buffers = []
    for index in range(count):
        start = rng.randint(0, 12)
        size = rng.randint(1, 24) * STICK - rng.randint(0, 100)
        buffers.append(Buffer(f"b{index}", size, start, start + rng.randint(1, 5), traffic=2 * size))
    return buffers


def test_load_counts_bytes_live_at_once_in_whole_sticks():
    buffers = [Buffer("a", 100, 0, 2), Buffer("b", 256, 1, 3), Buffer("c", 128, 2, 4)]
    assert load(buffers) == 128 + 256
    assert load([]) == 0


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("seed", range(3))
def test_solvers_place_without_overlap_and_report_bounds(solver, seed):
    buffers = _random(seed)
    placement = allocate(buffers, 40 * STICK, solver)
    assert placement.peak >= min(placement.load, placement.peak)
    assert placement.peak <= 40 * STICK
    assert placement.spill_bytes == sum(b.traffic for b in buffers if b.name in placement.spilled)
    placed = [b for b in buffers if b.name in placement.offsets]
    for index, first in enumerate(placed):
        for second in placed[index + 1 :]:
            if first.meets(second):
                a, b = placement.offsets[first.name], placement.offsets[second.name]
                assert a + first.span <= b or b + second.span <= a


@pytest.mark.parametrize("seed", range(3))
def test_when_everything_fits_nobody_spills_and_peak_is_at_least_load(seed):
    buffers = _random(seed)
    for solver in SOLVERS:
        placement = allocate(buffers, 10**6, solver)
        assert placement.spilled == ()
        assert placement.peak >= placement.load


@pytest.mark.parametrize("seed", range(4))
def test_cp_sat_spills_no_more_than_greedy_or_best_fit(seed):
    buffers = _random(seed, 30)
    capacity = 30 * STICK
    exact = allocate(buffers, capacity, "cp-sat")
    for solver in ("greedy", "best-fit"):
        assert exact.spill_bytes <= allocate(buffers, capacity, solver).spill_bytes


def test_cp_sat_reaches_load_on_a_known_packing():
    # two tiles of 3 sticks and one of 2 alternate: LOAD is 5 sticks, and 5 sticks suffice
    buffers = [Buffer("x", 3 * STICK, 0, 2), Buffer("y", 2 * STICK, 1, 3), Buffer("z", 3 * STICK, 2, 4)]
    placement = allocate(buffers, 5 * STICK, "cp-sat")
    assert placement.spilled == ()
    assert placement.peak == placement.load == 5 * STICK
    assert placement.optimal


def test_unknown_solver_and_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="unknown scratchpad solver"):
        allocate([], 128, "annealing")
    with pytest.raises(ValueError, match="distinct names"):
        allocate([Buffer("a", 1, 0, 1), Buffer("a", 1, 0, 1)], 128)


def test_core_buffers_of_a_divided_graph_hold_row_shares_and_matmul_tiles():
    from ring_inductor.plan import divide
    from ring_inductor.plan.graph import Graph
    from ring_inductor.plan.scratchpad import core_buffers

    graph = Graph()
    graph.tensor("x", (1024, 256))
    graph.tensor("w", (256, 512))
    graph.matmul("mm", "x", "w", "h")
    graph.pointwise("gelu", "gelu", ["h"], "y")
    graph.outputs = ["y"]
    buffers = {b.name: b for b in core_buffers(graph, divide.divide(graph), 32)}
    assert "w" not in buffers  # weights stream through the matmul's chunks
    assert buffers["x"].size == 1024 * 256 * 2 // 32
    assert buffers["h"].start == 1
    assert buffers["h"].end == 3  # live through its reader's step
    assert buffers["mm.acc"].start == 1
    assert buffers["mm.acc"].end == 2
    assert buffers["y"].end == len(graph.ops) + 2
    placement = allocate(list(buffers.values()), 1_625_216, "best-fit")
    assert placement.resident_load <= placement.peak


def test_cp_sat_honours_its_time_limit():
    buffers = _random(7, 80)
    placement = allocate(buffers, 40 * STICK, "cp-sat", time_limit=0.5)
    assert placement.seconds < 5.0
    assert placement.spill_bytes <= allocate(buffers, 40 * STICK, "best-fit").spill_bytes
