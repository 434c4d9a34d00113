"""What a callback body must look like (schema_version "1"), checked before any state is touched.

A structural error in the body is a 400 naming the rule. The two optional extras are different: upstream's relay
drops a triage verdict (and here also a failed-tests detail) that breaks a rule and keeps the callback, so they
come back as a value or as a note saying why they were dropped.

Where the extras travel: `workflow.triage_verdict` and `workflow.failed_tests_detail` (the action's inputs
`triage-verdict` and `failed-tests-detail`, in the `workflow` object beside the other per-job fields).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

IN_PROGRESS = "in_progress"
COMPLETED = "completed"
DISPATCHED_EVENTS = frozenset({"pull_request", "push"})
SELF_REPORTED_EVENTS = frozenset({"nightly", "periodic"})
CONCLUSIONS = frozenset(
    {"success", "failure", "cancelled", "skipped", "timed_out", "action_required", "neutral", "stale",
     "startup_failure"}
)  # fmt: skip
UPSTREAM = "pytorch/pytorch"
SHA = re.compile(r"[0-9a-f]{40}")
ISO_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
TEST_COUNTS = ("passed", "failed", "skipped", "total")
WORKFLOW_STRINGS = ("name", "url", "run_attempt", "job_name", "check_run_id")

#: The triage verdict's caps and vocabulary (contract: "Optional extras accepted by the action").
CATEGORIES = frozenset({"upstream", "backend", "infra", "flake", "unknown"})
CONFIDENCES = frozenset({"high", "medium", "low"})
VERDICT_KEYS = frozenset(
    {"schema_version", "category", "confidence", "summary", "suspected_upstream", "evidence", "reproduced_on_retry",
     "analyzer", "analyzed_at"}
)  # fmt: skip
VERDICT_MAX = 16 * 1024
SUMMARY_MAX = 1024
EVIDENCE_MAX = 10
EXCERPT_MAX = 1024
#: The failed-tests detail's caps.
DETAIL_MAX = 1000
DETAIL_KEYS = frozenset({"name", "classname", "message", "stacktrace", "duration"})
MESSAGE_MAX = 1024
STACKTRACE_MAX = 4 * 1024


class Rejected(Exception):
    """A callback the relay refuses with 400: `rule` is a stable name, the message says what broke it."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class Callback:
    """A checked callback: the key fields, what gets stored, and notes on any extra that was dropped."""

    delivery_id: str
    event_type: str
    payload: Mapping[str, Any]
    workflow: Mapping[str, Any]
    verdict: Mapping[str, Any] | None
    failed_tests: list[Any] | None
    notes: tuple[str, ...]

    @property
    def status(self) -> str:
        return self.workflow["status"]

    @property
    def self_reported(self) -> bool:
        """A nightly or periodic run reports without a dispatch."""
        return self.event_type in SELF_REPORTED_EVENTS

    def field(self, name: str, default: str = "") -> str:
        """A workflow string field, `default` when absent."""
        value = self.workflow.get(name)
        return default if value is None else value


def _size(value: Any) -> int:
    return len(value.encode()) if isinstance(value, str) else len(json.dumps(value).encode())


def _is_time(value: Any) -> bool:
    if not isinstance(value, str) or not ISO_Z.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check(body: Any) -> Callback:
    """The callback in `body`, or Rejected naming the first rule it breaks."""
    if not isinstance(body, Mapping):
        raise Rejected("body", "the body must be a JSON object")
    workflow = body.get("workflow")
    if not isinstance(workflow, Mapping):
        raise Rejected("missing-field", "workflow is missing or not an object")
    for name, value in (("delivery_id", body.get("delivery_id")), ("workflow.status", workflow.get("status")),
                        ("workflow.run_id", workflow.get("run_id"))):  # fmt: skip
        if not isinstance(value, str) or not value:
            raise Rejected("missing-field", f"{name} is missing or not a non-empty string")
    event_type, payload = body.get("event_type"), body.get("payload")
    if event_type not in DISPATCHED_EVENTS | SELF_REPORTED_EVENTS:
        raise Rejected("event-type", f"event_type must be one of pull_request, push, nightly, periodic: {event_type!r}")
    if not isinstance(payload, Mapping):
        raise Rejected("missing-field", "payload is missing or not an object")
    _check_workflow(workflow)
    if event_type in SELF_REPORTED_EVENTS:
        _check_self_report(body["delivery_id"], payload, workflow)
    verdict, verdict_note = _extra(workflow, "triage_verdict", _verdict_problem)
    failed, failed_note = _extra(workflow, "failed_tests_detail", _detail_problem)
    notes = tuple(note for note in (verdict_note, failed_note) if note)
    return Callback(body["delivery_id"], event_type, payload, workflow, verdict, failed, notes)


