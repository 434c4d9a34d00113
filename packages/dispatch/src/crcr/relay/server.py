"""The relay's HTTP face: dispatch, callbacks, the HUD, the issuer's routes, and a context manager for tests.

Routes (one port):
    POST /dispatch              {"event_type", "payload": webhook, "to"?: a configured consumer URL, "delivery_id"?}
                                (or the delivery id as `X-GitHub-Delivery`) -> {"client_payload", "repositories",
                                "skipped", "repeated"}
    POST /github/callback/      the callback, `Authorization: Bearer <OIDC token>`
    GET  /hud/<owner>/<repo>    runs per delivery and job, as HTML
    GET  /api/deliveries        the same as JSON (`?repo=owner/name` for one repo)
    GET  /reports/<run id>/<file>   a run's report.html, summary.json or record.json, from the `reports` folder
    GET  /.well-known/openid-configuration, /.well-known/jwks, /_actions/id-token   the local issuer

Dispatch answers: 200 (`client_payload` null and `skipped` saying why for an event that is not dispatched;
`repeated: true`, nothing recorded or posted again, for a redelivery of the same id, event and webhook); 400
`{"error"}` (a bad body, event type or delivery id); 403 (`to` is not a configured consumer: nothing is posted);
409 (the delivery id was dispatched for another event or webhook); 502 (the consumer refused: the delivery is not
kept, so its redelivery is dispatched afresh).

Callback answers: 200 `{"state": "IN_PROGRESS"|"COMPLETED", "notes": [...]}` or `{"ignored": why}` (repo below L2,
nothing stored); 400 `{"error", "rule"}` (`timed-out` for a job the sweeper closed, `already-completed` after a
real completed); 401 `{"error"}` (an expired token says so); 429 with Retry-After (rate limit, or injected fault);
503 (injected fault). An injected fault changes no state.

Any route: a Content-Length that is not one run of digits, or a Transfer-Encoding, is a 400 at once and the
connection closes; a body over 1 MiB is a 413.

Python API:
    with running_relay(db_path, allowlist={"owner/repo": 2}, consumers={"owner/repo": URL}, rate_limit=60,
                       fail_ratio=0.0, fail_seed=0, sweep_after=6 * 3600, token_lifetime=300, leeway=5.0,
                       reports=None, host="127.0.0.1", port=0) as relay:
        relay.url, relay.callback_url            # "http://127.0.0.1:PORT", ".../github/callback/"
        relay.issuer.url                          # the OIDC issuer (same port)
        relay.issuer.token_request_url, relay.issuer.request_token   # ACTIONS_ID_TOKEN_REQUEST_URL / _TOKEN
        relay.issuer.mint(repository="owner/repo", audience=AUDIENCE, expires_in=token_lifetime)   # a signed JWT
        relay.dispatch("pull_request", webhook, to=None, delivery_id=None) -> client_payload  (None when the action
            is not dispatched; a repeated delivery id gives the first client_payload again)
        relay.jobs() / relay.deliveries() / relay.callbacks()       # stored state, JSON columns decoded
        relay.sweep() -> closed count
`allowlist` may be a mapping repo -> level, an `Allowlist`, or a YAML path. Default: {issuer repository: 2}.
`consumers` maps allowlisted repos to the only URLs a dispatch is ever posted to (default: none). `token_lifetime`
is the relay's own issuer's (pass `issuer=Issuer(..., token_lifetime=...)` instead when giving an issuer);
`leeway` is the clock skew, in seconds, the token checks allow.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crcr import http
from crcr.relay import dispatch, hud
from crcr.relay.allowlist import Allowlist
from crcr.relay.auth import Unauthorized, Verifier
from crcr.relay.issuer import TOKEN_LIFETIME, Issuer
from crcr.relay.ratelimit import SlidingWindow
from crcr.relay.store import DeliveryConflict, Store
from crcr.relay.validate import Rejected, check
from crcr.relay.web import Reply, Request, Server, base_url, bind, html_reply, json_reply, serving

CALLBACK_PATHS = ("/github/callback/", "/github/callback")
REPORT_FILES = {"report.html": "text/html; charset=utf-8", "summary.json": "application/json",
                "record.json": "application/json"}  # fmt: skip
REPORT_PATH = re.compile(r"/reports/([A-Za-z0-9_-][A-Za-z0-9_.-]*)/(" + "|".join(map(re.escape, REPORT_FILES)) + ")")
HUD_PATH = re.compile(r"/hud/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/?")
SWEEP_AFTER = 6 * 3600.0
#: Seconds a token's exp/nbf may be off, for clocks that differ between the runner and the relay.
LEEWAY = 5.0
#: Statuses an injected fault answers with, as an overloaded relay or its load balancer would.
FAULT_STATUSES = (429, 503)


class Faults:
    """Answer a seeded-random fraction of callbacks with 429 or 503, for testing clients' retries."""

    def __init__(self, ratio: float = 0.0, seed: int = 0, retry_after: int = 1) -> None:
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"fail ratio must be within 0..1: {ratio}")
        self.ratio = ratio
        self.retry_after = retry_after
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.injected = 0

    def pick(self) -> Reply | None:
        """A fault reply for this request, or None to serve it."""
        if self.ratio == 0.0:
            return None
        with self._lock:
            if self._random.random() >= self.ratio:
                return None
            status = self._random.choice(FAULT_STATUSES)
            self.injected += 1
        return json_reply(status, {"error": f"injected fault ({status})"}, {"Retry-After": str(self.retry_after)})


