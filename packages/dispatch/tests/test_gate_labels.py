"""Polling a PR's labels for the Merged label: transient failures are polls that saw nothing, a refusal stops early,
and the time spent is bounded by the policy's seconds whatever the server does."""

from __future__ import annotations

import time

from crcr.gate.labels import poll_github
from crcr.github import GitHub
from github_api import DROP, Fault, LocalGitHub

UP = "pytorch/pytorch"


def test_transient_failures_are_polls_that_saw_nothing() -> None:
    with LocalGitHub(token="t") as api:
        api.add_labels(UP, 5, "Merged")
        api.fail_next(Fault(503), Fault(DROP), Fault(429))
        seen = poll_github(GitHub(api.url, "t"), UP, 5, "Merged", seconds=5, interval=0.01)
    assert (seen.found, seen.polls) == (True, 4)
    assert seen.seconds < 5


def test_a_late_label_is_found() -> None:
    with LocalGitHub() as api:
        api.add_labels(UP, 5, "Merged", after=0.2)
        seen = poll_github(GitHub(api.url), UP, 5, "Merged", seconds=3, interval=0.05)
    assert seen.found
    assert 0.15 < seen.seconds < 3


def test_polling_ends_when_the_time_is_up() -> None:
    with LocalGitHub() as api:
        api.fail_next(*[Fault(500)] * 1000)
        start = time.monotonic()
        seen = poll_github(GitHub(api.url), UP, 5, "Merged", seconds=0.4, interval=0.05)
        took = time.monotonic() - start
    assert not seen.found
    assert "HTTP 500" in seen.error
    assert 0.4 <= took < 1.0


def test_a_refusal_stops_polling() -> None:
    with LocalGitHub(token="right") as api:
        seen = poll_github(GitHub(api.url, "wrong"), UP, 5, "Merged", seconds=5, interval=0.01)
    assert (seen.found, seen.polls) == (False, 1)
    assert "HTTP 401" in seen.error
