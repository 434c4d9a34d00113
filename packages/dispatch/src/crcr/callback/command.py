"""`crcr callback start|finish|run|poll`: the CLI over the body builder, the run facts, the ledger and the token.

`start` sends in_progress, `finish` sends completed (in_progress first if this job never sent it), `run -- CMD`
brackets a command with the pair (cancelled when the job is interrupted), `poll` waits for a dispatched workflow run
and prints its conclusion. Each send gets its own token (minted when it is sent), so a command that outlives a
token still reports; a token that cannot be had is reported after the command ran, never instead of it. The command
never sees what mints the relay's token (crcr.credentials). Workflow fields default from GitHub's environment;
flags override. Exit status: 0 sent (or nothing left to send), 2 bad input or a callback the relay would not take
(a refusal is never silent); `run` exits with the command's status, or 2 when it passed and completed was not sent.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crcr import credentials, http, oidc
from crcr.actions_output import OutputError, write_outputs
from crcr.callback import body as bodies
from crcr.callback import from_run, ledger
from crcr.callback.body import CallbackError

ERRORS = (CallbackError, oidc.TokenError, http.HTTPError, OutputError, OSError)
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class Call:
    """Everything one invocation sends: where, for which job, about which dispatch."""

    payload: dict[str, Any]
    self_reported: bool
    job: bodies.Job
    key: ledger.Key
    url: str
    dry_run: bool
    args: argparse.Namespace

    def body(self, status: bodies.Status, **fields: Any) -> dict[str, Any]:
        now = datetime.datetime.now(datetime.UTC)
        artifact_url = self.args.artifact_url or ""
        return bodies.body(self.payload, bodies.workflow(self.job, status, now, artifact_url=artifact_url, **fields))


def add_callback(sub: argparse._SubParsersAction) -> None:
    """Add `crcr callback` and its actions."""
    callback = sub.add_parser("callback", help="report this job to the relay: start, finish, run a command, poll")
    actions = callback.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="send in_progress (once per job)")
    _common(start)
    start.set_defaults(run=_guarded(_start))
    finish = actions.add_parser("finish", help="send completed (once; in_progress first if it was never sent)")
    _common(finish)
    _results(finish)
    finish.add_argument("--conclusion", choices=bodies.CONCLUSIONS, help="default: from --run-dir")
    finish.add_argument("--no-implicit-start", action="store_true", help="never send in_progress first")
    finish.set_defaults(run=_guarded(_finish))
    run = actions.add_parser("run", help="send in_progress, run COMMAND, send completed from its exit status")
    _common(run)
    _results(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...] (run without a shell)")
    run.set_defaults(run=_guarded(_run))
    poll = actions.add_parser("poll", help="wait for a workflow run to complete and print its conclusion")
    poll.add_argument("--repo", required=True, help="OWNER/NAME of the repository the run belongs to")
    poll.add_argument("--run-id", required=True, help="the workflow run's id")
    poll.add_argument("--github-api", default="", help="default: $GITHUB_API_URL or https://api.github.com")
    poll.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding a GitHub token")
    poll.add_argument("--timeout", type=float, default=6 * 3600.0, help="seconds to wait at most (default: 6 h)")
    poll.add_argument("--interval", type=float, default=15.0, help="seconds between polls (default: 15)")
    poll.set_defaults(run=_guarded(_poll))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--payload", metavar="FILE|-", help="the dispatch's client_payload as JSON")
    parser.add_argument("--self-report", choices=bodies.SELF_REPORTS, help="a nightly/periodic run (with --sha)")
    parser.add_argument("--sha", default="", help="the upstream commit a self-reported run tested")
    parser.add_argument("--url", default="", help="the callback URL (default: $CRCR_CALLBACK_URL)")
    parser.add_argument("--token-env", default="", help="environment variable holding the relay token")
    parser.add_argument("--job-name", default="", help="default: $GITHUB_JOB")
    parser.add_argument("--matrix", action="append", default=[], metavar="KEY=VALUE", help="a matrix value (repeat)")
    parser.add_argument("--workflow", default="", help="the workflow's name (default: $GITHUB_WORKFLOW)")
    parser.add_argument("--workflow-url", default="", help="the run's URL (default: from GitHub's environment)")
    parser.add_argument("--run-id", default="", help="default: $GITHUB_RUN_ID")
    parser.add_argument("--run-attempt", default="", help="default: $GITHUB_RUN_ATTEMPT, else 1")
    parser.add_argument("--check-run-id", default="", help="the job's check run id (default: RUN_ID-RUN_ATTEMPT)")
    parser.add_argument("--repo", default="", help="this repository, OWNER/NAME (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--artifact-url", default="", help="where the full results are")
    parser.add_argument("--state-dir", default="", help="default: $RUNNER_TEMP/crcr-callbacks or .tributary/callbacks")
    parser.add_argument("--attempts", type=int, default=10, help="tries per callback on 429/5xx (default: 10)")
    parser.add_argument("--dry-run", action="store_true", help="print the body JSON and send nothing")


def _results(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", default="", help="a crcr ci run directory (or a runs folder: its newest run)")
    parser.add_argument("--combination", default="", help="the combination to report (default: the primary one)")
    parser.add_argument("--shard", type=int, help="report only this shard of it (a leg, from the merged run)")


def _guarded(action: Callable[[argparse.Namespace, Mapping[str, str]], int]) -> Callable[[argparse.Namespace], int]:
    """`action` with the environment, and every expected failure as one `error:` line and exit 2."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return action(args, os.environ)
        except ERRORS as exc:
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return 2

    return guarded


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename:
        text = f"{exc.filename}: {exc.strerror or text}"
    return " ".join(text.split())


