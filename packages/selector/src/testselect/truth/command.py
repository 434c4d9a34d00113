"""`testselect truth --torch-root ROOT --device NAME --out DIR`: run every case of an upstream tree on a
privateuse1 device, every rule mandatory, sharded and resumable; its results are `testselect score --truth`."""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from pathlib import Path
from types import FrameType

from testselect.command import CliError, Command, ExitCode
from testselect.refine.records import RecordsError
from testselect.truth.run import Report, TruthError, run_truth


def _setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--torch-root", required=True, help="a PyTorch checkout's root: its test/ files are run")
    parser.add_argument("--device", required=True, metavar="NAME", help="the privateuse1 backend's name, e.g. ring")
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="configs/, results/ and logs/ go here; rerun with it to resume"
    )
    parser.add_argument("--files", nargs="+", metavar="GLOB", help="only these files (paths under test/, fnmatch)")
    parser.add_argument("--shards", type=int, default=2, help="pytest processes at once, cases split (default: 2)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one case may run (default: 60)")


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM too stops the shards and keeps every finished case


def _print(report: Report, args: argparse.Namespace) -> None:
    outcomes = ", ".join(f"{n} {outcome}" for outcome, n in report.outcomes.most_common()) or "none"
    print(
        f"truth: {report.collected} cases of {report.files} files on {args.device}, {sum(report.outcomes.values())} "
        f"recorded ({outcomes}); {report.recorded_now} by this run, {report.already_recorded} before; "
        f"{report.missing} without a record; {report.launches} pytest processes; {report.wall_seconds:.1f} s"
    )
    results = Path(args.out) / "results"
    print(f"results: {len(report.results)} files, {results}/run-*.jsonl")
    print(
        f"score: testselect score --configs CONFIGS --truth {results}/run-*.jsonl --torch-root {args.torch_root} "
        f"--device {args.device}"
    )


def _run(args: argparse.Namespace) -> int:
    root, out = Path(args.torch_root), Path(args.out)
    if not root.is_dir():
        raise CliError(f"--torch-root {root}: not a directory")
    if args.shards < 1:
        raise CliError(f"--shards {args.shards}: must be at least 1")
    if not args.timeout > 0:
        raise CliError(f"--timeout {args.timeout}: must be more than 0")
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out}: not a directory")
    say = functools.partial(print, flush=True)
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        report = run_truth(root, args.device, out, args.files, args.shards, args.timeout, say)
    except (TruthError, RecordsError) as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        raise CliError("interrupted", hint=f"rerun with --out {out}: only cases without a record run") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    for problem in report.problems:
        print(f"warning: {problem}", file=sys.stderr)
    _print(report, args)
    return ExitCode.INCOMPLETE if report.missing or report.problems else ExitCode.OK


COMMAND = Command(
    "truth",
    "run every case of a tree on a device, every rule mandatory (sharded, resumable): the truth `score` reads",
    _setup,
    _run,
)
