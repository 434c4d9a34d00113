"""The whole CRCR loop on one machine: a real-shaped upstream webhook dispatched by the local relay, gated by
`crcr gate`'s own decision, a small real run on the ring device (one test hit by the simulator's transient fault),
the job's callback pair with its results and triage verdict, and the run on the relay's HUD as headless Chromium
renders it. A skipped dispatch sends nothing; a malformed payload file is one error line."""

from __future__ import annotations

import datetime
import html
import importlib.util
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from crcr import cli, http, loop, oidc
from crcr.ci import pipeline, runner
from crcr.ci.ciconfig import CIConfig, DeviceProfile, load_profile
from crcr.ci.model import BuildResult, Prepared, RunRecord
from crcr.relay.issuer import Issuer
from crcr.relay.server import Relay, running_relay
from embedded import COMBINATION, config_folder, ring_suite

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "configs" / "crcr.yaml"
FIXTURES = ROOT / "packages" / "dispatch" / "tests" / "payloads"
REPO = "acme/accel"
JOB_NAME = "ci (ring, primary)"
#: The first kernel each shard process launches raises the device's TransientDeviceError: one test fails, infra.
FAULT = {1: {"RINGSIM_FAULT": "transient@1"}}
TESTS = 6


def _browser() -> ModuleType:
    """The dispatch tests' chromium helper (finds or installs chromium, its offline flags, the skip reasons)."""
    spec = importlib.util.spec_from_file_location("browser", ROOT / "packages" / "dispatch" / "tests" / "browser.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _webhook(name: str) -> dict[str, Any]:
    """The raw GitHub webhook inside a committed real-shaped client_payload."""
    return json.loads((FIXTURES / name).read_text())["payload"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[runner.Suite, dict[str, str]]:
    """The embedded view ops on ring, collected once: the suite and a few of its tests (nodeid -> mode)."""
    configs = config_folder(tmp_path_factory.mktemp("configs"), "test_view_ops.yaml")
    collected = runner.collect(ring_suite(configs), tmp_path_factory.mktemp("collect"))
    return ring_suite(configs), {n: collected.modes[n] for n in collected.selected[:TESTS]}


def small_run(suite: tuple[runner.Suite, dict[str, str]], root: Path) -> loop.RunJob:
    """The job as the pipeline's public pieces run it, minus the backend build: plan, execute, finish, conclude."""
    ring, modes = suite

    def run_job(trigger: Any, combination: str) -> tuple[RunRecord, Path]:
        ring_failures = load_profile(Path(__file__).resolve().parents[1] / "configs", "ring").failures
        profile = DeviceProfile("dev", "ring", (), {"embedded": "configs"}, failures=ring_failures)
        config = CIConfig("dev", ("2.13.0",), "embedded", shards=1, retries=0)
        ctx = pipeline.Context(root, root / "cache", config, profile, shard_env=FAULT)
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        record = RunRecord("20260101T000000Z-loop", started, dict(trigger), pipeline.environment(), "dev")
        run_dir = ctx.cache / "runs" / record.run_id
        work = run_dir / combination
        work.mkdir(parents=True)
        plan = runner.plan_shards(
            ring, list(modes), ctx.durations, "ring/embedded", combination, runner.Planning(1), work
        )
        prepared = Prepared(COMBINATION, BuildResult(True), modes, plan)
        shards, tests = pipeline.execute(ctx, prepared, ring, work)
        record.combinations.append(pipeline.finish(ctx, prepared, ring, shards, tests, work))
        pipeline.conclude(ctx, record, run_dir)
        return record, run_dir

    return run_job


@pytest.fixture
def relay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Relay]:
    """A relay serving for the test, `acme/accel` at L2, its runner token endpoint exported as on a runner."""
    with running_relay(tmp_path / "relay.sqlite", allowlist={REPO: 2}, issuer=Issuer(repository=REPO)) as running:
        monkeypatch.setenv(oidc.REQUEST_URL, running.issuer.token_request_url)
        monkeypatch.setenv(oidc.REQUEST_TOKEN, running.issuer.request_token)
        monkeypatch.delenv(oidc.DEFAULT_ENV, raising=False)
        yield running


def _dispatch(relay: Relay, event: str, webhook: dict[str, Any], path: Path) -> Path:
    """POST the webhook to the relay's /dispatch, as upstream's relay receives it; the client_payload file."""
    answer = http.request("POST", f"{relay.url}/dispatch", json_body={"event_type": event, "payload": webhook}).body
    assert answer["repositories"] == [REPO]
    path.write_text(json.dumps(answer["client_payload"]))
    return path


def _rows(dom: str) -> list[list[str]]:
    """The visible text of each table row's cells in a dumped DOM."""
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", dom, re.S)]
    return [[" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for cell in row] for row in rows]


def test_a_dispatched_pr_runs_reports_and_shows_on_the_hud(suite, relay: Relay, tmp_path: Path, capsys) -> None:
    payload = _dispatch(relay, "pull_request", _webhook("pr_opened_labelled.json"), tmp_path / "payload.json")
    assert cli.main(["gate", "--payload", str(payload), "--policy", str(POLICY)]) == 0
    gated = json.loads(capsys.readouterr().out)
    assert gated["run"]
    assert gated["combination"] == "primary"

    record, run_dir = loop.loop(str(payload), small_run(suite, tmp_path), policy=POLICY, repo=REPO,
                                cache=tmp_path / "loop", relay_url=relay.url)  # fmt: skip
    said = capsys.readouterr().out
    assert said.splitlines()[0].startswith(f"gate: run primary at {gated['sha']}: pull request #171234")
    assert f"in_progress sent for job {JOB_NAME!r}" in said
    assert f"completed sent for job {JOB_NAME!r}" in said
    assert f"hud: {relay.url}/hud/{REPO}" in said
    assert "token" not in said.lower()
    for key in ("event", "delivery_id", "sha", "pr"):
        assert record.trigger[key] == gated[key]
    assert json.loads((run_dir / "record.json").read_text())["trigger"]["sha"] == gated["sha"]

    (job,) = relay.jobs(REPO)
    assert (job["job_name"], job["status"], job["conclusion"]) == (JOB_NAME, "COMPLETED", "failure")
    assert job["test_results"] == {"passed": TESTS - 1, "failed": 1, "skipped": 0, "total": TESTS}
    assert (job["verdict"]["category"], job["verdict"]["confidence"]) == ("infra", "high")
    assert [c["body"]["workflow"]["status"] for c in relay.callbacks()] == ["in_progress", "completed"]
    assert (run_dir / "hud.html").read_text().count(JOB_NAME) == 1

    browser = _browser()
    chromium = browser.chromium_or_skip()
    dumped = browser.headless(
        chromium, tmp_path / "profile", "--no-proxy-server", "--dump-dom", f"{relay.url}/hud/{REPO}"
    )
    if "<body" not in dumped.stdout:
        pytest.skip(f"chromium dumped no DOM (exit {dumped.returncode}): {dumped.stderr[-300:]}")
    (row,) = [r for r in _rows(dumped.stdout) if r and r[0] == JOB_NAME]
    assert row[1:8] == ["crcr ci", "COMPLETED", "failure", str(TESTS - 1), "1", "0", str(TESTS)]
    assert row[8].startswith("infra (high) 1 of 1 failing test(s) infra in primary")
    assert "PR #171234 [privateuse1] Fix aten::flip dispatch" in html.unescape(dumped.stdout)


def test_a_skipped_dispatch_sends_nothing(suite, relay: Relay, tmp_path: Path, capsys) -> None:
    push = {**_webhook("push_main.json"), "ref": "refs/heads/feature/faster-flip"}
    payload = _dispatch(relay, "push", push, tmp_path / "payload.json")

    def never(_trigger: Any, _combination: str) -> tuple[RunRecord, Path]:
        raise AssertionError("a skipped dispatch must not run")

    assert loop.loop(str(payload), never, policy=POLICY, repo=REPO, cache=tmp_path, relay_url=relay.url) is None
    assert capsys.readouterr().out.startswith("gate: skip: push to feature/faster-flip, not a gated branch")
    assert relay.jobs() == []
    assert relay.callbacks() == []
    assert "dispatched; no callback yet" in http.request("GET", f"{relay.url}/hud/{REPO}").body


def test_the_local_relay_keeps_the_run_and_links_its_report(suite, tmp_path: Path, capsys) -> None:
    """With no relay given, the loop's own relay stores the run; a later relay over the same database and runs
    folder (any port) shows the job on its HUD with a working link to the run's report."""
    cache = tmp_path / "cache"
    _, run_dir = loop.loop(str(FIXTURES / "pr_opened_labelled.json"), small_run(suite, tmp_path), policy=POLICY,
                           repo=REPO, cache=cache)  # fmt: skip
    assert f"--reports {cache / 'runs'}" in capsys.readouterr().out
    with running_relay(cache / "relay.sqlite", allowlist={REPO: 2}, reports=cache / "runs") as later:
        page = http.request("GET", f"{later.url}/hud/{REPO}").body
        link = f"/reports/{run_dir.name}/report.html"
        assert f'href="{link}"' in page
        report = http.request("GET", f"{later.url}{link}", headers={"Accept": "text/html"}).body
        assert report == (run_dir / "report.html").read_text()
        for escape in ("/reports/../relay.sqlite/report.html", f"/reports/{run_dir.name}/../record.json",
                       f"/reports/{run_dir.name}/hud.html"):  # fmt: skip
            with pytest.raises(http.HTTPError, match="HTTP 404"):
                http.request("GET", f"{later.url}{escape}")


def _interrupt(_trigger: Any, _combination: str) -> tuple[RunRecord, Path]:
    raise KeyboardInterrupt


def _terminate(_trigger: Any, _combination: str) -> tuple[RunRecord, Path]:
    """What a CI runner does to cancel a job: SIGTERM to the process."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
    raise AssertionError("SIGTERM did not end the job")


@pytest.mark.parametrize("interrupted", [_interrupt, _terminate], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_job_is_reported_cancelled_on_the_local_relay(interrupted, tmp_path: Path, capsys) -> None:
    with pytest.raises(KeyboardInterrupt):
        loop.loop(str(FIXTURES / "pr_opened_labelled.json"), interrupted, policy=POLICY, repo=REPO, cache=tmp_path)
    assert "completed sent" in capsys.readouterr().out
    with running_relay(tmp_path / "relay.sqlite", allowlist={REPO: 2}) as later:  # the store outlives the command
        (job,) = later.jobs(REPO)
    assert (job["status"], job["conclusion"]) == ("COMPLETED", "cancelled")


def test_a_malformed_payload_file_is_one_error_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "payload.json"
    bad.write_text('{"event_type": "pull_request", "delivery_id": ')
    assert cli.main(["ci", "--payload", str(bad), "--policy", str(POLICY), "--cache", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ")
    assert not (tmp_path / "relay.sqlite").exists()
