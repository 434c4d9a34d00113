"""A relay dispatch's `client_payload`, parsed into typed facts, every field the gate reads checked by shape.

The payload is attacker-shaped input (anyone can open a PR with any title and branch name), so each string the gate
reads is checked for length, control characters, line and paragraph separators, bidi overrides and lone surrogates,
and refs and shas by shape. Required are the fields the contract says a consumer reads (`action`, `number`,
`pull_request.{number, head.sha, head.repo.full_name, base.ref, labels[].name, merged, merge_commit_sha}`; for a push
`ref`, `before`, `after`) and `repository.full_name`; the title, the head ref and `deleted` are checked when present.
Other fields are ignored: GitHub sends many. Every error is one line that names the field and never echoes the value.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, BinaryIO

from crcr.github import REPO

#: GitHub's cap on a repository_dispatch client_payload.
MAX_BYTES = 65_536
SHA = re.compile(r"[0-9a-f]{40}")
ZERO_SHA = "0" * 40
_DELIVERY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_WORD = re.compile(r"[a-z_]{1,40}")
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_REF_BAD = re.compile(r"\.\.|@\{|//|/\.|[\x00-\x20\x7f~^:?*\[\\]")


class PayloadError(Exception):
    """A client_payload the gate refuses: one line naming the field."""


@dataclass(frozen=True)
class PullRequest:
    """The facts of a pull_request webhook the gate decides on."""

    action: str
    number: int
    merged: bool
    merge_commit_sha: str | None
    head_sha: str
    head_repo: str | None  # None when the fork was deleted
    base_ref: str
    labels: tuple[str, ...]
    title: str | None  # None when absent (checked when present: it is shown on the HUD)
    head_ref: str | None


@dataclass(frozen=True)
class Push:
    """The facts of a push webhook: a branch or tag moved, was created or was deleted."""

    ref: str
    before: str
    after: str
    deleted: bool


@dataclass(frozen=True)
class Dispatch:
    """One `client_payload`: the upstream event, its delivery id and the repository it happened in."""

    event_type: str
    delivery_id: str
    repository: str
    event: PullRequest | Push


def read(source: BinaryIO) -> bytes:
    """At most MAX_BYTES + 1 bytes: enough to know a payload is over GitHub's cap without reading it all."""
    return source.read(MAX_BYTES + 1)


