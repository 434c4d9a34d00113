"""Re-bucket the shipped test-reuse configs from what the device does now, keeping every rule's scope.

Every xfail/xfail_strict rule is run as mandatory_success once (a temporary copy of the configs), so each case
either passes or shows its real failure. Each such rule is then rewritten in place: the ops (or dtypes) whose
cases all pass become one mandatory_success rule, the rest stay xfail_strict with the first line of the failure
the device raised (numbers folded only for grouping). mandatory_success rules that now fail are printed and left
as they are: a regression is fixed, never re-bucketed. skip rules are kept.
Run: python tools/refresh_configs.py configs/ [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import yaml

_NUMBERS = re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b")
_RUNNABLE = {"xfail", "xfail_strict", "mandatory_success"}


def _observe(configs: Path, workers: int) -> tuple[dict[str, dict], dict[str, str]]:
    """Run the configs with every xfail rule made mandatory: (record per node id, failure line per node id)."""
    with tempfile.TemporaryDirectory(prefix="refresh-") as scratch:
        copy = Path(scratch) / "configs"
        copy.mkdir()
        for path in sorted(configs.glob("*.yaml")):
            (copy / path.name).write_text(_as_mandatory(path.read_text()))
        results, junit = Path(scratch) / "r.jsonl", Path(scratch) / "junit.xml"
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers),
                "--testreuse-config", str(copy), "--testreuse-device", "ring", "--testreuse-isolation", "none",
                "--testreuse-results", str(results), f"--junitxml={junit}", "-o", "junit_family=xunit1"]  # fmt: skip
        subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=False)
        records = {}
        for line in results.read_text().splitlines():
            record = json.loads(line)
            records[record["nodeid"]] = record
        failures = {}
        for case in ET.parse(junit).getroot().iter("testcase"):
            failed = case.find("failure") if case.find("failure") is not None else case.find("error")
            if failed is not None:
                failures[case.get("classname", "").split(".")[-1] + "::" + case.get("name", "")] = _cause(
                    failed.get("message") or ""
                )
        return records, failures


def _as_mandatory(text: str) -> str:
    """The config with xfail modes made mandatory_success, line for line, so rule locations stay the same."""
    out, previous = [], ""
    for line in text.splitlines(keepends=True):
        if re.match(r"^\s*mode: xfail(_strict)?\s*$", line):
            line = line.split("mode:")[0] + "mode: mandatory_success\n"
        elif re.match(r"^\s*reason:", line) and "mode: mandatory_success" in previous:
            line = "#\n"
        out.append(line)
        previous = line
    return "".join(out)


def _short(nodeid: str) -> str:
    """A node id's class::name tail, the part JUnit and the results record agree on."""
    return "::".join(nodeid.split("::")[-2:])


