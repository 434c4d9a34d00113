"""The environment upstream test code runs in (collection, shards, retries): an allow-list, never the host's.

The suite is upstream's test/ tree at the dispatched commit, a PR's head for labelled PRs: whatever its files can
read they can use. The host's credentials (`ACTIONS_ID_TOKEN_REQUEST_*`, `GITHUB_TOKEN`, `CRCR_*`), and what would
change what a test does without being recorded (`PYTHONPATH`, `PYTEST_ADDOPTS`, a device's fault switches) stay
out. A shard gets what a process needs to run at all, the names the device profile passes on, and what the
pipeline sets itself (the backend's import path, a fault test's variables).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from crcr.credentials import is_credential

#: What any process needs from the host: where programs are, whose home, which locale and time zone, scratch space.
BASE = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "TERM")


def matching(host: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    """The host's variables that a name or shell pattern names, never a credential even when a pattern matches."""
    chosen = tuple(patterns)
    return {k: v for k, v in host.items() if any(fnmatch.fnmatchcase(k, p) for p in chosen) and not is_credential(k)}


def shard_environment(
    host: Mapping[str, str], passed: Iterable[str] = (), fixed: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The host's allow-listed variables (BASE and the profile's `passed` names or patterns), `fixed` on top."""
    return {**matching(host, (*BASE, *passed)), **(fixed or {})}