@dataclass
class Settings:
    """What the relay enforces: who is allowed at which level, where a dispatch may be posted, how fast, how long a
    job may stay open, and how much clock skew a token's times may show."""

    allowlist: Allowlist
    rate_limit: int = 60
    sweep_after: float = SWEEP_AFTER
    reports: Path | None = None  # a folder of run directories (`.tributary/runs`) whose reports the HUD links
    leeway: float = LEEWAY
    #: Downstream repo -> the URL its repository_dispatch is posted to: the only URLs a dispatch's `to` may name.
    consumers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Dispatched:
    """What one dispatch request did: the client_payload (None when not dispatched, `skipped` saying why), and
    whether it repeated a delivery already recorded (then nothing was recorded or posted again)."""

    client_payload: dict[str, Any] | None
    skipped: str = ""
    repeated: bool = False


class Relay:
    """The relay's logic as an app (Request -> Reply) over a store, an issuer and a verifier."""

    def __init__(self, store: Store, issuer: Issuer, settings: Settings, faults: Faults | None = None) -> None:
        self.store = store
        self.issuer = issuer
        self.settings = settings
        self.faults = faults or Faults()
        self.limiter = SlidingWindow(settings.rate_limit)
        self.verifier: Verifier | None = None
        self.url = ""
        self._swept = 0.0
        self._sweep_lock = threading.Lock()

    def bind(self, url: str, issuer_url: str | None = None) -> None:
        """Take the server's URL; the tokens it trusts come from `issuer_url` (default: its own issuer)."""
        self.url = url
        self.issuer.bind(url)
        self.verifier = Verifier(issuer_url or url, leeway=self.settings.leeway)

    @property
    def callback_url(self) -> str:
        return f"{self.url}/github/callback/"

    def __call__(self, request: Request) -> Reply:
        self._maybe_sweep()
        if request.path in CALLBACK_PATHS and request.method == "POST":
            return self.faults.pick() or self._callback(request)
        if request.path == "/dispatch" and request.method == "POST":
            return self._dispatch_request(request)
        if request.method == "GET":
            if found := HUD_PATH.fullmatch(request.path):
                repo = f"{found[1]}/{found[2]}"
                return html_reply(200, hud.page(repo, self.store.deliveries(repo)))
            if request.path == "/api/deliveries":
                repo = (request.query.get("repo") or [None])[-1]
                return json_reply(200, {"deliveries": self.store.deliveries(repo)})
            if request.path in ("", "/"):
                return html_reply(200, hud.index(self.settings.allowlist.downstream()))
            if found := REPORT_PATH.fullmatch(request.path):
                return self._report(found[1], found[2])
        return self.issuer.answer(request) or json_reply(404, {"error": f"no route {request.method} {request.path}"})

    def _report(self, run_id: str, name: str) -> Reply:
        """One of a run's report files; the names are fixed and the run id a plain name, so no path escapes."""
        path = self.settings.reports / run_id / name if self.settings.reports else None
        if path is None or not path.is_file():
            return json_reply(404, {"error": f"no report {name} for run {run_id}"})
        return Reply(200, path.read_bytes(), {"Content-Type": REPORT_FILES[name]})

    def _callback(self, request: Request) -> Reply:
        assert self.verifier is not None, "bind() the relay before serving"
        try:
            claims = self.verifier.verify(request.headers.get("authorization"))
        except Unauthorized as exc:
            return json_reply(401, {"error": str(exc)})
        repo = claims["repository"]
        if self.settings.allowlist.level(repo) < 2:
            return json_reply(200, {"ignored": f"{repo} is below L2: callbacks are not stored"})
        if (wait := self.limiter.admit(repo.lower())) is not None:
            return json_reply(
                429, {"error": f"rate limit: {self.settings.rate_limit}/minute"}, {"Retry-After": str(wait)}
            )
        try:
            body = json.loads(request.body)
            callback = check(body)
            new = self.store.apply(repo, callback, body)
        except json.JSONDecodeError:
            return json_reply(400, {"error": "the body is not JSON", "rule": "body"})
        except Rejected as exc:
            return json_reply(400, {"error": str(exc), "rule": exc.rule})
        return json_reply(200, {"state": new, "notes": list(callback.notes)})

    def dispatch(
        self, event_type: str, webhook: Any, to: str | None = None, delivery_id: str | None = None
    ) -> dict[str, Any] | None:
        """Dispatch an upstream webhook to every allowlisted repo; the client_payload, None if not dispatched."""
        return self._dispatch(event_type, webhook, to, delivery_id).client_payload

    def _dispatch(self, event_type: Any, webhook: Any, to: str | None, delivery_id: str | None) -> Dispatched:
        """Record the dispatch and POST it to `to`, a configured consumer. A redelivery of a recorded delivery id
        (same event and webhook) records and posts nothing; one that never reached its consumer is forgotten, so
        GitHub's redelivery of the webhook dispatches it afresh."""
        if to is not None and to not in self.settings.consumers.values():
            raise dispatch.UnknownConsumer(f"to: {to[:200]!r} is not a configured consumer (crcr relay serve "
                                           "--consumer REPO=URL)")  # fmt: skip
        if reason := dispatch.skipped(event_type, webhook):
            return Dispatched(None, reason)
        payload = dispatch.client_payload(event_type, webhook, delivery_id)
        repos = self.settings.allowlist.downstream()
        if not self.store.record_dispatch(payload["delivery_id"], repos, event_type, webhook):
            return Dispatched(payload, repeated=True)
        if to is not None:
            try:
                dispatch.post(payload, to)
            except http.HTTPError:
                self.store.forget_dispatch(payload["delivery_id"])
                raise
        return Dispatched(payload)

    def _dispatch_request(self, request: Request) -> Reply:
        try:
            asked = json.loads(request.body)
            if not isinstance(asked, Mapping) or not isinstance(asked.get("to") or "", str):
                raise dispatch.DispatchError("the body must be {event_type, payload, to?, delivery_id?}")
            given = dispatch.given_delivery_id(request.headers.get("x-github-delivery"), asked.get("delivery_id"))
            done = self._dispatch(asked.get("event_type"), asked.get("payload"), asked.get("to") or None, given)
        except dispatch.UnknownConsumer as exc:
            return json_reply(403, {"error": str(exc)})
        except DeliveryConflict as exc:
            return json_reply(409, {"error": str(exc)})
        except (json.JSONDecodeError, dispatch.DispatchError) as exc:
            return json_reply(400, {"error": str(exc).splitlines()[0]})
        except http.HTTPError as exc:
            return json_reply(502, {"error": f"the consumer refused the dispatch: {exc}"})
        repos = self.settings.allowlist.downstream() if done.client_payload else []
        return json_reply(200, {"client_payload": done.client_payload, "repositories": repos,
                                "skipped": done.skipped, "repeated": done.repeated})  # fmt: skip

    def _maybe_sweep(self) -> None:
        """Sweep at most a few times per max age, so a busy relay does not write on every request."""
        now = time.monotonic()
        with self._sweep_lock:
            if now - self._swept < min(self.settings.sweep_after / 4, 60.0):
                return
            self._swept = now
        self.sweep()

    def sweep(self) -> int:
        """Close jobs left IN_PROGRESS longer than the max age; how many."""
        return self.store.sweep(self.settings.sweep_after)

    def jobs(self, repo: str | None = None) -> list[dict[str, Any]]:
        return self.store.jobs(repo)

    def deliveries(self, repo: str | None = None) -> list[dict[str, Any]]:
        return self.store.deliveries(repo)

    def callbacks(self) -> list[dict[str, Any]]:
        return self.store.callbacks()


