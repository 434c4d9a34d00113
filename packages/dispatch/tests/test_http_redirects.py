"""`crcr.http.request` against real local servers: redirects keep a token only within its origin, and a failure says
how many attempts it took."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from crcr import http
from crcr.relay.web import serving

FAST = http.Retry(attempts=4, base_delay=0.01, max_delay=0.01)


class _Recorder(BaseHTTPRequestHandler):
    """`/redirect/<code>?to=URL` answers that redirect; any other path answers the next scripted status (200 when
    the script is empty). Every request's path and headers are recorded on the server."""

    def do_GET(self) -> None:
        server: Any = self.server
        server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        parts = urllib.parse.urlsplit(self.path)
        if parts.path.startswith("/redirect/"):
            location = urllib.parse.parse_qs(parts.query)["to"][0]
            status, headers = int(parts.path.rsplit("/", 1)[1]), {"Location": location}
        else:
            status, headers = (server.script.pop(0) if server.script else 200), {}
        raw = json.dumps({"path": parts.path}).encode()
        self.send_response(status)
        for name, value in {**headers, "Content-Type": "application/json", "Content-Length": str(len(raw))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        return


@contextmanager
def _recorder() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen, server.script = [], []
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield server


@pytest.fixture
def a() -> Iterator[Any]:
    """Server A: where requests start."""
    with _recorder() as server:
        yield server


@pytest.fixture
def b() -> Iterator[Any]:
    """Server B: another origin (its own port)."""
    with _recorder() as server:
        yield server


def _redirect(server: Any, code: int, to: str) -> str:
    return f"{server.url}/redirect/{code}?to={urllib.parse.quote(to, safe='')}"


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_redirect_to_another_origin_carries_no_authorization(a: Any, b: Any, code: int) -> None:
    answer = http.request("GET", _redirect(a, code, f"{b.url}/landed"), token="secret-token")
    assert (answer.status, answer.body) == (200, {"path": "/landed"})
    [(_, sent)] = a.seen
    [(path, got)] = b.seen
    assert sent["authorization"] == "Bearer secret-token"
    assert path == "/landed"
    assert "authorization" not in got
    assert got["user-agent"] == "tributary-crcr"  # the rest of the request still follows the redirect


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_same_origin_redirect_keeps_the_token(a: Any, code: int) -> None:
    answer = http.request("GET", _redirect(a, code, "/landed"), token="secret-token")
    assert answer.body == {"path": "/landed"}
    assert [(path, got["authorization"]) for path, got in a.seen][1] == ("/landed", "Bearer secret-token")


def test_another_host_on_the_same_port_or_a_hop_back_gets_no_authorization(a: Any, b: Any) -> None:
    """The origin is scheme, host and port: `localhost` is not `127.0.0.1`, and a token dropped stays dropped."""
    port = a.server_address[1]
    http.request("GET", _redirect(a, 302, f"http://localhost:{port}/other-host"), headers={"Authorization": "token x"})
    assert [got.get("authorization") for _, got in a.seen] == ["token x", None]
    http.request("GET", _redirect(a, 302, _redirect(b, 302, f"{a.url}/back-home")), token="secret-token")
    assert [got.get("authorization") for _, got in a.seen[2:]] == ["Bearer secret-token", None]
    assert a.seen[3][0] == "/back-home"
    assert "authorization" not in b.seen[0][1]


def test_an_error_says_how_many_attempts_it_took(a: Any) -> None:
    a.script = [404]
    with pytest.raises(http.HTTPError) as first:
        http.request("GET", f"{a.url}/x", retry=FAST, sleep=lambda _: None)
    assert (first.value.status, first.value.attempts) == (404, 1)
    a.script = [503, 502, 400]
    with pytest.raises(http.HTTPError) as retried:
        http.request("GET", f"{a.url}/x", retry=FAST, sleep=lambda _: None)
    assert (retried.value.status, retried.value.attempts) == (400, 3)
    a.script = [503] * FAST.attempts
    with pytest.raises(http.HTTPError) as spent:
        http.request("GET", f"{a.url}/x", retry=FAST, sleep=lambda _: None)
    assert (spent.value.status, spent.value.attempts) == (None, FAST.attempts)
    assert "gave up after 4 attempts" in str(spent.value)
    a.script = [503]
    assert http.request("GET", f"{a.url}/x", retry=FAST, sleep=lambda _: None).attempts == 2
