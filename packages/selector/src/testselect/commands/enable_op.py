"""`testselect enable-op OP`: the tests waiting on an op, which of them it would admit, and the config diff."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path

from testselect.command import CliError, Command, ExitCode, store_option
from testselect.index.dtypes import DTYPES
from testselect.index.store import Store
from testselect.select.choose import make_reasoner, reasoner_options
from testselect.select.configdiff import changed_lines
from testselect.select.enable_op import Change, EnableOpReport, enable_op
from testselect.select.reasoner import shortlist

OP_NAME = re.compile(r"^[a-z_][a-z0-9_]*::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")


def _setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", metavar="OP", help="an aten overload as the evidence records it, e.g. aten::cumsum")
    parser.add_argument("--dtypes", nargs="+", default=[], metavar="D", help="enable it only for these dtypes")
    reasoner_options(parser)
    store_option(parser)
    parser.add_argument("--json", action="store_true", help="the report (and diff) as JSON")


def _print(report: EnableOpReport) -> None:
    added, removed = changed_lines(report.diff)
    where = f" for {', '.join(report.dtypes)}" if report.dtypes else ""
    print(
        f"{report.op}{where}: {report.waiting_cases} recorded cases of {len(report.waiting_tests)} tests ran it; "
        f"{sum(len(c.cases) for c in report.admitted)} cases admitted, "
        f"{sum(len(c.cases) for c in report.still_blocked)} still blocked; "
        f"diff +{added} -{removed} lines"
    )
    for change in report.admitted:
        print(f"admitted  {_entry(change)}  {change.before} -> ok: {_cases(change)}")
    for change in report.still_blocked:
        print(f"blocked   {_entry(change)}  {change.after}: {change.reason}: {_cases(change)}")
    if report.diff:
        print(report.diff, end="")


def _entry(change: Change) -> str:
    scope = [*change.ops, *([change.dtype] if change.dtype else [])]
    return change.node_id + (f" [{', '.join(scope)}]" if scope else "")


def _cases(change: Change) -> str:
    """The cases it decides, by their names in the test's class (the first three, then a count)."""
    return shortlist([node.rsplit("::", 1)[-1] for node in change.cases])


def _run(args: argparse.Namespace) -> int:
    if not OP_NAME.match(args.op):
        raise CliError(f"OP {args.op!r}: not an aten overload name", hint="e.g. aten::cumsum or aten::mul.Scalar")
    unknown = [d for d in args.dtypes if d not in DTYPES]
    if unknown:
        raise CliError(f"--dtypes {unknown[0]}: not a torch dtype name", hint="e.g. float16 bfloat16 float32")
    if not args.capabilities:
        raise CliError("enable-op needs --capabilities: the export the op is added to")
    reasoner = make_reasoner(args)
    store = Store.open(Path(args.store), create=False)
    try:
        report = enable_op(store, reasoner, args.op, tuple(args.dtypes))
    finally:
        store.close()
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2, sort_keys=True))
    else:
        _print(report)
    return ExitCode.OK if report.waiting_cases else ExitCode.INCOMPLETE


COMMAND = Command(
    "enable-op",
    "the tests waiting on an aten op, which entries enabling it admits, and the config diff",
    _setup,
    _run,
)