def _check_workflow(workflow: Mapping[str, Any]) -> None:
    if workflow.get("schema_version") != "1":
        raise Rejected("schema-version", f'workflow.schema_version must be "1": {workflow.get("schema_version")!r}')
    status, conclusion = workflow["status"], workflow.get("conclusion")
    if status not in (IN_PROGRESS, COMPLETED):
        raise Rejected("status", f"workflow.status must be in_progress or completed: {status!r}")
    if status == IN_PROGRESS and conclusion is not None:
        raise Rejected("conclusion", "workflow.conclusion must be null while in_progress")
    if status == COMPLETED and conclusion not in CONCLUSIONS:
        raise Rejected("conclusion", f"workflow.conclusion must be a GitHub conclusion when completed: {conclusion!r}")
    timed, other = ("started_at", "completed_at") if status == IN_PROGRESS else ("completed_at", "started_at")
    if not _is_time(workflow.get(timed)):
        raise Rejected("times", f"workflow.{timed} must be an ISO-8601 UTC time ending in Z when {status}")
    if workflow.get(other) is not None:
        raise Rejected("times", f"workflow.{other} must be null when {status}")
    for name in WORKFLOW_STRINGS:
        if workflow.get(name) is not None and not isinstance(workflow[name], str):
            raise Rejected("type", f"workflow.{name} must be a string")
    results = workflow.get("test_results")
    if results is not None:
        if not isinstance(results, Mapping) or set(results) != set(TEST_COUNTS):
            raise Rejected("test-results", "workflow.test_results must be {passed, failed, skipped, total}")
        if not all(_is_count(results[k]) for k in TEST_COUNTS):
            raise Rejected("test-results", "workflow.test_results counts must be non-negative integers")
        if results["passed"] + results["failed"] + results["skipped"] > results["total"]:
            raise Rejected("test-results", "workflow.test_results: passed + failed + skipped exceeds total")
    url = workflow.get("artifact_url")
    if url is not None and not (isinstance(url, str) and re.match(r"https?://", url)):
        raise Rejected("artifact-url", "workflow.artifact_url must be an http(s) URL")


def _check_self_report(delivery_id: str, payload: Mapping[str, Any], workflow: Mapping[str, Any]) -> None:
    if workflow["status"] != COMPLETED:
        raise Rejected("self-report", "a nightly or periodic self-report may only send status completed")
    repository = payload.get("repository")
    if not isinstance(repository, Mapping) or repository.get("full_name") != UPSTREAM:
        raise Rejected("self-report", f"a self-report's payload.repository.full_name must be {UPSTREAM}")
    if not SHA.fullmatch(delivery_id) or payload.get("head_sha") != delivery_id:
        raise Rejected("self-report", "a self-report's delivery_id must be the upstream sha, equal to payload.head_sha")


def _extra(workflow: Mapping[str, Any], name: str, problem: Callable[[Any], str]) -> tuple[Any, str]:
    """(the extra, "") when absent or sound; (None, why) when it breaks a rule and is dropped."""
    value = workflow.get(name)
    if value is None:
        return None, ""
    why = problem(value)
    return (None, f"{name} dropped: {why}") if why else (value, "")


def _strings(value: Any, keys: frozenset[str]) -> bool:
    return isinstance(value, Mapping) and set(value) <= keys and all(isinstance(v, str) for v in value.values())


def _verdict_problem(verdict: Any) -> str:
    """The first rule the triage verdict breaks, "" if none."""
    if not isinstance(verdict, Mapping):
        return "not an object"
    if _size(verdict) > VERDICT_MAX:
        return f"over {VERDICT_MAX} bytes"
    if unknown := set(verdict) - VERDICT_KEYS:
        return f"unknown keys {sorted(unknown)}"
    if verdict.get("schema_version") != 1 or isinstance(verdict.get("schema_version"), bool):
        return "schema_version must be 1"
    if verdict.get("category") not in CATEGORIES:
        return "category must be upstream, backend, infra, flake or unknown"
    if verdict.get("confidence") not in CONFIDENCES:
        return "confidence must be high, medium or low"
    if not isinstance(verdict.get("summary"), str) or _size(verdict["summary"]) > SUMMARY_MAX:
        return f"summary must be a string of at most {SUMMARY_MAX} bytes"
    if "suspected_upstream" in verdict:
        if verdict["category"] != "upstream":
            return "suspected_upstream is only for category upstream"
        suspect = verdict["suspected_upstream"]
        if not isinstance(suspect, Mapping) or set(suspect) - {"pr", "commit", "reason"}:
            return "suspected_upstream must be {pr, commit, reason}"
    evidence = verdict.get("evidence", [])
    if not isinstance(evidence, list) or len(evidence) > EVIDENCE_MAX:
        return f"evidence must be a list of at most {EVIDENCE_MAX}"
    for item in evidence:
        if not _strings(item, frozenset({"job", "test", "log_url", "excerpt"})):
            return "each evidence must be {job, test, log_url, excerpt} strings"
        if _size(item.get("excerpt", "")) > EXCERPT_MAX:
            return f"an evidence excerpt is over {EXCERPT_MAX} bytes"
    if not isinstance(verdict.get("reproduced_on_retry", False), bool):
        return "reproduced_on_retry must be a boolean"
    if "analyzer" in verdict and not _strings(verdict["analyzer"], frozenset({"name", "version", "model",
                                                                             "prompt_version"})):  # fmt: skip
        return "analyzer must be {name, version, model, prompt_version} strings"
    if "analyzed_at" in verdict and not _is_time(verdict["analyzed_at"]):
        return "analyzed_at must be an ISO-8601 UTC time"
    return ""


def _detail_problem(detail: Any) -> str:
    """The first rule the failed-tests detail breaks, "" if none."""
    if not isinstance(detail, list) or len(detail) > DETAIL_MAX:
        return f"must be a list of at most {DETAIL_MAX} entries"
    for entry in detail:
        if not isinstance(entry, Mapping) or set(entry) - DETAIL_KEYS:
            return "each entry must be {name, classname, message, stacktrace, duration}"
        if not all(isinstance(entry.get(k, ""), str) for k in ("name", "classname", "message", "stacktrace")):
            return "name, classname, message and stacktrace must be strings"
        duration = entry.get("duration", 0)
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            return "duration must be a number"
        if _size(entry.get("message", "")) > MESSAGE_MAX or _size(entry.get("stacktrace", "")) > STACKTRACE_MAX:
            return f"a message is over {MESSAGE_MAX} bytes or a stacktrace over {STACKTRACE_MAX}"
    return ""