def _call(args: argparse.Namespace, env: Mapping[str, str]) -> Call:
    """Read and check everything a callback needs, before anything is sent."""
    if bool(args.self_report) != bool(args.sha):
        raise CallbackError("--self-report and --sha go together")
    if args.self_report and args.payload:
        raise CallbackError("give either --payload or --self-report, not both")
    if args.self_report:
        payload = bodies.self_report(args.self_report, args.sha)
    elif args.payload:
        text = sys.stdin.read() if args.payload == "-" else Path(args.payload).read_text(encoding="utf-8")
        payload = bodies.load_client_payload(text)
    else:
        raise CallbackError("no dispatch: give --payload FILE|- (or --self-report nightly|periodic --sha SHA)")
    run_id = args.run_id or env.get("GITHUB_RUN_ID", "")
    repo = args.repo or env.get("GITHUB_REPOSITORY", "")
    if repo and not _REPO.match(repo):
        raise CallbackError(f"--repo must be OWNER/NAME, got {repo[:80]!r}")
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    job = bodies.Job(
        name=args.workflow or env.get("GITHUB_WORKFLOW", ""),
        url=args.workflow_url or (f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else ""),
        run_id=run_id,
        run_attempt=args.run_attempt or env.get("GITHUB_RUN_ATTEMPT", "") or "1",
        job_name=bodies.job_name(args.job_name or env.get("GITHUB_JOB", ""), args.matrix),
        check_run_id=args.check_run_id,
    )
    url = args.url or env.get("CRCR_CALLBACK_URL", "")
    if not url and not args.dry_run:
        raise CallbackError("no callback URL: pass --url or set CRCR_CALLBACK_URL (or use --dry-run)")
    key = ledger.Key(payload["delivery_id"], repo, job.run_id, job.run_attempt, job.job_name)
    return Call(payload, bool(args.self_report), job, key, url, args.dry_run, args)


Post = Callable[[bodies.Status, dict[str, Any]], None]


def _poster(call: Call, env: Mapping[str, str]) -> Post:
    """A function that builds a body and gets a token at send time and POSTs it: the timestamp is the send's, and
    a minted token is fresh for each send (an OIDC token lives minutes; a leg's tests can outlast it)."""

    def post(status: bodies.Status, fields: dict[str, Any]) -> None:
        retry = http.Retry(attempts=max(1, call.args.attempts))
        token = oidc.token(env, call.args.token_env)
        answer = http.request("POST", call.url, json_body=call.body(status, **fields), token=token, retry=retry)
        if answer.attempts > 1:
            print(f"crcr callback: {status} took {answer.attempts} attempts", file=sys.stderr)

    return post


def _sends(post: Post, fields: dict[str, Any], implicit_start: bool) -> tuple[ledger.Send | None, ledger.Send]:
    """The ledger's two senders: in_progress (None when it must not be sent first) and completed."""
    start = (lambda: post("in_progress", {})) if implicit_start else None
    return start, lambda: post("completed", fields)


def _ledger(call: Call, env: Mapping[str, str]) -> ledger.Ledger:
    return ledger.Ledger(Path(call.args.state_dir) if call.args.state_dir else ledger.default_dir(env))


def _say(call: Call, steps: list[str]) -> None:
    for step in steps:
        print(f"crcr callback: {step} for job {call.job.job_name!r} (run {call.job.run_id}.{call.job.run_attempt})")


