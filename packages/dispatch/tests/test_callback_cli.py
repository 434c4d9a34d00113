"""`crcr callback` on the command line: dry runs, GitHub's environment, and bad input as one `error:` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from crcr.cli import main

SHA = "0123456789abcdef0123456789abcdef01234567"
PAYLOAD = {
    "event_type": "push",
    "delivery_id": "7d0c0000-0000-4000-8000-00000000abcd",
    "payload": {"ref": "refs/heads/main", "after": SHA, "before": "f" * 40},
}
GITHUB_ENV = {
    "GITHUB_WORKFLOW": "downstream",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "tributary/backend",
    "GITHUB_RUN_ID": "123456",
    "GITHUB_RUN_ATTEMPT": "3",
    "GITHUB_JOB": "test",
}


@pytest.fixture
def payload_file(tmp_path: Path) -> Path:
    path = tmp_path / "client_payload.json"
    path.write_text(json.dumps(PAYLOAD))
    return path


@pytest.fixture
def github_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in GITHUB_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.mark.usefixtures("github_env")
def test_start_dry_run_takes_githubs_environment(payload_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["callback", "start", "--dry-run", "--payload", str(payload_file), "--matrix", "device=ring"]) == 0
    sent = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in sent.items() if k != "workflow"} == PAYLOAD
    flow = sent["workflow"]
    assert flow["name"] == "downstream"
    assert flow["url"] == "https://github.com/tributary/backend/actions/runs/123456"
    assert (flow["run_id"], flow["run_attempt"], flow["check_run_id"]) == ("123456", "3", "123456-3")
    assert flow["job_name"] == "test (ring)"
    assert (flow["status"], flow["conclusion"], flow["completed_at"]) == ("in_progress", None, None)


@pytest.mark.usefixtures("github_env")
def test_flags_override_the_environment(payload_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["callback", "finish", "--dry-run", "--payload", str(payload_file), "--conclusion", "cancelled",
            "--workflow", "nightly", "--run-id", "9", "--run-attempt", "1", "--job-name", "leg", "--check-run-id", "77",
            "--workflow-url", "https://ci.example/9", "--artifact-url", "https://ci.example/9/artifacts"]  # fmt: skip
    assert main(argv) == 0
    flow = json.loads(capsys.readouterr().out)["workflow"]
    assert flow == {
        "schema_version": "1",
        "status": "completed",
        "conclusion": "cancelled",
        "name": "nightly",
        "url": "https://ci.example/9",
        "run_id": "9",
        "run_attempt": "1",
        "job_name": "leg",
        "check_run_id": "77",
        "started_at": None,
        "completed_at": flow["completed_at"],
        "artifact_url": "https://ci.example/9/artifacts",
    }
    assert flow["completed_at"].endswith("Z")


@pytest.mark.usefixtures("github_env")
def test_self_report_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["callback", "finish", "--dry-run", "--self-report", "nightly", "--sha", SHA, "--conclusion", "success"]
    assert main(argv) == 0
    sent = json.loads(capsys.readouterr().out)
    assert sent["event_type"] == "nightly"
    assert sent["delivery_id"] == SHA
    assert sent["payload"] == {"repository": {"full_name": "pytorch/pytorch"}, "head_sha": SHA}


@pytest.mark.usefixtures("github_env")
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["start", "--dry-run", "--self-report", "nightly", "--sha", SHA], "only completed"),
        (["finish", "--dry-run", "--self-report", "nightly", "--conclusion", "success"], "go together"),
        (["finish", "--dry-run", "--sha", SHA, "--conclusion", "success"], "go together"),
        (["start", "--dry-run"], "no dispatch"),
        (["start", "--dry-run", "--payload", "/nonexistent/payload.json"], "No such file"),
        (["start", "--payload", "PAYLOAD"], "no callback URL"),
        (["finish", "--dry-run", "--payload", "PAYLOAD"], "--conclusion or --run-dir"),
        (["finish", "--dry-run", "--payload", "PAYLOAD", "--run-dir", "/nonexistent"], "neither a run directory"),
        (["start", "--dry-run", "--payload", "PAYLOAD", "--matrix", "novalue"], "KEY=VALUE"),
        (["start", "--dry-run", "--payload", "PAYLOAD", "--run-id", "12; rm -rf /"], "must be numbers"),
        (["start", "--dry-run", "--payload", "PAYLOAD", "--repo", "not a repo"], "OWNER/NAME"),
        (["run", "--dry-run", "--payload", "PAYLOAD", "--"], "needs a command"),
        (["poll", "--repo", "o/r", "--run-id", "x"], "numeric --run-id"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(
    argv: list[str], says: str, payload_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRCR_CALLBACK_URL", raising=False)
    argv = [str(payload_file) if a == "PAYLOAD" else a for a in argv]
    assert main(["callback", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: ")
    assert says in err[0]


def test_bad_json_payload_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("{'not': json}"))
    assert main(["callback", "start", "--dry-run", "--payload", "-", "--workflow", "w", "--run-id", "1",
                 "--job-name", "j"]) == 2  # fmt: skip
    assert capsys.readouterr().err.startswith("error: the client payload is not JSON")
