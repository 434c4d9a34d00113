"""The callback body, schema version "1": the received `client_payload` echoed, plus a `workflow` object.

Where the two optional extras go follows the upstream relay, not a guess: its verdict validator
(pytorch/test-infra `aws/lambda/cross_repo_ci_relay/utils/triage_verdict.py`) reads "the `workflow.triage_verdict`
value straight off the wire", and the action (`.github/actions/cross-repo-ci-relay-callback/action.yml`) passes
`failed-tests-detail` and `triage-verdict` side by side (`FAILED_TESTS_DETAIL`, `TRIAGE_VERDICT`). So both sit inside
`workflow`, as `workflow.failed_tests_detail` and `workflow.triage_verdict`. The verdict is shaped here to pass that
validator: enums checked, strings non-empty, `suspected_upstream` only for `upstream` and only with a PR number or a
hex commit, evidence links plain http(s), and the whole object at most 16 KB as the relay measures it
(`json.dumps`, ASCII-escaped), shrinking the evidence until it fits.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

SCHEMA_VERSION = "1"
Status = Literal["in_progress", "completed"]
#: GitHub's check-run conclusions.
CONCLUSIONS = ("success", "failure", "cancelled", "neutral", "skipped", "timed_out", "action_required", "stale")
SELF_REPORTS = ("nightly", "periodic")
UPSTREAM_REPO = "pytorch/pytorch"

MAX_FAILED_TESTS = 1000
MAX_MESSAGE = 1024
MAX_STACKTRACE = 4096
CATEGORIES = ("upstream", "backend", "infra", "flake", "unknown")
CONFIDENCES = ("high", "medium", "low")
#: 1 KB, kept within the relay's 1000-character caps so nothing it stores is cut again.
MAX_SUMMARY = 1000
MAX_EXCERPT = 1000
MAX_REASON = 300  # the relay's cap on suspected_upstream.reason
MAX_SHORT = 200  # the relay's cap on evidence job/test and analyzer fields
MAX_URL = 500
MAX_EVIDENCE = 10
MAX_VERDICT = 16 * 1024
MAX_PAYLOAD = 1024 * 1024  # GitHub caps client_payload near 65 KB; anything far past that is not one
_COMMIT = re.compile(r"^[0-9a-fA-F]{7,40}$")
_SHA = re.compile(r"^[0-9a-f]{40}$")


class CallbackError(ValueError):
    """Bad input for a callback: one line, said to the user as `error: ...`."""


def truncate_utf8(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, never inside a character."""
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


def iso_z(moment: datetime.datetime) -> str:
    """ISO-8601 in UTC with a `Z`, to the second."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Job:
    """The workflow run and job a callback speaks for."""

    name: str  # the workflow's name
    url: str  # the run's URL
    run_id: str
    run_attempt: str
    job_name: str
    check_run_id: str = ""

    def __post_init__(self) -> None:
        for field in ("name", "run_id", "run_attempt", "job_name"):
            if not getattr(self, field):
                raise CallbackError(f"the workflow's {field.replace('_', ' ')} is missing")
        if not self.run_id.isdigit() or not self.run_attempt.isdigit():
            raise CallbackError(f"run id and run attempt must be numbers, got {self.run_id!r} and {self.run_attempt!r}")


def job_name(base: str, matrix: Sequence[str]) -> str:
    """A matrix leg's name as GitHub writes it, `base (v1, v2)`, from `KEY=VALUE` items; `base` without any."""
    values = []
    for item in matrix:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise CallbackError(f"--matrix takes KEY=VALUE, got {item!r}")
        values.append(value.strip())
    return f"{base} ({', '.join(values)})" if values else base


