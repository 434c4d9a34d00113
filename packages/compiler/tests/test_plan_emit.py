"""Emitted programs run on the real simulator and match CPU torch; the plan's choices show in the report."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from ring_inductor.plan import divide
from ring_inductor.plan.cost import CostModel
from ring_inductor.plan.divide import MatmulDivision, TensorSplit
from ring_inductor.plan.emit_handover import elementwise_pass, emit_handover, then
from ring_inductor.plan.emit_matmul import emit_matmul
from ring_inductor.plan.emit_rows import emit_rows, plan_rows
from ring_inductor.plan.examples import matmul_graph, softmax_graph
from ring_inductor.plan.graph import Graph
from ring_inductor.plan.tiling import MatmulTile
from ringsim.engine import DEFAULT_MODEL, launch


def _run(emitted, inputs):
    buffers = emitted.pack(inputs)
    report = launch(emitted.program, buffers)
    return report, emitted.unpack(buffers)


@pytest.mark.parametrize(("cores", "resident"), [(1, True), (1, False), (4, True)])
def test_softmax_matches_torch_resident_or_round_trip(cores, resident):
    graph = softmax_graph(256, 512)
    kernel = plan_rows(graph, cores, resident)
    x = torch.randn(256, 512, generator=torch.Generator().manual_seed(0)).half()
    report, out = _run(emit_rows(graph, kernel, "softmax"), {"x": x})
    torch.testing.assert_close(out["y"].double(), torch.softmax(x.double(), -1), atol=2e-3, rtol=2e-3)
    stored = 2 if resident else 2 + 2 * 4  # x in, y out; round trip adds d, e out and back (m, s are small)
    assert report.bytes_moved >= stored * x.numel() * 2 // 2
    assert len(report.per_core) == cores


def test_resident_intermediates_share_space_and_move_fewer_bytes():
    graph = softmax_graph(256, 512)
    kept, trip = plan_rows(graph, 1, True), plan_rows(graph, 1, False)
    assert kept.placement.offsets["x"] == kept.placement.offsets["y"]
    x = torch.randn(256, 512).half()
    kept_report, _ = _run(emit_rows(graph, kept, "kept"), {"x": x})
    trip_report, _ = _run(emit_rows(graph, trip, "trip"), {"x": x})
    assert kept_report.bytes_moved < trip_report.bytes_moved
    assert kept_report.total_cycles < trip_report.total_cycles


@pytest.mark.parametrize("scheme", ["ring", "row_ring", "grid"])
@pytest.mark.parametrize("span", [None, 64 * 1024])
def test_matmul_schemes_match_torch(scheme, span):
    """With a span of 64 KiB the 128 KiB left operand is split in two buffers by the mandatory pass."""
    cost = CostModel(dataclasses.replace(DEFAULT_MODEL, addressable_span_bytes=span)) if span else CostModel()
    graph = matmul_graph(512, 128, 256)
    plan = divide.divide(graph, cost)
    parts = 2 if span else 1
    assert plan.splits.get("a", TensorSplit("a", 0, 1)).parts == parts
    division = next(d for d in plan.considered["mm"] if d.scheme == scheme)
    emitted = emit_matmul(graph, graph.ops[0], division, plan.splits.get("a"))
    assert sum(name.startswith("a.") for name in emitted.program["buffers"]) == parts
    generator = torch.Generator().manual_seed(1)
    a, b = torch.randn(512, 128, generator=generator).half(), torch.randn(128, 256, generator=generator).half()
    report, out = _run(emitted, {"a": a, "b": b})
    torch.testing.assert_close(out["c"].float(), a.float() @ b.float(), atol=0.05, rtol=2e-3)
    assert report.flops == 2 * 512 * 128 * 256
    assert (report.ring_bytes > 0) == (scheme != "grid")


def test_the_row_ring_stores_whole_rows_where_the_host_reads_them():
    graph = matmul_graph(1024, 256, 512)
    # two blocks of rows and two K-chunks: a core's pieces of both blocks, each read in chunks
    division = MatmulDivision("mm", "row_ring", 2, 32, MatmulTile(16, 16, 128, 2, 2), estimate=0.0, traffic=0)
    emitted = emit_matmul(graph, graph.ops[0], division, None)
    generator = torch.Generator().manual_seed(2)
    a, b = torch.randn(1024, 256, generator=generator).half(), torch.randn(256, 512, generator=generator).half()
    buffers = emitted.pack({"a": a, "b": b})
    report = launch(emitted.program, buffers)
    torch.testing.assert_close(buffers["c"].view(1024, 512).float(), a.float() @ b.float(), atol=0.05, rtol=2e-3)
    stores = [i for core in emitted.program["cores"] for i in core["instructions"] if i["op"] == "dma_out"]
    assert len(stores) == 32 * division.m_parts  # one DMA of whole rows per core and block
    assert report.ring_bytes > 0


@pytest.mark.parametrize("b_along_k", [False, True])
def test_the_sliced_row_ring_reads_its_operands_as_stored_and_cuts_their_chunks_on_chip(b_along_k):
    graph = matmul_graph(1024, 256, 512)
    division = MatmulDivision("mm", "row_ring", 2, 32, MatmulTile(16, 16, 128, 2, 2), 0.0, 0, sliced=True)
    emitted = emit_matmul(graph, graph.ops[0], division, None, b_along_k=b_along_k)
    generator = torch.Generator().manual_seed(3)
    a, weight = torch.randn(1024, 256, generator=generator).half(), torch.randn(512, 256, generator=generator).half()
    b = weight.t() if b_along_k else weight.t().contiguous()  # along K: a linear layer's weight, as stored
    (_, pack_a), (_, pack_b) = emitted.layouts["a"][0], emitted.layouts["b"][0]
    assert pack_a(a).is_contiguous()  # A's rows as stored: nothing to relay
    assert pack_b(b).is_contiguous() == b_along_k  # along N, B's chunks are still blocks
    buffers = emitted.pack({"a": a, "b": b})
    report = launch(emitted.program, buffers)
    torch.testing.assert_close(buffers["c"].view(1024, 512).float(), a.float() @ b.float(), atol=0.05, rtol=2e-3)
    code = emitted.program["cores"][5]["instructions"]
    reads = [i for i in code if i["op"] == "dma_in"]
    cuts = [i for i in code if i["op"] == "compute" and i["fn"] == "slice"]
    steps = division.m_parts * 2  # blocks x K-chunks
    # a DMA of the piece's rows per block; the band's rows once, or each step's chunk of it in two halves
    assert len(reads) == division.m_parts + (1 if b_along_k else 2 * steps)
    assert len(cuts) == steps * (2 if b_along_k else 1)
    assert report.ring_bytes > 0


@pytest.mark.parametrize("scheme", ["grid", "ring", "row_ring"])
def test_a_matmul_fuses_its_epilogue_and_the_unfused_kernel_agrees(scheme):
    graph = matmul_graph(256, 128, 256)
    division = next(d for d in divide.divide(graph).considered["mm"] if d.scheme == scheme)
    a, b = torch.randn(256, 128).half(), torch.randn(128, 256).half()
    fused = emit_matmul(graph, graph.ops[0], division, None, epilogue=["gelu"])
    _, fused_out = _run(fused, {"a": a, "b": b})
    plain = emit_matmul(graph, graph.ops[0], division, None)
    plain.program["cores"] = then(
        plain.program["cores"], elementwise_pass("c", "c", 256 * 256, "float16", ["gelu"], 32)
    )
    _, plain_out = _run(plain, {"a": a, "b": b})
    assert torch.equal(fused_out["c"], plain_out["c"])
    expected = torch.nn.functional.gelu((a.float() @ b.float()).half().float())
    torch.testing.assert_close(fused_out["c"].float(), expected, atol=0.05, rtol=5e-3)


@pytest.mark.parametrize("transition", ["spill", "relayout"])
def test_hand_over_by_spill_or_ring_gives_the_same_sums(transition):
    graph = Graph()
    graph.tensor("x", (1536, 128))
    graph.pointwise("exp", "exp", ["x"], "t")
    graph.reduction("sum", "sum", "t", 1, "s")
    graph.outputs = ["s"]
    x = torch.randn(1536, 128).half()
    report, out = _run(emit_handover(graph, 48, 64, transition), {"x": x})
    expected = torch.exp(x.float()).half().float().sum(-1, keepdim=True)
    torch.testing.assert_close(out["s"].float(), expected, rtol=2e-3, atol=1e-2)
    assert (report.ring_bytes > 0) == (transition == "relayout")
