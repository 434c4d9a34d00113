"""Properties of the performance model, checked on reports of programs (timing needs no data)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from ringsim.engine import DEFAULT_MODEL, KernelReport, parse_program, plan
from ringsim.engine.program import TileSpec
from ringsim.engine.timing import _overlaps

MODEL = DEFAULT_MODEL
MIB = 1024 * 1024


def report_of(cores: list[dict[str, Any]], buffers: dict[str, list[int]]) -> KernelReport:
    document = {
        "format": "ringsim-program/1",
        "name": "timing",
        "buffers": {name: {"dtype": "uint8", "shape": shape} for name, shape in buffers.items()},
        "cores": cores,
    }
    return plan(parse_program(document)).report


def byte_tile(nbytes: int, offset: int = 0) -> dict[str, Any]:
    return {"offset": offset, "dtype": "uint8", "shape": [nbytes]}


def dma(op: str, buffer: str, offset: int, tile: str = "t") -> dict[str, Any]:
    return {"op": op, "buffer": buffer, "offset": offset, "tile": tile}


def single_dma(nbytes: int) -> KernelReport:
    return report_of(
        [{"core": 0, "tiles": {"t": byte_tile(nbytes)}, "instructions": [dma("dma_in", "x", 0)]}], {"x": [4096]}
    )


def test_partial_sticks_are_charged_as_whole_sticks() -> None:
    one, partial, two = single_dma(128), single_dma(130), single_dma(256)
    assert (one.sticks, partial.sticks, two.sticks) == (1, 2, 2)
    assert partial.total_cycles == two.total_cycles > one.total_cycles
    assert partial.bytes_read == 130


def test_an_uncontended_dma_is_latency_plus_sticks_at_the_engine_rate() -> None:
    report = single_dma(4096)
    expected = MODEL.dma_latency_cycles + 4096 / min(
        MODEL.dma_engine_bytes_per_cycle, MODEL.memory_peak_bytes_per_cycle
    )
    assert report.total_cycles == pytest.approx(expected)
    assert report.memory_cycles == pytest.approx(expected)


def concurrent_reads(cores: int, nbytes: int) -> KernelReport:
    return report_of(
        [
            {"core": core, "tiles": {"t": byte_tile(nbytes)}, "instructions": [dma("dma_in", "x", core * nbytes)]}
            for core in range(cores)
        ],
        {"x": [cores * nbytes]},
    )


def test_device_memory_is_shared_so_concurrent_dmas_are_slower_per_core() -> None:
    alone = concurrent_reads(1, MIB)
    crowded = concurrent_reads(32, MIB)
    assert crowded.per_core[5].memory > 10 * alone.per_core[0].memory
    flowing = crowded.total_cycles - MODEL.dma_latency_cycles
    assert crowded.bytes_read / flowing == pytest.approx(MODEL.memory_peak_bytes_per_cycle)


def test_mixed_reads_and_writes_get_the_mixed_bandwidth() -> None:
    nbytes = MIB
    cores = []
    for core in range(32):
        op = "dma_in" if core % 2 else "dma_out"
        cores.append({"core": core, "tiles": {"t": byte_tile(nbytes)}, "instructions": [dma(op, "x", core * nbytes)]})
    mixed = report_of(cores, {"x": [32 * nbytes]})
    flowing = mixed.total_cycles - MODEL.dma_latency_cycles
    assert mixed.bytes_moved / flowing == pytest.approx(MODEL.memory_mixed_bytes_per_cycle)
    assert mixed.total_cycles > concurrent_reads(32, nbytes).total_cycles


def test_compute_runs_at_fixed_throughput() -> None:
    tiles = {
        "a": {"offset": 0, "dtype": "float16", "shape": [128, 256]},
        "b": {"offset": 65536, "dtype": "float16", "shape": [256, 128]},
        "c": {"offset": 131072, "dtype": "float16", "shape": [128, 128]},
        "s": {"offset": 196608, "dtype": "float32", "shape": [1, 1]},
    }
    instructions = [
        {"op": "compute", "fn": "mm", "inputs": ["a", "b"], "output": "c"},
        {"op": "compute", "fn": "exp", "inputs": ["a"], "output": "a"},
        {"op": "compute", "fn": "sum", "inputs": ["c"], "output": "s", "attrs": {"dim": [0, 1], "keepdim": True}},
    ]
    report = report_of([{"core": 0, "tiles": tiles, "instructions": instructions}], {})
    matmul = MODEL.compute_issue_cycles + 128 * 128 * 256 / MODEL.macs_per_cycle
    vector = MODEL.compute_issue_cycles + 128 * 256 / MODEL.vector_elements_per_cycle
    reduction = MODEL.compute_issue_cycles + 128 * 128 / MODEL.reduction_elements_per_cycle
    assert report.compute_cycles == pytest.approx(matmul + vector + reduction)
    assert report.flops == 2 * 128 * 128 * 256 + 128 * 256 + 128 * 128


def test_a_slice_moves_only_its_slice_and_counts_no_flops() -> None:
    tiles = {
        "band": {"offset": 0, "dtype": "float16", "shape": [16, 1024]},
        "piece": {"offset": 32768, "dtype": "float16", "shape": [16, 32]},
    }
    instructions = [
        {"op": "compute", "fn": "slice", "inputs": ["band"], "output": "piece",
         "attrs": {"dim": 1, "start": 32, "end": 64}},
        {"op": "compute", "fn": "slice_scatter", "inputs": ["band", "piece"], "output": "band",
         "attrs": {"dim": 1, "start": 64, "end": 96}},
    ]  # fmt: skip
    report = report_of([{"core": 0, "tiles": tiles, "instructions": instructions}], {})
    one = MODEL.compute_issue_cycles + 16 * 32 / MODEL.vector_elements_per_cycle
    assert report.compute_cycles == pytest.approx(2 * one)
    assert report.flops == 0


def test_ring_transfer_costs_hop_latency_plus_link_time() -> None:
    cores = [
        {"core": 3, "tiles": {"t": byte_tile(8192)}, "instructions": [{"op": "send", "to": 4, "tile": "t"}]},
        {"core": 4, "tiles": {"t": byte_tile(8192)}, "instructions": [{"op": "recv", "from": 3, "tile": "t"}]},
    ]
    report = report_of(cores, {})
    send = MODEL.ring_hop_latency_cycles + 8192 / MODEL.ring_link_bytes_per_cycle
    assert report.total_cycles == pytest.approx(send + MODEL.ring_recv_cycles)
    assert report.per_core[4].idle == pytest.approx(send)


def test_a_barrier_waits_for_the_slowest_core() -> None:
    tiles = {"a": {"offset": 0, "dtype": "float16", "shape": [256, 256]}}
    slow = {"core": 0, "tiles": tiles, "instructions": [{"op": "compute", "fn": "exp", "inputs": ["a"], "output": "a"}]}
    slow["instructions"].append({"op": "barrier"})
    fast = {"core": 1, "tiles": tiles, "instructions": [{"op": "barrier"}]}
    report = report_of([slow, fast], {})
    work = MODEL.compute_issue_cycles + 256 * 256 / MODEL.vector_elements_per_cycle
    assert report.total_cycles == pytest.approx(work + MODEL.barrier_cycles)
    assert report.per_core[1].idle == pytest.approx(work)


def test_independent_dma_and_compute_overlap() -> None:
    """Double buffering: loading the next tile while computing on this one beats doing them one after another."""
    tiles = {"a": byte_tile(65536), "b": byte_tile(65536, 65536)}
    compute = {"op": "compute", "fn": "neg", "inputs": ["a"], "output": "a"}
    overlapped = [dma("dma_in", "x", 0, "a"), compute, dma("dma_in", "x", 65536, "b")]
    serial = [dma("dma_in", "x", 0, "a"), compute, dma("dma_in", "x", 65536, "a")]
    fast = report_of([{"core": 0, "tiles": tiles, "instructions": overlapped}], {"x": [131072]})
    slow = report_of([{"core": 0, "tiles": tiles, "instructions": serial}], {"x": [131072]})
    assert fast.total_cycles < slow.total_cycles
    assert slow.total_cycles == pytest.approx(slow.compute_cycles + slow.memory_cycles)


def test_roofline_bound_of_a_memory_bound_kernel() -> None:
    report = single_dma(4096)
    assert report.bound == "memory"
    assert report.roofline_cycles == pytest.approx(4096 / MODEL.memory_peak_bytes_per_cycle)
    assert report.roofline_cycles <= report.total_cycles
    assert MODEL.ridge_flops_per_byte == pytest.approx(486.4)


def test_timing_is_computed_once_per_program() -> None:
    document = parse_program(
        {
            "format": "ringsim-program/1",
            "name": "once",
            "buffers": {},
            "cores": [{"core": 0, "tiles": {}, "instructions": [{"op": "barrier"}]}],
        }
    )
    assert plan(document) is plan(document)


def test_a_double_buffered_copy_on_all_cores_reaches_the_mixed_bandwidth() -> None:
    """Reads and writes overlap on every core, so device memory runs at its mixed figure (within 5%)."""
    chunk, chunks = 64 * 1024, 8
    cores = []
    for core in range(32):
        base = core * chunk * chunks
        instructions = []
        for index in range(chunks):
            instructions.append(dma("dma_in", "src", base + index * chunk, "ab"[index % 2]))
            if index:
                instructions.append(dma("dma_out", "dst", base + (index - 1) * chunk, "ab"[(index - 1) % 2]))
        instructions.append(dma("dma_out", "dst", base + (chunks - 1) * chunk, "ab"[(chunks - 1) % 2]))
        cores.append(
            {"core": core, "tiles": {"a": byte_tile(chunk), "b": byte_tile(chunk, chunk)}, "instructions": instructions}
        )
    report = report_of(cores, {"src": [32 * chunk * chunks], "dst": [32 * chunk * chunks]})
    achieved = report.bytes_moved / report.total_cycles
    assert achieved == pytest.approx(MODEL.memory_mixed_bytes_per_cycle, rel=0.05)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), min_size=1, max_size=30))
def test_tile_overlaps_match_every_pair_compared(spans: list[tuple[int, int]]) -> None:
    tiles = {f"t{i}": TileSpec(f"t{i}", 128 * start, torch.uint8, (128 * length,)) for i, (start, length) in
             enumerate(spans)}  # fmt: skip
    pairwise = {
        name: frozenset(other for other, b in tiles.items()
                        if other == name or (a.nbytes and b.nbytes and a.offset < b.end and b.offset < a.end))
        for name, a in tiles.items()
    }  # fmt: skip
    assert _overlaps(tiles) == pairwise


def test_a_core_with_thousands_of_run_tiles_is_timed_quickly() -> None:
    """One tile per DMA'd run inside one large tile: the overlap pairs are linear in the tiles, not quadratic."""
    runs = 4096
    tiles = {"all": byte_tile(128 * runs), **{f"r{i}": byte_tile(128, 128 * i) for i in range(runs)}}
    code = [dma("dma_in", "x", 128 * i, f"r{i}") for i in range(runs)] + [dma("dma_out", "y", 0, "all")]
    overlaps = _overlaps({n: TileSpec(n, s["offset"], torch.uint8, tuple(s["shape"])) for n, s in tiles.items()})
    assert sum(len(names) for names in overlaps.values()) == 1 + runs + 2 * runs  # itself each, and all <-> r_i
    report = report_of([{"core": 0, "tiles": tiles, "instructions": code}], {"x": [128 * runs], "y": [128 * runs]})
    assert report.bytes_moved == 2 * 128 * runs
