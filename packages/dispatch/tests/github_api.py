"""A real local GitHub REST API server for the tests: the few endpoints crcr reads, faults on demand.

It serves `/repos/{owner}/{repo}/issues/{n}/labels` (labels may appear only after a delay, for the merge bot's
race), `/commits/{ref}` (by full or abbreviated sha, or by branch name such as `nightly`) and `/branches/{name}`,
in GitHub's JSON shapes. The first requests can be made to fail (429, 5xx, a dropped connection), and a bearer
token can be required (401 otherwise, as GitHub answers a bad token).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ROUTE = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/(?:issues/(?P<issue>\d+)/labels|commits/(?P<commit>.+)|"
                    r"branches/(?P<branch>.+))")  # fmt: skip
DROP = "drop"


@dataclass
class Fault:
    """One injected failure: an HTTP status (with an optional Retry-After) or DROP (close without answering)."""

    status: int | str
    retry_after: str | None = None


@dataclass
class State:
    token: str | None = None
    labels: dict[tuple[str, int], list[tuple[float, str]]] = field(default_factory=dict)
    commits: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    branches: dict[tuple[str, str], str] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path with query, Authorization)
    lock: threading.Lock = field(default_factory=threading.Lock)


class LocalGitHub:
    """Start with `with LocalGitHub(token=...) as api:`; `api.url` is the base to give crcr."""

    def __init__(self, token: str | None = None) -> None:
        self.state = State(token=token)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> LocalGitHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add_labels(self, repo: str, number: int, *names: str, after: float = 0.0) -> None:
        """Labels on issue/PR `number`, visible `after` seconds from now."""
        with self.state.lock:
            self.state.labels.setdefault((repo, number), []).extend((time.monotonic() + after, n) for n in names)

    def add_commit(self, repo: str, sha: str, message: str, *refs: str) -> None:
        """A commit, reachable by its sha, any prefix of it of 7+ characters, and `refs` (branch names)."""
        body = {"sha": sha, "node_id": "C_kwDOA" + sha[:10], "html_url": f"https://github.com/{repo}/commit/{sha}",
                "commit": {"message": message, "author": {"name": "PyTorch MergeBot", "date": "2026-12-01T07:34:02Z"},
                           "tree": {"sha": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}},
                "parents": [{"sha": "f" * 40}], "stats": {"total": 2, "additions": 1, "deletions": 1}}  # fmt: skip
        with self.state.lock:
            for ref in (sha, *refs):
                self.state.commits[(repo, ref)] = body

    def add_branch(self, repo: str, name: str, sha: str) -> None:
        with self.state.lock:
            self.state.branches[(repo, name)] = sha

    def fail_next(self, *faults: Fault) -> None:
        """The next len(faults) requests fail, in this order."""
        with self.state.lock:
            self.state.faults.extend(faults)

    @property
    def requests(self) -> list[tuple[str, str | None]]:
        with self.state.lock:
            return list(self.state.requests)


def _handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any, retry_after: str | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with state.lock:
                state.requests.append((self.path, self.headers.get("Authorization")))
                fault = state.faults.pop(0) if state.faults else None
            if fault is not None and fault.status == DROP:
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if fault is not None:
                return self._send(int(fault.status), {"message": "injected"}, fault.retry_after)
            if state.token and self.headers.get("Authorization") != f"Bearer {state.token}":
                return self._send(
                    401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
                )
            found = self._route(urllib.parse.unquote(urllib.parse.urlsplit(self.path).path))
            if found is None:
                return self._send(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest",
                                        "status": "404"})  # fmt: skip
            self._send(200, found)

        def _route(self, path: str) -> Any:
            match = _ROUTE.fullmatch(path)
            if not match:
                return None
            repo = match["repo"]
            with state.lock:
                if match["issue"]:
                    now, entries = time.monotonic(), state.labels.get((repo, int(match["issue"])), [])
                    return [{"id": 1000 + i, "node_id": f"LA_{i}", "name": name, "color": "ededed", "default": False,
                             "description": None} for i, (at, name) in enumerate(entries) if at <= now]  # fmt: skip
                if match["commit"]:
                    ref = match["commit"]
                    exact = state.commits.get((repo, ref))
                    prefixed = [c for (r, key), c in state.commits.items()
                                if r == repo and len(ref) >= 7 and key.startswith(ref)]  # fmt: skip
                    return exact or (prefixed[0] if prefixed else None)
                sha = state.branches.get((repo, match["branch"]))
                if sha is None:
                    return None
                return {"name": match["branch"], "commit": {"sha": sha, "url": f"https://api.github.com/repos/{repo}/commits/{sha}"},
                        "protected": True}  # fmt: skip

    return Handler