def valid_ref(name: str) -> bool:
    """git check-ref-format's rules for a ref or branch name (no `..`, `@{`, spaces, `~^:?*[\\`, `.lock` ...)."""
    return (
        0 < len(name) <= 255
        and not _REF_BAD.search(name)
        and not name.startswith(("-", "/", "."))
        and not name.endswith(("/", ".", ".lock"))
        and name != "@"
        and all(part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/"))
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(raw: bytes) -> Dispatch:
    """Check and parse one client_payload; PayloadError names the first field that is wrong."""
    if len(raw) > MAX_BYTES:
        raise PayloadError(f"client_payload: more than {MAX_BYTES:,} bytes (GitHub's client_payload cap)")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise PayloadError("client_payload: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PayloadError(f"client_payload: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # NaN/Infinity, or an integer past Python's digit limit
        raise PayloadError(f"client_payload: not JSON: {str(exc).splitlines()[0][:80]}") from None
    except RecursionError:
        raise PayloadError("client_payload: not JSON: nested too deeply") from None
    top = _Object(data, "")
    event_type = top.text("event_type", _WORD)
    delivery_id = top.text("delivery_id", _DELIVERY)
    payload = top.object("payload")
    repository = payload.object("repository").text("full_name", REPO)
    if event_type == "pull_request":
        event: PullRequest | Push = _pull_request(payload)
    elif event_type == "push":
        event = _push(payload)
    else:
        raise PayloadError("event_type: expected pull_request or push")
    return Dispatch(event_type, delivery_id, repository, event)


def _pull_request(payload: _Object) -> PullRequest:
    pr = payload.object("pull_request")
    number = payload.integer("number")
    if pr.integer("number") != number:
        raise PayloadError("payload.pull_request.number: differs from payload.number")
    head, base = pr.object("head"), pr.object("base")
    head_repo = head.optional_object("repo")
    return PullRequest(
        action=payload.text("action", _WORD),
        number=number,
        merged=pr.boolean("merged"),
        merge_commit_sha=pr.optional_text("merge_commit_sha", SHA),
        head_sha=head.text("sha", SHA),
        head_repo=head_repo.text("full_name", REPO) if head_repo else None,
        base_ref=base.ref("ref"),
        labels=tuple(label.text("name", max_length=100) for label in pr.objects("labels")),
        title=pr.optional_text("title", max_length=1024, absent=True),
        head_ref=head.optional_ref("ref"),
    )


def _push(payload: _Object) -> Push:
    ref = payload.ref("ref")
    if not ref.startswith(("refs/heads/", "refs/tags/")):
        raise PayloadError("payload.ref: expected refs/heads/... or refs/tags/...")
    return Push(
        ref=ref,
        before=payload.text("before", SHA),
        after=payload.text("after", SHA),
        deleted=payload.boolean("deleted", default=False),
    )


def _hostile(text: str) -> str:
    """Why `text` cannot be shown or passed on safely, or ""."""
    for char in text:
        category = unicodedata.category(char)
        if category == "Cc":
            return "holds a control character"
        if category in ("Zl", "Zp"):
            return "holds a line separator"
        if category == "Cs":
            return "holds a lone surrogate"
        if char in _BIDI:
            return "holds a bidirectional override"
    return ""


class _Object:
    """Typed reads of one JSON object; errors name the dotted path (`payload.pull_request.base.ref`)."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise PayloadError(f"{path or 'client_payload'}: expected an object")
        self.data, self.path = data, path

    def _at(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def _get(self, name: str, what: str) -> Any:
        if name not in self.data:
            raise PayloadError(f"{self._at(name)}: required ({what})")
        return self.data[name]

    def _fail(self, name: str, why: str) -> PayloadError:
        return PayloadError(f"{self._at(name)}: {why}")

    def object(self, name: str) -> _Object:
        return _Object(self._get(name, "an object"), self._at(name))

    def optional_object(self, name: str) -> _Object | None:
        value = self._get(name, "an object or null")
        return None if value is None else _Object(value, self._at(name))

    def objects(self, name: str, limit: int = 100) -> list[_Object]:
        value = self._get(name, "a list")
        if not isinstance(value, list):
            raise self._fail(name, "expected a list")
        if len(value) > limit:
            raise self._fail(name, f"more than {limit} entries")
        return [_Object(item, f"{self._at(name)}[{index}]") for index, item in enumerate(value)]

    def text(self, name: str, shape: re.Pattern[str] | None = None, max_length: int = 255) -> str:
        value = self._get(name, "a string")
        if not isinstance(value, str):
            raise self._fail(name, "expected a string")
        if not value or len(value) > max_length:
            raise self._fail(name, f"expected 1 to {max_length} characters, got {len(value)}")
        hostile = _hostile(value)
        if hostile:
            raise self._fail(name, hostile)
        if shape is not None and not shape.fullmatch(value):
            raise self._fail(name, f"not the shape of {_SHAPES.get(shape, 'this field')}")
        return value

    def optional_text(
        self, name: str, shape: re.Pattern[str] | None = None, max_length: int = 255, absent: bool = False
    ) -> str | None:
        """A string or null; with `absent`, the field may also be missing."""
        if absent and name not in self.data:
            return None
        return None if self._get(name, "a string or null") is None else self.text(name, shape, max_length)

    def ref(self, name: str) -> str:
        value = self.text(name)
        if not valid_ref(value):
            raise self._fail(name, "not a valid git ref name")
        return value

    def optional_ref(self, name: str) -> str | None:
        """A git ref name, or None when the field is missing."""
        return self.ref(name) if name in self.data else None

    def integer(self, name: str) -> int:
        value = self._get(name, "an integer")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**31:
            raise self._fail(name, "expected a positive integer")
        return value

    def boolean(self, name: str, default: bool | None = None) -> bool:
        """true or false; `default` when the field is missing, if given."""
        if default is not None and name not in self.data:
            return default
        value = self._get(name, "true or false")
        if not isinstance(value, bool):
            raise self._fail(name, "expected true or false")
        return value


_SHAPES = {SHA: "a 40-hex sha", _DELIVERY: "a delivery id", _WORD: "a lower-case word", REPO: "owner/name"}
