"""`crcr`: the downstream CI job (`crcr ci`) and its exact re-run (`crcr reproduce`).

Exit codes: 0 green (or nothing differs), 1 red (or outcomes differ), 2 bad input or usage (one `error:` line).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from crcr.callback.command import add_callback
from crcr.ci import build, cores, envs, history, runner, worktrees
from crcr.ci.ciconfig import ISOLATIONS, CIConfigError, load_ci_config, load_profile
from crcr.ci.isolation import IsolationError
from crcr.ci.pipeline import Context, run
from crcr.ci.progress import RichProgress
from crcr.ci.reproduce import ReproduceError, reproduce
from crcr.gate.command import add_gate, add_resolve
from crcr.relay.command import add_relay

EXPECTED = (
    CIConfigError, ReproduceError, history.HistoryError, worktrees.WorktreeError, cores.CoreError, build.BuildError,
    envs.EnvError, runner.RunnerError, IsolationError,
)  # fmt: skip


def _ci(args: argparse.Namespace) -> int:
    repo = Path(args.repo).resolve()
    config = load_ci_config(Path(args.config))
    if args.isolation:
        config = dataclasses.replace(config, isolation=args.isolation)
    profile = load_profile(Path(args.config).parent, args.device or config.device)
    progress = RichProgress()
    try:
        context = Context(repo, Path(args.cache).resolve(), config, profile, progress, only=tuple(args.only))
        record, run_dir = run(context, {"event": args.event, "by": "crcr ci"})
    finally:
        progress.close()
    print(f"{record.verdict}: {run_dir / 'report.html'}")
    return 0 if record.verdict.startswith("green") else 1


def _reproduce(args: argparse.Namespace) -> int:
    differences = reproduce(Path(args.run_dir).resolve(), Path(args.repo).resolve(), print)
    for line in differences:
        print(line)
    print(f"{len(differences)} outcome(s) differ" if differences else "every outcome is the same")
    return 1 if differences else 0


def _add_ci(sub: argparse._SubParsersAction) -> None:
    ci = sub.add_parser("ci", help="run the downstream CI job: every combination, sharded, retried, reported")
    ci.add_argument("--config", default="configs/ci.yaml", help="the CI config (default: configs/ci.yaml)")
    ci.add_argument("--device", help="a device profile in configs/devices/ (default: the config's device)")
    ci.add_argument("--repo", default=".", help="the backend repository (default: .)")
    ci.add_argument("--cache", default=".tributary", help="builds, environments, history, runs (default: .tributary)")
    ci.add_argument("--only", action="append", default=[], metavar="NAME", help="run only this combination")
    ci.add_argument("--event", default="manual", help="what triggered the run, for the record")
    ci.add_argument("--isolation", choices=ISOLATIONS, help="where shards run (default: the config's shards.isolation)")
    ci.set_defaults(run=_ci)


def _add_reproduce(sub: argparse._SubParsersAction) -> None:
    again = sub.add_parser("reproduce", help="rerun a recorded run's combinations from its artifacts; print diffs")
    again.add_argument("run_dir", help="a run directory (holding record.json)")
    again.add_argument("--repo", default=".", help="the backend repository (default: .)")
    again.set_defaults(run=_reproduce)


#: The subcommands, in the order `--help` lists them: each adds its parser and sets `run` to a function
#: (args) -> exit code.
COMMANDS = (_add_ci, _add_reproduce, add_gate, add_resolve, add_callback, add_relay)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crcr", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and 2
    try:
        return args.run(args)
    except EXPECTED as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2
