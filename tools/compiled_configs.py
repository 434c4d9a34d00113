"""Write a compiled variant's per-file configs from one observed compiled run of upstream test files.

Every case of the named files runs once as mandatory_success under the folder's compile setting (its config files
other than the `test_*.yaml` ones written here, e.g. `00-ring-compile.yaml` with `compile:`). Then each case is
listed by what it did: mandatory_success when it passed with at least one graph compiled; xfail_strict with the
compiler's one-line cause when ring_inductor refused it; unlisted (skipped in the compiled run; the eager configs
cover it) when it passed without compiling a graph or failed for another reason. Cases are grouped per generic test
and dtype, with their OpInfo ops; a group whose cases did different things is left unlisted rather than guessed.
Run: python tools/compiled_configs.py CONFIGS test/test_x.py [...] [--torch-root DIR] [--minutes N] [-k EXPR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from testreuse.loader import resolve_torch_root
from testreuse.results import ResultsError, read_results

#: What a failure message of the compiler starts with once its exception type is dropped.
REFUSAL = "ring_inductor cannot compile "
SCHEMA = Path(__file__).resolve().parents[1] / "packages" / "testreuse" / "schema" / "testreuse-config.schema.json"


def observe(configs: Path, files: list[str], torch_root: Path, minutes: float, select: str | None) -> list[dict]:
    """Run every case of `files` as mandatory_success under the folder's shared configs; its results records."""
    with tempfile.TemporaryDirectory(prefix="compiled-configs-") as scratch:
        copy = Path(scratch) / "configs"
        copy.mkdir()
        for path in sorted(configs.glob("*.yaml")):
            if not path.name.startswith("test_"):
                shutil.copy(path, copy / path.name)
        for name in files:
            (copy / f"{Path(name).stem}.yaml").write_text(
                f"test_suite_config:\n  files:\n    - path: ${{TORCH_ROOT}}/{name}\n"
                "      unlisted_test_mode: mandatory_success\n"
            )
        results = Path(scratch) / "results.jsonl"
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--testreuse-config", str(copy),
                "--testreuse-device", "ring", "--torch-root", str(torch_root), "--testreuse-results", str(results),
                *(["-k", select] if select else []), *(str(torch_root / name) for name in files)]  # fmt: skip
        try:
            subprocess.run(argv, cwd=torch_root, capture_output=True, text=True, timeout=minutes * 60, check=False)
            stopped = False
        except subprocess.TimeoutExpired:
            stopped = True
        if not results.is_file():
            raise SystemExit("error: the observation run wrote no results (run its pytest command to see why)")
        records = read_results(results)
    if stopped and records:  # the test it was in may have cases it never reached: list none of that test
        last = records[-1]["generic"]
        print(f"note: stopped the observation after {minutes:g} minutes, in {last}; listing the tests it finished")
        records = [r for r in records if r["generic"] != last]
    return records


def refusal(record: dict[str, Any]) -> str | None:
    """The compiler's one-line cause when it refused the case, else None."""
    failure = record.get("failure") or {}
    for facts in (failure, failure.get("cause") or {}):
        message = str(facts.get("message", ""))
        if REFUSAL in message:
            return REFUSAL + message.split(REFUSAL, 1)[1].splitlines()[0].strip()
    return None


def verdict(record: dict[str, Any]) -> tuple[str, str] | None:
    """How the case is listed: (mode, reason), or None to leave it unlisted."""
    if record.get("outcome") == "passed" and record.get("compiled_graphs", 0) >= 1:
        return "mandatory_success", ""
    cause = refusal(record) if record.get("outcome") == "failed" else None
    return ("xfail_strict", cause) if cause else None


