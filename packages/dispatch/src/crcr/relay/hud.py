"""The HUD page: one repo's runs per delivery and job, static HTML with inline CSS.

Every stored string came from a webhook or a callback, so all of it is hostile: each one is escaped, and only
http(s) URLs become links.
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:20px}h2{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;width:100%;margin-bottom:8px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td.time{white-space:nowrap}
th{background:#f6f8fa}.meta{color:#59636e}.empty{color:#59636e;font-style:italic}
.success{background:#dafbe1}.failure,.timed_out,.startup_failure{background:#ffebe9}
.cancelled,.skipped,.neutral{background:#eaeef2}.in_progress{background:#fff8c5}
code{font-size:12px}
"""
COLUMNS = ("job", "workflow", "status", "conclusion", "passed", "failed", "skipped", "total", "verdict", "started",
           "completed", "report")  # fmt: skip


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _link(url: Any, text: str) -> str:
    """A link when `url` is http(s), else the escaped text alone (a `javascript:` URL never becomes a link). A run
    report this relay serves (`.../reports/...`) links relative to the page, so it still opens when a later relay
    serves the same database on another port."""
    if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
        path = urllib.parse.urlsplit(url).path
        return f'<a href="{_e(path if path.startswith("/reports/") else url)}">{_e(text)}</a>'
    return _e(text)


def _upstream(event_type: str, payload: Mapping[str, Any]) -> str:
    """What upstream change the delivery is about: the PR and its head, the pushed ref, or the nightly sha."""
    pr = payload.get("pull_request")
    if event_type == "pull_request" and isinstance(pr, Mapping):
        head = pr.get("head") if isinstance(pr.get("head"), Mapping) else {}
        title = f"PR #{pr.get('number')} {pr.get('title') or ''}".strip()
        return (
            f"{_link(pr.get('html_url'), title)} ({_e(payload.get('action'))}) head <code>{_e(head.get('sha'))}</code>"
        )
    if event_type == "push":
        before, after = _e(payload.get("before")), _e(payload.get("after"))
        return f"push {_e(payload.get('ref'))} <code>{before}</code> &rarr; <code>{after}</code>"
    return f"{_e(event_type)} <code>{_e(payload.get('head_sha'))}</code>"


def _verdict(verdict: Any, notes: Iterable[str]) -> str:
    """The verdict's category, confidence and summary, then the relay's notes (a dropped verdict, the sweeper)."""
    shown = [_e(note) for note in notes]
    if isinstance(verdict, Mapping):
        shown.insert(
            0, f"<b>{_e(verdict.get('category'))}</b> ({_e(verdict.get('confidence'))}) {_e(verdict.get('summary'))}"
        )
    return "<br>".join(shown)


def _row(job: Mapping[str, Any]) -> str:
    counts = job.get("test_results") or {}
    state = job.get("conclusion") or ("in_progress" if job["status"] == "IN_PROGRESS" else "")
    cells = [
        _e(job["job_name"]),
        _link(job.get("url"), job.get("workflow_name") or f"run {job['run_id']}"),
        _e(job["status"]),
        _e(job.get("conclusion")),
        *(_e(counts.get(k)) for k in ("passed", "failed", "skipped", "total")),
        _verdict(job.get("verdict"), job.get("notes") or []),
        _e(job.get("started_at")),
        _e(job.get("completed_at")),
        _link(job.get("artifact_url"), "run report") if job.get("artifact_url") else "",
    ]
    timed = {len(cells) - 3, len(cells) - 2}
    tds = "".join(f'<td class="time">{c}</td>' if i in timed else f"<td>{c}</td>" for i, c in enumerate(cells))
    return f'<tr class="{_e(state)}">{tds}</tr>'


def _delivery(delivery: Mapping[str, Any]) -> str:
    when = datetime.fromtimestamp(delivery["dispatched_at"], UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    how = "self-reported" if delivery["self_reported"] else "dispatched"
    head = (f"<h2>{_upstream(delivery['event_type'], delivery['payload'])}</h2>"
            f'<p class="meta">delivery <code>{_e(delivery["delivery_id"])}</code> &middot; {_e(delivery["event_type"])}'
            f" &middot; {how} {when}</p>")  # fmt: skip
    if not delivery["jobs"]:
        return head + '<p class="empty">dispatched; no callback yet</p>'
    header = "".join(f"<th>{name}</th>" for name in COLUMNS)
    rows = "".join(_row(job) for job in delivery["jobs"])
    return f"{head}<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"


def page(repo: str, deliveries: list[Mapping[str, Any]]) -> str:
    """The HUD page of one downstream repo, newest delivery first."""
    body = "".join(_delivery(d) for d in deliveries) or '<p class="empty">no deliveries for this repository</p>'
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>CRCR HUD: {_e(repo)}</title>'
            f"<style>{STYLE}</style></head><body><h1>CRCR HUD: {_e(repo)}</h1>{body}</body></html>")  # fmt: skip


def index(repos: list[str]) -> str:
    """A page linking each allowlisted repo's HUD."""
    items = "".join(f'<li><a href="/hud/{_e(repo)}">{_e(repo)}</a></li>' for repo in repos)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>CRCR relay</title>'
            f"<style>{STYLE}</style></head><body><h1>CRCR relay</h1><ul>{items}</ul></body></html>")  # fmt: skip
