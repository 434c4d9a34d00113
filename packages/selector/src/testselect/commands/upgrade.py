"""`testselect upgrade --from OLD --to NEW`: what moved between two test trees or two torch versions, re-evaluated.

OLD and NEW are both torch roots (folders with test/) or both Python interpreters (whose torch's op_db and
module_db are dumped in that interpreter); the output is the counts, the names and the configs' unified diff.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from testselect.command import CliError, Command, ExitCode, store_option
from testselect.index.store import Store
from testselect.select.choose import make_reasoner, reasoner_options
from testselect.select.plan import write_configs
from testselect.upgrade.core import UpgradeError, run_dump
from testselect.upgrade.report import core_lines, tree_lines
from testselect.upgrade.run import core_upgrade, tree_upgrade

DEFAULT_STORE_DIR = Path(".tributary") / "upgrade"


def _kind(option: str, value: str) -> str:
    """ "tree" for a folder with test/, "python" for an executable file; anything else is bad input."""
    path = Path(value)
    if path.is_dir():
        if not (path / "test").is_dir():
            raise CliError(f"{option} {value}: a folder without test/ (give a torch root or a Python interpreter)")
        return "tree"
    if path.is_file() and os.access(path, os.X_OK):
        return "python"
    if path.is_file():
        raise CliError(f"{option} {value}: not executable (give a torch root or a Python interpreter)")
    raise CliError(f"{option} {value}: no such file or folder")


def _run(args: argparse.Namespace) -> int:
    kinds = _kind("--from", args.old), _kind("--to", args.new)
    if kinds[0] != kinds[1]:
        raise CliError(f"--from is a {kinds[0]} but --to is a {kinds[1]}: compare two trees or two interpreters")
    reasoner = make_reasoner(args)
    device = reasoner.profile.device
    store = Store.open(Path(args.store), create=True)
    try:
        if kinds[0] == "tree":
            new_path = Path(args.store_dir) / "new.sqlite"
            report, result = tree_upgrade(Path(args.old), Path(args.new), store, new_path, reasoner, device)
            lines = tree_lines(report)
        else:
            if args.torch_root is None:
                raise CliError("--torch-root is required to compare two interpreters (the tests mapped onto them)")
            root = Path(args.torch_root)
            if not (root / "test").is_dir():
                raise CliError(f"--torch-root {root}: no test/ folder")
            ops = [name for name in (args.ops or "").split(",") if name] or None
            try:
                old, new = (run_dump(Path(p), ops, args.max_samples) for p in (args.old, args.new))
            except UpgradeError as exc:
                raise CliError(str(exc)) from None
            report, result = core_upgrade(root, store, old, new, reasoner, device)
            lines = core_lines(report)
    finally:
        store.close()
    for line in report.get("skipped", []):
        print(f"skipped: {line}", file=sys.stderr)
    if args.out:
        write_configs(result.new_decisions(), Path(args.out), device)
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else "\n".join(lines))
    return ExitCode.OK


def _setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="old", required=True, metavar="OLD", help="a torch root or a Python interpreter")
    parser.add_argument("--to", dest="new", required=True, metavar="NEW", help="the same kind as --from")
    reasoner_options(parser)
    store_option(parser)  # trees: OLD's index (and evidence); interpreters: --torch-root's
    parser.add_argument("--store-dir", default=str(DEFAULT_STORE_DIR), help="where NEW's index is kept (trees)")
    parser.add_argument("--torch-root", help="interpreters: the tree whose tests the op_db delta is mapped onto")
    parser.add_argument("--ops", help="interpreters: only these OpInfo names, comma-separated (for speed)")
    parser.add_argument("--max-samples", type=int, default=8, help="sample inputs hashed per op (default: 8)")
    parser.add_argument("--out", metavar="DIR", help="write NEW's testreuse configs here")
    parser.add_argument("--json", action="store_true", help="the report as JSON")


COMMAND = Command(
    "upgrade",
    "what moved between two test trees or two torch versions: the delta re-evaluated, a config diff",
    _setup,
    _run,
)
