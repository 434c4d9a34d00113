"""The OpInfo sweep of the served ops on ring against the same sweep on CPU: wall time ratio (goal: within 3x).

Both sweeps run the same cases (first N samples per op and dtype). Two figures: "ops only" applies the op to samples
generated once (moved to the device) and brings the result back; "test-style" does what an upstream OpInfo test
does per case: generate the samples, run the op on the device, compare with CPU eager. Correctness itself is the
conformance tests' business; this measures what thousands of upstream cases cost on the device.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # both sweeps' host work on one thread: no thread-pool wake-ups in the figures
    ringsim.ops.register()
    cases = list(conformance.cases(samples=args.samples))
    sweep(cases, "ring")  # first pass builds and caches every program
    cpu = min(sweep(cases, "cpu") for _ in range(2))
    ring_warm = min(sweep(cases, "ring") for _ in range(2))
    ring_cold_start = time.perf_counter()
    ringsim.ops.dispatch._PLANS.clear()
    ringsim.engine.clear_cache()
    sweep(cases, "ring")
    ring_cold = time.perf_counter() - ring_cold_start
    ops = len({case.name for case in cases})
    names = sorted({case.name for case in cases})
    cpu_test = min(test_style(names, args.samples, "cpu") for _ in range(2))
    ring_test = min(test_style(names, args.samples, "ring") for _ in range(2))
    print(f"{len(cases)} cases over {ops} OpInfo entries (first {args.samples} samples per dtype)")
    print(f"cpu sweep (ops only):   {cpu:7.2f} s")
    print(f"ring sweep (cached):    {ring_warm:7.2f} s   ratio {ring_warm / cpu:5.1f}x")
    print(f"ring sweep (cold):      {ring_cold:7.2f} s   ratio {ring_cold / cpu:5.1f}x")
    print(f"cpu test-style sweep:   {cpu_test:7.2f} s")
    print(f"ring test-style sweep:  {ring_test:7.2f} s   ratio {ring_test / cpu_test:5.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
