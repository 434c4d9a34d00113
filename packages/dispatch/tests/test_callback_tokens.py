"""`crcr callback run` where GitHub is rough, on the real local relay and its issuer: a command that outlives the OIDC
token, a token that cannot be had, a job the relay's sweeper closed first, a completed another sender already
delivered, and a wrapped command that must not see what mints the token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from crcr import oidc
from crcr.relay.server import Relay, running_relay

CRCR = str(Path(sys.executable).parent / "crcr")
RECORD = Path(__file__).parent / "data" / "callback-run" / "record.json"
LIFETIME = 2  # seconds a minted token lives on this issuer
WEBHOOK = {"ref": "refs/heads/main", "after": "c" * 40, "before": "d" * 40, "repository": {"full_name": "p/p"}}


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    with running_relay(tmp_path / "relay.db", rate_limit=100_000, token_lifetime=LIFETIME, leeway=0) as running:
        yield running


@pytest.fixture
def job(relay: Relay, tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A GitHub Actions job's environment (the runner's token endpoint) and the dispatch's client_payload file."""
    payload = tmp_path / "client_payload.json"
    payload.write_text(json.dumps(relay.dispatch("push", WEBHOOK)))
    env = {k: v for k, v in os.environ.items() if k != oidc.DEFAULT_ENV}
    env |= {
        oidc.REQUEST_URL: relay.issuer.token_request_url,
        oidc.REQUEST_TOKEN: relay.issuer.request_token,
        "CRCR_CALLBACK_URL": relay.callback_url,
        "GITHUB_WORKFLOW": "downstream",
        "GITHUB_REPOSITORY": relay.issuer.repository,
        "GITHUB_RUN_ID": "77",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "shard",
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
    }
    return env, payload


def _crcr(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CRCR, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_command_that_outlives_the_token_sends_both_callbacks(relay: Relay, job, tmp_path: Path) -> None:
    env, payload = job
    early = oidc.mint(env)  # what a single token minted before the command would have been
    run_dir = tmp_path / "run"
    script = (f"import shutil, time; time.sleep({LIFETIME + 2}); shutil.copytree({str(RECORD.parent)!r}, "
              f"{str(run_dir)!r})")  # fmt: skip
    done = _crcr("callback", "run", "--payload", str(payload), "--run-dir", str(run_dir), "--", sys.executable, "-c",
                 script, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "completed sent" in done.stdout
    with pytest.raises(Exception, match="expired"):
        relay.verifier.verify(f"Bearer {early}")  # type: ignore[union-attr]
    (sent,) = relay.jobs()
    assert (sent["status"], sent["conclusion"]) == ("COMPLETED", "failure")  # the command passed; its tests did not
    assert sent["test_results"] == {"passed": 4, "failed": 2, "skipped": 1, "total": 7}
    with urllib.request.urlopen(f"{relay.url}/hud/{relay.issuer.repository}") as page:
        hud = page.read().decode()
    assert "COMPLETED" in hud
    assert "<td>4</td>" in hud
    assert relay.issuer.request_token not in done.stdout + done.stderr


def test_a_token_that_cannot_be_had_is_reported_after_the_command_ran(relay: Relay, job, tmp_path: Path) -> None:
    env, payload = job
    env[oidc.REQUEST_TOKEN] = "not-the-runners"
    ran = tmp_path / "ran"
    done = _crcr("callback", "run", "--payload", str(payload), "--", sys.executable, "-c",
                 f"open({str(ran)!r}, 'w').close()", env=env)  # fmt: skip
    assert ran.exists()  # the tests ran
    assert done.returncode == 2
    assert "warning: in_progress not sent (finish will send it): minting the OIDC token failed" in done.stderr
    assert "error: completed not sent: minting the OIDC token failed" in done.stderr
    assert "Traceback" not in done.stderr
    assert relay.jobs() == []


def test_the_wrapped_command_never_sees_what_mints_the_token(job) -> None:
    env, payload = job
    env["CRCR_TOKEN_FILE"] = "x"
    show = "import json, os; print(json.dumps(sorted(os.environ)))"
    done = _crcr("callback", "run", "--payload", str(payload), "--", sys.executable, "-c", show, env=env)
    assert done.returncode == 0, done.stderr
    (listed,) = [line for line in done.stdout.splitlines() if line.startswith("[")]
    seen = set(json.loads(listed))
    assert not {n for n in seen if n.startswith(("ACTIONS_", "CRCR_"))}
    assert {"GITHUB_RUN_ID", "RUNNER_TEMP"} <= seen  # the rest of the job's environment is the command's


def test_a_completed_after_the_sweeper_closed_the_job_is_an_error(relay: Relay, job) -> None:
    env, payload = job
    assert _crcr("callback", "start", "--payload", str(payload), env=env).returncode == 0
    assert relay.store.sweep(0, now=time.time() + 1) == 1
    done = _crcr("callback", "finish", "--payload", str(payload), "--conclusion", "success", env=env)
    assert done.returncode == 2
    assert "completed not stored: the relay's sweeper closed this job as timed_out first" in done.stderr
    assert [(j["status"], j["conclusion"]) for j in relay.jobs()] == [("COMPLETED", "timed_out")]


def test_a_completed_another_sender_delivered_is_an_error_not_a_retry(relay: Relay, job, tmp_path: Path) -> None:
    env, payload = job
    finish = ["callback", "finish", "--payload", str(payload), "--conclusion", "success", "--state-dir"]
    assert _crcr(*finish, str(tmp_path / "a"), env=env).returncode == 0
    done = _crcr(*finish, str(tmp_path / "b"), "--conclusion", "failure", env=env)
    assert done.returncode == 2
    assert "not stored: the relay already holds completed for this job from another sender" in done.stderr
    assert [j["conclusion"] for j in relay.jobs()] == ["success"]
