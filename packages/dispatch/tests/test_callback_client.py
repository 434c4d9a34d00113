"""`crcr callback` against real local servers: the relay (crcr.relay), a runner-shaped OIDC endpoint, a GitHub
actions-runs endpoint, and faults. Nothing of ours is mocked; tokens are checked to never reach the output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from crcr import http, oidc
from crcr.callback import ledger
from crcr.cli import main
from crcr.relay.server import Relay, running_relay

PR_WEBHOOK = {
    "action": "synchronize",
    "number": 7,
    "pull_request": {"number": 7, "title": "faster", "head": {"sha": "a" * 40, "repo": {"full_name": "x/y"}},
                     "base": {"ref": "main"}, "labels": [], "merged": False},
    "repository": {"full_name": "pytorch/pytorch"},
}  # fmt: skip
LEGS = ("ring", "cpu", "fallback", "ring-debug")
CRCR = str(Path(sys.executable).parent / "crcr")
FAST = http.Retry(attempts=3, base_delay=0.01, max_delay=0.05)


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    with running_relay(tmp_path / "relay.db", rate_limit=100_000) as running:
        yield running


@pytest.fixture
def runner_env(relay: Relay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A GitHub Actions job's environment: the runner's token endpoint, the run's ids, a callback URL."""
    env = {
        oidc.REQUEST_URL: relay.issuer.token_request_url,
        oidc.REQUEST_TOKEN: relay.issuer.request_token,
        "CRCR_CALLBACK_URL": relay.callback_url,
        "GITHUB_WORKFLOW": "downstream",
        "GITHUB_REPOSITORY": relay.issuer.repository,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "test",
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
    }
    monkeypatch.delenv(oidc.DEFAULT_ENV, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def dispatched(relay: Relay, tmp_path: Path) -> Path:
    path = tmp_path / "client_payload.json"
    path.write_text(json.dumps(relay.dispatch("pull_request", PR_WEBHOOK)))
    return path


def _pairs(relay: Relay) -> Counter[tuple[str, str]]:
    """(job_name, status) -> how many callbacks the relay accepted."""
    return Counter((c["body"]["workflow"]["job_name"], c["status"]) for c in relay.callbacks())


@pytest.mark.usefixtures("runner_env")
def test_matrix_legs_each_send_one_pair_the_relay_accepts(
    relay: Relay, dispatched: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for leg in LEGS:
        common = ["--payload", str(dispatched), "--matrix", f"device={leg}", "--matrix", "python=3.11"]
        assert main(["callback", "start", *common]) == 0
        assert main(["callback", "start", *common]) == 0  # a second start is a no-op, said as such
        assert main(["callback", "finish", *common, "--conclusion", "success"]) == 0
        assert main(["callback", "finish", *common, "--conclusion", "failure"]) == 0  # and so is a second finish
    out = capsys.readouterr().out
    assert out.count("in_progress sent") == len(LEGS)
    assert out.count("in_progress not sent: this job already sent in_progress") == len(LEGS)
    assert out.count("completed not sent: this job already completed") == len(LEGS)
    jobs = {j["job_name"]: j for j in relay.jobs()}
    assert sorted(jobs) == sorted(f"test ({leg}, 3.11)" for leg in LEGS)
    assert {(j["status"], j["conclusion"]) for j in jobs.values()} == {("COMPLETED", "success")}
    assert set(_pairs(relay).values()) == {1}
    assert len(_pairs(relay)) == 2 * len(LEGS)


@pytest.mark.usefixtures("runner_env")
def test_finish_without_start_sends_the_pair(relay: Relay, dispatched: Path) -> None:
    assert main(["callback", "finish", "--payload", str(dispatched), "--conclusion", "failure"]) == 0
    assert _pairs(relay) == Counter({("test", "in_progress"): 1, ("test", "completed"): 1})
    assert relay.jobs()[0]["conclusion"] == "failure"


@pytest.mark.usefixtures("runner_env")
def test_no_implicit_start_leaves_the_relays_refusal_visible(
    relay: Relay, dispatched: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["callback", "finish", "--payload", str(dispatched), "--conclusion", "success", "--no-implicit-start"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: POST http://127.0.0.1:")
    assert "HTTP 400" in err
    assert relay.callbacks() == []


@pytest.mark.usefixtures("runner_env")
def test_a_finish_with_the_run_record_carries_results_and_verdict(relay: Relay, dispatched: Path) -> None:
    run_dir = Path(__file__).parent / "data" / "callback-run"
    argv = ["callback", "finish", "--payload", str(dispatched), "--run-dir", str(run_dir),
            "--artifact-url", "https://ci.example/runs/1"]  # fmt: skip
    assert main(argv) == 0
    job = relay.jobs()[0]
    assert job["conclusion"] == "failure"
    assert job["test_results"] == {"passed": 4, "failed": 2, "skipped": 1, "total": 7}
    assert job["verdict"]["category"] == "upstream"
    assert "suspected_upstream" not in job["verdict"]  # the recorded core is a release, not the PR's commit
    assert "is not the dispatched commit aaaaaaaaaaaa" in job["verdict"]["summary"]
    assert [t["name"] for t in job["failed_tests"]] == ["test_add_float32", "test_mul_float32"]
    assert job["notes"] == []  # nothing dropped by the relay's checks


@pytest.mark.usefixtures("runner_env")
def test_self_reported_nightly_sends_completed_only(relay: Relay) -> None:
    sha = "b" * 40
    argv = ["callback", "finish", "--self-report", "nightly", "--sha", sha, "--conclusion", "success"]
    assert main(argv) == 0
    assert main(argv) == 0
    assert _pairs(relay) == Counter({("test", "completed"): 1})
    assert relay.jobs()[0]["delivery_id"] == sha


def test_faults_on_a_third_of_requests_lose_and_duplicate_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with running_relay(tmp_path / "relay.db", rate_limit=100_000, fail_ratio=0.33, fail_seed=7) as relay:
        payload = tmp_path / "client_payload.json"
        payload.write_text(json.dumps(relay.dispatch("pull_request", PR_WEBHOOK)))
        env = {**os.environ, "CRCR_TOKEN": relay.issuer.mint(repository=relay.issuer.repository)}
        legs = [f"leg{i}" for i in range(8)]
        for leg in legs:
            common = ["--payload", str(payload), "--url", relay.callback_url, "--workflow", "w", "--run-id", "9",
                      "--job-name", "test", "--matrix", f"shard={leg}", "--state-dir", str(tmp_path)]  # fmt: skip
            for action in (["start"], ["finish", "--conclusion", "success"]):
                done = subprocess.run(
                    [CRCR, "callback", *action, *common], env=env, capture_output=True,
                    text=True, check=False
                )  # fmt: skip
                assert done.returncode == 0, done.stderr
                assert env["CRCR_TOKEN"] not in done.stdout + done.stderr
        assert relay.faults.injected > 0
        assert {j["status"] for j in relay.jobs()} == {"COMPLETED"}
        assert len(relay.jobs()) == len(legs)
        assert set(_pairs(relay).values()) == {1}


def test_runner_minting_and_the_token_never_printed(
    relay: Relay, runner_env: dict[str, str], dispatched: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    minted = oidc.mint(runner_env)
    claims = relay.verifier.verify(f"Bearer {minted}")  # type: ignore[union-attr]
    assert claims["aud"] == oidc.AUDIENCE
    assert main(["callback", "start", "--payload", str(dispatched)]) == 0
    assert main(["callback", "start", "--payload", str(dispatched), "--url", relay.url + "/nowhere"]) == 0  # ledger
    assert main(["callback", "finish", "--payload", str(dispatched), "--conclusion", "success", "--url",
                 relay.url + "/nowhere", "--job-name", "other"]) == 2  # fmt: skip
    out = capfd.readouterr()
    for secret in (runner_env[oidc.REQUEST_TOKEN], minted):
        assert secret not in out.out + out.err


def test_request_url_gets_the_audience_with_or_without_a_query() -> None:
    assert oidc.request_url("https://t.example/id?api-version=2.0") == (
        "https://t.example/id?api-version=2.0&audience=pytorch-cross-repo-ci-relay"
    )
    assert oidc.request_url("https://t.example/id") == "https://t.example/id?audience=pytorch-cross-repo-ci-relay"
    assert (
        oidc.request_url("https://t.example/id?audience=x&a=1", "a b&c") == "https://t.example/id?a=1&audience=a+b%26c"
    )


class _Endpoint(BaseHTTPRequestHandler):
    """A tiny runner token endpoint and GitHub actions-runs API: answers come from the server's script."""

    def do_GET(self) -> None:
        server: Any = self.server
        server.seen.append((self.path, self.headers.get("Authorization", "")))
        status, body = server.script.pop(0) if len(server.script) > 1 else server.script[0]
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def endpoint() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
    server.seen, server.script = [], [(200, {})]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_minting_retries_a_runner_5xx_and_fails_without_the_token(
    endpoint: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint.script = [(503, {}), (200, {"count": 1, "value": "minted-jwt-value"})]
    env = {oidc.REQUEST_URL: f"{endpoint.url}/_apis/token?api-version=2.0", oidc.REQUEST_TOKEN: "runner-secret-123"}
    assert oidc.token(env, retry=FAST) == "minted-jwt-value"
    assert endpoint.seen[-1] == (
        "/_apis/token?api-version=2.0&audience=pytorch-cross-repo-ci-relay",
        "Bearer runner-secret-123",
    )
    endpoint.script = [(500, {"echo": "runner-secret-123"})]
    with pytest.raises(oidc.TokenError) as failed:
        oidc.token(env, retry=FAST)
    assert "runner-secret-123" not in str(failed.value)
    endpoint.script = [(200, {"nothing": True})]
    with pytest.raises(oidc.TokenError, match="without a `value`"):
        oidc.token(env, retry=FAST)
    assert oidc.token({**env, "MY_TOKEN": "given"}, "MY_TOKEN") == "given"
    with pytest.raises(oidc.TokenError, match="--token-env NOPE"):
        oidc.token(env, "NOPE")
    with pytest.raises(oidc.TokenError, match="id-token: write"):
        oidc.token({})


def test_poll_waits_for_the_dispatched_run(
    endpoint: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    endpoint.script = [(200, {"status": "queued"}), (503, {}), (200, {"status": "in_progress"}),
                       (200, {"status": "completed", "conclusion": "failure"})]  # fmt: skip
    argv = ["callback", "poll", "--repo", "tributary/matrix", "--run-id", "77", "--github-api", endpoint.url,
            "--interval", "0.01", "--timeout", "30"]  # fmt: skip
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == "failure"
    name, value = outputs.read_text().splitlines()[:2]
    assert (name.partition("<<")[0], value) == ("conclusion", "failure")  # for the parent job's next step
    assert {path for path, _ in endpoint.seen} == {"/repos/tributary/matrix/actions/runs/77"}
    endpoint.script = [(200, {"status": "queued"})]
    assert main([*argv[:-1], "0.05"]) == 2
    assert "not completed after 0.05 s (queued)" in capsys.readouterr().err


def _run_crcr(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([CRCR, "callback", "run", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


@pytest.mark.parametrize(("code", "conclusion"), [(0, "success"), (1, "failure")])
def test_run_brackets_a_command(
    relay: Relay, runner_env: dict[str, str], dispatched: Path, code: int, conclusion: str
) -> None:
    child = _run_crcr(["--payload", str(dispatched), "--", sys.executable, "-c", f"raise SystemExit({code})"],
                      {**os.environ, **runner_env})  # fmt: skip
    out, err = child.communicate(timeout=60)
    assert child.returncode == code, err
    assert relay.jobs()[0]["conclusion"] == conclusion
    assert set(_pairs(relay).values()) == {1}
    assert runner_env[oidc.REQUEST_TOKEN] not in out + err


def test_run_reports_cancelled_when_the_job_is_terminated(
    relay: Relay, runner_env: dict[str, str], dispatched: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "child-ready"
    script = f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('x'); time.sleep(60)"
    child = _run_crcr(["--payload", str(dispatched), "--", sys.executable, "-c", script], {**os.environ, **runner_env})
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert [(j["status"], j["conclusion"]) for j in relay.jobs()] == [("COMPLETED", "cancelled")]
    assert set(_pairs(relay).values()) == {1}


def test_ledger_files_are_per_key(tmp_path: Path) -> None:
    book = ledger.Ledger(tmp_path)
    one, two = ledger.Key("d", "o/r", "1", "1", "a"), ledger.Key("d", "o/r", "1", "1", "b")
    sent: list[str] = []
    assert ledger.start(book, one, lambda: sent.append("one")) == ["in_progress sent"]
    assert ledger.finish(book, two, None, lambda: sent.append("two")) == ["completed sent"]
    assert ledger.start(book, two, lambda: sent.append("again")) == [
        "in_progress not sent: this job already sent completed"
    ]
    assert sent == ["one", "two"]
    assert len(list(tmp_path.glob("*.json"))) == 2
    assert ledger.default_dir({"RUNNER_TEMP": "/rt"}) == Path("/rt/crcr-callbacks")


@pytest.mark.usefixtures("runner_env")
def test_a_state_the_relay_already_holds_is_recorded_not_failed(
    relay: Relay, dispatched: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = ["--state-dir", str(tmp_path / "a")], ["--state-dir", str(tmp_path / "b")]
    assert main(["callback", "start", "--payload", str(dispatched), *first]) == 0
    assert main(["callback", "start", "--payload", str(dispatched), *second]) == 0  # as after a lost answer
    assert "in_progress already held by the relay" in capsys.readouterr().out
    assert main(["callback", "finish", "--payload", str(dispatched), "--conclusion", "success", *second]) == 0
    assert _pairs(relay) == Counter({("test", "in_progress"): 1, ("test", "completed"): 1})


@pytest.mark.usefixtures("runner_env")
def test_a_finish_for_a_job_the_sweeper_closed_is_an_error(
    relay: Relay, dispatched: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["callback", "start", "--payload", str(dispatched)]) == 0
    assert relay.store.sweep(0) == 1
    assert main(["callback", "finish", "--payload", str(dispatched), "--conclusion", "success"]) == 2
    err = capsys.readouterr().err
    assert "already held" not in err  # not mistaken for a retried request of its own
    assert "timed_out" in err
    assert relay.jobs()[0]["conclusion"] == "timed_out"
