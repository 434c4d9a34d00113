"""The pipeline's subcommands: `ci` (the whole job here), its distributed form (`prepare`, `leg`, `merge`: build
once, one leg per planned shard on any machine, merge), and `reproduce`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crcr import loop
from crcr.ci import backendsource, build, cores, dryrun, envs, history, legs, runner, worktrees
from crcr.ci.ciconfig import ISOLATIONS, CIConfigError, load_ci_config, load_profile
from crcr.ci.isolation import IsolationError
from crcr.ci.model import RunRecord
from crcr.ci.pipeline import Context, QuietProgress, run
from crcr.ci.progress import RichProgress
from crcr.ci.reproduce import ReproduceError, reproduce

#: Errors of the pipeline that are the user's input or machine, said in one line (exit 2), never a traceback.
EXPECTED: tuple[type[Exception], ...] = (
    CIConfigError, ReproduceError, history.HistoryError, worktrees.WorktreeError, cores.CoreError, build.BuildError,
    envs.EnvError, runner.RunnerError, IsolationError, legs.LegError, backendsource.SourceError, *loop.ERRORS,
)  # fmt: skip


#: `--only` matches whole names: a variant is a combination of its own.
EXACT = " (its exact name, repeatable: primary does not select primary+compile)"


def _context(args: argparse.Namespace, progress: RichProgress | QuietProgress) -> Context:
    config = load_ci_config(Path(args.config))
    if args.isolation:
        config = dataclasses.replace(config, isolation=args.isolation)
    if args.suite:
        config = dataclasses.replace(config, suite=args.suite)
    profile = load_profile(Path(args.config).parent, args.device or config.device)
    only = tuple(getattr(args, "only", ()))
    reuse = not getattr(args, "no_cache", False)
    return Context(
        Path(args.repo).resolve(), Path(args.cache).resolve(), config, profile, progress, only=only, reuse=reuse,
        commit=getattr(args, "upstream_sha", "") or "",
    )  # fmt: skip


def _verdict_line(record: RunRecord, run_dir: Path) -> int:
    """The verdict last, with where to look: the report for people, the summary for tools."""
    print(f"report:  {run_dir / 'report.html'}")
    print(f"summary: {run_dir / 'summary.json'}")
    print(f"{record.verdict}: {run_dir / 'report.html'}")
    return 0 if record.verdict.startswith("green") else 1


def _ci(args: argparse.Namespace) -> int:
    if args.dry_run:
        for line in dryrun.describe(_context(args, QuietProgress())):
            print(line, flush=True)
        return 0
    if args.payload:
        ran = loop.command(args, lambda trigger, combination: _pipeline(args, trigger, combination))
        return 0 if ran is None else _verdict_line(*ran)
    progress = RichProgress()
    try:
        record, run_dir = run(_context(args, progress), {"event": args.event, "by": "crcr ci"})
    finally:
        progress.close()
    return _verdict_line(record, run_dir)


def _pipeline(args: argparse.Namespace, trigger: Mapping[str, Any], combination: str) -> tuple[RunRecord, Path]:
    """The loop's job: the pipeline on the gate's combination only, the dispatch recorded as its trigger."""
    progress = RichProgress()
    try:
        return run(dataclasses.replace(_context(args, progress), only=(combination,)), trigger)
    finally:
        progress.close()


def _prepare(args: argparse.Namespace) -> int:
    progress = RichProgress()
    try:
        matrix = legs.prepare(_context(args, progress), {"event": args.event, "by": "crcr prepare"}, Path(args.out))
    finally:
        progress.close()
    print(json.dumps(matrix, sort_keys=True, separators=(",", ":")))
    return 0


def _leg(args: argparse.Namespace) -> int:
    progress = RichProgress()
    try:
        ctx = _context(args, progress)
        out = Path(args.out).resolve()
        failing = legs.run_leg(ctx, Path(args.prepared).resolve(), args.combination, args.shard, out)
    finally:
        progress.close()
    print(f"leg {args.combination} shard {args.shard}: {failing} failing test(s); {out / legs.LEG}")
    return 1 if failing else 0


def _merge(args: argparse.Namespace) -> int:
    progress = RichProgress()
    try:
        ctx = _context(args, progress)
        record, run_dir = legs.merge(ctx, Path(args.prepared).resolve(), [Path(d).resolve() for d in args.legs])
    finally:
        progress.close()
    return _verdict_line(record, run_dir)


def _reproduce(args: argparse.Namespace) -> int:
    differences = reproduce(Path(args.run_dir).resolve(), Path(args.repo).resolve(), print)
    for line in differences:
        print(line)
    print(f"{len(differences)} outcome(s) differ" if differences else "every outcome is the same")
    return 1 if differences else 0


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="configs/ci.yaml", help="the CI config (default: configs/ci.yaml)")
    parser.add_argument("--device", help="a device profile in configs/devices/ (default: the config's device)")
    parser.add_argument("--repo", default=".", help="the backend repository (default: .)")
    parser.add_argument("--upstream-sha", default="", metavar="SHA", help="the dispatched upstream commit: a git "
                        "suite checkout is taken at it, and core sources that follow it (nightly: dispatched, {sha}) "
                        "resolve to it (a dispatch's own payload sets it)")  # fmt: skip
    parser.add_argument("--cache", default=".tributary", help="builds, envs, history, runs (default: .tributary)")
    parser.add_argument("--isolation", choices=ISOLATIONS, help="where shards run (default: shards.isolation)")
    parser.add_argument("--suite", metavar="ROOT", help="embedded or a PyTorch checkout (default: suite.root)")


def add_ci(sub: argparse._SubParsersAction) -> None:
    ci = sub.add_parser("ci", help="run the downstream CI job: every combination, sharded, retried, reported")
    _options(ci)
    ci.add_argument("--only", action="append", default=[], metavar="NAME", help=f"run only this combination{EXACT}")
    ci.add_argument("--event", default="manual", help="what triggered the run, for the record")
    ci.add_argument("--dry-run", action="store_true", help="say what would run, be built and reused; do nothing")
    ci.add_argument(
        "--no-cache", action="store_true", help="run every combination, even one whose inputs equal a recorded run's"
    )
    loop.add_options(ci)
    ci.set_defaults(run=_ci)


def add_distributed(sub: argparse._SubParsersAction) -> None:
    prepare = sub.add_parser("prepare", help="build and plan every combination once; print the shard matrix JSON")
    _options(prepare)
    prepare.add_argument(
        "--only", action="append", default=[], metavar="NAME", help=f"prepare only this combination{EXACT}"
    )
    prepare.add_argument("--event", default="manual", help="what triggered the run, for the record")
    prepare.add_argument("--out", required=True, help="the folder to write (run.json, matrix.json, builds/)")
    prepare.set_defaults(run=_prepare)
    leg = sub.add_parser("leg", help="run one shard of one prepared combination, with its retries")
    _options(leg)
    leg.add_argument("--prepared", required=True, help="a folder written by `crcr prepare`")
    leg.add_argument("--combination", required=True, help="a combination named in matrix.json")
    leg.add_argument("--shard", required=True, type=int, help="a shard index named in matrix.json")
    leg.add_argument("--out", required=True, help="the leg's folder (leg-state.json, results, JUnit, log, leg.json)")
    leg.set_defaults(run=_leg)
    merge = sub.add_parser("merge", help="merge the legs into one run: classify, attribute, record, report")
    _options(merge)
    merge.add_argument("--prepared", required=True, help="the folder written by `crcr prepare`")
    merge.add_argument(
        "legs", nargs="*", help="the legs' folders (a leg killed, missing or unreadable leaves its tests not_run: red)"
    )
    merge.set_defaults(run=_merge)


def add_reproduce(sub: argparse._SubParsersAction) -> None:
    again = sub.add_parser("reproduce", help="rerun a recorded run's combinations from its artifacts; print diffs")
    again.add_argument("run_dir", help="a run directory (holding record.json)")
    again.add_argument("--repo", default=".", help="the backend repository (default: .)")
    again.set_defaults(run=_reproduce)


__all__ = ["EXPECTED", "add_ci", "add_distributed", "add_reproduce"]
