"""Failure classification: who each failing test is blamed on, said from the run's facts alone.

The facts, read from the test's own failure and captured output (never a neighbour's lines in a shard log), in
the order they decide: the retry outcome (passed on a retry: `flake`), a crash with a signal (the device killed the
process: `backend`), transient infrastructure errors (`infra`), the device profile's transient errors (`infra`), the
other device-fatal patterns (a crash, a hang: `backend`), the profile's refusals (the device declines the work, every
time: `backend`, never out of memory), out of memory (`backend`), an attribution already made (`follows`), then
which candidates moved since the combination's last green run. Each classification says which fact decided
and carries a short excerpt as evidence, because a verdict nobody can check is not triage.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from crcr.ci.model import Candidate, Classification, Combination, FailureClass, TestOutcome

EVIDENCE_LIMIT = 300
KINDS: tuple[str, ...] = ("backend", "core", "suite")
#: The worst class wins the triage verdict.
SEVERITY: tuple[FailureClass, ...] = ("backend", "upstream", "infra", "unknown", "flake")

#: Transient infrastructure errors: the machine, the network or the runner failed, not the code under test.
INFRA_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(pattern, re.IGNORECASE))
    for label, pattern in (
        ("connection refused", r"connection refused|ECONNREFUSED|\[Errno 111\]"),
        ("connection reset", r"connection reset|ECONNRESET|\[Errno 104\]|broken pipe|\[Errno 32\]"),
        ("no space left on device", r"no space left on device|ENOSPC|\[Errno 28\]"),
        ("too many open files", r"too many open files|EMFILE|\[Errno 24\]"),
        ("a lost worker", r"worker\b[^\n]{0,40}\blost|lost (?:connection to )?(?:the )?worker|node down"),
        (
            "a package network error",
            r"(?:pip|uv)[^\n]{0,80}(?:network|connection|timed? ?out|temporary failure|could not fetch|"
            r"failed to (?:download|fetch))|ReadTimeoutError|Temporary failure in name resolution|"
            r"Max retries exceeded",
        ),
    )
)
_SIGNAL = re.compile(
    r"\b(SIG(?:SEGV|ABRT|BUS|ILL|FPE|KILL|TERM))\b|signal (\d+)|Segmentation fault|core dumped|Fatal Python error"
)
_OOM = re.compile(r"out of memory|MemoryError|OutOfMemory", re.IGNORECASE)


@dataclass(frozen=True)
class DevicePatterns:
    """What a device's own failures look like, from its profile (the pipeline names no device): `transient` errors
    that a retry may clear (infra), and `refusal`s, the device declining work it cannot do, every time (backend,
    never out of memory)."""

    transient: tuple[str, ...] = ()
    refusal: tuple[str, ...] = ()

    def first(self, kind: str, text: str) -> re.Match[str] | None:
        """The first match in `text` of this kind's patterns."""
        for pattern in getattr(self, kind):
            if found := re.search(pattern, text):
                return found
        return None


def moved_since(current: Combination, last_green: Combination | None) -> set[str]:
    """The candidate kinds whose sha differs from the last green run; all three when there is none (everything is
    new to a combination that was never green)."""
    if last_green is None:
        return set(KINDS)
    return {kind for kind in KINDS if _candidate(current, kind).sha != _candidate(last_green, kind).sha}


