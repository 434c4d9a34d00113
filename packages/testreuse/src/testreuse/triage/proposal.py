"""The config change a triaged run implies, rule by rule, as edits of the config files' text.

A rule whose cases all end one way gets that bucket: all passing -> mandatory_success; all failing with one cause ->
xfail_strict with the cause as its reason; all skipping themselves -> skip. A rule whose cases split keeps the
largest group's bucket and gains, right after it, one narrower rule per other group (exact names, scoped by op or
module, and by dtype only where one op's dtypes disagree), which wins by being more specific. Cases decided by a
file's unlisted mode or by capabilities are reported, not edited.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testreuse.loader import PlacedRule, Plan
from testreuse.triage.causes import PASSING, Cause, classify

PASS = "pass"
SCOPE_KEYS = ("ops", "modules", "dtypes", "torch")  # a narrower rule keeps its rule's torch versions too


@dataclass(frozen=True)
class Group:
    """Cases of one rule that end the same way: passing, or failing with one cause (its worst case's evidence)."""

    key: str
    cause: Cause | None
    records: tuple[dict[str, Any], ...]

    @property
    def mode(self) -> str:
        if self.cause is None:
            return "mandatory_success"
        return "skip" if self.cause.category == "runtime_skip" else "xfail_strict"

    def reason(self) -> str | None:
        return None if self.cause is None else self.cause.reason()


@dataclass(frozen=True)
class RuleChange:
    """One rule's text before and after, where it is (1-based lines, `end` exclusive)."""

    file: Path
    start: int
    end: int
    before: str
    after: str
    groups: tuple[Group, ...]


def groups_of(records: list[dict[str, Any]]) -> list[Group]:
    """Cases split by how they end, largest group first (ties: passing first, then by key)."""
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    causes: dict[str, Cause | None] = {}
    for record in records:
        cause = classify(record)
        if cause is None and record.get("outcome") not in PASSING:
            continue  # skipped by its config: nothing was observed
        key = PASS if cause is None else cause.key
        by_key[key].append(record)
        kept = causes.get(key)
        if kept is None or (cause is not None and _error(cause) > _error(kept)):
            causes[key] = cause
    ordered = sorted(by_key, key=lambda k: (-len(by_key[k]), k != PASS, k))
    return [Group(k, causes[k], tuple(by_key[k])) for k in ordered]


def _error(cause: Cause) -> float:
    return cause.evidence.get("max_abs", 0.0)


def propose(plan: Plan, records: list[dict[str, Any]]) -> tuple[list[RuleChange], list[dict[str, Any]]]:
    """Edits per rule, and the records no rule decided (unlisted mode, capabilities), which get no edit."""
    rules = [p for file_plan in plan.files.values() for p in file_plan.rules]
    placed = {_where(p.location.file, p.location.line, p.location.column): p for p in rules}
    by_rule: dict[tuple[str, int, int], list[dict[str, Any]]] = defaultdict(list)
    undecided = []
    for record in records:
        where = _parse_rule(str(record.get("rule", "")))
        if where is not None and where in placed:
            by_rule[where].append(record)
        elif classify(record) is not None:
            undecided.append(record)
    changes = []
    for where in sorted(by_rule):
        change = _change(placed[where], groups_of(by_rule[where]))
        if change is not None:
            changes.append(change)
    return changes, undecided


def apply(changes: list[RuleChange]) -> dict[Path, tuple[str, str]]:
    """Each touched config file's text before and after the changes."""
    texts: dict[Path, tuple[str, str]] = {}
    for path in sorted({c.file for c in changes}):
        before = path.read_text(encoding="utf-8")
        lines = before.splitlines(keepends=True)
        for change in sorted((c for c in changes if c.file == path), key=lambda c: -c.start):
            lines[change.start - 1 : change.end - 1] = [change.after]
        texts[path] = (before, "".join(lines))
    return texts


def _where(file: str, line: int, column: int) -> tuple[str, int, int]:
    return (str(Path(file).resolve()), line, column)


def _parse_rule(text: str) -> tuple[str, int, int] | None:
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    return _where(parts[0], int(parts[1]), int(parts[2]))


def _change(placed: PlacedRule, groups: list[Group]) -> RuleChange | None:
    if not groups:
        return None
    rule = placed.rule
    first = groups[0]
    unchanged = first.mode == rule.mode.value and (first.mode == "mandatory_success" or first.reason() == rule.reason)
    if unchanged and len(groups) == 1:
        return None
    path = Path(placed.location.file)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start, column = placed.location.line, placed.location.column
    end = _block_end(lines, start, column)
    indent = " " * (column - 3)
    original = _fields(rule)
    texts = [_render({**original, "mode": first.mode, "reason": first.reason()}, indent)]
    for group in groups[1:]:
        for names, scope in _scopes(group, groups):
            narrowed = {**original.get("only", {}), **(scope or {})}  # never wider than the rule it splits
            only = {k: narrowed[k] for k in SCOPE_KEYS if k in narrowed} or None
            fields = {**original, "names": names, "only": only, "mode": group.mode, "reason": group.reason()}
            texts.append(_render(fields, indent))
    return RuleChange(path, start, end, "".join(lines[start - 1 : end - 1]), "".join(texts), tuple(groups))


def _block_end(lines: list[str], start: int, column: int) -> int:
    """The first line after the rule's block: a line indented less than its keys (blank lines stay inside)."""
    for number in range(start + 1, len(lines) + 1):
        text = lines[number - 1]
        if text.strip() and len(text) - len(text.lstrip(" ")) < column - 1:
            return number
    return len(lines) + 1


def _fields(rule: Any) -> dict[str, Any]:
    data = rule.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    if "only" in data:  # in the configs' order: what, then which dtypes, then which torch
        data["only"] = {k: data["only"][k] for k in SCOPE_KEYS if k in data["only"]}
    return {k: data[k] for k in ("names", "only", "labels", "edits") if k in data}


def _scopes(group: Group, groups: list[Group]) -> list[tuple[list[str], dict[str, list[str]] | None]]:
    """Exact names per scope: by op (or module), narrowed to dtypes only where the op's dtypes end differently."""
    seen: dict[tuple[str, str | None], set[str]] = defaultdict(set)
    for other in groups:
        for r in other.records:
            seen[(r.get("generic", ""), _subject(r))].update(r.get("dtypes") or [])
    mine: dict[tuple[str, str | None], set[str]] = defaultdict(set)
    for r in group.records:
        mine[(r.get("generic", ""), _subject(r))].update(r.get("dtypes") or [])
    subjects: dict[tuple[str, tuple[str, ...]], set[str]] = defaultdict(set)
    for (generic, subject), dtypes in mine.items():
        narrowed = tuple(sorted(dtypes)) if dtypes != seen[(generic, subject)] else ()
        bucket = subjects[(generic, narrowed)]
        if subject:
            bucket.add(subject)
    names: dict[tuple[tuple[str, ...], tuple[str, ...]], set[str]] = defaultdict(set)
    for (generic, dtypes), found in subjects.items():
        names[(tuple(sorted(found)), dtypes)].add(generic)
    kind = "modules" if any(r.get("module") for r in group.records) else "ops"
    scopes = []
    for (found, dtypes), generics in sorted(names.items()):
        scope = {**({kind: list(found)} if found else {}), **({"dtypes": list(dtypes)} if dtypes else {})}
        scopes.append((sorted(generics), scope or None))
    return scopes


def _subject(record: dict[str, Any]) -> str | None:
    return record.get("module") or record.get("op")


def _render(fields: dict[str, Any], indent: str) -> str:
    """A rule in the configs' own style: block keys, flow values, JSON-quoted strings (valid YAML)."""
    order = ("names", "only", "mode", "reason", "labels", "edits")
    lines = []
    for key in order:
        value = fields.get(key)
        if value is None or (key == "reason" and fields.get("mode") == "mandatory_success"):
            continue
        lead = f"{indent}- " if not lines else f"{indent}  "
        lines.append(f"{lead}{key}: {_flow(value)}\n")
    return "".join(lines)


_PLAIN = re.compile(r"[A-Za-z_][\w.]*(::[A-Za-z_]\w*)?")
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str) and _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value)
