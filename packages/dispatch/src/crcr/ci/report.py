"""The run's report: a merged `summary.json` and a static, self-contained `report.html` rendered from it.

The summary is the machine-readable truth (the relay's triage reads it); the HTML is a view of that same data, so
the two never disagree. The page needs no network and no JavaScript: inline CSS, inline SVG. Every string that came
from a run (test names, messages, logs, candidate names) is hostile input and is escaped where it is written.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from string import Template
from typing import Any

from crcr.ci.classify import verdict
from crcr.ci.model import FAILING, CombinationResult, RunRecord, TestOutcome

SCHEMA = "tributary-ci-summary/1"
#: Rows per table in the HTML (summary.json keeps every row).
ROW_LIMIT = 400
PASSING: frozenset[str] = frozenset({"passed", "xfailed"})
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


def regressions_and_fixes(result: CombinationResult, previous: dict[str, str] | None) -> tuple[list[str], list[str]]:
    """(failing now but passing in the previous green run, passing now but failing then); the result's own lists
    are kept too, so a driver that filled them loses nothing."""
    regressions = set(result.regressions)
    fixes = set(result.fixes)
    if previous:
        for test in result.tests:
            before = previous.get(test.nodeid)
            if before is None:
                continue
            if test.failing and before in PASSING:
                regressions.add(test.nodeid)
            elif test.outcome in PASSING and before in FAILING:
                fixes.add(test.nodeid)
    return sorted(regressions), sorted(fixes)


def shard_balance(seconds: list[float]) -> float | None:
    """Slowest shard / mean shard: 1.0 is perfect balance; None without shards or time."""
    if not seconds:
        return None
    mean = sum(seconds) / len(seconds)
    return round(max(seconds) / mean, 3) if mean > 0 else None


def summarize(run: RunRecord, previous_green: dict[str, dict[str, str]]) -> dict[str, Any]:
    """The merged summary of a run as plain JSON data."""
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
        }
    return {
        "name": combo.name,
        "matrix": combo.matrix,
        "variant": combo.variant,
        "status": result.status,
        "reason": result.reason,
        "candidates": {c.kind: {"name": c.name, "version": c.version, "sha": c.sha} for c in combo.candidates()},
        "counts": result.counts(),
        "tests": len(result.tests),
        "seconds": round(result.seconds, 3),
        "shards": shards,
        "shard_balance": shard_balance([s["seconds"] for s in shards]),
        "planned_balance": shard_balance([s["planned_seconds"] for s in shards]),
        "regressions": regressions,
        "fixes": fixes,
        "had_previous_green": previous is not None,
        "not_run": sorted(t.nodeid for t in result.tests if t.outcome == "not_run"),
        "build": build,
        "attributed_to": result.attributed_to,
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


# --- HTML -------------------------------------------------------------------------------------------------------------

_PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tributary CI: $title</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", "Liberation Sans", sans-serif; margin: 24px;
       color: #1f2328; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 14px; margin: 16px 0 6px; }
.banner { padding: 10px 14px; border-radius: 6px; font-weight: 600; margin: 10px 0; }
.meta { color: #57606a; } code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0; } th, td { border: 1px solid #d0d7de; padding: 4px 8px;
  vertical-align: top; text-align: left; } th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.st-passed, .ok { background: #dafbe1; } .st-failed, .bad { background: #ffd8d3; }
.st-build_failed { background: #ffc9a8; } .st-incompatible { background: #eaeef2; } .st-error { background: #f0d8ff; }
.warn { background: #fff1c2; } .none { background: #f6f8fa; color: #8c959f; }
.pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.c-backend { background: #cf222e; color: #fff; } .c-upstream { background: #8250df; color: #fff; }
.c-infra { background: #bf8700; color: #fff; } .c-unknown { background: #6e7781; color: #fff; }
.c-flake { background: #0969da; color: #fff; } .c-unclassified { background: #d0d7de; }
.small { font-size: 12px; color: #57606a; } .evidence { max-width: 520px; word-break: break-all; }
.nodeid { max-width: 460px; word-break: break-all; }
</style>
</head>
<body>
<h1>Tributary CI run <span class="mono">$run_id</span></h1>
<div class="meta">device <b>$device</b> &middot; started $started &middot; finished $finished
 &middot; $tests tests in $combos combinations</div>
<div class="banner $banner_class">$verdict</div>
$sections
</body>
</html>
""")


