"""The whole CRCR loop on one machine: `crcr ci --payload FILE` gates a relay dispatch, runs what the gate chose and
reports the job's callbacks to a relay, so a dispatch can be followed from webhook to HUD without GitHub.

Every step is the one a GitHub job takes, through the same functions: the gate's `decision`, the callback body,
the per-job ledger (in_progress at most once, completed exactly once), an OIDC token minted from the runner's token
endpoint (`ACTIONS_ID_TOKEN_REQUEST_URL`/`_TOKEN`, here the local issuer's), and the results and triage verdict read
back from the run directory with `crcr.callback.from_run`. The relay is, by default, an in-process one over
`<cache>/relay.sqlite` (so the HUD keeps every run: `crcr relay serve --db <cache>/relay.sqlite` shows them later),
or `--relay URL`, one already serving (whose dispatch the payload must be; the token comes from the environment,
as on a runner). Running the job is a parameter (`RunJob`): the CLI passes the pipeline, a test a small real run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crcr import http, oidc
from crcr.callback import body as bodies
from crcr.callback import from_run, ledger
from crcr.callback.body import CallbackError
from crcr.ci.model import RunRecord
from crcr.gate.command import EXPECTED as GATE_ERRORS
from crcr.gate.command import decision, payload_bytes
from crcr.gate.decide import Decision
from crcr.relay.issuer import Issuer
from crcr.relay.server import running_relay

#: Runs the gate's combination with the dispatch in the run's trigger: (trigger, combination) -> (record, run dir).
RunJob = Callable[[Mapping[str, Any], str], tuple[RunRecord, Path]]
Say = Callable[[str], None]

WORKFLOW = "crcr ci"
JOB = "ci"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class LoopError(Exception):
    """Bad input for the loop (its options), said in one line."""


#: What the loop can fail with that is the user's input or the relay's answer: one `error:` line, exit 2.
ERRORS: tuple[type[Exception], ...] = (*GATE_ERRORS, CallbackError, oidc.TokenError, http.HTTPError, LoopError)


@dataclass(frozen=True)
class Endpoint:
    """A relay to report to: its URL and the environment a token is minted from (the runner's two variables, or
    `CRCR_TOKEN`); `serving` says whether it keeps serving after this command (then its HUD URL is worth printing)."""

    url: str
    token_env: Mapping[str, str]
    serving: bool

    @property
    def callback_url(self) -> str:
        return f"{self.url}/github/callback/"

    def hud_url(self, repo: str) -> str:
        return f"{self.url}/hud/{repo}"


def add_options(parser: argparse.ArgumentParser) -> None:
    """`crcr ci`'s loop options (all of them only with --payload)."""
    parser.add_argument("--payload", metavar="FILE|-", help="a relay dispatch's client_payload: gate it, run what the "
                        "gate chose, report the callbacks to a relay (the whole CRCR loop)")  # fmt: skip
    parser.add_argument("--relay", metavar="URL", help="with --payload: a running relay (default: one in-process "
                        "over CACHE/relay.sqlite)")  # fmt: skip
    parser.add_argument("--policy", default="configs/crcr.yaml", help="with --payload: the gate policy "
                        "(default: configs/crcr.yaml)")  # fmt: skip
    parser.add_argument("--as", dest="as_repo", metavar="OWNER/NAME", help="with --payload: the downstream repo "
                        "reporting (default: local/<repo folder name>)")  # fmt: skip


def command(args: argparse.Namespace, run_job: RunJob) -> tuple[RunRecord, Path] | None:
    """`crcr ci --payload`: the run's record and directory, or None when the gate skipped."""
    repo = args.as_repo or f"local/{Path(args.repo).resolve().name}"
    return loop(args.payload, run_job, policy=Path(args.policy), device=args.device, repo=repo,
                cache=Path(args.cache).resolve(), relay_url=args.relay or "", only=tuple(args.only))  # fmt: skip


def loop(
    payload: str,
    run_job: RunJob,
    *,
    policy: Path,
    repo: str,
    cache: Path,
    device: str | None = None,
    relay_url: str = "",
    only: tuple[str, ...] = (),
    env: Mapping[str, str] = os.environ,
    say: Say = print,
) -> tuple[RunRecord, Path] | None:
    """Gate the client_payload in file `payload`; when it runs, report `run_job`'s run to the relay and save the
    repo's HUD page into the run directory. None when the gate skipped (nothing is sent)."""
    if not _REPO.match(repo):
        raise LoopError(f"--as must be OWNER/NAME, got {repo[:100]!r}")
    raw = payload_bytes(payload)
    gated = decision(raw, policy, device)
    if not gated.run or not gated.combination:
        say(f"gate: skip: {gated.reason}")
        return None
    if only and only != (gated.combination,):
        raise LoopError(f"--only {', '.join(only)}: the gate chose {gated.combination!r} for this dispatch")
    say(f"gate: run {gated.combination} at {gated.sha}: {gated.reason}")
    client_payload = bodies.load_client_payload(raw.decode("utf-8"))
    with _relay(relay_url, cache, repo, client_payload, env) as endpoint:
        record, run_dir = report(endpoint, client_payload, gated, repo, run_job, cache, say)
        say(f"hud: {save_hud(endpoint, repo, run_dir)}")
        if endpoint.serving:
            say(f"hud: {endpoint.hud_url(repo)}")
        else:
            say(
                f"hud: later, `crcr relay serve --db {cache / 'relay.sqlite'} --repo {repo} --reports {cache / 'runs'}`"
                f" serves it at /hud/{repo}"
            )
    return record, run_dir


@contextmanager
def _relay(
    url: str, cache: Path, repo: str, client_payload: Mapping[str, Any], env: Mapping[str, str]
) -> Iterator[Endpoint]:
    if url:
        yield Endpoint(url.rstrip("/"), env, serving=True)
        return
    with local_relay(cache / "relay.sqlite", repo, client_payload) as endpoint:
        yield endpoint


