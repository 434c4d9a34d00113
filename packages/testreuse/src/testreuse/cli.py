"""`testreuse`: validate configs, list every concrete case with its mode, explain one case's outcome, triage a run."""

from __future__ import annotations

import argparse
import enum
import json
import re
import subprocess
import sys
import tempfile
import traceback
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from testreuse.errors import ConfigError
from testreuse.loader import resolve_torch_root
from testreuse.model import Mode
from testreuse.results import ResultsError
from testreuse.schema import config_schema_text
from testreuse.triage.proposal import apply, propose
from testreuse.triage.records import read_records
from testreuse.triage.report import case_rows, summary_lines, unified_diff
from testreuse.validate import ignored_export_ops, missing_reasons, missing_test_names, validate


class ExitCode(enum.IntEnum):
    OK = 0
    INVALID_CONFIG = 1
    USAGE = 2
    COLLECTION_FAILED = 3
    NOT_FOUND = 4
    STALE = 5


# pytest's exit codes for a collection that finished: OK, and NO_TESTS_COLLECTED (every case deselected).
COLLECTED = (0, 5)
COLLECT_ERROR = re.compile(r"^_+ ERROR collecting (.+?) _+$")
PROBLEM = re.compile(r"^\S.*:\d+:\d+: \S+: .+$")


class CliError(Exception):
    def __init__(self, message: str, code: ExitCode, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


def _validate(args: argparse.Namespace) -> int:
    torch_root = resolve_torch_root(args.torch_root)
    collected = None
    if args.collect:
        try:
            records = _collect(args, args.paths)
        except CollectionFailed as exc:
            if not exc.problems:
                raise
            for line in exc.problems:  # the plugin checked the names against the collection itself
                print(f"error: {line}", file=sys.stderr)
            return ExitCode.INVALID_CONFIG
        collected = _generic_names(records, torch_root)
    plan = validate(args.paths, torch_root, run_commands=args.run_capabilities, collected=collected, strict=args.strict)
    for problem in missing_reasons(plan):
        print(f"warning: {problem}", file=sys.stderr)
    rules = sum(len(f.rules) for f in plan.files.values())
    print(f"ok: {len(plan.sources)} config file(s), {len(plan.files)} upstream file(s), {rules} rule placement(s)")
    inactive = {p.order for f in plan.files.values() for p in f.rules if not p.active}
    if inactive:
        print(f"note: {len(inactive)} rule(s) apply to no case on torch {plan.torch_version} (only.torch)")
    ignored = ignored_export_ops(plan)
    if ignored:
        print(f"note: {len(ignored)} exported op(s) are not OpInfo names and narrow nothing: {', '.join(ignored)}")
    for command in plan.capabilities.unrun_commands:
        print(f"note: capabilities command not run: {command} (pass --run-capabilities to check its export)")
    return ExitCode.OK


def _collect(args: argparse.Namespace, configs: Sequence[str]) -> list[dict]:
    """A collect-only pytest run with the plugin: the same code path a real run takes, nothing executed."""
    with tempfile.TemporaryDirectory(prefix="testreuse-") as scratch:
        plan_file = Path(scratch) / "plan.jsonl"
        argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        for config in configs:
            argv += ["--testreuse-config", str(Path(config).resolve())]
        argv += ["--testreuse-plan", str(plan_file)]
        for flag, value in (("--torch-root", args.torch_root), ("--testreuse-backend", args.backend)):
            if value:
                argv += [flag, str(Path(value).resolve()) if flag == "--torch-root" else value]
        if args.device:
            argv += ["--testreuse-device", args.device]
        done = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=False)
        if args.debug:
            sys.stderr.write(done.stdout + done.stderr)
        if done.returncode not in COLLECTED or not plan_file.exists():
            output = (done.stdout + done.stderr).splitlines()
            raise CollectionFailed(_collection_failure(output, done.returncode), _config_problems(output))
        return [json.loads(line) for line in plan_file.read_text(encoding="utf-8").splitlines()]