def render_html(summary: dict[str, Any]) -> str:
    """The static report page for a summary (the output of `summarize`)."""
    green = str(summary.get("verdict", "")).startswith("green")
    verdict_text = summary.get("verdict") or "no verdict"
    if summary.get("triage"):
        verdict_text = f"{verdict_text} (triage: {summary['triage']})"
    sections = [
        _section_totals(summary),
        _section_matrix(summary),
        _section_balance(summary),
        _section_regressions(summary),
        _section_attribution(summary),
        _section_flaky(summary),
        _section_classes(summary),
        _section_builds(summary),
        _section_not_run(summary),
    ]
    return _PAGE.substitute(
        title=_e(summary.get("run_id", "")),
        run_id=_e(summary.get("run_id", "")),
        device=_e(summary.get("device", "")),
        started=_e(summary.get("started", "")),
        finished=_e(summary.get("finished", "") or "-"),
        tests=summary["totals"]["tests"],
        combos=len(summary["combinations"]),
        banner_class="ok" if green else "bad",
        verdict=_e(verdict_text),
        sections="\n".join(s for s in sections if s),
    )


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _secs(seconds: float) -> str:
    if seconds >= 60:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} m {rest:02d} s"
    return f"{seconds:.1f} s"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {_e(k)}" for k, n in counts.items()) or "no tests"


def _pill(klass: str) -> str:
    return f'<span class="pill c-{_e(klass)}">{_e(klass)}</span>'


def _rows(rows: list[str], columns: int, total: int | None = None) -> str:
    total = len(rows) if total is None else total
    shown = rows[:ROW_LIMIT]
    if total > len(shown):
        shown.append(
            f'<tr><td colspan="{columns}" class="small">and {total - len(shown)} more in summary.json</td></tr>'
        )
    return "\n".join(shown)


def _section_totals(summary: dict[str, Any]) -> str:
    totals = summary["totals"]
    statuses = ", ".join(f'<span class="pill st-{_e(k)}">{n} {_e(k)}</span>' for k, n in totals["combinations"].items())
    classes = " ".join(f"{_pill(k)} {n}" for k, n in summary["failure_classes"].items()) or "none"
    worst = summary["shard_balance"]["worst"]
    skipped = ""
    if summary.get("skipped_variants"):
        names = ", ".join(_e(name) for name in summary["skipped_variants"])
        device = _e(summary["device"])
        skipped = f"<tr><th>skipped variants</th><td>{names} (not declared by device profile {device})</td></tr>"
    return (
        "<h2>Overview</h2><table>"
        f"<tr><th>combinations</th><td>{statuses or 'none'}</td></tr>"
        f"<tr><th>outcomes</th><td>{_counts(totals['outcomes'])}</td></tr>"
        f"<tr><th>regressions / fixes</th><td>{totals['regressions']} / {totals['fixes']}</td></tr>"
        f"<tr><th>flaky tests</th><td>{totals['flaky']}</td></tr>"
        f"<tr><th>failure classes</th><td>{classes}</td></tr>"
        f"<tr><th>shard balance (worst slowest/mean)</th><td>{'-' if worst is None else f'{worst:.3f}'}</td></tr>"
        f"{skipped}</table>"
    )


def _candidates_cell(candidates: dict[str, dict[str, str]]) -> str:
    lines = [
        f'<span class="small">{kind}</span> <b>{_e(c["name"])}</b> <span class="small">{_e(c["version"])}</span> '
        f'<span class="mono small">{_e(c["sha"][:10])}</span>'
        for kind, c in ((k, candidates[k]) for k in ("backend", "core", "suite"))
    ]
    return "<td>" + "<br>".join(lines) + "</td>"


def _section_matrix(summary: dict[str, Any]) -> str:
    combos = summary["combinations"]
    width = max((s["index"] for c in combos for s in c["shards"]), default=0)
    head = "".join(f"<th>shard {i}</th>" for i in range(1, width + 1))
    rows = []
    for c in combos:
        status = _e(c["status"])
        variant = f", {_e(c['variant'])} variant" if c.get("variant") else ""
        cells = [
            f'<td class="st-{status}"><b>{_e(c["name"])}</b><br><span class="small">{_e(c["matrix"])} matrix'
            f"{variant}</span><br><b>{status}</b></td>",
            _candidates_cell(c["candidates"]),
        ]
        by_index = {s["index"]: s for s in c["shards"]}
        if not by_index and width:
            cells.append(f'<td colspan="{width}" class="st-{status}">{_e(c["reason"] or "no shards")}</td>')
        else:
            cells.extend(_shard_cell(by_index.get(i)) for i in range(1, width + 1))
        cells.append(f'<td class="num">{_counts(c["counts"])}<br>{_secs(c["seconds"])}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        "<h2>Combinations &times; shards</h2><table><tr><th>combination</th><th>candidates</th>"
        f"{head}<th>total</th></tr>{_rows(rows, width + 3)}</table>"
    )


