"""The layout pass in the compiled path: simulated cycles with it and without, and the share spent relaying.

Run: python packages/compiler/benchmarks/layout.py [--quick]

Each case is compiled with torch.compile on ring twice: with `ring_inductor.config.layout_pass` off (the baseline:
every matmul's right operand relaid into N-sticks first, a linear layer's weight transposed on every call) and on
(a right operand stored along K is read as it is, `linear` on the systolic array). Printed per case: kernels,
simulated cycles summed over kernels (second call), the relayout programs' cycles and share, the share of Inductor's
own copy kernels of permuted views (`ring_clone_*`, relaying by another name), and the error against float64.
Figures are the simulator's (its pinned DeviceModel), not hardware.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import ringsim
import torch
from ring_inductor import config
from ring_inductor.checking import block_case, compiled_run
from ring_inductor.tolerance import max_relative_error

Case = tuple[Callable[..., Any], tuple[torch.Tensor, ...], Callable[..., Any]]


def _cases(quick: bool) -> dict[str, Case]:
    torch.manual_seed(0)
    rows, batch, tokens = (128, 2, 128) if quick else (512, 4, 512)
    x = torch.randn(rows, 1024, dtype=torch.float16)
    softmax = lambda t: torch.softmax(t, -1)  # noqa: E731
    return {
        f"softmax ({rows}, 1024)": (softmax, (x,), lambda t: softmax(t.double())),
        f"block dim 256, {batch} x {tokens} tokens": block_case(256, 4, batch, tokens),
        f"block dim 1024, {batch} x {tokens} tokens, planned": block_case(1024, 8, batch, tokens),
    }


def _run(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], layout_pass: bool) -> dict[str, Any]:
    config.layout_pass = layout_pass
    with torch.no_grad():
        compiled_run(fn, *inputs)  # compile and warm up, then measure a second compile's call
        with ringsim.profile() as profile:
            out, _ = compiled_run(fn, *inputs)
    reports = profile.reports
    total = sum(r.total_cycles for r in reports)
    return {
        "kernels": len(reports),
        "cycles": total,
        "relayout": sum(r.total_cycles for r in reports if r.name.startswith("ring_relayout_")),
        "clones": sum(r.total_cycles for r in reports if r.name.startswith("ring_clone_")),
        "out": out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="layout.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="128 rows and 2 x 128 tokens, not 512 and 4 x 512")
    args = parser.parse_args(argv)
    print(f"{'case':<42}{'layout':>8}{'kernels':>8}{'cycles':>12}{'relayout':>11}{'share':>7}{'clones':>9}"
          f"{'max err':>10}")  # fmt: skip
    try:
        for name, (fn, inputs, reference_of) in _cases(args.quick).items():
            with torch.no_grad():
                reference = reference_of(*inputs)
            runs = {on: _run(fn, inputs, on) for on in (False, True)}
            for on, run in runs.items():
                error = max_relative_error(run["out"], reference)
                print(f"{name if not on else '':<42}{'on' if on else 'off':>8}{run['kernels']:>8}"
                      f"{run['cycles']:>12,.0f}{run['relayout']:>11,.0f}{run['relayout'] / run['cycles']:>7.1%}"
                      f"{run['clones'] / run['cycles']:>9.1%}{error:>10.1e}")  # fmt: skip
            print(f"{'':<42}{'on/off':>8}{'':>8}{runs[True]['cycles'] / runs[False]['cycles']:>12.3f}", flush=True)
    finally:
        config.layout_pass = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
