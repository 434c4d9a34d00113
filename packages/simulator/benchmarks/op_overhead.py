"""Per-op eager dispatch overhead on ring against CPU eager, on the same small inputs, measured in the same run.

Prints one row per op (microseconds per call on each device and the ratio) and the geometric mean of the ratios.
Run: python benchmarks/op_overhead.py [--repeat N]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import ringsim.ops
import torch

CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
    "add": lambda x, y: x + y,
    "mul_scalar": lambda x, y: x * 2.0,
    "exp": lambda x, y: torch.exp(x),
    "gelu": lambda x, y: torch.nn.functional.gelu(x),
    "gt": lambda x, y: x > y,
    "where": lambda x, y: torch.where(x > 0, x, y),
    "sum_dim": lambda x, y: x.sum(-1),
    "amax": lambda x, y: x.amax(-1),
    "softmax": lambda x, y: torch.softmax(x, -1),
    "layer_norm": lambda x, y: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    "mm": lambda x, y: x @ y.t(),
    "cat": lambda x, y: torch.cat([x, y]),
    "add_": lambda x, y: x.add_(y),
    "zeros_like": lambda x, y: torch.zeros_like(x),
}


def per_call(fn: Callable[[], object], repeat: int) -> float:
    fn()
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--shape", type=int, nargs=2, default=(32, 64))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # both devices' host work on one thread: no thread-pool wake-ups in the figures
    ringsim.ops.register()
    x, y = torch.randn(*args.shape, dtype=torch.float16), torch.randn(*args.shape, dtype=torch.float16)
    rx, ry = x.to("ring"), y.to("ring")
    print(f"shape {tuple(args.shape)} float16, best of 3 x {args.repeat} calls")
    print(f"{'op':<12} {'cpu us':>9} {'ring us':>9} {'ratio':>7}")
    ratios = []
    for name, case in CASES.items():
        cpu = per_call(lambda case=case: case(x, y), args.repeat)
        ring = per_call(lambda case=case: case(rx, ry), args.repeat)
        ratios.append(ring / cpu)
        print(f"{name:<12} {cpu * 1e6:9.1f} {ring * 1e6:9.1f} {ring / cpu:7.1f}")
    print(f"geomean ring/cpu ratio: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
