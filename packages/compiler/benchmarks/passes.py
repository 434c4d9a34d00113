"""Planning passes toggled one at a time, measured by the Ring-32 simulator against a baseline of the same run.

Run: python packages/compiler/benchmarks/passes.py [--quick]
Cycle figures are the simulator's (its pinned DeviceModel), not hardware. --quick shrinks the matmul and the
transformer block and shortens the CP-SAT time limit; the full run simulates the [8192, 32768] x [32768, 4096]
matmul with the engine's timing model alone (its bytes are not executed: that would be 2.2 TFLOP on the host).
"""

from __future__ import annotations

import argparse
import time

import torch
from ring_inductor.plan import cooptimize, divide, layout
from ring_inductor.plan.coplans import FLAT, blocked_reduction_options, epilogue_options
from ring_inductor.plan.cost import DEFAULT_COST
from ring_inductor.plan.emit import Emitted
from ring_inductor.plan.emit_handover import elementwise_pass, emit_handover, then
from ring_inductor.plan.emit_matmul import emit_matmul
from ring_inductor.plan.emit_rows import emit_rows, plan_rows
from ring_inductor.plan.examples import matmul_graph, softmax_graph
from ring_inductor.plan.graph import Graph
from ring_inductor.plan.scratchpad import SOLVERS, allocate, core_buffers, load
from ringsim.engine import KernelReport, launch, parse_program, plan

HEADER = f"    {'variant':<34}{'total':>12}{'compute':>12}{'memory':>12}{'comm':>11}{'bytes':>15}{'roofline':>12}"


def _row(label: str, report: KernelReport, baseline: KernelReport | None = None) -> str:
    line = (
        f"    {label:<34}{round(report.total_cycles):>12,}{round(report.compute_cycles):>12,}"
        f"{round(report.memory_cycles):>12,}{round(report.communication_cycles):>11,}{report.bytes_moved:>15,}"
        f"{round(report.roofline_cycles):>12,}"
    )
    if baseline is not None:
        line += (
            f"   x{report.total_cycles / baseline.total_cycles:.3f} time, "
            f"x{report.bytes_moved / max(baseline.bytes_moved, 1):.3f} bytes"
        )
    return line


def _run(emitted: Emitted, inputs: dict[str, torch.Tensor]) -> tuple[KernelReport, dict[str, torch.Tensor]]:
    buffers = emitted.pack(inputs)
    report = launch(emitted.program, buffers)
    return report, emitted.unpack(buffers)


def softmax() -> None:
    graph = softmax_graph(512, 1024)
    x = torch.randn(512, 1024, generator=torch.Generator().manual_seed(0)).half()
    reference = torch.softmax(x.double(), -1)
    trip = plan_rows(graph, 1, resident=False)
    kept = plan_rows(graph, 1, resident=True)
    base, base_out = _run(emit_rows(graph, trip, "softmax_round_trip"), {"x": x})
    best, best_out = _run(emit_rows(graph, kept, "softmax_resident"), {"x": x})
    assert torch.equal(base_out["y"], best_out["y"]), "the two softmax plans disagree"
    error = (best_out["y"].double() - reference).abs().max().item()
    print(
        "(a) softmax (512, 1024) fp16 on one core, max -> sub -> exp -> sum -> div; pass toggled: scratchpad residency"
    )
    print(f"    blocks of {kept.block_rows} rows, tile peak {kept.placement.peak:,} B = LOAD {kept.placement.load:,} B")
    print(HEADER)
    print(_row("baseline: round trip (pass off)", base))
    print(_row("intermediates resident (pass on)", best, base))
    print(
        f"    {100 * (1 - best.total_cycles / base.total_cycles):.1f}% less time (public hardware figure: 27%, "
        f"32.51 -> 23.67 us); max abs error vs float64 {error:.2e}"
    )


