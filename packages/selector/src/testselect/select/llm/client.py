"""One OpenAI-compatible chat completion: cached by a hash of the request, retried on 429/5xx honoring Retry-After.

Stdlib only (urllib): a request is a POST of JSON, and the key travels only in the `Authorization` header; it is
never part of the cache key, a message or an error.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

RETRIED = frozenset({429, 500, 502, 503, 504})
MAX_WAIT = 60.0  # seconds: a longer Retry-After is capped, so a run never stalls for long on one request


class EndpointError(OSError):
    """The endpoint gave no usable completion after the retries; an OSError so a command prints one error line."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to ask: `url` is the API base (`.../v1`), `key` the bearer token or None for a keyless server."""

    url: str
    model: str
    key: str | None
    timeout: float  # seconds per attempt
    retries: int  # attempts after the first, on 429, 5xx or no answer


@dataclass(frozen=True)
class Completion:
    content: str
    cached: bool


def request_body(model: str, messages: list[dict[str, str]]) -> dict:
    """Deterministic sampling and a JSON object as the answer, so equal facts give an equal request."""
    return {"model": model, "messages": messages, "temperature": 0, "response_format": {"type": "json_object"}}


def _retry_after(value: str | None, attempt: int) -> float:
    """Seconds to wait: the server's Retry-After (seconds or an HTTP date), else 1, 2, 4, ... capped."""
    if value is not None:
        try:
            return min(max(float(value), 0.0), MAX_WAIT)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if email.utils.parsedate_tz(value) else None
            if when is not None:
                return min(max(when.timestamp() - time.time(), 0.0), MAX_WAIT)
    return min(2.0**attempt, MAX_WAIT)


def _content(url: str, raw: bytes) -> str:
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        content = None
    if not isinstance(content, str):
        raise EndpointError(f"llm endpoint {url}: HTTP 200 but not a chat completion (no choices[0].message.content)")
    return content


def _post(endpoint: Endpoint, body: bytes) -> str:
    url = endpoint.url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if endpoint.key:
        headers["Authorization"] = f"Bearer {endpoint.key}"
    attempt = 0
    while True:
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=endpoint.timeout) as response:
                return _content(url, response.read())
        except urllib.error.HTTPError as exc:
            failure, retried = f"HTTP {exc.code}", exc.code in RETRIED
            if exc.code in (401, 403):
                failure += " (check the key's environment variable)"
            wait = _retry_after(exc.headers.get("Retry-After"), attempt)
        except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as exc:
            failure, retried = str(getattr(exc, "reason", exc) or type(exc).__name__), True
            wait = _retry_after(None, attempt)
        if not retried or attempt == endpoint.retries:
            tries = f" after {attempt + 1} attempts" if attempt else ""
            raise EndpointError(f"llm endpoint {url}: {failure}{tries}")
        time.sleep(wait)
        attempt += 1


def complete(endpoint: Endpoint, messages: list[dict[str, str]], cache: Path) -> Completion:
    """The assistant's reply to `messages`: from `cache` when this exact request was answered before, else asked."""
    body = json.dumps(request_body(endpoint.model, messages), sort_keys=True).encode()
    digest = hashlib.sha256(endpoint.url.rstrip("/").encode() + b"\n" + body).hexdigest()
    path = cache / f"{digest}.json"
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))["content"]
    except (OSError, ValueError, KeyError, TypeError):
        cached = None  # not answered yet, or a damaged entry: ask again
    if isinstance(cached, str):
        return Completion(cached, cached=True)
    content = _post(endpoint, body)
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"content": content}), encoding="utf-8")
    partial.replace(path)
    return Completion(content, cached=False)