class CollectionFailed(CliError):
    """A collect-only run that failed; `problems` are the config problems the plugin named, one per line."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message, ExitCode.COLLECTION_FAILED, hint="rerun with --debug for pytest's output")
        self.problems = problems


def _config_problems(output: list[str]) -> list[str]:
    """The lines of pytest's usage error when they are config problems (`file:line:col: path: message`)."""
    start = next((i for i, line in enumerate(output) if line.startswith("ERROR: ")), None)
    if start is None:
        return []
    lines = [output[start].removeprefix("ERROR: ")]
    lines += [line for line in output[start + 1 :] if line.strip()]
    return lines if all(PROBLEM.match(line) for line in lines) else []


def _collection_failure(output: list[str], returncode: int) -> str:
    """One line for a failed collection: pytest's usage error, else every upstream file that failed to collect."""
    usage = [line.removeprefix("ERROR: ") for line in output if line.startswith("ERROR: ")]
    if usage:
        return usage[0]
    files = []
    for index, line in enumerate(output):
        header = COLLECT_ERROR.match(line)
        if header:
            detail = next((text.strip() for text in output[index + 1 :] if text.strip()), "")
            files.append(f"{header.group(1)} ({detail})")
    if files:
        return f"{len(files)} upstream file(s) failed to collect: " + "; ".join(files)
    return output[-1] if output else f"pytest exited with {returncode}"


def _list(args: argparse.Namespace) -> int:
    records = [r for r in _collect(args, args.configs) if args.mode is None or r["mode"] == args.mode]
    if args.format == "json":  # one document, shaped like `triage --json`'s: a reader needs one json.loads
        print(json.dumps({"cases": records}, indent=2, sort_keys=True))
    elif args.format == "jsonl":  # a case a line, for grep and for readers that stream
        for record in records:
            print(json.dumps(record, sort_keys=True))
    else:
        for record in records:
            print(f"{record['nodeid']}\t{record['mode']}\t{record['rule']}\t{record['reason']}")
    return ExitCode.OK


def _explain(args: argparse.Namespace) -> int:
    wanted = args.test_id
    records = [
        r
        for r in _collect(args, args.configs)
        if r["nodeid"] == wanted or r["nodeid"].endswith(f"::{wanted}") or r["generic"] == wanted
    ]
    if not records:
        raise CliError(f"no collected case matches {wanted!r}", ExitCode.NOT_FOUND, hint="see `testreuse list`")
    for record in records:
        print(record["nodeid"])
        for key in ("generic", "mode", "rule", "reason", "op", "dtypes", "module", "labels"):
            value = record.get(key)
            if value not in (None, [], ""):
                shown = ", ".join(value) if isinstance(value, list) else value
                print(f"  {key}: {shown}")
    return ExitCode.OK


def _schema(args: argparse.Namespace) -> int:
    text = config_schema_text()
    if args.check:
        current = Path(args.check).read_text(encoding="utf-8") if Path(args.check).exists() else ""
        if current != text:
            raise CliError(
                f"{args.check} is stale", ExitCode.STALE, hint=f"run `testreuse schema --output {args.check}`"
            )
        return ExitCode.OK
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return ExitCode.OK


def _generic_names(records: Sequence[dict], torch_root: Path) -> dict[Path, set[str]]:
    """The generic `Class::test` names per upstream file that collection records (its own or a run's) hold."""
    names: dict[Path, set[str]] = defaultdict(set)
    for record in records:
        if isinstance(record.get("file"), str) and isinstance(record.get("generic"), str):
            names[torch_root / record["file"]].add(record["generic"])
    return names


def _triage(args: argparse.Namespace) -> int:
    try:
        records = read_records(Path(args.results))
    except ResultsError as exc:
        raise CliError(str(exc), ExitCode.USAGE) from None
    torch_root = resolve_torch_root(args.torch_root)
    plan = validate(args.config, torch_root, collected={})  # names: below, against what the records hold
    # A run names its cases' tests (those made at import time too) but not the tests it skipped whole: a name in
    # neither the file nor the records is a warning here; `validate --collect` and `run` check it against collection.
    for problem in missing_test_names(plan, _generic_names(records, torch_root)):
        print(f"warning: {problem}", file=sys.stderr)
    changes, undecided = propose(plan, records)
    rows = case_rows(records)
    texts = apply(changes)
    if args.json:
        print(json.dumps({"cases": rows, "diff": unified_diff(texts)}, indent=2, sort_keys=True))
    elif args.diff:
        print(unified_diff(texts), end="")
    else:
        print("\n".join(summary_lines(rows, changes, len(undecided))))
    if args.write:
        for path, (_, after) in texts.items():
            path.write_text(after, encoding="utf-8")
    return ExitCode.OK