def _start(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    call = _call(args, env)
    if call.self_reported:
        raise CallbackError("a nightly/periodic self-report sends only completed: use finish or run")
    if call.dry_run:
        print(json.dumps(call.body("in_progress"), indent=2, sort_keys=True))
        return 0
    post = _poster(call, env)
    _say(call, ledger.start(_ledger(call, env), call.key, lambda: post("in_progress", {})))
    return 0


def _facts(call: Call, exit_conclusion: str = "") -> dict[str, Any]:
    """The completed body's fields: the conclusion and, with --run-dir, the run's results and verdict. A conclusion
    given (finish --conclusion) decides; a command that passed defers to its results, since a success beside
    failing tests would contradict itself on the HUD; a failed or cancelled command stays so."""
    explicit = getattr(call.args, "conclusion", None)
    if not call.args.run_dir:
        if call.args.shard is not None:
            raise CallbackError("--shard needs --run-dir (the merged run)")
        if not (explicit or exit_conclusion):
            raise CallbackError("finish needs --conclusion or --run-dir")
        return {"conclusion": explicit or exit_conclusion}
    record = from_run.load_record(from_run.resolve_run_dir(Path(call.args.run_dir)))
    found = from_run.facts(
        record,
        call.args.combination,
        job=call.job.job_name,
        log_url=call.args.artifact_url or call.job.url,
        upstream=bodies.upstream_change(call.payload),
        shard=call.args.shard,
    )
    ran = exit_conclusion if exit_conclusion not in ("", "success") else found.conclusion
    return {
        "conclusion": explicit or ran,
        "test_results": found.test_results,
        "failed_tests": found.failed_tests,
        "verdict": found.verdict,
    }


def _finish(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    call = _call(args, env)
    fields = _facts(call)
    completed = call.body("completed", **fields)  # built now, so a bad conclusion fails before anything is sent
    if call.dry_run:
        print(json.dumps(completed, indent=2, sort_keys=True))
        return 0
    implicit = not (call.self_reported or args.no_implicit_start)
    _say(call, ledger.finish(_ledger(call, env), call.key, *_sends(_poster(call, env), fields, implicit)))
    return 0


def _run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise CallbackError("run needs a command after --")
    call = _call(args, env)
    post = None if call.dry_run else _poster(call, env)
    book = _ledger(call, env)
    with _Forwarding() as child:
        if not call.self_reported:
            _send_start(call, book, post)
        code = child.run(
            command, credentials.without_relay_credentials(env, [args.token_env] if args.token_env else [])
        )
    conclusion = "cancelled" if child.signalled else "success" if code == 0 else "failure"
    try:
        fields = _facts(call, conclusion)
    except CallbackError as exc:
        print(f"warning: no results: {_one_line(exc)}", file=sys.stderr)
        fields = {"conclusion": conclusion}
    if post is None:
        print(json.dumps(call.body("completed", **fields), indent=2, sort_keys=True))
        return code
    try:
        _say(call, ledger.finish(book, call.key, *_sends(post, fields, not call.self_reported)))
    except ERRORS as exc:
        print(f"error: completed not sent: {_one_line(exc)}", file=sys.stderr)
        return code or 2
    return code


def _send_start(call: Call, book: ledger.Ledger, post: Post | None) -> None:
    """in_progress before the command; a relay that will not take it does not stop the job (finish sends it)."""
    if post is None:
        print(json.dumps(call.body("in_progress"), indent=2, sort_keys=True))
        return
    try:
        _say(call, ledger.start(book, call.key, lambda: post("in_progress", {})))
    except ERRORS as exc:
        print(f"warning: in_progress not sent (finish will send it): {_one_line(exc)}", file=sys.stderr)


class _Forwarding:
    """SIGINT/SIGTERM handlers that forward the signal to the running child and remember it."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signalled = 0
        self.child: subprocess.Popen[bytes] | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Forwarding:
        self._old = {s: signal.signal(s, self._on_signal) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._old.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signalled = self.signalled or signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self, command: list[str], env: Mapping[str, str]) -> int:
        """The command's exit status (128 + N when it or this job got signal N; 127 when it cannot start)."""
        if self.signalled:
            return 128 + self.signalled
        try:
            self.child = subprocess.Popen(command, env=dict(env))
        except OSError as exc:
            print(f"error: cannot run {command[0]!r}: {exc.strerror or type(exc).__name__}", file=sys.stderr)
            return 127
        if self.signalled and self.child.poll() is None:
            self.child.send_signal(self.signalled)
        code = self.child.wait()
        if self.signalled:
            return 128 + self.signalled
        return 128 - code if code < 0 else code


def _poll(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if not _REPO.match(args.repo) or not args.run_id.isdigit():
        raise CallbackError(f"poll needs --repo OWNER/NAME and a numeric --run-id, got {args.repo[:80]!r}")
    api = (args.github_api or env.get("GITHUB_API_URL", "") or "https://api.github.com").rstrip("/")
    url = f"{api}/repos/{args.repo}/actions/runs/{args.run_id}"
    token = env.get(args.token_env, "") if args.token_env else ""
    deadline = time.monotonic() + args.timeout
    while True:
        run = http.request("GET", url, token=token or None).body
        status = run.get("status") if isinstance(run, dict) else None
        if status == "completed":
            conclusion = str(run.get("conclusion") or "")
            write_outputs({"conclusion": conclusion}, env.get("GITHUB_OUTPUT", ""))
            print(conclusion)
            return 0
        if time.monotonic() + args.interval > deadline:
            raise CallbackError(f"run {args.run_id} of {args.repo} not completed after {args.timeout:g} s ({status})")
        time.sleep(args.interval)
