"""The label race: PyTorch's merge bot closes a PR, lands it, and only then adds `Merged`, so the `closed` dispatch
can arrive before the label. Poll the PR's labels for a bounded time before deciding it did not land.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from crcr.github import GitHub
from crcr.http import HTTPError, Retry


@dataclass(frozen=True)
class Poll:
    """What polling saw: whether the label came, after how many requests and seconds, and the last failure."""

    found: bool
    polls: int
    seconds: float
    error: str = ""


def poll_label(
    fetch: Callable[[float], list[str]],
    label: str,
    seconds: float,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Poll:
    """Call `fetch(timeout)` until its labels hold `label` or `seconds` have passed (0: do not poll).

    A transient failure is one more poll that did not see the label; a refusal (401, 403, 404) ends polling early,
    since asking again will not change it.
    """
    start, polls, error = clock(), 0, ""
    while seconds > 0:
        left = seconds - (clock() - start)
        if left <= 0:
            break
        polls += 1
        try:
            if label in fetch(max(left, 0.1)):
                return Poll(True, polls, clock() - start)
        except HTTPError as exc:
            error = str(exc)
            if exc.status is not None:
                break
        sleep(max(min(interval, seconds - (clock() - start)), 0))
    return Poll(False, polls, clock() - start, error)


def poll_github(github: GitHub, repo: str, number: int, label: str, seconds: float, interval: float) -> Poll:
    """poll_label on `GET /repos/{repo}/issues/{number}/labels`, one attempt per poll (the loop is the retry)."""
    return poll_label(
        lambda timeout: github.issue_labels(repo, number, retry=Retry(attempts=1), timeout=timeout),
        label, seconds, interval,
    )  # fmt: skip
