"""`testselect score --configs DIR --truth RESULTS...`: precision and recall of configs against a full execution."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from testselect.command import CliError, Command, ExitCode
from testselect.refine.records import RecordsError
from testselect.refine.tool import ToolError
from testselect.score import Group, Score, score


def _setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configs", required=True, metavar="DIR", help="the configs to score (with the device file)")
    parser.add_argument(
        "--truth",
        nargs="+",
        required=True,
        metavar="RESULTS",
        help="results records (--testreuse-results JSON lines) of a run in which every case ran",
    )
    parser.add_argument("--torch-root", help="the upstream tree (default: TORCH_ROOT, else testreuse's embedded one)")
    parser.add_argument("--device", help="the privateuse1 backend's name, e.g. ring (checked by testreuse)")
    parser.add_argument(
        "--scope",
        metavar="DIR",
        help="configs admitting what the device declares (its device file, every test mandatory): recall within it",
    )
    parser.add_argument("--limit", type=int, default=10, help="tests shown per list (default: 10)")
    parser.add_argument("--json", action="store_true", help="the figures and the lists as JSON")


def _ratio(value: float | None, part: int, whole: int) -> str:
    return f"{value:.4f} ({part} of {whole})" if value is not None else f"n/a ({part} of {whole})"


def _groups(title: str, count: int, groups: list[Group]) -> list[str]:
    shown = sum(g.cases for g in groups)
    lines = [f"{title}: {count} cases" + (f", the worst {len(groups)} tests ({shown} cases):" if groups else "")]
    for group in groups:
        causes = "; ".join(f"{n} {cause}" for cause, n in group.causes[:2])
        more = f"; and {len(group.causes) - 2} more causes" if len(group.causes) > 2 else ""
        lines.append(f"  {group.cases:5d}  {group.test}  {causes}{more}")
    return lines


def _print(result: Score) -> None:
    print(f"truth: {result.total} cases ran ({result.passing} really pass) in {', '.join(result.truth_files)}")
    modes = ", ".join(f"{n} {mode}" for mode, n in result.modes.items()) or "none"
    print(f"configs {result.configs}: {result.listed} cases ({modes}); {result.admitted} admitted")
    precision = _ratio(result.precision, result.true_positives, result.admitted_in_truth)
    print(f"precision {precision} admitted cases really pass")
    print(f"recall    {_ratio(result.recall, result.true_positives, result.passing)} really-passing cases are admitted")
    if result.scope is not None:
        in_scope = _ratio(result.recall_in_scope, result.admitted_in_scope, result.passing_in_scope)
        print(f"          {in_scope} within the device's declared scope ({result.scope})")
    print(f"admitted/total {_ratio(result.admitted_ratio, result.admitted_in_truth, result.total)}")
    if result.not_in_truth:
        shown = ", ".join(result.not_in_truth_examples[:3])
        print(f"not in the truth: {result.not_in_truth} admitted cases (not counted), e.g. {shown}")
    if result.not_listed:
        print(f"not made by the configs: {result.not_listed} truth cases (counted as not admitted)")
    for line in _groups("false positives (admitted, failing)", result.false_positive_cases, result.false_positives):
        print(line)
    for line in _groups("false negatives (passing, not admitted)", result.false_negative_cases, result.false_negatives):
        print(line)


def _run(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit {args.limit}: must be at least 1")
    configs = Path(args.configs)
    if not configs.is_dir() and not configs.is_file():
        raise CliError(f"--configs {configs}: no such directory or file")
    if args.scope and not Path(args.scope).is_dir():
        raise CliError(f"--scope {args.scope}: no such directory")
    for truth in args.truth:
        if not Path(truth).is_file():
            raise CliError(f"--truth {truth}: no such results file")
    root = Path(args.torch_root) if args.torch_root else None
    if root is not None and not (root / "test").is_dir():
        raise CliError(f"--torch-root {root}: no test/ folder")
    try:
        scope = Path(args.scope) if args.scope else None
        result = score(configs, [Path(t) for t in args.truth], root, args.device, args.limit, scope=scope)
    except RecordsError as exc:
        raise CliError(str(exc)) from None
    except ToolError as exc:
        raise CliError(str(exc), exc.hint) from None
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2, sort_keys=True))
    else:
        _print(result)
    return ExitCode.OK


COMMAND = Command(
    "score",
    "precision and recall of configs (testreuse list) against a full execution's results, worst tests listed",
    _setup,
    _run,
)
