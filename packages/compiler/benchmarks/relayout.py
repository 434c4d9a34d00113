"""Relayout programs for the strided operands of compiled kernels on ring: each scheme's cycles against the bound.

Run: python packages/compiler/benchmarks/relayout.py [--quick]

Part 1: views compiled code meets (linear layers' transposed weights, attention's q/k/v split and transposed keys,
a head permutation, a column slice), each relaid by every scheme that fits it (`ring_inductor.relayout`):
simulated cycles, and the fastest one's share of the device-memory bound (every byte read and written once at the
150 B/cycle peak; no relayout through memory can beat it). The blocks scheme (blocks through each core's
scratchpad) is the baseline the ring scheme is measured against where both fit. Part 2: a transformer block
compiled with relayout programs off (the device's copy, which the simulator does not time) and on: the block's
cycles, and how many of them the relayouts take. Cycle figures are the simulator's (its pinned DeviceModel), not
hardware.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable

import ringsim
import torch
from ring_inductor import config, relayout
from ring_inductor.checking import TransformerBlock, compiled_run
from ringsim.engine import DEFAULT_MODEL

#: name -> (the tensor's shape and dtype, the view of it compiled code relays)
VIEWS: dict[str, tuple[tuple[int, ...], torch.dtype, Callable[[torch.Tensor], torch.Tensor]]] = {
    "Linear(1024, 4096).weight.t()": ((4096, 1024), torch.float16, lambda t: t.t()),
    "Linear(1024, 1024).weight.t()": ((1024, 1024), torch.float16, lambda t: t.t()),
    "768x512 .t()": ((768, 512), torch.float16, lambda t: t.t()),
    "q of qkv [4, 512, 3, 8, 128]": ((4, 512, 3, 8, 128), torch.float16, lambda t: t.permute(2, 0, 3, 1, 4)[0]),
    "keys [32, 512, 64].transpose(-2, -1)": ((32, 512, 64), torch.float16, lambda t: t.transpose(-2, -1)),
    "heads [4, 512, 8, 128].transpose(1, 2)": ((4, 512, 8, 128), torch.float16, lambda t: t.transpose(1, 2)),
    "[4096, 1024][:, 256:768]": ((4096, 1024), torch.float16, lambda t: t[:, 256:768]),
}
QUICK = {"Linear(1024, 1024).weight.t()", "keys [32, 512, 64].transpose(-2, -1)", "[4096, 1024][:, 256:768]"}
NAME_WIDTH = 48


def _views(names: list[str]) -> None:
    peak = DEFAULT_MODEL.memory_peak_bytes_per_cycle
    schemes = "".join(f"{s:>11}" for s in relayout.SCHEMES)
    print(f"    {'view':<{NAME_WIDTH}}{'MiB':>6}{schemes}  {'chosen':<7}{'of bound':>9}")
    for name in names:
        shape, dtype, view_of = VIEWS[name]
        host = torch.randn(shape).to(dtype)
        view = view_of(host.to("ring"))
        with ringsim.profile() as profile:
            out = relayout.contiguous(view)
        if not torch.equal(out.cpu(), view_of(host).contiguous()):
            raise SystemExit(f"relayout.py: {name}: the relaid tensor differs from the view")
        layout = relayout.Relayout(relayout.normalized(tuple(view.shape), tuple(view.stride())), view.dtype)
        chosen = relayout.choose(layout)
        cycles = {c["scheme"]: c.get("cycles") for c in chosen.candidates}
        nbytes = view.numel() * view.element_size()
        (report,) = profile.reports
        scheme = report.name.rsplit("_", 1)[1]
        cells = "".join(f"{cycles[s]:>11,.0f}" if cycles[s] else f"{'-':>11}" for s in relayout.SCHEMES)
        share = 2 * nbytes / peak / report.total_cycles
        print(f"    {name:<{NAME_WIDTH}}{nbytes / 2**20:>6.1f}{cells}  {scheme:<7}{share:>9.3f}")
        if cycles["blocks"] and cycles["ring"]:
            print(f"    {'':<{NAME_WIDTH}}ring / blocks: x{cycles['ring'] / cycles['blocks']:.3f}")
    print("    ('-': the scheme does not fit the view; 'of bound': the bound's cycles / the chosen scheme's)")


def _block(quick: bool) -> None:
    dim, heads, batch, tokens = (256, 4, 2, 128) if quick else (1024, 8, 4, 512)
    torch.manual_seed(0)
    block = TransformerBlock(dim, heads).eval().half()
    x = torch.randn(batch, tokens, dim, dtype=torch.float16)
    print(f"(2) transformer block, fp16, {batch} x {tokens} tokens, dim {dim}, {heads} heads, compiled on ring:")
    outputs = {}
    for programs in (False, True):
        config.relayout_programs = programs
        with torch.no_grad(), ringsim.profile() as profile:
            out, _ = compiled_run(copy.deepcopy(block).to("ring"), x)
        outputs[programs] = out.cpu()
        total = sum(r.total_cycles for r in profile.reports)
        moved = [r for r in profile.reports if r.name.startswith("ring_relayout_")]
        spent = sum(r.total_cycles for r in moved)
        label = "relayout programs" if programs else "device copy (untimed)"
        print(f"    {label:<22} {total:>12,.0f} cycles; {len(moved)} relayout launches, {spent:>10,.0f} cycles "
              f"({spent / total:.1%} of the block)")  # fmt: skip
    config.relayout_programs = True
    same = torch.equal(outputs[False], outputs[True])
    print(f"    outputs identical with and without relayout programs: {same}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="relayout.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three views and a small block (dim 256)")
    args = parser.parse_args(argv)
    print("(1) strided views relaid on ring: cycles of every scheme that fits, the fastest chosen")
    _views([name for name in VIEWS if name in QUICK or not args.quick])
    _block(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