def _shard_cell(shard: dict[str, Any] | None) -> str:
    if shard is None:
        return '<td class="none">-</td>'
    failing = sum(n for k, n in shard["counts"].items() if k in FAILING)
    klass = "bad" if failing else "warn" if shard["reran"] or shard["exit_status"] not in (0, 1) else "ok"
    reran = "<br><b>died, rerun once</b>" if shard["reran"] else ""
    return (
        f'<td class="{klass} num">{_counts(shard["counts"])}<br>{_secs(shard["seconds"])}'
        f'<span class="small"> (plan {_secs(shard["planned_seconds"])})</span>'
        f'<br><span class="small">exit {_e(shard["exit_status"])}</span>{reran}</td>'
    )


def _section_regressions(summary: dict[str, Any]) -> str:
    rows = []
    for c in summary["combinations"]:
        for kind, names in (("regression", c["regressions"]), ("fix", c["fixes"])):
            klass = "bad" if kind == "regression" else "ok"
            rows.extend(
                f'<tr><td>{_e(c["name"])}</td><td class="{klass}">{kind}</td><td class="mono nodeid">{_e(n)}</td></tr>'
                for n in names
            )
    without = [c["name"] for c in summary["combinations"] if not c["had_previous_green"]]
    note = f'<p class="small">No previous green run for: {", ".join(_e(n) for n in without)}.</p>' if without else ""
    body = (
        f"<table><tr><th>combination</th><th>change</th><th>test</th></tr>{_rows(rows, 3)}</table>"
        if rows
        else "<p>None: every test outcome matches the previous green run.</p>"
    )
    return f"<h2>Regressions and fixes (against the previous green run)</h2>{body}{note}"


def _section_attribution(summary: dict[str, Any]) -> str:
    rows = []
    for c in summary["combinations"]:
        if c["attributed_to"]:
            rows.append(
                f"<tr><td>{_e(c['name'])}</td><td>the build ({_e(c['status'])})</td>"
                f"<td><b>{_e(c['attributed_to'])}</b></td></tr>"
            )
        for nodeid, follows in c["attribution"].items():
            rows.append(
                f'<tr><td>{_e(c["name"])}</td><td class="mono nodeid">{_e(nodeid)}</td>'
                f"<td><b>{_e(follows)}</b></td></tr>"
            )
        unattributed = [f for f in c["failures"] if not f["follows"] and f["class"] == "unknown"]
        if unattributed:
            rows.append(
                f"<tr><td>{_e(c['name'])}</td><td>{len(unattributed)} failing test(s)</td>"
                "<td>unknown: no single candidate explains them</td></tr>"
            )
    body = (
        f"<table><tr><th>combination</th><th>what</th><th>follows</th></tr>{_rows(rows, 3)}</table>"
        if rows
        else "<p>Nothing to attribute: no failure needed telling two moved candidates apart.</p>"
    )
    return (
        '<h2>Attribution</h2><p class="small">A failure follows a candidate when it passes with that candidate '
        "alone pinned back to its last-green version.</p>" + body
    )


def _section_flaky(summary: dict[str, Any]) -> str:
    rows = [
        f'<tr><td>{_e(c["name"])}</td><td class="mono nodeid">{_e(f["nodeid"])}</td><td class="num">{f["shard"]}</td>'
        f'<td class="mono">{_e(" -> ".join(f["attempts"]))}</td></tr>'
        for c in summary["combinations"]
        for f in c["flaky"]
    ]
    if not rows:
        return "<h2>Flaky tests</h2><p>None: no test passed only on a retry.</p>"
    return (
        "<h2>Flaky tests (failed, then passed on a retry)</h2><table><tr><th>combination</th><th>test</th>"
        f"<th>shard</th><th>attempts</th></tr>{_rows(rows, 4)}</table>"
    )


def _section_classes(summary: dict[str, Any]) -> str:
    rows = [
        f'<tr><td>{_e(c["name"])}</td><td class="mono nodeid">{_e(f["nodeid"])}</td><td>{_e(f["outcome"])}</td>'
        f'<td>{_pill(f["class"])}</td><td>{_e(f["reason"])}</td><td class="mono evidence">{_e(f["evidence"])}</td></tr>'
        for c in summary["combinations"]
        for f in c["failures"]
    ]
    if not rows:
        return "<h2>Failure classes</h2><p>No failing test.</p>"
    legend = " ".join(f"{_pill(k)} {n}" for k, n in summary["failure_classes"].items())
    return (
        f"<h2>Failure classes</h2><p>{legend}</p><table><tr><th>combination</th><th>test</th><th>outcome</th>"
        f"<th>class</th><th>reason</th><th>evidence</th></tr>{_rows(rows, 6)}</table>"
    )