def load_client_payload(text: str) -> dict[str, Any]:
    """The dispatch's `client_payload`: a JSON object with a `delivery_id` and an `event_type`."""
    if len(text.encode("utf-8", "replace")) > MAX_PAYLOAD:
        raise CallbackError(f"the client payload is over {MAX_PAYLOAD} bytes")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CallbackError(f"the client payload is not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(payload, dict):
        raise CallbackError("the client payload must be a JSON object")
    for key in ("delivery_id", "event_type"):
        if not isinstance(payload.get(key), str) or not payload[key].strip():
            raise CallbackError(f"the client payload has no {key} (a non-empty string)")
    if not isinstance(payload.get("payload", {}), dict):
        raise CallbackError("the client payload's payload must be a JSON object")
    return payload


def self_report(event_type: str, sha: str) -> dict[str, Any]:
    """The stand-in payload of a nightly or periodic run, keyed by the upstream commit it tested."""
    if event_type not in SELF_REPORTS:
        raise CallbackError(f"a self-report is nightly or periodic, got {event_type!r}")
    if not _SHA.match(sha):
        raise CallbackError(f"--sha must be a 40-character lower-case hex commit, got {sha[:60]!r}")
    return {
        "event_type": event_type,
        "delivery_id": sha,
        "payload": {"repository": {"full_name": UPSTREAM_REPO}, "head_sha": sha},
    }


def upstream_change(client_payload: Mapping[str, Any]) -> dict[str, Any]:
    """The upstream PR number and/or commit a dispatch is about ({} when it names neither)."""
    inner = client_payload.get("payload")
    if not isinstance(inner, Mapping):
        return {}
    found: dict[str, Any] = {}
    pr = inner.get("pull_request")
    if isinstance(pr, Mapping):
        number, head = pr.get("number"), pr.get("head")
        if isinstance(number, int) and not isinstance(number, bool) and number > 0:
            found["pr"] = number
        sha = head.get("sha") if isinstance(head, Mapping) else None
    else:
        sha = inner.get("after") or inner.get("head_sha")
    if isinstance(sha, str) and _COMMIT.match(sha) and sha.strip("0"):
        found["commit"] = sha
    return found


def workflow(
    job: Job,
    status: Status,
    now: datetime.datetime,
    *,
    conclusion: str | None = None,
    test_results: Mapping[str, int] | None = None,
    artifact_url: str = "",
    failed_tests: Sequence[Mapping[str, Any]] = (),
    verdict: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `workflow` object; a completed one needs a GitHub conclusion, an in-progress one carries none."""
    if status == "completed" and conclusion not in CONCLUSIONS:
        raise CallbackError(f"a completed callback needs a conclusion ({', '.join(CONCLUSIONS)}), got {conclusion!r}")
    stamp = iso_z(now)
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "conclusion": conclusion if status == "completed" else None,
        "name": job.name,
        "url": job.url,
        "run_id": str(job.run_id),
        "run_attempt": str(job.run_attempt),
        "job_name": job.job_name,
        "check_run_id": job.check_run_id or f"{job.run_id}-{job.run_attempt}",
        "started_at": stamp if status == "in_progress" else None,
        "completed_at": stamp if status == "completed" else None,
    }
    if status == "completed":
        if test_results is not None:
            body["test_results"] = {k: int(test_results[k]) for k in ("passed", "failed", "skipped", "total")}
        if failed_tests:
            body["failed_tests_detail"] = cap_failed_tests(failed_tests)
        if verdict:
            body["triage_verdict"] = cap_verdict(verdict)
    if artifact_url:
        body["artifact_url"] = artifact_url
    return body


def body(client_payload: Mapping[str, Any], workflow_object: Mapping[str, Any]) -> dict[str, Any]:
    """The POSTed body: the client payload, every key as received, plus `workflow`."""
    return {**client_payload, "workflow": dict(workflow_object)}


def cap_failed_tests(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """At most 1000 entries of {name, classname, message (1 KB), stacktrace (4 KB), duration}."""
    capped = []
    for entry in entries[:MAX_FAILED_TESTS]:
        item: dict[str, Any] = {"name": str(entry["name"])}
        for key, limit in (("classname", MAX_SHORT * 5), ("message", MAX_MESSAGE), ("stacktrace", MAX_STACKTRACE)):
            if entry.get(key):
                item[key] = truncate_utf8(str(entry[key]), limit)
        if entry.get("duration") is not None:
            item["duration"] = round(float(entry["duration"]), 3)
        capped.append(item)
    return capped


def cap_verdict(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """A schema-1 verdict the relay will keep: checked, each field within its cap, the whole within 16 KB."""
    category, confidence = verdict.get("category"), verdict.get("confidence")
    if category not in CATEGORIES or confidence not in CONFIDENCES:
        raise CallbackError(f"a triage verdict needs a known category and confidence, got {category!r}/{confidence!r}")
    summary = truncate_utf8(str(verdict.get("summary") or "").strip(), MAX_SUMMARY).strip()
    out: dict[str, Any] = {
        "schema_version": 1,
        "category": category,
        "confidence": confidence,
        "summary": summary or f"classified {category}",
    }
    suspect = _suspect(verdict.get("suspected_upstream")) if category == "upstream" else {}
    if suspect:
        out["suspected_upstream"] = suspect
    evidence = [e for e in (_evidence(item) for item in verdict.get("evidence") or ()) if e][:MAX_EVIDENCE]
    if evidence:
        out["evidence"] = evidence
    if isinstance(verdict.get("reproduced_on_retry"), bool):
        out["reproduced_on_retry"] = verdict["reproduced_on_retry"]
    analyzer = _strings(verdict.get("analyzer") or {}, ("name", "version", "model", "prompt_version"), MAX_SHORT)
    if analyzer:
        out["analyzer"] = analyzer
    if verdict.get("analyzed_at"):
        out["analyzed_at"] = str(verdict["analyzed_at"])
    while len(json.dumps(out).encode()) > MAX_VERDICT and out.get("evidence"):
        out["evidence"].pop()
        if not out["evidence"]:
            del out["evidence"]
    return out


def _suspect(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        return {}
    found: dict[str, Any] = {}
    pr = raw.get("pr")
    if isinstance(pr, int) and not isinstance(pr, bool) and pr > 0:
        found["pr"] = pr
    if isinstance(raw.get("commit"), str) and _COMMIT.match(raw["commit"]):
        found["commit"] = raw["commit"]
    if not found:  # the relay drops a suspicion that names neither
        return {}
    reason = truncate_utf8(str(raw.get("reason") or "").strip(), MAX_REASON).strip()
    return {**found, "reason": reason} if reason else found


def _evidence(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    entry = _strings(raw, ("job", "test"), MAX_SHORT) | _strings(raw, ("excerpt",), MAX_EXCERPT)
    url = str(raw.get("log_url") or "")
    if url and len(url) <= MAX_URL and _plain_url(url):
        entry["log_url"] = url
    return entry


def _strings(raw: Mapping[str, Any], keys: Sequence[str], limit: int) -> dict[str, str]:
    found = {}
    for key in keys:
        text = truncate_utf8(str(raw.get(key) or "").strip(), limit).strip()
        if text:
            found[key] = text
    return found


def _plain_url(url: str) -> bool:
    """An http(s) URL with a host, no user info and no whitespace or control characters (as the relay demands)."""
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and "@" not in parts.netloc
