"""`crcr relay serve` and `crcr relay dispatch` as processes: ready file, event file, runner tokens, clean stop."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import jwt
import pytest
from crcr.relay.issuer import AUDIENCE, with_audience
from crcr.relay.web import Reply, Request, base_url, bind, serving

CRCR = str(Path(sys.executable).with_name("crcr"))
DISPATCH = ["dispatch", "--relay", "http://127.0.0.1:9", "--event", "push", "--webhook"]
PUSH = {"ref": "refs/heads/main", "before": "b" * 40, "after": "d" * 40}


def serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Start `crcr relay serve` and wait for its ready file."""
    ready = tmp_path / "ready.json"
    command = [CRCR, "relay", "serve", "--db", str(tmp_path / "relay.db"), "--ready-file", str(ready), *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"crcr relay serve did not start: {process.communicate()}")
        time.sleep(0.05)
    return process, json.loads(ready.read_text())


def test_serve_dispatch_callback_and_a_clean_sigterm(tmp_path: Path) -> None:
    allowlist = tmp_path / "allowlist.yml"
    allowlist.write_text("L1: [acme/listener]\nL3:\n  ring:\n    acme/accel: [oncall]\n")
    process, ready = serve(tmp_path, "--allowlist", str(allowlist), "--repo", "acme/accel", "--token-lifetime", "120")
    try:
        (tmp_path / "push.json").write_text(json.dumps(PUSH))
        event = tmp_path / "event.json"
        sent = subprocess.run(
            [CRCR, "relay", "dispatch", "--relay", ready["url"], "--event", "push", "--webhook",
             str(tmp_path / "push.json"), "--event-file", str(event), "--repo", "acme/accel"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        payload = json.loads(sent.stdout)
        written = json.loads(event.read_text())
        assert written["action"] == "push"
        assert written["client_payload"] == payload
        assert written["repository"]["full_name"] == "acme/accel"

        token_url = with_audience(ready["token_request_url"], AUDIENCE)
        asked = urllib.request.Request(token_url, headers={"Authorization": f"Bearer {ready['token_request_token']}"})
        with urllib.request.urlopen(asked) as answer:
            token = json.loads(answer.read())["value"]
        claims = jwt.decode(token, options={"verify_signature": False})
        assert claims["exp"] - claims["iat"] == 120
        flow = {"schema_version": "1", "status": "in_progress", "conclusion": None, "run_id": "1", "run_attempt": "1",
                "job_name": "test", "started_at": "2026-12-01T10:00:00Z", "completed_at": None}  # fmt: skip
        body = json.dumps({**payload, "workflow": flow}).encode()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        with urllib.request.urlopen(urllib.request.Request(ready["callback_url"], body, headers)) as answer:
            assert json.loads(answer.read())["state"] == "IN_PROGRESS"
        with urllib.request.urlopen(f"{ready['url']}/hud/acme/accel") as answer:
            assert payload["delivery_id"] in answer.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out.startswith(f"relay: {ready['url']} ")
    assert err == ""


def test_a_labeled_event_is_not_dispatched(tmp_path: Path) -> None:
    process, ready = serve(tmp_path)
    try:
        sent = subprocess.run(
            [CRCR, "relay", "dispatch", "--relay", ready["url"], "--event", "pull_request", "--webhook", "-"],
            input=json.dumps({"action": "labeled", "pull_request": {"number": 1}}),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    assert (sent.returncode, sent.stdout) == (1, "")
    assert sent.stderr.startswith("not dispatched: pull_request action 'labeled'")
    assert process.returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--allowlist", "{missing}"], "error: {missing}: "),
        (["serve", "--allowlist", "{bad}"], "error: {bad}: unknown key 'L9'"),
        (["serve", "--port", "{busy}"], "error: "),
        (
            ["serve", "--consumer", "stranger/repo=http://127.0.0.1:9/"],
            "error: consumer stranger/repo: not an allowlisted repository",
        ),
        (["serve", "--consumer", "ftp://127.0.0.1/"], "error: --consumer 'ftp://127.0.0.1/': expected OWNER/REPO=URL"),
        (
            ["serve", "--consumer", "http://127.0.0.1:9/a", "--consumer", "tributary/tributary=http://127.0.0.1:9/b"],
            "error: --consumer: tributary/tributary is given twice",
        ),
        ([*DISPATCH, "{missing}"], "error: "),
        ([*DISPATCH, "{bad}"], "error: {bad}: not JSON"),
    ],
    ids=[
        "missing-allowlist",
        "bad-allowlist",
        "busy-port",
        "unlisted-consumer",
        "not-a-consumer",
        "consumer-twice",
        "missing-webhook",
        "bad-webhook",
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("L9: [a/b]\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        names = {"missing": str(tmp_path / "missing"), "bad": str(bad), "busy": str(busy.getsockname()[1])}
        args = [arg.format(**names) for arg in args]
        db = ["--db", str(tmp_path / "r.db")] if args[0] == "serve" else []
        done = subprocess.run([CRCR, "relay", *args, *db], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(message.format(**names)), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(("value", "why"), [("0", "must be at least 1: 0"), ("abc", "not a whole number: abc")])
def test_a_bad_token_lifetime_is_a_usage_error(tmp_path: Path, value: str, why: str) -> None:
    args = [CRCR, "relay", "serve", "--db", str(tmp_path / "r.db"), "--token-lifetime", value]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"crcr relay serve: error: argument --token-lifetime: {why}"


def test_dispatch_posts_only_to_a_configured_consumer_and_once_per_delivery(tmp_path: Path) -> None:
    received: list[str] = []

    def consumer(request: Request) -> Reply:
        received.append(json.loads(request.body)["client_payload"]["delivery_id"])
        return Reply(204, b"")

    (tmp_path / "push.json").write_text(json.dumps(PUSH))
    with serving(bind(consumer)) as server:
        to = f"{base_url(server)}/repos/acme/accel/dispatches"
        process, ready = serve(tmp_path, "--repo", "acme/accel", "--consumer", to)
        try:
            send = [CRCR, "relay", "dispatch", "--relay", ready["url"], "--event", "push", "--webhook",
                    str(tmp_path / "push.json"), "--delivery-id", "d-1"]  # fmt: skip
            runs = [subprocess.run([*send, "--to", url], capture_output=True, text=True, check=False)
                    for url in (to, to, f"{base_url(server)}/elsewhere")]  # fmt: skip
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)
    first, again, elsewhere = runs
    assert (first.returncode, first.stderr) == (0, "")
    assert (again.returncode, again.stdout) == (0, first.stdout)
    assert again.stderr.startswith("repeated delivery d-1: ")
    assert json.loads(first.stdout)["delivery_id"] == "d-1"
    assert elsewhere.returncode == 2
    assert "HTTP 403" in elsewhere.stderr
    assert "is not a configured consumer" in elsewhere.stderr
    assert len(elsewhere.stderr.strip().splitlines()) == 1
    assert received == ["d-1"]
