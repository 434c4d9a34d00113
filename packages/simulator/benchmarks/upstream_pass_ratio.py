"""Real upstream test files on ring against the same files on CPU: pass ratio and wall time, per file.

For each test file under ``TORCH_ROOT/test``, pytest runs the device-generic cases instantiated for ring and, in a
separate run, the same cases instantiated for CPU, restricted to one dtype slice (``-k float32`` by default). A case
counts for ring when its CPU twin passes too, so the ratio is "of what works on CPU, how much works on ring". The
most frequent first lines of the ring failures show what the device lacks.
Run: python benchmarks/upstream_pass_ratio.py --torch-root ../../../shared/data/upstream-tests [--dtype float32]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: A cause line is cut here, and addresses/numbers that differ per case are folded, so equal causes count together.
_CAUSE_WIDTH = 150
_NUMBERS = re.compile(r"0x[0-9a-f]+|\b\d+(\.\d+)?(e[-+]?\d+)?\b")


@dataclass
class Outcome:
    """Per-case outcomes of one run (case name with the device word removed) and its wall time."""

    seconds: float
    cases: dict[str, str] = field(default_factory=dict)
    causes: dict[str, str] = field(default_factory=dict)


def run(test_file: Path, device: str, dtype: str, workers: int) -> Outcome:
    """One pytest run of `test_file` restricted to `device`'s classes and the `dtype` slice, read from JUnit."""
    with tempfile.TemporaryDirectory(prefix="pass-ratio-") as scratch:
        junit = Path(scratch) / "junit.xml"
        argv = [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider"]
        argv += ["-k", f"{device.upper()} and {dtype}", f"--junitxml={junit}", "-o", "junit_family=xunit1"]
        if workers > 1:
            argv += ["-n", str(workers)]
        start = time.perf_counter()
        subprocess.run(argv, cwd=test_file.parent, capture_output=True, text=True, check=False, env=_env())
        seconds = time.perf_counter() - start
        outcome = Outcome(seconds)
        if junit.exists():
            _read(junit, device, outcome)
        return outcome


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _read(junit: Path, device: str, outcome: Outcome) -> None:
    """Cases of `device`'s instantiated classes only (``-k`` also matches test names that contain the word)."""
    suffixes = ("CPU",) if device == "cpu" else (device.upper(), "PRIVATEUSE1")
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname = case.get("classname", "")
        suffix = next((s for s in suffixes if classname.endswith(s)), None)
        if suffix is None:
            continue
        name = classname.removesuffix(suffix) + "::" + case.get("name", "")
        name = name.replace(f"_{device}_", "_DEV_").replace(f"_{device}", "_DEV")
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        if failed is not None:
            outcome.cases[name] = "failed"
            outcome.causes[name] = _cause(failed.get("message") or failed.text or "")
        elif case.find("skipped") is not None:
            outcome.cases[name] = "skipped"
        else:
            outcome.cases[name] = "passed"


def _cause(message: str) -> str:
    first = next((line for line in message.splitlines() if line.strip()), "")
    return _NUMBERS.sub("N", first.strip())[:_CAUSE_WIDTH]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-root", type=Path, required=True, help="a folder holding test/test_*.py")
    parser.add_argument("--dtype", default="float32", help="the dtype slice (-k expression), default float32")
    parser.add_argument("--files", nargs="*", default=None, help="test file names (default: every test_*.py)")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers per run (default 1)")
    parser.add_argument("--top", type=int, default=15, help="how many failure causes to list")
    args = parser.parse_args(argv)
    test_dir = args.torch_root.resolve() / "test"
    files = [test_dir / f for f in args.files] if args.files else sorted(test_dir.glob("test_*.py"))
    if not files or not all(f.is_file() for f in files):
        print(f"error: {test_dir}: no such test files", file=sys.stderr)
        return 2
    totals = Counter()
    causes: Counter[str] = Counter()
    print(f"{'file':<28} {'cpu pass':>8} {'ring pass':>9} {'ratio':>6} {'cpu s':>7} {'ring s':>7} {'time x':>6}")
    for test_file in files:
        cpu = run(test_file, "cpu", args.dtype, args.workers)
        ring = run(test_file, "ring", args.dtype, args.workers)
        cpu_pass = {name for name, o in cpu.cases.items() if o == "passed"}
        both = {name for name in cpu_pass if ring.cases.get(name) == "passed"}
        causes.update(ring.causes[name] for name in cpu_pass if name in ring.causes)
        ratio = len(both) / len(cpu_pass) if cpu_pass else float("nan")
        totals.update(cpu=len(cpu_pass), ring=len(both))
        totals["cpu_s"] += cpu.seconds
        totals["ring_s"] += ring.seconds
        print(
            f"{test_file.name:<28} {len(cpu_pass):>8} {len(both):>9} {ratio:>6.2f} {cpu.seconds:>7.1f} "
            f"{ring.seconds:>7.1f} {ring.seconds / cpu.seconds:>6.2f}"
        )
    ratio = totals["ring"] / totals["cpu"] if totals["cpu"] else float("nan")
    print(
        f"{'all':<28} {totals['cpu']:>8} {totals['ring']:>9} {ratio:>6.2f} {totals['cpu_s']:>7.1f} "
        f"{totals['ring_s']:>7.1f} {totals['ring_s'] / totals['cpu_s']:>6.2f}"
    )
    print(
        f"pass ratio ring/cpu ({args.dtype}): {ratio:.2f}; wall time ring/cpu: {totals['ring_s'] / totals['cpu_s']:.2f}"
    )
    print(f"most frequent causes of ring failures among cases passing on cpu (top {args.top}):")
    for cause, count in causes.most_common(args.top):
        print(f"  {count:>5}  {cause}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
