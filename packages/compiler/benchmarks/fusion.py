"""Compiled matmul epilogues on ring: the product kept resident in the matmul's kernel against spilled.

Run: python packages/compiler/benchmarks/fusion.py [--quick]

Each case is compiled with torch.compile twice: with `ring_inductor.config.fuse_matmul_epilogues` off (the
baseline: the matmul stores its product, a second kernel reads it back) and on (the co-optimiser keeps the product
in the matmul's scratchpad tiles and runs the consumers there). Printed per case: kernels, simulated cycles
(compute / memory / communication, summed over kernels), bytes moved, the share of core-time spent computing, the
roofline bound's share of the cycles, and the error against float64. Figures are the simulator's (its pinned
DeviceModel), not hardware. Cases marked planned have a B that overflows a core: the planning layer's division
(ring or grid) carries the consumers on its output tiles.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import ringsim
import torch
import torch.nn.functional as F
from ring_inductor import config
from ring_inductor.checking import block_case, compiled_run, float64_reference
from ring_inductor.emit import CORES
from ring_inductor.tolerance import max_relative_error

Case = tuple[Callable[..., Any], tuple[torch.Tensor, ...], Callable[..., Any]]


def _cases(rows: int, tokens: int, wide_tokens: int) -> dict[str, Case]:
    torch.manual_seed(0)
    x = torch.randn(rows, 512, dtype=torch.float16)
    up, gate = ((torch.randn(1024, 512) / 23).half() for _ in range(2))
    bias, down = torch.randn(1024, dtype=torch.float16), (torch.randn(512, 512) / 23).half()
    cases = {
        f"gelu(linear) [{rows}, 512] -> 1024": (lambda x, w, b: F.gelu(F.linear(x, w, b)), (x, up, bias)),
        f"x + relu(x @ w) [{rows}, 512] -> 512": (lambda x, w: x + torch.relu(x @ w), (x, down)),
        f"silu(x @ g) * (x @ u) [{rows}, 512] -> 1024": (
            lambda x, g, u: F.silu(F.linear(x, g)) * F.linear(x, u),
            (x, gate, up),
        ),
    }
    # B overflows a core: the planned matmul's division carries the consumers
    wide, big_up = torch.randn(rows // 4, 1024, dtype=torch.float16), (torch.randn(4096, 1024) / 32).half()
    cases[f"gelu(linear) [{rows // 4}, 1024] -> 4096, planned"] = (
        lambda x, w, b: F.gelu(F.linear(x, w, b)),
        (wide, big_up, torch.randn(4096, dtype=torch.float16)),
    )
    cases = {name: (fn, inputs, lambda *t, fn=fn: float64_reference(fn, *t)) for name, (fn, inputs) in cases.items()}
    cases[f"block dim 256, 4 x {tokens} tokens"] = block_case(256, 4, 4, tokens)
    cases[f"block dim 1024, 4 x {wide_tokens} tokens, planned"] = block_case(1024, 8, 4, wide_tokens)
    return cases


def _run(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], fuse: bool) -> dict[str, Any]:
    config.fuse_matmul_epilogues = fuse
    compiled_run(fn, *inputs)  # compile, then measure the second call
    with torch.no_grad(), ringsim.profile() as profile:
        out, _ = compiled_run(fn, *inputs)
    reports = profile.reports
    total = sum(r.total_cycles for r in reports)
    computing = sum(core.compute for r in reports for core in r.per_core.values())
    return {
        "kernels": len(reports),
        "cycles": total,
        "compute": sum(r.compute_cycles for r in reports),
        "memory": sum(r.memory_cycles for r in reports),
        "communication": sum(r.communication_cycles for r in reports),
        "bytes": sum(r.bytes_moved for r in reports),
        "busy": computing / (CORES * total),
        "bound": sum(r.roofline_cycles for r in reports) / total,
        "out": out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fusion.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="1,024 rows, not 8,192; 256 and 64 tokens a block, not 512 and 512"
    )
    args = parser.parse_args(argv)
    print(f"{'case':<42}{'':>8}{'kernels':>8}{'cycles':>11}{'compute':>10}{'memory':>10}{'comm':>7}{'bytes':>13}"
          f"{'compute share':>15}{'bound share':>13}{'max err':>10}")  # fmt: skip
    try:
        for name, (fn, inputs, reference_of) in _cases(*((1024, 256, 64) if args.quick else (8192, 512, 512))).items():
            with torch.no_grad():
                reference = reference_of(*inputs)
            runs = {fuse: _run(fn, inputs, fuse) for fuse in (False, True)}
            for fuse, run in runs.items():
                print(f"{name if not fuse else '':<42}{'fused' if fuse else 'spilled':>8}{run['kernels']:>8}"
                      f"{run['cycles']:>11,.0f}{run['compute']:>10,.0f}{run['memory']:>10,.0f}"
                      f"{run['communication']:>7,.0f}{run['bytes']:>13,}{run['busy']:>15.3f}{run['bound']:>13.3f}"
                      f"{max_relative_error(run['out'], reference):>10.1e}")  # fmt: skip
            print(f"{'':<42}{'ratio':>8}{'':>8}{runs[True]['cycles'] / runs[False]['cycles']:>11.3f}"
                  f"{'':>27}{runs[True]['bytes'] / runs[False]['bytes']:>13.3f}")  # fmt: skip
    finally:
        config.fuse_matmul_epilogues = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