@contextmanager
def local_relay(db: Path, repo: str, client_payload: Mapping[str, Any]) -> Iterator[Endpoint]:
    """An in-process relay over `db` with `repo` at L2, the client_payload recorded as dispatched to it (as the real
    relay did before the dispatch reached us), minting tokens for `repo` at its runner endpoint."""
    db.parent.mkdir(parents=True, exist_ok=True)
    issuer = Issuer(repository=repo)
    with running_relay(db, allowlist={repo: 2}, rate_limit=600, issuer=issuer, reports=db.parent / "runs") as relay:
        delivery = str(client_payload["delivery_id"])
        if not any(d["delivery_id"] == delivery for d in relay.store.deliveries(repo)):
            relay.store.record_dispatch(delivery, [repo], str(client_payload["event_type"]),
                                        client_payload.get("payload") or {})  # fmt: skip
        runner = {oidc.REQUEST_URL: relay.issuer.token_request_url, oidc.REQUEST_TOKEN: relay.issuer.request_token}
        yield Endpoint(relay.url, runner, serving=False)


def trigger(gated: Decision, job: bodies.Job) -> dict[str, Any]:
    """What the run's record says started it: the dispatch (event, delivery_id, the gate's sha and reason...) and
    the job that reports it."""
    facts = {k: v for k, v in gated.as_dict().items() if v is not None and k not in ("run", "combination")}
    return {**facts, "by": "crcr ci --payload", "run_id": job.run_id, "job_name": job.job_name}


def report(
    endpoint: Endpoint,
    client_payload: Mapping[str, Any],
    gated: Decision,
    repo: str,
    run_job: RunJob,
    cache: Path,
    say: Say = print,
) -> tuple[RunRecord, Path]:
    """in_progress, the job, then completed whatever happened (its results and verdict; `failure` when it raised,
    `cancelled` when interrupted). A relay that refuses in_progress stops the job before it starts: it would refuse
    completed too. The ledger (`cache/callbacks`) keeps each state exactly once, as `crcr callback` does."""
    combination = str(gated.combination)
    job = bodies.Job(WORKFLOW, (cache / "runs").as_uri(), str(time.time_ns()), "1",
                     bodies.job_name(JOB, [f"device={gated.device}", f"combination={combination}"]))  # fmt: skip
    key = ledger.Key(str(client_payload["delivery_id"]), repo, job.run_id, job.run_attempt, job.job_name)
    book = ledger.Ledger(cache / "callbacks")
    post = _poster(endpoint, client_payload)
    _say(say, job, ledger.start(book, key, lambda: post(job, "in_progress", {})))
    try:
        with _terminate_as_interrupt():
            record, run_dir = run_job(trigger(gated, job), combination)
        done = dataclasses.replace(job, url=(run_dir / "report.html").as_uri())
        fields = completed_fields(run_dir, combination, done, client_payload)
        fields["artifact_url"] = f"{endpoint.url}/reports/{run_dir.name}/report.html"
    except BaseException as exc:
        fields = {"conclusion": "cancelled" if isinstance(exc, KeyboardInterrupt) else "failure"}
        try:
            _say(say, job, ledger.finish(book, key, None, lambda: post(job, "completed", fields)))
        except ERRORS as refused:  # said, not raised over the job's own error
            say(f"warning: completed not sent: {str(refused).splitlines()[0]}")
        raise
    _say(say, done, ledger.finish(book, key, None, lambda: post(done, "completed", fields)))
    return record, run_dir


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """A SIGTERM (how a CI runner cancels a job) ends the job as Ctrl-C does, so its completed says cancelled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def completed_fields(
    run_dir: Path, combination: str, job: bodies.Job, client_payload: Mapping[str, Any]
) -> dict[str, Any]:
    """The completed callback's conclusion, test results, failed tests and verdict, read from the run directory."""
    found = from_run.facts(from_run.load_record(run_dir), combination, job=job.job_name,
                           upstream=bodies.upstream_change(client_payload))  # fmt: skip
    return {"conclusion": found.conclusion, "test_results": found.test_results, "failed_tests": found.failed_tests,
            "verdict": found.verdict}  # fmt: skip


def _poster(endpoint: Endpoint, client_payload: Mapping[str, Any]) -> Callable[[bodies.Job, bodies.Status, dict], None]:
    """POST one callback with a token minted for it (a job can outlive a token's five minutes)."""

    def post(job: bodies.Job, status: bodies.Status, fields: dict[str, Any]) -> None:
        workflow = bodies.workflow(job, status, datetime.datetime.now(datetime.UTC), **fields)
        http.request("POST", endpoint.callback_url, json_body=bodies.body(client_payload, workflow),
                     token=oidc.token(endpoint.token_env), retry=http.Retry(attempts=10))  # fmt: skip

    return post


def _say(say: Say, job: bodies.Job, steps: list[str]) -> None:
    for step in steps:
        say(f"crcr callback: {step} for job {job.job_name!r} (run {job.run_id}.{job.run_attempt})")


def save_hud(endpoint: Endpoint, repo: str, run_dir: Path) -> Path:
    """The relay's HUD page for `repo`, as it is now, saved as `run_dir/hud.html`."""
    page = http.request("GET", endpoint.hud_url(repo), headers={"Accept": "text/html"}).body
    path = run_dir / "hud.html"
    path.write_text(page if isinstance(page, str) else "", encoding="utf-8")
    return path


__all__ = ["ERRORS", "Endpoint", "LoopError", "RunJob", "add_options", "command", "local_relay", "loop", "report",
           "save_hud", "trigger"]  # fmt: skip