def _setup_triage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="a run's results record (--testreuse-results, JSON lines)")
    parser.add_argument("--config", nargs="+", required=True, help="the config files or directories the run used")
    parser.add_argument("--torch-root", help="the upstream tree (default: TORCH_ROOT, else the embedded tree)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="cases with causes and the diff, as JSON")
    output.add_argument("--diff", action="store_true", help="print the proposed config change as a unified diff")
    parser.add_argument("--write", action="store_true", help="apply the proposed change to the config files")


def _collection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="+", metavar="CONFIG", help="config file or directory (repeatable)")
    parser.add_argument("--torch-root", help="upstream tree (default: $TORCH_ROOT, else the embedded one)")
    parser.add_argument("--backend", help="MODULE[:FUNC] that registers the privateuse1 backend")
    parser.add_argument("--device", help="expected privateuse1 backend name")


def _setup_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="config file or directory")
    parser.add_argument("--torch-root", help="upstream tree (default: $TORCH_ROOT, else the embedded one)")
    parser.add_argument(
        "--collect",
        action="store_true",
        help="check test names against what collection produces (tests made at import time too) instead of the "
        "files' syntax trees; imports the upstream files and needs the backend",
    )
    parser.add_argument("--backend", help="with --collect: MODULE[:FUNC] that registers the privateuse1 backend")
    parser.add_argument("--device", help="with --collect: expected privateuse1 backend name")
    parser.add_argument(
        "--run-capabilities",
        action="store_true",
        help="run `capabilities.command` and check its export too (by default no command is run)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also refuse what a run accepts with a warning: an xfail, xfail_strict or skip entry with no reason "
        "(no `reason:`, no comment above the entry or on its lines)",
    )


def _setup_list(parser: argparse.ArgumentParser) -> None:
    _collection_options(parser)
    parser.add_argument("--mode", choices=[m.value for m in Mode], help="only cases in this outcome bucket")
    parser.add_argument(
        "--format",
        choices=("text", "json", "jsonl"),
        default="text",
        help='text: nodeid, mode, rule, reason tab-separated; json: one document {"cases": [...]}; '
        "jsonl: one case object a line (default: text)",
    )


def _setup_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs=1, metavar="CONFIG", help="config file or directory")
    parser.add_argument("test_id", metavar="TEST_ID", help="node id, Class::method, or generic Class::test")
    parser.add_argument("--torch-root", help="upstream tree (default: $TORCH_ROOT, else the embedded one)")
    parser.add_argument("--backend", help="MODULE[:FUNC] that registers the privateuse1 backend")
    parser.add_argument("--device", help="expected privateuse1 backend name")


def _setup_schema(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--output", metavar="FILE", help="write the schema to FILE")
    group.add_argument("--check", metavar="FILE", help="fail if FILE differs from the generated schema")


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    setup: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS = (
    Command(
        "validate",
        "check config files strictly (keys, types, dtypes, ops, upstream test names)",
        _setup_validate,
        _validate,
    ),
    Command(
        "list", "every concrete test id with its mode and deciding rule (collect-only dry run)", _setup_list, _list
    ),
    Command(
        "explain", "why a test gets its outcome: mode, deciding rule as file:line, reason", _setup_explain, _explain
    ),
    Command("schema", "print, write or check the config JSON Schema", _setup_schema, _schema),
    Command(
        "triage",
        "each failing case's root cause with evidence, and the config change it implies (as a diff)",
        _setup_triage,
        _triage,
    ),
)


def _parser() -> argparse.ArgumentParser:
    codes = "\n".join(f"  {code.value}  {code.name.lower()}" for code in ExitCode)
    parser = argparse.ArgumentParser(
        prog="testreuse",
        description=__doc__,
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and pytest output on errors")
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
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return ExitCode.INVALID_CONFIG
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.code
    except (OSError, ValueError, ImportError) as exc:  # ImportError: an environment missing torch's test deps
        if args.debug:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
