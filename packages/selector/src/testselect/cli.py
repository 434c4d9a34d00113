"""`testselect`: index an upstream test tree into the repository memory, query it for similar tests, and record
which aten ops each test case runs (op evidence) as a reverse index."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from testselect import commands, similar
from testselect.command import CliError, Command, ExitCode, store_option
from testselect.evidence import store as evidence
from testselect.evidence.run import Recording, run_evidence
from testselect.index.build import TreeError, index_tree, tree_test_dir
from testselect.index.store import Store, StoreError
from testselect.select import plan
from testselect.select.capabilities import CapabilitiesError, load_capabilities
from testselect.select.choose import make_reasoner, reasoner_options
from testselect.select.profile import ProfileError
from testselect.truth import command as truth


def _store(args: argparse.Namespace, create: bool) -> Store:
    return Store.open(Path(args.store), create=create)


def _index(args: argparse.Namespace) -> int:
    root = Path(args.torch_root)
    if not root.is_dir():
        raise CliError(f"--torch-root {root}: not a directory")
    store = _store(args, create=True)
    try:
        counts = index_tree(root, store)
        totals = store.totals()
    finally:
        store.close()
    for line in counts.errors:
        print(f"skipped: {line}", file=sys.stderr)
    if args.json:
        report = dataclasses.asdict(counts) | {"store": str(args.store), "totals": totals}
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        c = counts
        print(
            f"files: {c.files_scanned} scanned, {c.files_added} added, {c.files_changed} changed, "
            f"{c.files_unchanged} unchanged, {c.files_removed} removed, {c.files_unparsable} unparsable; "
            f"tests: {c.tests_added} added, {c.tests_changed} changed, {c.tests_unchanged} unchanged, "
            f"{c.tests_removed} removed; store {args.store}: {totals['files']} files, {totals['classes']} classes, "
            f"{totals['tests']} tests"
        )
    return ExitCode.INCOMPLETE if args.strict and counts.errors else ExitCode.OK


def _similar(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError(f"--limit {args.limit}: must be at least 1")
    if (args.text is None) == (args.like is None):
        raise CliError("give either TEXT or --like NODE_ID")
    store = _store(args, create=False)
    try:
        if args.like is not None:
            test = store.test(args.like)
            if test is None:
                raise CliError(f"--like {args.like}: no such test in {args.store}", hint="node ids: file::Class::test")
            query = similar.document(test)
        else:
            query = similar.tokens(args.text)
        matches = similar.rank(store.tests(), query, args.limit, exclude=args.like)
    finally:
        store.close()
    if args.json:
        shown = {"query": query, "matches": [dataclasses.asdict(m) for m in matches]}
        print(json.dumps(shown, indent=2, sort_keys=True))
    else:
        for match in matches:
            print(f"{match.score:8.4f}  {match.node_id}  {match.summary}")
    return ExitCode.OK if matches else ExitCode.INCOMPLETE


def _show(args: argparse.Namespace) -> int:
    store = _store(args, create=False)
    try:
        test = store.test(args.node_id)
    finally:
        store.close()
    if test is None:
        raise CliError(f"{args.node_id}: no such test in {args.store}", hint="node ids: file::Class::test")
    test.pop("id")
    print(json.dumps(test, indent=2, sort_keys=True))
    return ExitCode.OK


def _say(line: str) -> None:
    """A long run's progress, on stderr: stdout is its report (JSON with --json)."""
    print(line, file=sys.stderr, flush=True)


