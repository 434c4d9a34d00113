"""The OpInfo sweep of the served ops on ring against the same sweep on CPU: the device's own cost (goal: within 3x).

Headline, "ops only": samples generated once; per case they are moved to the device, the op runs and its results
are brought back, with the program cache warm (every program already built) and cold (the first pass on ring,
which builds, checks and times every program; a CPU pass before it pays torch's one-time host costs for both sides).
After it, "test-style": what an upstream OpInfo test does per case (generate the samples on CPU, run the op on the
device, compare with CPU eager). Both sides pay the same sample generation and comparison there, so that ratio is
diluted towards 1 and says little about the device. Correctness is the conformance tests' business.
Run: python benchmarks/opinfo_sweep.py [--samples N]
"""

from __future__ import annotations

import argparse
import time

import ringsim.ops
import torch
from ringsim.ops import conformance


def sweep(cases: list[conformance.Case], device: str) -> float:
    start = time.perf_counter()
    for case in cases:
        result = conformance.run(case, conformance.to_device(case.sample, device))
        for tensor in conformance.tensors(result):
            tensor.cpu()
    return time.perf_counter() - start


def test_style(names: list[str], samples: int, device: str) -> float:
    """Per OpInfo entry and dtype: make the samples, run on `device`, compare with CPU eager (as test_ops does)."""
    start = time.perf_counter()
    for case in conformance.cases(names, samples=samples):
        actual = conformance.tensors(conformance.run(case, conformance.to_device(case.sample, device)))
        expected = conformance.tensors(conformance.run(case, case.sample))
        for a, e in zip(actual, expected, strict=True):
            torch.testing.assert_close(a.cpu(), e, atol=1.0, rtol=1.0, equal_nan=True, check_dtype=False)
    return time.perf_counter() - start


def ratio_line(label: str, ring: float, cpu: float) -> str:
    return f"{label:<44} ring/CPU {ring / cpu:5.1f}x   (ring {ring:6.2f} s, cpu {cpu:6.2f} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # both sweeps' host work on one thread: no thread-pool wake-ups in the figures
    ringsim.ops.register()
    cases = list(conformance.cases(samples=args.samples))
    sweep(cases, "cpu")  # torch's one-time host costs, paid before either side is timed
    ring_cold = sweep(cases, "ring")  # the first ring pass: every program built, checked and timed
    cpu = min(sweep(cases, "cpu") for _ in range(2))
    ring_warm = min(sweep(cases, "ring") for _ in range(2))
    names = sorted({case.name for case in cases})
    cpu_test = min(test_style(names, args.samples, "cpu") for _ in range(2))
    ring_test = min(test_style(names, args.samples, "ring") for _ in range(2))
    print(ratio_line("ops only, warm program cache:", ring_warm, cpu))
    print(ratio_line("ops only, cold program cache:", ring_cold, cpu))
    print(f"({len(cases)} cases over {len(names)} OpInfo entries, first {args.samples} samples per dtype)")
    print(ratio_line("test-style (diluted: shared CPU sample work):", ring_test, cpu_test))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
