"""`python -m testreuse.shards`: plan shards from a durations store, fold a run's results into it, select a shard.

Exit codes: 0 ok, 2 bad input or usage (one `error: ...` line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import enum
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from testreuse.shards.documents import PlanError, dumps, matrix_document, plan_document, shard_selection
from testreuse.shards.durations import (
    DurationsError,
    Store,
    Table,
    dump_store,
    load_store,
    merge_runs,
    merge_shards,
    read_results,
    split_nodeid,
)
from testreuse.shards.planner import SLACK, plan_cap, plan_count
from testreuse.shards.units import DEFAULT_SECONDS, build_tree, timed_paths


class ExitCode(enum.IntEnum):
    """Process exit status."""

    OK = 0
    USAGE = 2


def _table(store: Store, job: str, config: str, source: Path) -> Table:
    if config not in store.get(job, {}):
        known = [f"{j}.{c}" for j in sorted(store) for c in sorted(store[j])]
        some = ", ".join(known[:3]) + (f" and {len(known) - 3} more" if len(known) > 3 else "")
        raise DurationsError(f"{source}: {job}.{config}: no such job and test config (the store has {some or 'none'})")
    return store[job][config]


def _pooled(tables: list[Table]) -> Table:
    """One table of several configs': each test's median over the configs that timed it."""
    seen: dict[tuple[str, ...], list[float]] = {}
    for table in tables:
        for path, seconds in table.items():
            seen.setdefault(path, []).append(seconds)
    return {path: statistics.median(values) for path, values in seen.items()}


def _nodeids(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DurationsError(f"{path}: cannot read: {exc}") from None
    nodeids = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            split_nodeid(line.strip())
        except ValueError as exc:
            raise DurationsError(f"{path}:{number}: nodeid: {exc}") from None
        nodeids.append(line.strip())
    return nodeids


def _group(text: str) -> tuple[str, str]:
    name, sep, pattern = text.partition("=")
    if not sep or not name or not pattern:
        raise argparse.ArgumentTypeError(f"expected NAME=PATTERN, got {text!r}")
    return name, pattern


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")


def _plan(args: argparse.Namespace) -> None:
    nodeids = _nodeids(args.tests) if args.tests else None
    store = load_store(args.durations) if nodeids is None or args.durations.exists() else {}
    if nodeids is not None and args.config not in store.get(args.job, {}):
        # the first run of a new config: its tests are estimated from the `--fallback` configs that have durations
        # (the same tests run alike elsewhere, on another core say), each test's median, else from a constant
        known = store.get(args.job, {})
        like = [name for name in args.fallback if name in known]
        source = f"the medians of {', '.join(like)}" if like else f"{args.default_seconds:g} s a test"
        print(f"note: no durations for {args.job}.{args.config} yet: every test is estimated from {source}",
              file=sys.stderr)  # fmt: skip
        table: Table = _pooled([known[name] for name in like])
    else:
        table = _table(store, args.job, args.config, args.durations)
    tree = build_tree(timed_paths(table, nodeids, args.default_seconds), args.group)
    if args.shards is not None:
        plan = plan_count(tree, args.shards, args.setup, args.slack)
    else:
        plan = plan_cap(tree, args.cap, args.setup)
    _write(dumps(plan_document(plan)), args.output)


def _merge(args: argparse.Namespace) -> None:
    store = load_store(args.store) if args.store.exists() else {}
    run = merge_shards(read_results(path) for path in args.results)
    configs = store.setdefault(args.job, {})
    configs[args.config] = merge_runs(configs.get(args.config, {}), run, args.alpha)
    scratch = args.store.with_name(f".{args.store.name}.tmp")  # a plan reading the store never sees half of it
    scratch.write_text(dump_store(store), encoding="utf-8")
    scratch.replace(args.store)


def _read_plan(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: cannot read a plan: {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: top level: expected a plan object")
    return data


def _select(args: argparse.Namespace) -> None:
    print("\n".join(shard_selection(_read_plan(args.plan), args.shard, str(args.plan))))


def _matrix(args: argparse.Namespace) -> None:
    sys.stdout.write(dumps(matrix_document(_read_plan(args.plan))))


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m testreuse.shards", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="plan shards (a count or a cap) and print the plan JSON")
    plan.add_argument(
        "--durations", type=Path, required=True,
        help="durations store (PyTorch test-times shape); with --tests it may be missing or lack the job",
    )  # fmt: skip
    plan.add_argument("--job", default="default", help="top-level job key (default: default)")
    plan.add_argument("--config", default="default", help="test config key (default: default)")
    plan.add_argument("--tests", type=Path, help="collected node ids, one a line (default: every timed unit)")
    mode = plan.add_mutually_exclusive_group(required=True)
    mode.add_argument("--shards", type=int, help="exactly this many shards")
    mode.add_argument("--cap", type=_positive, help="the fewest shards of at most this many seconds each")
    plan.add_argument("--setup", type=float, default=90.0, help="fixed set-up seconds per shard (default: 90)")
    plan.add_argument("--group", type=_group, action="append", default=[], help="NAME=PATTERN feature group")
    plan.add_argument(
        "--fallback", action="append", default=[], metavar="CONFIG",
        help="a config of the same job whose durations estimate this one's while it has none (repeatable)",
    )  # fmt: skip
    plan.add_argument("--default-seconds", type=_positive, default=DEFAULT_SECONDS, help="estimate with no data")
    plan.add_argument("--slack", type=float, default=SLACK, help="makespan seconds to pay for whole files (1)")
    plan.add_argument("--output", type=Path, help="write the plan here (default: stdout)")
    plan.set_defaults(run=_plan)
    merge = sub.add_parser("merge", help="fold one run's results files (its shards) into a durations store")
    merge.add_argument("--store", type=Path, required=True, help="store to update (created if missing)")
    merge.add_argument("--job", default="default")
    merge.add_argument("--config", default="default")
    merge.add_argument("--alpha", type=float, default=0.5, help="weight of the new run (default: 0.5)")
    merge.add_argument("results", type=Path, nargs="+", help="testreuse results files (JSON lines)")
    merge.set_defaults(run=_merge)
    select = sub.add_parser("select", help="print the node ids one shard runs")
    select.add_argument("plan", type=Path)
    select.add_argument("--shard", type=int, required=True, help="1-based shard index")
    select.set_defaults(run=_select)
    matrix = sub.add_parser("matrix", help="print the GitHub Actions matrix of a plan")
    matrix.add_argument("plan", type=Path)
    matrix.set_defaults(run=_matrix)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; known errors are one line on stderr and exit 2."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        args.run(args)
    except (DurationsError, PlanError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK
