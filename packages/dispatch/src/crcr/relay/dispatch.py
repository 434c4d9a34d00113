"""Relay -> downstream: which upstream webhooks are dispatched, the `client_payload`, and its delivery.

GitHub delivers a `repository_dispatch` as a run whose event file (`$GITHUB_EVENT_PATH`) holds
`{"action": event_type, "client_payload": ..., "repository": ...}`; locally the same dispatch is either POSTed, in
the REST API's shape `{"event_type", "client_payload"}`, to a configured consumer URL, or written as that event file.
The delivery id is the webhook's own (`X-GitHub-Delivery`) when given, so a redelivered webhook is recognised.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crcr import http

#: pull_request actions the relay dispatches; labeled, edited and the rest are not.
PR_ACTIONS = frozenset({"opened", "reopened", "synchronize", "closed"})
#: GitHub's cap on a repository_dispatch client_payload, in bytes.
CLIENT_PAYLOAD_MAX = 65535
#: A delivery id the relay takes from a webhook: GitHub's are GUIDs, a self-report's a sha; it is a database key and
#: shown on the HUD, so it stays one short line of plain characters.
DELIVERY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class DispatchError(Exception):
    """A webhook the relay cannot dispatch (wrong event type, not an object, too large, a malformed delivery id)."""


class UnknownConsumer(DispatchError):
    """A `to` that is not a configured consumer: the relay posts nowhere it was not told to at start (a 403)."""


def given_delivery_id(header: str | None, field: Any) -> str | None:
    """The webhook's delivery id from the `X-GitHub-Delivery` header or the body's `delivery_id` (None when neither
    is given); DispatchError when it is malformed or the two disagree."""
    if header is not None and field is not None and header != field:
        raise DispatchError("the X-GitHub-Delivery header and the body's delivery_id disagree")
    given = field if header is None else header
    return None if given is None else checked_delivery_id(given)


def checked_delivery_id(value: Any) -> str:
    """`value` when it is a sane delivery id, else DispatchError saying what one looks like."""
    if not isinstance(value, str) or not DELIVERY_ID.fullmatch(value):
        shown = repr(value)[:60]
        raise DispatchError(f"delivery_id must be 1-128 letters, digits, '.', '_' or '-' (starting with a letter or "
                            f"digit): {shown}")  # fmt: skip
    return value


def skipped(event_type: str, webhook: Any) -> str:
    """Why the relay does not dispatch this webhook, "" when it does."""
    if event_type not in ("pull_request", "push"):
        raise DispatchError(f"event type must be pull_request or push: {event_type!r}")
    if not isinstance(webhook, Mapping):
        raise DispatchError("the webhook must be a JSON object")
    if event_type == "pull_request" and webhook.get("action") not in PR_ACTIONS:
        return f"pull_request action {webhook.get('action')!r} is not dispatched (only {', '.join(sorted(PR_ACTIONS))})"
    return ""


def client_payload(event_type: str, webhook: Mapping[str, Any], delivery_id: str | None = None) -> dict[str, Any]:
    """`{event_type, delivery_id, payload}` with the webhook verbatim, under its own delivery id or a fresh uuid4."""
    delivery_id = str(uuid.uuid4()) if delivery_id is None else checked_delivery_id(delivery_id)
    built = {"event_type": event_type, "delivery_id": delivery_id, "payload": webhook}
    size = len(json.dumps(built).encode())
    if size > CLIENT_PAYLOAD_MAX:
        raise DispatchError(f"client_payload is {size} bytes, over GitHub's {CLIENT_PAYLOAD_MAX}")
    return built


def dispatch_body(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The body of `POST /repos/{owner}/{repo}/dispatches` for this client_payload."""
    return {"event_type": payload["event_type"], "client_payload": payload}


def event_file(payload: Mapping[str, Any], repository: str) -> dict[str, Any]:
    """What `$GITHUB_EVENT_PATH` holds in the downstream repo's run of this repository_dispatch."""
    owner, name = repository.split("/", 1)
    return {
        "action": payload["event_type"],
        "branch": "main",
        "client_payload": payload,
        "repository": {"full_name": repository, "name": name, "owner": {"login": owner}, "default_branch": "main"},
        "sender": {"login": "pytorch-cross-repo-ci-relay[bot]", "type": "Bot"},
    }


def post(payload: Mapping[str, Any], consumer_url: str) -> int:
    """Deliver to a local consumer as GitHub's REST API would be called; the consumer's status."""
    return http.request("POST", consumer_url, json_body=dispatch_body(payload), retry=http.Retry(attempts=3)).status


def write_event_file(payload: Mapping[str, Any], repository: str, path: Path) -> None:
    """Deliver by writing the event file a runner would hand the workflow."""
    path.write_text(json.dumps(event_file(payload, repository), indent=2, sort_keys=True) + "\n")