def rules(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per test file, its rules: one per generic test, dtypes and verdict, naming the OpInfo ops it covers."""
    groups: dict[tuple[str, str, tuple[str, ...]], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if record.get("outcome") in ("passed", "failed", "xfailed", "skipped", "crashed", "timeout", "error"):
            groups[(record["file"], record["generic"], tuple(record.get("dtypes") or ()))].append(record)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (file, generic, dtypes), members in sorted(groups.items()):
        judged = [(r, verdict(r)) for r in members]
        verdicts = {v for _, v in judged}
        if None in verdicts or len({mode for mode, _ in verdicts}) > 1:
            continue  # something in the group would not be listed, or the group did different things
        if len(verdicts) > 1 and not all(r.get("op") for r in members):
            continue  # refused for different causes with no op to tell the cases apart
        for mode, reason in sorted(verdicts):
            ops = sorted({r["op"] for r, v in judged if v == (mode, reason) and r.get("op")})
            only = {**({"ops": ops} if ops else {}), **({"dtypes": list(dtypes)} if dtypes else {})}
            out[file].append({"names": [generic], **({"only": only} if only else {}), "mode": mode,
                              **({"reason": reason} if reason else {})})  # fmt: skip
    return out


def render(file: str, file_rules: list[dict[str, Any]], target: Path) -> str:
    """One config file's text: the schema line, what it lists and why, then its rules."""
    schema = os.path.relpath(SCHEMA, target.resolve().parent)
    lines = [
        f"# yaml-language-server: $schema={schema}",
        f"# Upstream {file} compiled on ring (written by tools/compiled_configs.py from one observed compiled run):",
        "# the cases that passed with at least one graph compiled, and those ring_inductor refused with its cause;",
        "# every other case is left to the eager configs.",
        "test_suite_config:",
        "  files:",
        f"    - path: ${{TORCH_ROOT}}/{file}",
        "      unlisted_test_mode: skip",
        "      tests:",
    ]
    for rule in file_rules:
        lines.append(f"        - names: [{rule['names'][0]}]")
        if "only" in rule:
            parts = ", ".join(f"{key}: [{', '.join(values)}]" for key, values in rule["only"].items())
            lines.append(f"          only: {{{parts}}}")
        lines.append(f"          mode: {rule['mode']}")
        if "reason" in rule:
            lines.append(f"          reason: {json.dumps(rule['reason'])}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compiled_configs.py", description=__doc__.splitlines()[0])
    parser.add_argument("configs", type=Path, help="the compiled variant's config folder (holds its compile setting)")
    parser.add_argument("files", nargs="+", help="upstream test files, relative to the torch root (test/test_x.py)")
    parser.add_argument("--torch-root", help="the upstream tree (default: TORCH_ROOT or the embedded one)")
    parser.add_argument("--minutes", type=float, default=30.0, help="stop the observation after this long")
    parser.add_argument("-k", dest="select", help="only the cases pytest's -k expression selects")
    parser.add_argument("--keep", type=Path, metavar="FILE", help="save the observation's results records here")
    args = parser.parse_args(argv)
    if not args.configs.is_dir() or not any(p for p in args.configs.glob("*.yaml") if not p.name.startswith("test_")):
        print(f"error: {args.configs}: no shared config (a non-test_*.yaml file with the compile setting)",
              file=sys.stderr)  # fmt: skip
        return 2
    torch_root = resolve_torch_root(args.torch_root)
    missing = [name for name in args.files if not (torch_root / name).is_file()]
    if missing:
        print(f"error: {torch_root / missing[0]}: no such test file", file=sys.stderr)
        return 2
    try:
        records = observe(args.configs, args.files, torch_root, args.minutes, args.select)
    except ResultsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.keep is not None:
        args.keep.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")
    listed = rules(records)
    for name in args.files:
        target = args.configs / f"{Path(name).stem}.yaml"
        file_rules = listed.get(name, [])
        target.write_text(render(name, file_rules, target), encoding="utf-8")
        modes = [rule["mode"] for rule in file_rules]
        print(f"wrote {target}: {modes.count('mandatory_success')} mandatory, {modes.count('xfail_strict')} "
              f"xfail_strict rules from {sum(r.get('file') == name for r in records)} cases")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