def _cause(message: str) -> str:
    """The device's own words for a failure: the error line, or the numerics summary of a comparison."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return "failed without a message"
    first = lines[0]
    if "not close" in first or "not equal" in first:
        detail = next((line for line in lines if line.startswith("Greatest absolute difference")), "")
        count = next((line for line in lines if line.startswith("Mismatched elements")), "")
        return f"results differ from the CPU reference: {count}; {detail}".strip("; ")
    return first[:300]


def _key(cause: str) -> str:
    return _NUMBERS.sub("N", cause)


def refresh(configs: Path, workers: int, check: bool) -> int:
    records, failures = _observe(configs, workers)
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for record in records.values():
        if record.get("rule") and record["outcome"] != "deselected":
            by_rule[record["rule"]].append(record)
    changed, regressions = [], []
    for path in sorted(configs.glob("*.yaml")):
        lines = path.read_text().splitlines(keepends=True)
        data = yaml.compose(path.read_text())
        edits = _plan_edits(path, data, by_rule, failures, regressions)
        if not edits:
            continue
        for start, end, text in sorted(edits, reverse=True):
            lines[start:end] = [text]
        new = "".join(lines)
        if new != path.read_text():
            changed.append(path)
            if not check:
                path.write_text(new)
    for nodeid, cause in regressions:
        print(f"regression (mandatory_success fails): {nodeid}: {cause}")
    for path in changed:
        print(f"{'stale' if check else 'rewrote'}: {path}")
    return 1 if regressions or (check and changed) else 0


def _plan_edits(path: Path, root, by_rule, failures, regressions) -> list[tuple[int, int, str]]:
    """(first line, end line, replacement text) for every runnable rule of one config file."""
    edits = []
    files = _get(_get(root, "test_suite_config"), "files")
    for entry in files.value if files is not None else []:
        tests = _get(entry, "tests")
        for rule_node in tests.value if tests is not None else []:
            rule = yaml.safe_load(yaml.serialize(rule_node))
            if rule["mode"] not in _RUNNABLE:
                continue
            # the rule's location as the plugin reports it: the config copy keeps file name, line and column
            location = f":{rule_node.start_mark.line + 1}:{rule_node.start_mark.column + 1}"
            cases = [r for key, rs in by_rule.items() if key.endswith(path.name + location) for r in rs]
            if not cases:
                continue
            if rule["mode"] == "mandatory_success":
                regressions += [
                    (c["nodeid"], failures.get(_short(c["nodeid"]), "failed"))
                    for c in cases
                    if c["outcome"] != "passed"
                ]
                continue
            text = _rewrite(rule, cases, failures, indent=" " * (rule_node.start_mark.column - 2))
            edits.append((rule_node.start_mark.line, rule_node.end_mark.line, text))
    return edits


def _get(node, key: str):
    if node is None or not hasattr(node, "value") or not isinstance(node.value, list):
        return None
    return next((v for k, v in node.value if getattr(k, "value", None) == key), None)


def _rewrite(rule: dict, cases: list[dict], failures: dict[str, str], indent: str) -> str:
    """The rule split by observed outcome: one mandatory rule for what passes, one xfail_strict per cause.

    Cases are told apart by their op (or module), and by dtype only where one op's dtypes disagree, so a rule never
    marks a passing case strict-xfail or borrows another case's cause.
    """
    axis = "ops" if any(c.get("op") for c in cases) else "modules" if any(c.get("module") for c in cases) else None
    observed: dict[tuple[str, str], str] = {}
    for case in cases:
        value = (case.get(axis[:-1]) if axis else None) or "-"
        dtype = ",".join(case.get("dtypes") or []) or "-"
        cause = failures.get(_short(case["nodeid"]), "failed") if case["outcome"] != "passed" else ""
        observed.setdefault((value, dtype), cause)
    units: dict[tuple[str, str], str] = {}  # (value, dtype or "*") -> cause ("" passes)
    for value in sorted({v for v, _ in observed}):
        mine = {d: c for (v, d), c in observed.items() if v == value}
        if len({_key(c) for c in mine.values()}) == 1:
            units[(value, "*")] = next(iter(mine.values()))
        else:
            units.update({(value, d): c for d, c in mine.items()})
    merged: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    reasons: dict[tuple[str, str, str], str] = {}
    for (value, dtype), cause in units.items():
        key = ("xfail_strict" if cause else "mandatory_success", _key(cause), dtype)
        merged[key].add(value)
        reasons.setdefault(key, cause)
    whole = len(merged) == 1
    out = []
    for (mode, folded, dtype), values in sorted(merged.items()):
        out.append(f"{indent}- names: {_flow(rule['names'])}\n")
        scope = dict(rule.get("only") or {})
        if not whole and axis and "-" not in values:
            scope[axis] = sorted(values)
        if dtype != "*" and "," not in dtype and dtype != "-":
            scope["dtypes"] = [dtype]
        if scope:
            out.append(f"{indent}  only: {{{', '.join(f'{k}: {_flow(v)}' for k, v in scope.items())}}}\n")
        out.append(f"{indent}  mode: {mode}\n")
        if mode != "mandatory_success":
            out.append(f"{indent}  reason: {json.dumps(reasons[(mode, folded, dtype)])}\n")
        for extra in ("labels", "edits"):
            if rule.get(extra):
                out.append(f"{indent}  {extra}: {json.dumps(rule[extra])}\n")
    return "".join(out)


def _flow(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) if not re.fullmatch(r"[A-Za-z_][\w:.]*", v) else v for v in values) + "]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--check", action="store_true", help="report stale rules without rewriting them")
    args = parser.parse_args(argv)
    if not args.configs.is_dir() or not any(args.configs.glob("*.yaml")):
        print(f"error: {args.configs}: not a folder of test-reuse configs (*.yaml)", file=sys.stderr)
        return 2
    return refresh(args.configs, args.workers, args.check)


if __name__ == "__main__":
    raise SystemExit(main())
