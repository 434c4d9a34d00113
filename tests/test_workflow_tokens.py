"""The downstream workflow keeps credentials away from upstream code: a job that runs nox (and so collects or runs
the dispatched test files) cannot mint an OIDC token, and the jobs that can mint one run only crcr's callbacks."""

from __future__ import annotations

from pathlib import Path

import yaml

WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"


def _jobs() -> dict[str, dict]:
    return yaml.safe_load((WORKFLOWS / "downstream.yml").read_text())["jobs"]


def _commands(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_no_job_that_runs_upstream_code_can_mint_a_token() -> None:
    jobs = _jobs()
    running = {name for name, job in jobs.items() if "nox " in _commands(job)}
    assert running == {"prepare", "shard", "merge"}
    for name in running:
        assert "id-token" not in jobs[name].get("permissions", {}), name


def test_the_jobs_that_mint_tokens_only_send_callbacks() -> None:
    jobs = _jobs()
    minting = {name for name, job in jobs.items() if job.get("permissions", {}).get("id-token") == "write"}
    assert minting == {"announce", "report"}
    for name in minting:
        lines = [line.strip() for line in _commands(jobs[name]).splitlines()]
        assert not [line for line in lines if line.startswith(("nox", "pytest", "python3 -m pytest"))], name
        assert any(line.startswith("crcr callback") for line in lines), name
        assert not any(step.get("with", {}).get("repository") == "pytorch/pytorch" for step in jobs[name]["steps"])
