"""The HTTP plumbing under the relay and the issuer: a request in, a reply out, on a stdlib threading server.

Apps are plain functions `Request -> Reply`, so the relay's logic never touches sockets and the issuer's routes can
share the relay's port or have one of their own. A request whose body cannot be framed (a bad Content-Length, a
Transfer-Encoding) never reaches an app: it gets a 400 at once and the connection is closed.
"""

from __future__ import annotations

import json
import re
import threading
import traceback
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_REQUEST = 1024 * 1024
DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Request:
    """One request: method, path without query, the parsed query, lower-cased header names and the raw body."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass(frozen=True)
class Reply:
    """One answer: status, body bytes and extra headers (the content type included)."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


App = Callable[[Request], Reply]


def json_reply(status: int, data: Any, headers: Mapping[str, str] | None = None) -> Reply:
    """A JSON answer with sorted keys, so what the relay says is stable from run to run."""
    body = json.dumps(data, sort_keys=True).encode()
    return Reply(status, body, {"Content-Type": "application/json", **(headers or {})})


def html_reply(status: int, page: str) -> Reply:
    """An HTML page."""
    return Reply(status, page.encode(), {"Content-Type": "text/html; charset=utf-8"})


def _body_length(headers: Message) -> int:
    """The body's length in bytes (0 without a body), or ValueError saying why the framing is refused.

    Only one run of ASCII digits will do: `int()` would take "-1" (and reading -1 bytes waits for an end of stream
    that a keep-alive client never sends), "+5" or " 5"; `str.isdigit` would pass "²". Two different lengths, or a
    Transfer-Encoding this server cannot decode, leave the body's end ambiguous, so they are refused too.
    """
    if headers.get("Transfer-Encoding") is not None:
        raise ValueError("Transfer-Encoding is not supported: send the body with a Content-Length")
    values = set(headers.get_all("Content-Length") or [])
    if not values:
        return 0
    if len(values) > 1:
        raise ValueError("conflicting Content-Length headers")
    (value,) = values
    if not DIGITS.fullmatch(value):
        raise ValueError(f"invalid Content-Length: {value[:40]!r}")
    return int(value)


def _handler(app: App) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        #: Headers and body go out as two writes: without TCP_NODELAY, Nagle and delayed ACKs add ~40 ms to each.
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            try:
                length = _body_length(self.headers)
            except ValueError as exc:
                return self._refuse(400, str(exc))
            if length > MAX_REQUEST:
                return self._refuse(413, "request too large")
            parts = urllib.parse.urlsplit(self.path)
            request = Request(
                self.command,
                parts.path,
                urllib.parse.parse_qs(parts.query),
                {k.lower(): v for k, v in self.headers.items()},
                self.rfile.read(length) if length else b"",
            )
            try:
                reply = app(request)
            except Exception:
                traceback.print_exc()
                reply = json_reply(500, {"error": "internal error"})
            self._send(reply)

        def _refuse(self, status: int, why: str) -> None:
            """Answer without reading the body and close: the rest of the stream cannot be told from a next request."""
            self._send(json_reply(status, {"error": why}, {"Connection": "close"}))
            self.close_connection = True

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a server inside tests and benchmarks must not write a line per request."""

    return Handler


class Server(ThreadingHTTPServer):
    """A threading server whose request threads do not keep the process alive."""

    daemon_threads = True


def bind(app: App, host: str = "127.0.0.1", port: int = 0) -> Server:
    """A server bound (port 0: any free one) but not yet serving; its `server_address` gives the real port."""
    return Server((host, port), _handler(app))


def base_url(server: Server) -> str:
    """`http://host:port` of a bound server."""
    host, port = server.server_address[:2]
    return f"http://{host}:{port}"


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """Serve in a background thread for the duration of the block, then shut down and close the socket."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="crcr-relay", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
