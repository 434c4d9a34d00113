"""Wall time of the same upstream files under each crash isolation mode, against no isolation, in the same run.

Each mode runs `pytest --testreuse-config ... --testreuse-isolation MODE` in a fresh process on the same configs; the
modes are interleaved and repeated (the minimum is kept) after one discarded warm-up run each, with bytecode caches
in a scratch folder. Every run writes a results file, and the outcome of every test must be the same in every mode:
an isolation that loses or changes a result is a failure, whatever its speed. The goal for the default `worker`
mode is at most 10% over `none`.

    python benchmarks/isolation_overhead.py --configs src/testreuse/upstream/configs/00-ring-device.yaml \\
        src/testreuse/upstream/configs/test_view_ops.yaml src/testreuse/upstream/configs/test_shape_ops.yaml  # ring
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 1.10


def _run(mode: str, configs: list[str], extra: list[str], env: dict[str, str], work: Path) -> tuple[float, dict]:
    """Wall time of one pytest process in `mode`, and the outcome per node id from its results file."""
    results = work / f"results-{mode}.jsonl"
    results.unlink(missing_ok=True)
    args = [a for c in configs for a in ("--testreuse-config", c)]
    args += ["--testreuse-isolation", mode, "--testreuse-results", str(results), *extra]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=work, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"error: pytest ({mode}) exited {done.returncode}: " + " | ".join(tail))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    return took, {r["nodeid"]: r["outcome"] for r in records}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", required=True, help="config files (or folders) naming the files")
    parser.add_argument("--modes", nargs="+", default=["worker", "fork"], help="isolation modes to time against none")
    parser.add_argument("--torch-root", type=Path, help="upstream tree (default: the plugin's own default)")
    parser.add_argument("--backend", help="MODULE[:FUNC] registering the privateuse1 backend (else: autoload)")
    parser.add_argument("--pythonpath", type=Path, help="folder to put on PYTHONPATH for --backend")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per mode (the minimum is kept)")
    args = parser.parse_args(argv)

    configs = [str(Path(c).resolve()) for c in args.configs]
    extra = ["--torch-root", str(args.torch_root.resolve())] if args.torch_root else []
    extra += ["--testreuse-backend", args.backend] if args.backend else []
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.pythonpath.resolve()), env.get("PYTHONPATH")]))
    modes = ["none", *[m for m in args.modes if m != "none"]]
    with tempfile.TemporaryDirectory(prefix="testreuse-isolation-") as scratch:
        work = Path(scratch)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        outcomes = {mode: _run(mode, configs, extra, env, work)[1] for mode in modes}
        timings: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(args.repeat):
            for mode in modes:
                took, outcomes[mode] = _run(mode, configs, extra, env, work)
                timings[mode].append(took)
    base = min(timings["none"])
    print(f"configs: {', '.join(args.configs)}; {len(outcomes['none'])} results; min of {args.repeat} runs per mode")
    for mode in modes:
        wall = min(timings[mode])
        goal = f" (goal <= {GOAL:.2f})" if mode == "worker" else ""
        print(f"isolation {mode:<7} {wall:7.2f} s   ratio to none {wall / base:6.3f}{goal}")
    differing = {m: sorted(k for k in outcomes["none"] if outcomes[m].get(k) != outcomes["none"][k]) for m in modes}
    for mode, nodeids in differing.items():
        if nodeids or len(outcomes[mode]) != len(outcomes["none"]):
            print(f"error: isolation {mode} changed {len(nodeids)} outcomes, e.g. {nodeids[:3]}", file=sys.stderr)
            return 1
    print("outcomes: identical in every mode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