def _evidence(args: argparse.Namespace) -> int:
    root = Path(args.torch_root)
    if not root.is_dir():
        raise CliError(f"--torch-root {root}: not a directory")
    if args.shards < 1:
        raise CliError(f"--shards {args.shards}: must be at least 1")
    if args.timeout < 0:
        raise CliError(f"--timeout {args.timeout}: must be 0 (none) or more")
    tree_test_dir(root)  # before a store is created
    store = _store(args, create=True)
    try:
        workdir = Path(f"{args.store}.evidence")
        report = run_evidence(root, store, args.shards, args.files, args.timeout, workdir, _recording(args), _say)
        totals = evidence.totals(store)
    finally:
        store.close()
    for problem in report.problems:
        print(f"error: {problem}", file=sys.stderr)
    observed = dict(sorted(report.observed.items()))
    if args.json:
        shown = dataclasses.asdict(report) | {"observed": observed, "store": str(args.store), "totals": totals}
        print(json.dumps(shown, indent=2, sort_keys=True))
    else:
        outcomes = ", ".join(f"{n} {outcome}" for outcome, n in observed.items()) or "none"
        print(
            f"cases: {sum(observed.values())} observed ({outcomes}), {report.already_recorded} already recorded; "
            f"{report.launches} pytest processes; {report.wall_seconds:.1f} s; store {args.store}: "
            f"{totals['cases']} cases, {totals['distinct_ops']} distinct ops"
        )
    return ExitCode.INCOMPLETE if report.problems else ExitCode.OK


def _recording(args: argparse.Namespace) -> Recording | None:
    """The recording device `--device` names, registering the ops of `--capabilities` (required with it)."""
    if args.device is None:
        return None
    if args.capabilities is None:
        raise CliError("--device needs --capabilities: the export of the ops the device registers")
    if args.device_count < 1:
        raise CliError(f"--device-count {args.device_count}: must be at least 1")
    try:
        caps = load_capabilities(Path(args.capabilities))
    except CapabilitiesError as exc:
        raise CliError(str(exc)) from None
    return Recording(args.device, args.device_count, caps.aten_ops)


def _ops(args: argparse.Namespace) -> int:
    store = _store(args, create=False)
    try:
        evidence.ensure(store)
        cases = evidence.ops_of(store, args.test)
    finally:
        store.close()
    if cases is None:
        raise CliError(f"--test {args.test}: no recorded case in {args.store}", hint="run `testselect evidence` first")
    if args.json:
        print(json.dumps(cases, indent=2, sort_keys=True))
    else:
        for case in cases:
            graphs = "  (compiled graphs)" if case["recorder"] == "compiled" else ""
            print(f"{case['node_id']}  {case['outcome']}  {case['duration']:.3f} s{graphs}")
            for op in case["ops"]:
                calls = "raised" if op.get("raised") else f"{op['count']:6d}"
                print(f"  {calls:>6}  {op['op']}  {','.join(op['dtypes'])}")
    return ExitCode.OK


def _tests(args: argparse.Namespace) -> int:
    store = _store(args, create=False)
    try:
        evidence.ensure(store)
        cases = evidence.tests_of(store, args.op, args.dtype)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"op": args.op, "dtype": args.dtype, "cases": cases}, indent=2, sort_keys=True))
    else:
        for case in cases:
            print(f"{case['count']:6d}  {case['node_id']}  {case['outcome']}")
    return ExitCode.OK if cases else ExitCode.INCOMPLETE


def _plan_scope(args: argparse.Namespace) -> int:
    reasoner = make_reasoner(args)
    store = _store(args, create=False)
    try:
        scopes = plan.plan_scope(store, reasoner)
    finally:
        store.close()
    if args.json:
        print(json.dumps([dataclasses.asdict(s) for s in scopes], indent=2, sort_keys=True))
    else:
        for scope in scopes:
            print(f"{'in ' if scope.selected else 'out'}  {scope.path}  {scope.reason}")
    return ExitCode.OK


def _select(args: argparse.Namespace) -> int:
    reasoner = make_reasoner(args)
    store = _store(args, create=False)
    try:
        chosen = plan.select(store, reasoner)
    finally:
        store.close()
    modes = plan.write_configs(chosen, Path(args.out), reasoner.profile.device)
    counts = ", ".join(f"{modes[m]} {m}" for m in ("mandatory_success", "xfail", "xfail_strict", "skip"))
    print(f"configs: {len(chosen)} files in {args.out}; entries: {counts}")
    return ExitCode.OK


