"""The run's report: a merged `summary.json` and a static, self-contained `report.html` rendered from it.

The summary is the machine-readable truth (the relay's triage reads it); the HTML is a view of that same data, so
the two never disagree: the Jinja2 templates under `templates/` see the summary and nothing else. The page needs no
network and no JavaScript: inline CSS, inline SVG. Every string that came from a run (test names, messages, logs,
candidate names, run ids) is hostile input, so every template is autoescaped.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import jinja2

from crcr.ci.classify import verdict
from crcr.ci.model import FAILING, CombinationResult, RunRecord, TestOutcome

SCHEMA = "tributary-ci-summary/1"
#: Rows per table in the HTML (summary.json keeps every row).
ROW_LIMIT = 400
PASSING: frozenset[str] = frozenset({"passed", "xfailed", "promotable"})
CLASSES: tuple[str, ...] = ("backend", "upstream", "infra", "unknown", "flake", "unclassified")


def write_report(run: RunRecord, run_dir: Path, previous_green: dict[str, dict[str, str]]) -> tuple[Path, Path]:
    """Write `summary.json` and `report.html` into `run_dir`; `previous_green` maps a combination name to the
    nodeid -> outcome of its previous green run (for regressions and fixes). Returns both paths."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(run, previous_green)
    summary_path = run_dir / "summary.json"
    html_path = run_dir / "report.html"
    _write(summary_path, json.dumps(summary, indent=2) + "\n")
    _write(html_path, render_html(summary))
    return summary_path, html_path