def matmul(quick: bool) -> None:
    m, k, n = (1024, 2048, 4096) if quick else (8192, 32768, 4096)
    graph = matmul_graph(m, k, n)
    division = divide.divide(graph)
    chosen = division.matmuls["mm"]
    grid = next(d for d in division.considered["mm"] if d.scheme == "grid")
    print(f"(b) matmul [{m}, {k}] x [{k}, {n}] fp16 on 32 cores; pass toggled: cost-model work division")
    for name, split in division.splits.items():
        tensor = graph.tensors[name]
        print(
            f"    mandatory split first: {name} {list(tensor.shape)} ({tensor.nbytes // 2**20} MiB > "
            f"{DEFAULT_COST.span // 2**20} MiB span) -> {split.parts} parts along dim {split.dim}"
        )
    for label, candidate in (("chosen", chosen), ("best grid", grid)):
        print(
            f"    {label}: {candidate.scheme} {candidate.m_parts}x{candidate.n_parts}, tile {candidate.tile.m}x"
            f"{candidate.tile.n}x{candidate.tile.k}, model {round(candidate.estimate):,} cycles, "
            f"{candidate.traffic:,} B traffic"
        )
    reports = {}
    for label, candidate in (("grid", grid), ("chosen", chosen)):
        emitted = emit_matmul(graph, graph.ops[0], candidate, division.splits.get("a"))
        begin = time.perf_counter()
        if quick:
            generator = torch.Generator().manual_seed(2)
            a = torch.randn(m, k, generator=generator).half()
            b = torch.randn(k, n, generator=generator).half()
            report, out = _run(emitted, {"a": a, "b": b})
            error = (out["c"].float() - a.float() @ b.float()).abs().max().item()
            how = f"executed, max abs error vs fp32 {error:.3f}"
        else:
            report = plan(parse_program(emitted.program)).report
            how = "timed by the engine's model without executing bytes"
        instructions = sum(len(core["instructions"]) for core in emitted.program["cores"])
        print(f"    {label}: {instructions:,} instructions, {how} ({time.perf_counter() - begin:.0f} s)")
        reports[label] = report
    flops = 2 * m * n * k
    compulsory = (m * k + k * n + m * n) * 2
    ideal = DEFAULT_COST.roofline(flops, compulsory)
    print(HEADER)
    print(_row("baseline: best grid (pass off)", reports["grid"]))
    print(_row(f"cost-model division: {chosen.scheme}", reports["chosen"], reports["grid"]))
    for label, report in (("grid", reports["grid"]), (chosen.scheme, reports["chosen"])):
        print(
            f"    {label}: 32-core roofline (compulsory bytes) {round(ideal):,} cycles / simulated "
            f"{round(report.total_cycles):,} = {ideal / report.total_cycles:.3f} of roofline"
        )


def _transformer(seq: int, model: int) -> Graph:
    graph = Graph()
    graph.tensor("x", (seq, model))
    for weight in ("wq", "wk", "wv", "wo"):
        graph.tensor(weight, (model, model))
    graph.tensor("w1", (model, 4 * model))
    graph.tensor("w2", (4 * model, model))
    graph.matmul("q", "x", "wq", "q")
    graph.matmul("k", "x", "wk", "k")
    graph.matmul("v", "x", "wv", "v")
    graph.transpose("kt", "k", "kt")
    graph.matmul("scores", "q", "kt", "scores")
    graph.reduction("max", "amax", "scores", 1, "m")
    graph.pointwise("sub", "sub", ["scores", "m"], "shifted")
    graph.pointwise("exp", "exp", ["shifted"], "e")
    graph.reduction("sum", "sum", "e", 1, "s")
    graph.pointwise("div", "div", ["e", "s"], "p")
    graph.matmul("attn", "p", "v", "attn")
    graph.matmul("o", "attn", "wo", "o")
    graph.pointwise("residual", "add", ["x", "o"], "h")
    graph.matmul("up", "h", "w1", "u")
    graph.pointwise("gelu", "gelu", ["u"], "g")
    graph.matmul("down", "g", "w2", "d")
    graph.pointwise("residual2", "add", ["h", "d"], "y")
    graph.outputs = ["y"]
    return graph


def scratchpad(quick: bool) -> None:
    seq, model = (1024, 512) if quick else (4096, 1024)
    graph = _transformer(seq, model)
    stick = layout.solve(graph)
    division = divide.divide(graph)
    buffers = core_buffers(graph, division, DEFAULT_COST.cores)
    capacity = DEFAULT_COST.scratchpad
    print(f"(c) scratchpad solvers: one core's tiles over a transformer block (attention + MLP, fp16, {seq} x {model})")
    print(
        f"    layout pass: {stick.count} restickify ops ({'exact' if stick.exact else 'descent'}, "
        f"{stick.examined} assignments examined); work division: "
        + ", ".join(f"{name} {d.scheme} {d.m_parts}x{d.n_parts}" for name, d in division.matmuls.items())
    )
    print(
        f"    {len(buffers)} buffers, LOAD {load(buffers):,} B (the lower bound on any peak), usable scratchpad "
        f"{capacity:,} B; 'kept LOAD' is the LOAD of the tiles a solver did not spill"
    )
    print(
        f"    {'solver':<10}{'peak':>12}{'kept LOAD':>12}{'peak/kept':>11}{'spilled':>9}{'spill bytes':>14}"
        f"{'seconds':>9}"
    )
    limit = 2.0 if quick else 20.0
    for name in SOLVERS:
        placement = allocate(buffers, capacity, name, time_limit=limit)
        note = ""
        if placement.optimal is not None:
            note = f" ({'optimal' if placement.optimal else f'feasible at the {limit:.0f} s limit'})"
        print(
            f"    {name:<10}{placement.peak:>12,}{placement.resident_load:>12,}"
            f"{placement.peak / placement.resident_load:>11.3f}"
            f"{len(placement.spilled):>9}{placement.spill_bytes:>14,}{placement.seconds:>9.2f}{note}"
        )


