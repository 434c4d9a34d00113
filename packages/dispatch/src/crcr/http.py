"""One retrying JSON-over-HTTP client for everything crcr says to GitHub's API, the relay or an OIDC endpoint.

The upstream callback action gives up on the first 429 or 5xx; here every transient answer (429, 5xx, a refused or
reset connection, a timeout) is retried with exponential backoff, honouring `Retry-After`. Tokens are sent only in
headers and never appear in an error message: errors name the method, the URL without its query and the status.
Redirects are followed (GitHub's API answers a renamed repository with one), but `Authorization` goes only to the
origin (scheme, host, port) it was given for: urllib's own handler would hand the token to whatever host a
redirect names.
"""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_BODY = 8 * 1024 * 1024


class HTTPError(Exception):
    """A request that failed for good: a non-transient status, or retries exhausted.

    `attempts` says how many exchanges it took, so a caller can tell a refusal of a retried request (whose first
    attempt may have been applied before its answer was lost) from a refusal of a first one."""

    def __init__(self, message: str, status: int | None = None, body: str = "", attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.attempts = attempts


@dataclass(frozen=True)
class Retry:
    """How often and how patiently to retry a transient failure."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt `attempt + 1`: Retry-After when the server gave one, else jittered backoff."""
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after.strip()), self.max_delay)
        backoff = min(self.base_delay * 2**attempt, self.max_delay)
        return backoff * (0.5 + random.random() / 2)


@dataclass(frozen=True)
class Response:
    """A finished exchange: the status, the headers (lower-cased names) and the decoded JSON body (or None)."""

    status: int
    headers: Mapping[str, str]
    body: Any
    attempts: int


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the scheme's default port filled in; None for a URL whose port does not parse."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower(), 0)
    except ValueError:
        return None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


class _SameOriginAuth(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, minus `Authorization` on a hop to another origin (and on every hop after it)."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        origin = _origin(req.full_url)
        if new is not None and (origin is None or _origin(new.full_url) != origin):
            for name in [name for name in new.headers if name.lower() == "authorization"]:
                del new.headers[name]
        return new


_OPENER = urllib.request.build_opener(_SameOriginAuth)


def _where(method: str, url: str) -> str:
    """`METHOD scheme://host/path`, dropping the query and any credentials from the URL."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{method} {parts.scheme}://{host}{parts.path}"


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def request(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    retry: Retry = Retry(),
    timeout: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Response:
    """Send one request, retrying transient failures; return the first non-transient answer below 400.

    Raises HTTPError for a 4xx (other than 429) at once, and for a transient failure once `retry.attempts` are spent.
    """
    data = None if json_body is None else json.dumps(json_body).encode()
    sent = {"Accept": "application/json", "User-Agent": "tributary-crcr", **(headers or {})}
    if data is not None:
        sent["Content-Type"] = "application/json"
    if token:
        sent["Authorization"] = f"Bearer {token}"
    where = _where(method, url)
    last = ""
    for attempt in range(retry.attempts):
        retry_after = None
        try:
            with _OPENER.open(
                urllib.request.Request(url, data=data, headers=sent, method=method), timeout=timeout
            ) as answer:
                raw = answer.read(MAX_BODY)
                return Response(answer.status, {k.lower(): v for k, v in answer.headers.items()}, _decode(raw),
                                attempt + 1)  # fmt: skip
        except urllib.error.HTTPError as exc:
            text = exc.read(MAX_BODY).decode("utf-8", "replace")
            if exc.code not in TRANSIENT_STATUSES:
                message = f"{where}: HTTP {exc.code} {_first_line(text)}".rstrip()
                raise HTTPError(message, exc.code, text, attempt + 1) from None
            last, retry_after = f"HTTP {exc.code}", exc.headers.get("Retry-After")
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            last = type(getattr(exc, "reason", exc)).__name__
        if attempt + 1 < retry.attempts:
            sleep(retry.delay(attempt, retry_after))
    raise HTTPError(f"{where}: gave up after {retry.attempts} attempts (last: {last})", attempts=retry.attempts)


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]
