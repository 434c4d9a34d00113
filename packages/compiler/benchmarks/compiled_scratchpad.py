"""Scratchpad solvers on the compiled kernels of a transformer block (attention + MLP, fp16) on ring.

Run: python packages/compiler/benchmarks/compiled_scratchpad.py [--quick]

The block is compiled with torch.compile once per placement (`ring_inductor.config.scratchpad_solver`), with the
stacked baseline (every tile its own bytes) first. Part 1: each fused kernel's chunk tiles, as the best-fit compile
chose them, placed again by every solver: peak bytes against LOAD (no placement can peak lower) and CP-SAT's solve
time. Part 2: the whole block per placement: rows per chunk, the simulator's cycles against the baseline's, and the
error against the float64 reference. Matmuls are extern kernels with their own tiling and are not placed here.
Cycle figures are the simulator's (its pinned DeviceModel), not hardware.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

import ringsim
import torch
from ring_inductor import config
from ring_inductor.checking import TransformerBlock, compiled_run
from ring_inductor.placement import CP_SAT_LIMIT, SOLVER_NAMES, Lifetime, place
from ring_inductor.plan.cost import DEFAULT_COST
from ring_inductor.tolerance import max_relative_error
from torch import nn


def _compile(block: nn.Module, x: torch.Tensor, solver: str, dump: Path) -> tuple[torch.Tensor, float, list[dict]]:
    """The block compiled with `solver`: its output, simulated cycles of one call, and each kernel's decisions."""
    config.scratchpad_solver, config.dump_dir = solver, str(dump)
    with torch.no_grad(), ringsim.profile() as profile:
        out, _ = compiled_run(copy.deepcopy(block).to("ring"), x)
    cycles = sum(report.total_cycles for report in profile.reports)
    decisions = [json.loads(p.read_text()) for p in sorted(dump.glob("*.decisions.json"))]
    return out.cpu(), cycles, [d for d in decisions if "scratchpad" in d]  # matmuls have their own tiling


def _kernel_table(decisions: list[dict]) -> None:
    print(f"    {'kernel':<46}{'tiles':>6}{'rows':>8}{'LOAD':>11}{'stacked':>11}", end="")
    print("".join(f"{name:>11}" for name in SOLVER_NAMES[1:]) + f"{'cp-sat s':>10}")
    totals = dict.fromkeys(("LOAD", *SOLVER_NAMES), 0)
    stopped = False
    for kernel in decisions:
        pad = kernel["scratchpad"]
        rows = pad["chunk_rows"]
        tiles = [Lifetime(t["tile"], t["bytes"] // rows, t["start"], t["end"]) for t in pad["tiles"]]
        if len(tiles) < 2:
            continue
        peaks, seconds, proved = {}, 0.0, True
        for name in SOLVER_NAMES:
            placement = place(tiles, rows, DEFAULT_COST.scratchpad * 64, name)  # unbounded: compare peaks only
            peaks[name] = placement.peak
            if name == "cp-sat":
                seconds, proved = placement.seconds, bool(placement.optimal)
                stopped |= not proved
        totals["LOAD"] += pad["load"]
        for name in SOLVER_NAMES:
            totals[name] += peaks[name]
        print(f"    {kernel['kernel'][:45]:<46}{len(tiles):>6}{rows:>8}{pad['load']:>11,}", end="")
        print("".join(f"{peaks[n]:>11,}" for n in SOLVER_NAMES) + f"{seconds:>9.2f}{'' if proved else '*'}")
    print(f"    {'all kernels':<60}{totals['LOAD']:>11,}" + "".join(f"{totals[n]:>11,}" for n in SOLVER_NAMES))
    ratios = ", ".join(f"{n} x{totals[n] / totals['LOAD']:.3f}" for n in SOLVER_NAMES)
    note = f" (* = CP-SAT stopped at its {CP_SAT_LIMIT:.0f} s limit)" if stopped else " (CP-SAT proved each optimal)"
    print(f"    peak / LOAD over all kernels: {ratios}{note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compiled_scratchpad.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small block (dim 256, 128 tokens)")
    args = parser.parse_args(argv)
    dim, heads, batch, tokens = (256, 4, 2, 128) if args.quick else (1024, 8, 4, 512)
    torch.manual_seed(0)
    block = TransformerBlock(dim, heads).eval().half()
    x = torch.randn(batch, tokens, dim, dtype=torch.float16)
    with torch.no_grad():
        reference = copy.deepcopy(block).double()(x.double())
    print(f"transformer block, fp16, {batch} x {tokens} tokens, dim {dim}, {heads} heads; compiled on ring")
    runs = {}
    with tempfile.TemporaryDirectory() as scratch:
        for solver in SOLVER_NAMES:
            runs[solver] = _compile(block, x, solver, Path(scratch) / solver)
    print("(1) each fused kernel's chunk tiles (as the best-fit compile chose its rows), placed by every solver:")
    print("    peak bytes of one core's chunk tiles; LOAD is the most bytes live at once")
    _kernel_table(runs["best-fit"][2])
    print("(2) the block compiled with each placement (rows per chunk of its fused kernels, simulated cycles):")
    base = runs["stacked"][1]
    for solver, (out, cycles, decisions) in runs.items():
        chunks = " ".join(str(k["split"]["chunk"]) for k in decisions)
        err = max_relative_error(out, reference)
        print(f"    {solver:<9} {cycles:>14,.0f} cycles  x{cycles / base:.3f}   max error {err:.1e} of max |y|   "
              f"rows per chunk: {chunks}")  # fmt: skip
    config.dump_dir = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
