"""`crcr relay serve` and `crcr relay dispatch`: the local relay from the command line.

`serve` prints one line with its URLs (and writes them as JSON to `--ready-file`, for scripts that start it in the
background) and serves until SIGINT or SIGTERM, then exits 0; it posts dispatches only to its `--consumer` URLs and
its runner endpoint's tokens live `--token-lifetime` seconds. `dispatch` asks a running relay to dispatch a
webhook and prints the client_payload as JSON (exit 1, with the reason, when the event is not dispatched); the same
`--delivery-id` again is a redelivery: the same client_payload, said on stderr, and nothing sent twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crcr import http
from crcr.relay.allowlist import AllowlistError
from crcr.relay.dispatch import DispatchError, write_event_file
from crcr.relay.issuer import TOKEN_LIFETIME, Issuer
from crcr.relay.server import SWEEP_AFTER, build, start

RELAY_ERRORS = (AllowlistError, DispatchError, http.HTTPError, OSError, ValueError)


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """One `error:` line and exit 2 for what a user can get wrong (a bad file, a busy port, a refused request)."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except RELAY_ERRORS as exc:
            print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
            return 2

    return guarded


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within 0..1: {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _consumer_options(given: list[str], repo: str) -> dict[str, str]:
    """`--consumer` values, each `OWNER/REPO=URL` or a bare URL (the consumer of `--repo`), as repo -> URL."""
    consumers: dict[str, str] = {}
    for value in given:
        if value.startswith(("http://", "https://")):  # a URL's query may hold "=": not a REPO=URL
            name, url = repo, value
        elif "=" in value:
            name, url = value.split("=", 1)
        else:
            raise ValueError(f"--consumer {value!r}: expected OWNER/REPO=URL or a URL")
        if name.lower() in consumers:
            raise ValueError(f"--consumer: {name} is given twice")
        consumers[name.lower()] = url
    return consumers


def _write_ready(path: Path, info: dict[str, Any]) -> None:
    """Write atomically, so a script polling for the file never reads half of it."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    os.replace(partial, path)


def _serve(args: argparse.Namespace) -> int:
    db = Path(args.db)
    db.parent.mkdir(parents=True, exist_ok=True)
    relay = build(
        db,
        allowlist=args.allowlist or {args.repo: 2},
        rate_limit=args.rate_limit,
        fail_ratio=args.fail_ratio,
        fail_seed=args.fail_seed,
        sweep_after=args.sweep_after,
        issuer=Issuer(repository=args.repo, token_lifetime=args.token_lifetime),
        reports=Path(args.reports) if args.reports else None,
        consumers=_consumer_options(args.consumer, args.repo),
    )
    server = start(relay, args.host, args.port)
    info = {
        "url": relay.url,
        "callback_url": relay.callback_url,
        "issuer": relay.issuer.url,
        "token_request_url": relay.issuer.token_request_url,
        "token_request_token": relay.issuer.request_token,
    }
    if args.ready_file:
        _write_ready(Path(args.ready_file), info)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"relay: {relay.url} (callback {relay.callback_url}, HUD {relay.url}/hud/{args.repo})", flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


def _dispatch(args: argparse.Namespace) -> int:
    source = sys.stdin if args.webhook == "-" else open(args.webhook)  # noqa: SIM115 - closed below
    with source:
        try:
            webhook = json.load(source)
        except json.JSONDecodeError as exc:
            raise DispatchError(f"{args.webhook}: not JSON ({exc.msg} at line {exc.lineno})") from None
    asked = {"event_type": args.event, "payload": webhook, "to": args.to, "delivery_id": args.delivery_id}
    answer = http.request("POST", f"{args.relay.rstrip('/')}/dispatch", json_body=asked).body
    payload = answer["client_payload"]
    if payload is None:
        print(f"not dispatched: {answer['skipped']}", file=sys.stderr)
        return 1
    if answer["repeated"]:
        print(f"repeated delivery {payload['delivery_id']}: recorded and posted before, nothing sent again",
              file=sys.stderr)  # fmt: skip
    if args.event_file:
        repos = answer["repositories"]
        if not repos:
            raise DispatchError("no allowlisted repository to write an event file for")
        write_event_file(payload, args.repo or repos[0], Path(args.event_file))
    print(json.dumps(payload, sort_keys=True))
    return 0


def add_relay(sub: argparse._SubParsersAction) -> None:
    """`crcr relay serve|dispatch`."""
    relay = sub.add_parser("relay", help="a local CRCR relay: dispatches, callbacks, OIDC issuer, HUD")
    actions = relay.add_subparsers(dest="relay_command", required=True)

    serve = actions.add_parser("serve", help="serve the relay, its OIDC issuer and HUD until SIGINT/SIGTERM")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="port (default: 0, any free one)")
    serve.add_argument("--db", default=".tributary/relay.sqlite", help="the SQLite store (default: %(default)s)")
    serve.add_argument("--allowlist", help="an allowlist YAML (L1..L4); default: --repo at L2")
    serve.add_argument("--repo", default="tributary/tributary", help="the downstream repo the issuer mints for")
    serve.add_argument("--rate-limit", type=_positive, default=60, help="callbacks per repo per minute (default: 60)")
    serve.add_argument("--fail-ratio", type=_ratio, default=0.0, help="answer this fraction of callbacks 429/503")
    serve.add_argument("--fail-seed", type=int, default=0, help="seed of the injected faults (default: 0)")
    serve.add_argument("--sweep-after", type=float, default=SWEEP_AFTER, help="close IN_PROGRESS older (seconds)")
    serve.add_argument("--consumer", action="append", default=[], metavar="REPO=URL",
                       help="a URL dispatches may be POSTed to (`dispatch --to`), for an allowlisted repo; a bare URL "
                       "is --repo's; repeatable. No other URL is ever posted to")  # fmt: skip
    serve.add_argument("--token-lifetime", type=_positive, default=TOKEN_LIFETIME, metavar="SECONDS",
                       help="how long the runner token endpoint's tokens live (default: %(default)s)")  # fmt: skip
    serve.add_argument("--reports", help="a folder of run directories whose reports the HUD links (.tributary/runs)")
    serve.add_argument("--ready-file", help="write {url, callback_url, issuer, token_request_url/token} here")
    serve.set_defaults(run=_guarded(_serve))

    send = actions.add_parser("dispatch", help="dispatch an upstream webhook through a running relay")
    send.add_argument("--relay", required=True, help="the relay's URL")
    send.add_argument("--event", required=True, choices=("pull_request", "push"), help="the upstream event")
    send.add_argument("--webhook", required=True, help="the raw GitHub webhook JSON (- for stdin)")
    target = send.add_mutually_exclusive_group()
    target.add_argument("--to", help="POST the repository_dispatch to this consumer URL (one the relay serves with "
                        "--consumer)")  # fmt: skip
    target.add_argument("--event-file", help="write the repository_dispatch event file ($GITHUB_EVENT_PATH) here")
    send.add_argument("--repo", help="the repository the event file names (default: the first allowlisted)")
    send.add_argument("--delivery-id", help="the webhook's X-GitHub-Delivery (default: a fresh one); the same id "
                      "again is a redelivery, dispatched once")  # fmt: skip
    send.set_defaults(run=_guarded(_dispatch))