def classify(
    test: TestOutcome, moved: set[str], log_excerpt: str = "", probes: str = "", device: DevicePatterns | None = None
) -> Classification:
    """Why `test` failed (or flaked), with the fact used as the reason and an excerpt as evidence, from the test's
    own failure and captured output; `probes` says which probe runs an attribution (`test.follows`) rests on and
    `device` what the device's transient errors and refusals look like."""
    device = device or DevicePatterns()
    message = failure_text(test)
    text = f"{message}\n{log_excerpt}" if log_excerpt else message
    attempts = " -> ".join(test.attempts)
    if test.flaky:
        return Classification("flake", f"failed, then passed on a retry ({attempts})", _excerpt(text))
    signal = "" if test.outcome == "timeout" else _signal(test, text)  # a hang killed by the runner is a hang
    if signal:
        return Classification("backend", f"the test process crashed with {signal} (device-fatal)", _excerpt(text))
    for label, pattern in INFRA_PATTERNS:
        found = pattern.search(text)
        if found:
            reason = f"transient infrastructure error: {label}"
            return Classification("infra", reason, _excerpt(text, found.start()))
    if found := device.first("transient", text):
        reason = f"a transient device error ({found.group(0)}, a transient error of this device's profile)"
        return Classification("infra", reason, _excerpt(text, found.start()))
    if test.outcome == "crashed":
        return Classification("backend", "the test process crashed (device-fatal)", _excerpt(text))
    if test.outcome == "timeout":
        return Classification("backend", "the test hung until its timeout (device-fatal)", _excerpt(text))
    if found := device.first("refusal", text):
        reason = f"the device refused the work ({found.group(0)}: a deterministic refusal, not out of memory)"
        return Classification("backend", reason, _excerpt(text, found.start()))
    found = _OOM.search(text)
    if found:
        reason = f"the device ran out of memory ({found.group(0)}, device-fatal)"
        return Classification("backend", reason, _excerpt(text, found.start()))
    retried = f" and failed on every retry ({attempts})" if len(test.attempts) > 1 else ""
    if test.follows:
        klass: FailureClass = "backend" if test.follows == "backend" else "upstream"
        reason = f"it passes with only the {test.follows} pinned back to its last-green version{retried}"
        reason += f" ({probes})" if probes else ""
        return Classification(klass, reason, _excerpt(text))
    return _by_moved(moved, retried, _excerpt(text))


def _by_moved(moved: set[str], retried: str, evidence: str) -> Classification:
    names = ", ".join(kind for kind in KINDS if kind in moved)
    if not moved:
        return Classification("unknown", f"no candidate moved since the last green run{retried}", evidence)
    if "backend" not in moved:
        who = "the core (torch)" if names == "core" else "the suite" if names == "suite" else "the core and the suite"
        return Classification("upstream", f"only {who} moved since the last green run{retried}", evidence)
    if moved == {"backend"}:
        return Classification("backend", f"only the backend moved since the last green run{retried}", evidence)
    return Classification(
        "unknown",
        f"several candidates moved since the last green run ({names}) and none is attributed yet{retried}",
        evidence,
    )


def verdict(classes: Iterable[FailureClass | Classification | str]) -> str:
    """The relay's triage field: the worst class present (backend > upstream > infra > unknown > flake), "" if none."""
    found = {c.klass if isinstance(c, Classification) else c for c in classes}
    for klass in SEVERITY:
        if klass in found:
            return klass
    return ""


def failure_text(test: TestOutcome) -> str:
    """The failure's facts as one text: type, message, where it was raised, and the cause it was raised from."""
    parts: list[str] = []
    for facts in (test.failure, test.failure.get("cause") if isinstance(test.failure.get("cause"), dict) else None):
        if not facts:
            continue
        kind, message = str(facts.get("type") or ""), str(facts.get("message") or "")
        head = message if not kind or message.startswith(kind) else f"{kind}: {message}" if message else kind
        if head:
            parts.append(head)
        for key in ("signal", "raised_at", "longrepr", "log", "output"):
            if facts.get(key):
                parts.append(f"{key}: {facts[key]}")
    return "\n".join(parts)


def _signal(test: TestOutcome, text: str) -> str:
    """The signal that killed the test, from the failure facts or the text ("" if there is none)."""
    value = test.failure.get("signal")
    if value not in (None, "", 0):
        return str(value) if str(value).startswith("SIG") else f"signal {value}"
    found = _SIGNAL.search(text)
    if found is None:
        return ""
    if found.group(1):
        return found.group(1)
    if found.group(2):
        return f"signal {found.group(2)}"
    return found.group(0).lower()


def _excerpt(text: str, at: int = 0) -> str:
    """At most EVIDENCE_LIMIT characters of `text`, from the line holding `at` on, whitespace collapsed."""
    start = text.rfind("\n", 0, at) + 1
    piece = " ".join(text[start:].split())
    if not piece:
        piece = " ".join(text.split())
    return piece if len(piece) <= EVIDENCE_LIMIT else piece[: EVIDENCE_LIMIT - 3] + "..."


def _candidate(combination: Combination, kind: str) -> Candidate:
    return getattr(combination, kind)