def _setup_index(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--torch-root", required=True, help="a PyTorch checkout's root: its test/ folder is indexed")
    store_option(parser)
    parser.add_argument("--json", action="store_true", help="the counts as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when an unparsable file was skipped")


def _setup_similar(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", nargs="?", metavar="TEXT", help='what the tests are about, e.g. "view storage"')
    parser.add_argument("--like", metavar="NODE_ID", help="rank tests like this one (file::Class::test)")
    parser.add_argument("--limit", type=int, default=10, help="how many to show (default: 10)")
    store_option(parser)
    parser.add_argument("--json", action="store_true", help="the query words and ranked matches as JSON")


def _setup_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node_id", metavar="NODE_ID", help="file::Class::test")
    store_option(parser)


def _setup_evidence(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--torch-root", required=True, help="a PyTorch checkout's root: its test/ files are run")
    store_option(parser)
    parser.add_argument("--shards", type=int, default=1, help="pytest processes at once, files split (default: 1)")
    parser.add_argument("--files", nargs="+", metavar="GLOB", help="only these files (paths under test/, fnmatch)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds one case may run, then it is a timeout (0: none)"
    )
    parser.add_argument(
        "--device",
        metavar="NAME",
        help="run on the recording device under the device's NAME: record the ops that reach the device",
    )
    parser.add_argument("--capabilities", metavar="FILE", help="the device's export (its aten ops), with --device")
    parser.add_argument("--device-count", type=int, default=1, help="devices the recorder has (default: 1)")
    parser.add_argument("--json", action="store_true", help="the run's report as JSON")


def _setup_ops(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--test", required=True, metavar="NODE_ID", help="a case's pytest node id, or a test's")
    store_option(parser)
    parser.add_argument("--json", action="store_true", help="the cases and their ops as JSON")


def _setup_tests(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", required=True, help="an aten overload, e.g. aten::mul.Scalar")
    parser.add_argument("--dtype", help="only cases that passed it a tensor of this dtype, e.g. float64")
    store_option(parser)
    parser.add_argument("--json", action="store_true", help="the cases as JSON")


def _setup_plan_scope(parser: argparse.ArgumentParser) -> None:
    reasoner_options(parser)
    store_option(parser)
    parser.add_argument("--json", action="store_true", help="each file with selected and reason, as JSON")


def _setup_select(parser: argparse.ArgumentParser) -> None:
    reasoner_options(parser)
    store_option(parser)
    parser.add_argument("--out", required=True, metavar="DIR", help="write one testreuse config per upstream file")


BUILTIN = (
    Command(
        "index", "parse a tree's test/ folder (AST, never imported) into the store; incremental", _setup_index, _index
    ),
    Command(
        "similar", "tests about TEXT, or like --like NODE_ID, ranked by BM25 with scores", _setup_similar, _similar
    ),
    Command("show", "one indexed test's record: parametrizations, features, hash, summary", _setup_show, _show),
    Command(
        "evidence",
        "run the test files on CPU under an op recorder (sharded, resumable) into the store",
        _setup_evidence,
        _evidence,
    ),
    Command("ops", "the aten ops (counts, dtypes) a recorded case or test ran", _setup_ops, _ops),
    Command("tests", "the recorded cases that ran an aten op, optionally with a dtype", _setup_tests, _tests),
    Command(
        "plan-scope",
        "the files worth analysing for a backend profile, each with its reason",
        _setup_plan_scope,
        _plan_scope,
    ),
    Command(
        "select",
        "bucket every test of the files in scope and write testreuse configs, each entry with its reason",
        _setup_select,
        _select,
    ),
    truth.COMMAND,
)
COMMANDS = BUILTIN + commands.discovered()


def _parser() -> argparse.ArgumentParser:
    codes = "\n".join(f"  {code.value}  {code.name.lower()}" for code in ExitCode)
    parser = argparse.ArgumentParser(
        prog="testselect",
        description=__doc__,
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.setup(sub.add_parser(command.name, help=command.summary, description=command.summary))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return ExitCode.OK if exc.code == 0 else ExitCode.USAGE
    run = next(c.run for c in COMMANDS if c.name == args.command)
    try:
        return run(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return ExitCode.USAGE
    except ProfileError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return ExitCode.USAGE
    except (StoreError, TreeError, CapabilitiesError, OSError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return ExitCode.USAGE
