"""The callback state machine per job key (delivery_id, repo, run_id, run_attempt, job_name).

DISPATCHED (the delivery was sent to the repo, no callback yet) -> IN_PROGRESS -> COMPLETED. Anything else is a 400
naming the rule, because a relay that accepted it would show a run that never happened, or the same run twice.
Self-reported nightly/periodic runs were never dispatched and send only `completed`.

A job the sweeper closed refuses what comes later with its own rule, `timed-out`, not `already-completed`: a
client treats `already-completed` as its own retried request having landed, while a late completed lost its result.
"""

from __future__ import annotations

from datetime import UTC, datetime

from crcr.relay.validate import COMPLETED, IN_PROGRESS, Rejected

DISPATCHED = "DISPATCHED"
STATE_IN_PROGRESS = "IN_PROGRESS"
STATE_COMPLETED = "COMPLETED"


def transition(
    current: str | None, status: str, *, dispatched: bool, self_reported: bool, swept_at: float | None = None
) -> str:
    """The job's next state for a callback with `status`, given its current one (None: no callback yet) and when
    the sweeper closed it (None: it did not)."""
    if not dispatched and not self_reported:
        raise Rejected("no-dispatch", "no dispatch of this delivery_id to this repository")
    if current == STATE_COMPLETED and swept_at is not None:
        when = datetime.fromtimestamp(swept_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise Rejected("timed-out", f"{status} too late: the sweeper closed this job as timed_out at {when}")
    if current == STATE_COMPLETED:
        raise Rejected("already-completed", f"{status} after this job already completed")
    if status == IN_PROGRESS:
        if current == STATE_IN_PROGRESS:
            raise Rejected("duplicate", "a second in_progress for this job")
        return STATE_IN_PROGRESS
    if status == COMPLETED and current is None and not self_reported:
        raise Rejected("completed-without-in-progress", "completed for a job that never sent in_progress")
    return STATE_COMPLETED
