"""`crcr resolve`: the upstream SHA for runs no dispatch triggers (nightly, a release branch, a commit by hand).

PyTorch's `nightly` branch HEAD is a commit whose message names the source commit as `(<40-hex sha>)`; the last such
match is taken. A release branch is `release/<version>`, resolved to its HEAD; a sha or ref to its full commit sha.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from crcr.gate.payload import SHA, valid_ref
from crcr.github import GitHub
from crcr.http import HTTPError

KINDS = ("nightly", "release", "sha")
_SOURCE_SHA = re.compile(r"\(([0-9a-f]{40})\)")


class ResolveError(Exception):
    """Nothing could be resolved: one line saying what was asked and why it failed."""


@dataclass(frozen=True)
class Resolved:
    """The upstream commit `sha` that `kind` `ref` names, and where it was read (`source`)."""

    kind: str
    ref: str
    sha: str
    source: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve(github: GitHub, repo: str, kind: str, ref: str = "nightly") -> Resolved:
    """Resolve `kind` (nightly, release, sha) and `ref` (ignored for nightly) in `repo` through the REST API."""
    what = "nightly" if kind == "nightly" else f"{kind} {ref[:100]!r}"
    if kind == "release" and not (ref.startswith("release/") and valid_ref(ref)):
        raise ResolveError(f"resolve {what}: expected a branch release/<version>")
    if kind == "sha" and not valid_ref(ref):
        raise ResolveError(f"resolve {what}: not a commit sha or a valid ref name")
    try:
        if kind == "nightly":
            body = github.commit(repo, "nightly")
            message = _field(body, "commit", "message")
            found = _SOURCE_SHA.findall(message) if isinstance(message, str) else []
            if not found:
                raise ResolveError(f"resolve nightly: the message of {repo}'s nightly HEAD names no (<40-hex sha>)")
            return Resolved("nightly", "nightly", found[-1], f"commit message of nightly {_sha(body, what, 'sha')}")
        if kind == "release":
            body = github.branch(repo, ref)
            return Resolved("release", ref, _sha(body, what, "commit", "sha"), f"branch {ref}")
        body = github.commit(repo, ref)
        return Resolved("sha", ref, _sha(body, what, "sha"), f"commit {ref}")
    except HTTPError as exc:
        raise ResolveError(f"resolve {what}: {exc}") from None


def _field(body: Any, *names: str) -> Any:
    for name in names:
        body = body.get(name) if isinstance(body, dict) else None
    return body


def _sha(body: Any, what: str, *names: str) -> str:
    value = _field(body, *names)
    if not isinstance(value, str) or not SHA.fullmatch(value):
        raise ResolveError(f"resolve {what}: the answer's {'.'.join(names)} is not a 40-hex sha")
    return value