def regressions_and_fixes(
    result: CombinationResult, previous: dict[str, str] | None, last: dict[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """(failing now but passing in the previous green run, passing now but failing the last time it ran); `last`
    is each test's last outcome (history.last_outcomes), the previous green run when not given. The result's own
    lists are kept too, so a driver that filled them loses nothing."""
    regressions = set(result.regressions)
    fixes = set(result.fixes)
    last = previous if last is None else last
    for test in result.tests:
        if previous and test.failing and previous.get(test.nodeid) in PASSING:
            regressions.add(test.nodeid)
        elif last and test.outcome in PASSING and last.get(test.nodeid) in FAILING:
            fixes.add(test.nodeid)
    return sorted(regressions), sorted(fixes)


def shard_balance(seconds: list[float]) -> float | None:
    """Slowest shard / mean shard: 1.0 is perfect balance; None without shards or time."""
    if not seconds:
        return None
    mean = sum(seconds) / len(seconds)
    return round(max(seconds) / mean, 3) if mean > 0 else None


def summarize(run: RunRecord, previous_green: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The merged summary of a run as plain JSON data. The run's `wall_seconds` is its start to its finish (None
    while unfinished); its `shard_seconds` sums the shard time of the combinations that ran here, not of those
    `cached` from another run, which spent that time there."""
    combos = [_combination(result, previous_green.get(result.combination.name)) for result in run.combinations]
    statuses: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    classes: dict[str, int] = {}
    for combo in combos:
        statuses[combo["status"]] = statuses.get(combo["status"], 0) + 1
        for key, n in combo["counts"].items():
            outcomes[key] = outcomes.get(key, 0) + n
        for key, n in combo["failure_classes"].items():
            classes[key] = classes.get(key, 0) + n
    balances = {c["name"]: c["shard_balance"] for c in combos if c["shard_balance"] is not None}
    return {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "started": run.started,
        "finished": run.finished,
        "device": run.device,
        "verdict": run.verdict,
        "triage": verdict(k for k in classes if k != "unclassified"),
        "trigger": run.trigger,
        "environment": run.environment,
        "totals": {
            "combinations": dict(sorted(statuses.items())),
            "outcomes": dict(sorted(outcomes.items())),
            "tests": sum(outcomes.values()),
            "failing": sum(n for k, n in outcomes.items() if k in FAILING),
            "flaky": sum(len(c["flaky"]) for c in combos),
            "regressions": sum(len(c["regressions"]) for c in combos),
            "fixes": sum(len(c["fixes"]) for c in combos),
            "wall_seconds": _elapsed(run.started, run.finished),
            "shard_seconds": round(sum(c["shard_seconds"] for c in combos if not c["cached"]), 3),
            "cached": sum(1 for c in combos if c["cached"]),
        },
        "failure_classes": {k: classes[k] for k in CLASSES if k in classes},
        "shard_balance": {"worst": max(balances.values(), default=None), "by_combination": balances},
        "build_failures": [
            {"combination": c["name"], **(c["build"] or {}), "reason": c["reason"]}
            for c in combos
            if c["status"] == "build_failed"
        ],
        "artifacts": len(run.artifacts),
        "skipped_variants": list(run.skipped_variants),  # ci.yaml's variants this device profile does not declare
        "combinations": combos,
    }


def _combination(result: CombinationResult, previous: dict[str, str] | None) -> dict[str, Any]:
    """One combination's entry. `compared_with_green` is whether its tests were compared with a previous green
    run: without one, or without a test that ran, its empty regressions and fixes say nothing."""
    combo = result.combination
    regressions, fixes = regressions_and_fixes(result, previous)
    by_shard: dict[int, dict[str, int]] = {}
    for test in result.tests:
        counts = by_shard.setdefault(test.shard, {})
        counts[test.outcome] = counts.get(test.outcome, 0) + 1
    shards = []
    for shard in sorted(result.shards, key=lambda s: s.index):
        counts = by_shard.get(shard.index, {})
        shards.append(
            {
                "index": shard.index,
                "planned_seconds": round(shard.planned_seconds, 3),
                "seconds": round(shard.seconds, 3),
                "exit_status": shard.exit_status,
                "reran": shard.reran,
                "note": shard.note,
                "tests": shard.tests or sum(counts.values()),
                "counts": dict(sorted(counts.items())),
            }
        )
    failures = [_failure(t) for t in result.tests if t.failing or t.flaky]
    classes: dict[str, int] = {}
    for failure in failures:
        classes[failure["class"]] = classes.get(failure["class"], 0) + 1
    build = None
    if result.build is not None:
        build = {
            "ok": result.build.ok,
            "first_error": result.build.first_error,
            "log": result.build.log,
            "cached": result.build.cached,
            "attributed_to": result.attributed_to,
            "attribution_basis": result.attribution_basis,
        }
    return {
        "name": combo.name,
        "matrix": combo.matrix,
        "variant": combo.variant,
        "status": result.status,
        "reason": result.reason,
        "candidates": {
            c.kind: {"name": c.name, "version": c.version, "sha": c.sha, "git": c.git} for c in combo.candidates()
        },
        "counts": result.counts(),
        "tests": len(result.tests),
        "seconds": round(result.seconds, 3),  # shard_seconds under the name readers of schema /1 know
        "shard_seconds": round(result.seconds, 3),
        "wall_seconds": round(result.wall_seconds, 3),
        "cached": result.cached or None,
        "shards": shards,
        "shard_balance": shard_balance([s["seconds"] for s in shards]),
        "planned_balance": shard_balance([s["planned_seconds"] for s in shards]),
        "regressions": regressions,
        "fixes": fixes,
        "had_previous_green": previous is not None,
        "compared_with_green": previous is not None and bool(result.tests),
        "not_run": {t.nodeid: _not_run_reason(t) for t in sorted(result.tests, key=_nodeid) if t.outcome == "not_run"},
        "build": build,
        "attributed_to": result.attributed_to,
        "attribution_basis": result.attribution_basis,
        "attribution": {t.nodeid: t.follows for t in result.tests if t.follows},
        "flaky": [{"nodeid": t.nodeid, "attempts": t.attempts, "shard": t.shard} for t in result.tests if t.flaky],
        "failure_classes": {k: classes[k] for k in CLASSES if k in classes},
        "failures": [f for f in failures if f["outcome"] in FAILING],
    }


def _failure(test: TestOutcome) -> dict[str, Any]:
    c = test.classification
    return {
        "nodeid": test.nodeid,
        "outcome": test.outcome,
        "shard": test.shard,
        "mode": test.mode,
        "attempts": test.attempts,
        "class": c.klass if c else ("flake" if test.flaky else "unclassified"),
        "reason": c.reason if c else "",
        "evidence": c.evidence if c else "",
        "follows": test.follows,
        "message": str(test.failure.get("message", ""))[:300],
    }


def _write(path: Path, text: str) -> None:
    """Write through a temporary file, so a reader never sees half a report."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
    tmp.replace(path)


def _elapsed(started: str, finished: str) -> float | None:
    """Seconds from one ISO 8601 time to another; None when either is missing or unreadable."""
    try:
        return round((datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds(), 3)
    except (TypeError, ValueError):
        return None


# --- HTML -------------------------------------------------------------------------------------------------------------

#: The shard-balance chart's geometry in pixels: label column, longest bar, bar height, gap between shards.
LABEL_W, BAR_W, BAR_H, GAP = 90, 620, 12, 10


class _Entry(NamedTuple):
    """One row of a table that lists the entries of every combination (a regression, a flaky test, ...)."""

    combination: dict[str, Any]
    key: str
    item: Any


def render_html(summary: dict[str, Any]) -> str:
    """The static report page for a summary (the output of `summarize`), the only data the templates see."""
    return _environment().get_template("report.html").render(summary=summary)


@functools.cache
def _environment() -> jinja2.Environment:
    """Autoescape everything (every summary string came from a run); fail on a missing key rather than print
    nothing where a figure belongs."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("crcr.ci", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["row_limit"] = ROW_LIMIT
    env.filters.update(
        secs=_secs, ratio=_ratio, failing=_failing, entries=_entries, shard_columns=_shard_columns, chart=_chart
    )
    return env


def _secs(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 60:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} m {rest:02d} s"
    return f"{seconds:.1f} s"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _failing(counts: dict[str, int]) -> int:
    return sum(n for outcome, n in counts.items() if outcome in FAILING)


def _nodeid(test: TestOutcome) -> str:
    return test.nodeid


def _not_run_reason(test: TestOutcome) -> str:
    """Why a selected test has no outcome: its leg's fate when a merge knows it, else that no shard reported it."""
    return str(test.failure.get("message") or "") or "no shard reported it (its shard died twice)"


def _entries(combinations: Iterable[dict[str, Any]], *keys: str) -> list[_Entry]:
    """The entries under `keys` (a list's items, a dict's (key, value) pairs) of every combination as one list, so a
    table cuts them at ROW_LIMIT as a whole."""
    return [
        _Entry(combo, key, item)
        for combo in combinations
        for key in keys
        for item in (combo[key].items() if isinstance(combo[key], dict) else combo[key])
    ]


def _shard_columns(combinations: Iterable[dict[str, Any]]) -> int:
    """The matrix's shard columns: the highest shard index of any combination."""
    return max((shard["index"] for combo in combinations for shard in combo["shards"]), default=0)


def _chart(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the balance chart's bars go: per shard its planned bar above its actual one, both scaled to the longest
    bar of the combination."""
    scale = max([s["seconds"] for s in shards] + [s["planned_seconds"] for s in shards] + [1e-9])
    step = 2 * BAR_H + GAP
    bars = [
        {
            "shard": s,
            "y": 6 + i * step,
            "planned": BAR_W * s["planned_seconds"] / scale,
            "actual": BAR_W * s["seconds"] / scale,
        }
        for i, s in enumerate(shards)
    ]
    return {
        "bars": bars,
        "label_w": LABEL_W,
        "bar_h": BAR_H,
        "width": LABEL_W + BAR_W + 110,
        "height": len(shards) * step + 30,
        "legend_y": 6 + len(shards) * step,
    }
