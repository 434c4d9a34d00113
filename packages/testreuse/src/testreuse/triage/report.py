"""What `testreuse triage` prints: failing cases with their causes, counts by cause, and the proposed config diff."""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import Any

from testreuse.triage.causes import classify
from testreuse.triage.proposal import RuleChange

#: Where torch's comparison helpers live: a device error raised there is a gap in the helpers' ops, not the op's.
COMPARISON_HELPERS = ("torch/testing/_comparison.py", "torch/testing/_internal/common_utils.py")


def in_comparison_helpers(record: dict[str, Any]) -> bool:
    """A failure raised inside `assert_close` / `assertEqual` rather than in the op the test is about (a numerics
    mismatch is raised there too, but it is the comparison's verdict, not a gap)."""
    raised = str((record.get("failure") or {}).get("raised_at", ""))
    return raised.startswith(COMPARISON_HELPERS)


def case_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per failing case: node id, mode, category, reason and evidence (the JSON output's cases)."""
    rows = []
    for record in records:
        cause = classify(record)
        if cause is None:
            continue
        rows.append(
            {
                "nodeid": record["nodeid"],
                "outcome": record.get("outcome"),
                "mode": record.get("mode"),
                "category": cause.category,
                "reason": cause.reason(),
                "evidence": cause.evidence,
                "in_comparison_helpers": cause.category != "numerics" and in_comparison_helpers(record),
            }
        )
    return rows


def summary_lines(rows: list[dict[str, Any]], changes: list[RuleChange], undecided: int) -> list[str]:
    counts = Counter(row["category"] for row in rows)
    by_cause = ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    lines = [f"{len(rows)} failing case(s)" + (f": {by_cause}" if by_cause else "")]
    lines += [f"  {row['nodeid']}  [{row['mode']}]  {row['category']}: {row['reason']}" for row in rows]
    gaps = sum(row["in_comparison_helpers"] for row in rows)
    lines.append(f"comparison-helper gaps: {gaps} case(s) failed inside torch's comparison helpers")
    files = len({c.file for c in changes})
    lines.append(f"proposed: {len(changes)} rule change(s) in {files} config file(s) (--diff to see, --write to apply)")
    if undecided:
        lines.append(f"not edited: {undecided} failing case(s) decided by an unlisted mode or the capabilities")
    return lines


def unified_diff(texts: dict[Path, tuple[str, str]]) -> str:
    """`git apply`-able when run from the directory the config paths are relative to."""
    out = []
    for path, (before, after) in texts.items():
        name = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
        out += difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{name}", f"b/{name}")
    return "".join(out)