def _section_builds(summary: dict[str, Any]) -> str:
    failures = summary["build_failures"]
    if not failures:
        return "<h2>Build failures</h2><p>None: every backend built.</p>"
    rows = [
        f'<tr><td class="st-build_failed">{_e(b["combination"])}</td>'
        f'<td class="mono evidence">{_e(b.get("first_error") or b.get("reason") or "")}</td>'
        f"<td><b>{_e(b.get('attributed_to') or 'unknown')}</b></td>"
        f'<td class="mono small">{_e(b.get("log", ""))}</td></tr>'
        for b in failures
    ]
    return (
        "<h2>Build failures</h2><table><tr><th>combination</th><th>first error</th><th>attributed to</th>"
        f"<th>log</th></tr>{_rows(rows, 4)}</table>"
    )


def _section_balance(summary: dict[str, Any]) -> str:
    charts = [_balance_chart(c) for c in summary["combinations"] if c["shards"]]
    if not charts:
        return "<h2>Shard balance</h2><p>No shard ran.</p>"
    worst = summary["shard_balance"]["worst"]
    head = f"<p>Worst slowest shard / mean shard: <b>{worst:.3f}</b> (1.000 is perfect balance).</p>" if worst else ""
    return "<h2>Shard balance (planned vs actual seconds per shard)</h2>" + head + "\n".join(charts)


def _balance_chart(combo: dict[str, Any]) -> str:
    shards = combo["shards"]
    scale = max([s["seconds"] for s in shards] + [s["planned_seconds"] for s in shards] + [1e-9])
    label_w, bar_w, bar_h, gap = 90, 620, 12, 10
    height = len(shards) * (2 * bar_h + gap) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 110}" height="{height}" role="img" '
        f'aria-label="shard balance of {_e(combo["name"])}">'
    ]
    y = 6
    for shard in shards:
        planned = bar_w * shard["planned_seconds"] / scale
        actual = bar_w * shard["seconds"] / scale
        parts.append(f'<text x="0" y="{y + bar_h + 4}" font-size="12" fill="#1f2328">shard {shard["index"]}</text>')
        parts.append(f'<rect x="{label_w}" y="{y}" width="{planned:.1f}" height="{bar_h}" fill="#9ecbff"/>')
        parts.append(
            f'<text x="{label_w + planned + 6:.1f}" y="{y + bar_h - 2}" font-size="11" fill="#57606a">'
            f"plan {_secs(shard['planned_seconds'])}</text>"
        )
        y += bar_h
        parts.append(f'<rect x="{label_w}" y="{y}" width="{actual:.1f}" height="{bar_h}" fill="#0550ae"/>')
        parts.append(
            f'<text x="{label_w + actual + 6:.1f}" y="{y + bar_h - 2}" font-size="11" fill="#1f2328">'
            f"actual {_secs(shard['seconds'])}</text>"
        )
        y += bar_h + gap
    parts.append(
        f'<rect x="{label_w}" y="{y + 4}" width="10" height="10" fill="#9ecbff"/>'
        f'<text x="{label_w + 14}" y="{y + 13}" font-size="11">planned</text>'
        f'<rect x="{label_w + 80}" y="{y + 4}" width="10" height="10" fill="#0550ae"/>'
        f'<text x="{label_w + 94}" y="{y + 13}" font-size="11">actual</text></svg>'
    )
    ratio = combo["shard_balance"]
    planned_ratio = combo["planned_balance"]
    caption = (
        f"<h3>{_e(combo['name'])}: slowest / mean = "
        f"<b>{'-' if ratio is None else f'{ratio:.3f}'}</b>"
        f'<span class="small"> (planned {"-" if planned_ratio is None else f"{planned_ratio:.3f}"})</span></h3>'
    )
    return caption + "".join(parts)


def _section_not_run(summary: dict[str, Any]) -> str:
    rows = [
        f'<tr><td>{_e(c["name"])}</td><td class="mono nodeid">{_e(n)}</td></tr>'
        for c in summary["combinations"]
        for n in c["not_run"]
    ]
    if not rows:
        return ""
    return (
        "<h2>Not run (no shard reported them)</h2><table><tr><th>combination</th><th>test</th></tr>"
        f"{_rows(rows, 2)}</table>"
    )