def _utilisation(report: KernelReport) -> tuple[float, float]:
    cores = report.per_core.values()
    busy = sum(core.busy for core in cores) / (len(report.per_core) * report.total_cycles)
    computing = sum(core.compute for core in cores) / (len(report.per_core) * report.total_cycles)
    return busy, computing


def cooptimization(quick: bool) -> None:
    m, d, h = (256, 512, 2048) if quick else (1024, 1024, 4096)
    graph = Graph()
    graph.tensor("x", (m, d))
    graph.tensor("w1", (d, h))
    graph.matmul("up", "x", "w1", "u")
    graph.pointwise("gelu", "gelu", ["u"], "g")
    graph.outputs = ["g"]
    candidates = divide.divide(graph).considered["up"]
    options, divisions = epilogue_options(graph, candidates)
    alone = cooptimize.independent(options.splits, options.edges)
    together = cooptimize.beam(options.splits, options.edges)
    exact = cooptimize.exhaustive(options.splits, options.edges, seconds=5.0)
    print("(d) co-optimisation; pass toggled: coordinated division and placement (vs each op on its own)")
    print(f"    fused MLP-style kernel gelu([{m}, {d}] x [{d}, {h}]) fp16 on 32 cores")
    for label, result in (("independent", alone), ("coordinated (beam)", together), ("exhaustive", exact)):
        print(
            f"    {label}: {' -> '.join(s.label for s in result.splits)}; hand-over {result.edges[0].transition}; "
            f"model {round(result.cycles):,} cycles ({result.examined} examined, complete {result.complete})"
        )
    generator = torch.Generator().manual_seed(3)
    x, w1 = torch.randn(m, d, generator=generator).half(), torch.randn(d, h, generator=generator).half()
    reports = {}
    for label, result in (("independent", alone), ("coordinated", together)):
        division = divisions[result.splits[0].key]
        fused = result.edges[0].transition == "resident"
        emitted = emit_matmul(graph, graph.ops[0], division, None, epilogue=["gelu"] if fused else [])
        if not fused:
            assert result.splits[1].key == FLAT
            second = elementwise_pass("u", "u", m * h, "float16", ["gelu"], DEFAULT_COST.cores)
            emitted.program["cores"] = then(emitted.program["cores"], second)
        report, out = _run(emitted, {"x": x, "w1": w1})
        reports[label] = (report, out["u"])
    assert torch.equal(reports["independent"][1], reports["coordinated"][1]), "the two MLP plans disagree"
    base = reports["independent"][0]
    print(HEADER)
    print(_row("baseline: independent splits", base))
    print(_row("coordinated splits", reports["coordinated"][0], base))
    for label, (report, _) in reports.items():
        busy, computing = _utilisation(report)
        print(f"    {label}: core utilisation {busy:.3f} busy, {computing:.3f} computing (mean over 32 cores)")
    _tension(quick)


def _tension(quick: bool) -> None:
    cols = 256 if quick else 1024
    graph = Graph()
    graph.tensor("x", (1536, cols))
    graph.pointwise("exp", "exp", ["x"], "t")
    graph.reduction("sum", "sum", "t", 1, "s")
    graph.outputs = ["s"]
    options = blocked_reduction_options(graph, 48, 64)
    chosen = cooptimize.beam(options.splits, options.edges)
    print(
        f"    tension graph: exp then row sum over [1536, {cols}] fp16; exp takes 48 rows per core, the sum's fp16 "
        "[rows, 1] result needs 64-row blocks (whole sticks), so 16-48 rows per block sit on the next core"
    )
    print(
        f"    co-optimiser: hand-over by {chosen.edges[0].transition} (model {round(chosen.edges[0].cycles):,} "
        f"cycles; a spill is priced {round(DEFAULT_COST.round_trip(48 * cols * 2, 32)):,})"
    )
    x = torch.randn(1536, cols, generator=torch.Generator().manual_seed(4)).half()
    spilled, spilled_out = _run(emit_handover(graph, 48, 64, "spill"), {"x": x})
    shuffled, shuffled_out = _run(emit_handover(graph, 48, 64, "relayout"), {"x": x})
    assert torch.equal(spilled_out["s"], shuffled_out["s"]), "spill and relayout disagree"
    print(HEADER)
    print(_row("baseline: spill through memory", spilled))
    print(_row("ring relayout (one hop)", shuffled, spilled))
    saved = spilled.total_cycles - shuffled.total_cycles
    print(
        f"    hand-over: spill {spilled.microseconds:.2f} us vs relayout {shuffled.microseconds:.2f} us kernel time "
        f"({saved / 1e3:.2f} us saved; {shuffled.ring_bytes:,} B over the ring instead of "
        f"{spilled.bytes_moved - shuffled.bytes_moved:,} B more through device memory)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller matmul and transformer block, short CP-SAT limit")
    args = parser.parse_args(argv)
    print("Planning passes on the Ring-32 simulator (cycle figures from its pinned DeviceModel, not hardware)")
    softmax()
    matmul(args.quick)
    scratchpad(args.quick)
    cooptimization(args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