def _allowlist(given: Mapping[str, int] | Allowlist | Path | str | None, issuer: Issuer) -> Allowlist:
    if given is None:
        return Allowlist.of({issuer.repository: 2})
    if isinstance(given, Allowlist):
        return given
    if isinstance(given, str | Path):
        return Allowlist.load(Path(given))
    return Allowlist.of(given)


def _consumers(given: Mapping[str, str], allowlist: Allowlist) -> dict[str, str]:
    """Each consumer's repo allowlisted and its URL http(s) with a host, or ValueError naming the bad one."""
    for repo, url in given.items():
        if not allowlist.level(repo):
            raise ValueError(f"consumer {repo}: not an allowlisted repository")
        parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"consumer {repo}: {url!r} is not an http(s) URL")
    return {repo.lower(): url for repo, url in given.items()}


def build(
    db_path: Path,
    *,
    allowlist: Mapping[str, int] | Allowlist | Path | str | None = None,
    rate_limit: int = 60,
    fail_ratio: float = 0.0,
    fail_seed: int = 0,
    sweep_after: float = SWEEP_AFTER,
    issuer: Issuer | None = None,
    reports: Path | None = None,
    token_lifetime: int | None = None,
    leeway: float = LEEWAY,
    consumers: Mapping[str, str] | None = None,
) -> Relay:
    """A relay over the database at `db_path`, not yet bound to a server; `reports` is a folder of run directories
    whose report files it serves under /reports/. `token_lifetime` is its own issuer's (a given `issuer` has its
    own); `leeway` is the clock skew the token checks allow; `consumers` maps allowlisted repos to the URLs a
    dispatch may be posted to."""
    if issuer is not None and token_lifetime is not None:
        raise ValueError("token_lifetime belongs to the issuer: pass Issuer(..., token_lifetime=...) instead")
    issuer = issuer or Issuer(token_lifetime=TOKEN_LIFETIME if token_lifetime is None else token_lifetime)
    known = _allowlist(allowlist, issuer)
    settings = Settings(
        known, rate_limit, sweep_after, reports, leeway=leeway, consumers=_consumers(consumers or {}, known)
    )
    return Relay(Store(Path(db_path)), issuer, settings, Faults(fail_ratio, fail_seed))


def start(relay: Relay, host: str = "127.0.0.1", port: int = 0, issuer_url: str | None = None) -> Server:
    """Bind a server for the relay and tell the relay its URL."""
    server = bind(relay, host, port)
    relay.bind(base_url(server), issuer_url)
    return server


@contextmanager
def running_relay(db_path: Path, *, host: str = "127.0.0.1", port: int = 0, **options: Any) -> Iterator[Relay]:
    """A relay serving on a free local port for the block (see the module docstring for what it offers)."""
    relay = build(db_path, **options)
    with serving(start(relay, host, port)):
        yield relay


@contextmanager
def running_issuer(issuer: Issuer | None = None, host: str = "127.0.0.1", port: int = 0) -> Iterator[Issuer]:
    """The OIDC issuer alone on its own port (a relay trusts it with `start(..., issuer_url=issuer.url)`)."""
    issuer = issuer or Issuer()
    server = bind(lambda request: issuer.answer(request) or json_reply(404, {"error": "not found"}), host, port)
    issuer.bind(base_url(server))
    with serving(server):
        yield issuer
