"""The job ledger: one small JSON state file per job key, so a job sends `in_progress` at most once and, once
started, `completed` exactly once.

The key is the relay's: (delivery_id, repo, run_id, run_attempt, job_name). A state is recorded only after the relay
accepted the callback, under an exclusive lock on the key's file, so two steps of one job cannot race.

A 400 `duplicate` for in_progress means the relay already holds it (another step sent it, or a retried request whose
first answer was lost): recorded, not a failure. `already-completed` is taken as held only when this send was
retried, so the relay's first copy can be its own; on a first try it means something else completed the job, and
the results sent now are not stored: an error. So is `timed-out`, the relay's sweeper having closed the job first.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from crcr import http

IN_PROGRESS = "in_progress"
COMPLETED = "completed"
#: The relay's rule names for a state it already has.
ALREADY_RULES = {IN_PROGRESS: "duplicate", COMPLETED: "already-completed"}
#: Rules that mean the relay will never store this job's callback, and why, as the error says it.
REFUSALS = {
    "timed-out": "the relay's sweeper closed this job as timed_out first",
    "already-completed": "the relay already holds completed for this job from another sender",
}


@dataclass(frozen=True)
class Key:
    """The relay's per-job key."""

    delivery_id: str
    repo: str
    run_id: str
    run_attempt: str
    job_name: str

    def file_name(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()
        return f"{digest[:32]}.json"


def default_dir(env: Mapping[str, str]) -> Path:
    """`$RUNNER_TEMP/crcr-callbacks` in GitHub Actions, else `.tributary/callbacks`."""
    return Path(env["RUNNER_TEMP"]) / "crcr-callbacks" if env.get("RUNNER_TEMP") else Path(".tributary/callbacks")


class Ledger:
    """The state files in one directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def state(self, key: Key) -> dict[str, str]:
        """The recorded state of `key` ({} when nothing was sent)."""
        path = self.root / key.file_name()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # a torn or foreign file says nothing was recorded; the relay's state machine is the backstop
        return data.get("sent", {}) if isinstance(data, dict) and data.get("key") == asdict(key) else {}

    @contextmanager
    def locked(self, key: Key) -> Iterator[None]:
        """Hold the key's lock (other processes wait)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{key.file_name()}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def record(self, key: Key, status: str) -> None:
        """Note that the relay has `status` for `key` (written whole, through a temporary file)."""
        sent = {**self.state(key), status: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
        path = self.root / key.file_name()
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps({"key": asdict(key), "sent": sent}, sort_keys=True) + "\n", encoding="utf-8")
        scratch.replace(path)


Send = Callable[[], None]


def start(ledger: Ledger, key: Key, send_in_progress: Send) -> list[str]:
    """Send in_progress unless this job already did (or already completed); what happened, one line per step."""
    with ledger.locked(key):
        sent = ledger.state(key)
        if sent:
            return [f"{IN_PROGRESS} not sent: this job already sent {', '.join(sorted(sent))}"]
        return [_send(ledger, key, IN_PROGRESS, send_in_progress)]


def finish(ledger: Ledger, key: Key, send_in_progress: Send | None, send_completed: Send) -> list[str]:
    """Send completed once; first in_progress when none was recorded and `send_in_progress` is given (the relay
    refuses a completed that was never in progress)."""
    with ledger.locked(key):
        sent = ledger.state(key)
        if COMPLETED in sent:
            return [f"{COMPLETED} not sent: this job already completed"]
        steps = []
        if IN_PROGRESS not in sent and send_in_progress is not None:
            steps.append(_send(ledger, key, IN_PROGRESS, send_in_progress))
        steps.append(_send(ledger, key, COMPLETED, send_completed))
        return steps


def _send(ledger: Ledger, key: Key, status: str, send: Send) -> str:
    try:
        send()
    except http.HTTPError as exc:
        rule = _rule(exc)
        held_as_retry = rule == ALREADY_RULES[status] and (status == IN_PROGRESS or exc.attempts > 1)
        if held_as_retry:
            ledger.record(key, status)
            return f"{status} already held by the relay ({_why(status)}): recorded"
        if rule in REFUSALS:
            raise http.HTTPError(f"{status} not stored: {REFUSALS[rule]} ({exc})", exc.status, exc.body) from None
        raise
    ledger.record(key, status)
    return f"{status} sent"


def _rule(exc: http.HTTPError) -> str:
    """The relay's rule name in a 400's JSON body ("" for anything else)."""
    try:
        body = json.loads(exc.body)
    except ValueError:
        return ""
    return str(body.get("rule", "")) if exc.status == 400 and isinstance(body, dict) else ""


def _why(status: str) -> str:
    return "a retried request" if status == COMPLETED else "sent by another step, or a retried request"
