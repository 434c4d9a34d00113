"""Re-bucket the shipped test-reuse configs from what the device does now, with reasons from triage.

Every xfail/xfail_strict rule is run as mandatory_success once (a line-for-line copy of the configs), so each case
either passes or shows its real failure; `testreuse triage` then rewrites the original rules from those causes (see
its README section). mandatory_success rules that now fail are printed and left as they are: a regression is
fixed, never re-bucketed. skip rules are kept.
Run: python tools/refresh_configs.py configs/ [--torch-root DIR] [--keep FILE] [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from testreuse.loader import resolve_torch_root
from testreuse.triage.causes import classify
from testreuse.triage.proposal import apply, propose
from testreuse.validate import validate


def _observe(configs: Path, torch_root: Path, workers: int, keep: Path | None) -> list[dict]:
    """Run the configs with every xfail rule made mandatory; records point at the original files' rules."""
    with tempfile.TemporaryDirectory(prefix="refresh-") as scratch:
        copy = Path(scratch) / "configs"
        copy.mkdir()
        for path in sorted(configs.glob("*.yaml")):
            (copy / path.name).write_text(_as_mandatory(path.read_text()))
        results = Path(scratch) / "r.jsonl"
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers),
                "--testreuse-config", str(copy), "--testreuse-device", "ring", "--torch-root", str(torch_root),
                "--testreuse-results", str(results)]  # fmt: skip
        run = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=False)
        if not results.is_file():
            last = (run.stdout + run.stderr).strip().splitlines()[-1:] or ["no output"]
            raise SystemExit(f"error: the observation run wrote no results (exit {run.returncode}): {last[0]}")
        records = [json.loads(line) for line in results.read_text().splitlines()]
    for record in records:
        record["rule"] = str(record.get("rule", "")).replace(str(copy.resolve()), str(configs.resolve()))
    if keep is not None:  # rules point at the original configs, so `testreuse triage KEEP --config DIR` works
        keep.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")
    return records


def _as_mandatory(text: str) -> str:
    """The config with xfail modes made mandatory_success, line for line, so rule locations stay the same."""
    out, previous = [], ""
    for line in text.splitlines(keepends=True):
        if re.match(r"^\s*mode: xfail(_strict)?\s*$", line):
            line = line.split("mode:")[0] + "mode: mandatory_success\n"
        elif re.match(r"^\s*reason:", line) and "mode: mandatory_success" in previous:
            line = "#\n"
        out.append(line)
        previous = line
    return "".join(out)


def refresh(configs: Path, torch_root: Path, workers: int, check: bool, keep: Path | None = None) -> int:
    records = _observe(configs, torch_root, workers, keep)
    plan = validate([configs], torch_root)
    mandatory = {str(p.location) for fp in plan.files.values() for p in fp.rules if p.rule.mode == "mandatory_success"}
    regressions = [r for r in records if classify(r) is not None and r.get("rule") in mandatory]
    regressed = {r["nodeid"] for r in regressions}
    changes, _ = propose(plan, [r for r in records if r["nodeid"] not in regressed])
    for record in regressions:
        print(f"regression (mandatory_success fails): {record['nodeid']}: {classify(record).reason()}")
    for path, (before, after) in apply(changes).items():
        if before != after:
            print(f"{'stale' if check else 'rewrote'}: {path}")
            if not check:
                path.write_text(after, encoding="utf-8")
    return 1 if regressions or (check and changes) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", type=Path)
    parser.add_argument(
        "--torch-root", help="the upstream tree the configs name (default: TORCH_ROOT or the embedded one)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, metavar="FILE", help="save the observation run's results record here")
    parser.add_argument("--check", action="store_true", help="report stale rules without rewriting them")
    args = parser.parse_args(argv)
    if not args.configs.is_dir() or not any(args.configs.glob("*.yaml")):
        print(f"error: {args.configs}: not a folder of test-reuse configs (*.yaml)", file=sys.stderr)
        return 2
    return refresh(args.configs, resolve_torch_root(args.torch_root), args.workers, args.check, args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
