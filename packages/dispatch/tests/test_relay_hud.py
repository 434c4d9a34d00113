"""The relay's HUD: what it shows per delivery and job, hostile strings escaped, and a real Chromium rendering."""

from __future__ import annotations

import html
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_or_skip, headless, pixels
from crcr.relay.server import Relay, running_relay

REPO = "acme/accel"
XSS = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>\"'&"
PR = {
    "action": "opened",
    "number": 42,
    "pull_request": {"number": 42, "title": f"fix {XSS}", "html_url": "javascript:alert(1)",
                     "head": {"sha": "a" * 40}, "base": {"ref": "main"}},
}  # fmt: skip
LEGS = ("test (ring, 1, 2)", "test (ring, 2, 2)", f"lint {XSS}")


def flow(status: str, job_name: str, **extra: Any) -> dict[str, Any]:
    started = status == "in_progress"
    return {
        "schema_version": "1", "status": status, "conclusion": None if started else "failure", "name": "downstream",
        "url": "https://github.com/acme/accel/actions/runs/9", "run_id": "9", "run_attempt": "1",
        "job_name": job_name, "check_run_id": "9-1",
        "started_at": "2026-12-01T10:00:00Z" if started else None,
        "completed_at": None if started else "2026-12-01T10:30:00Z", **extra,
    }  # fmt: skip


def send(relay: Relay, payload: dict[str, Any], workflow: dict[str, Any]) -> int:
    data = json.dumps({**payload, "workflow": workflow}).encode()
    headers = {"Authorization": f"Bearer {relay.issuer.mint(repository=REPO)}", "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(relay.callback_url, data, headers, method="POST")) as answer:
        return answer.status


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    """A relay holding one PR delivery with three legs (two finished, one running) and a pending push."""
    with running_relay(tmp_path / "relay.db", allowlist={REPO: 2}) as running:
        running.dispatch("push", {"ref": "refs/heads/main", "before": "b" * 40, "after": "d" * 40})
        payload = running.dispatch("pull_request", PR)
        for leg in LEGS:
            assert send(running, payload, flow("in_progress", leg)) == 200
        verdict = {"schema_version": 1, "category": "upstream", "confidence": "high",
                   "summary": f"torch moved; aten::flip broke {XSS}"}  # fmt: skip
        counts = {"passed": 1234, "failed": 3, "skipped": 56, "total": 1293}
        report = "https://example.org/runs/9/report.html?leg=1&x=<b>"
        assert send(running, payload, flow("completed", LEGS[0], test_results=counts, artifact_url=report,
                                            triage_verdict=verdict)) == 200  # fmt: skip
        bad_verdict = {**verdict, "category": "cosmic rays"}
        done = flow("completed", LEGS[1], conclusion="success", artifact_url="https://example.org/runs/9/leg2.html")
        assert send(running, payload, {**done, "triage_verdict": bad_verdict}) == 200
        yield running


def hud(relay: Relay) -> str:
    with urllib.request.urlopen(f"{relay.url}/hud/{REPO}") as answer:
        assert answer.headers["Content-Type"].startswith("text/html")
        return answer.read().decode()


def test_the_hud_escapes_every_hostile_string(relay: Relay) -> None:
    page = hud(relay)
    assert "<script>" not in page
    assert "onerror=alert" not in page.replace(html.escape("onerror=alert"), "")
    assert html.escape(f"lint {XSS}", quote=True) in page
    assert 'href="javascript:' not in page  # a javascript: PR URL is shown as text, never linked
    assert 'href="https://example.org/runs/9/report.html?leg=1&amp;x=&lt;b&gt;"' in page


def test_the_api_lists_deliveries_with_their_jobs(relay: Relay) -> None:
    with urllib.request.urlopen(f"{relay.url}/api/deliveries?repo={REPO}") as answer:
        deliveries = json.loads(answer.read())["deliveries"]
    assert [d["event_type"] for d in deliveries] == ["pull_request", "push"]
    assert [j["job_name"] for j in deliveries[0]["jobs"]] == list(LEGS)
    assert deliveries[0]["jobs"][0]["verdict"]["category"] == "upstream"
    assert deliveries[0]["jobs"][1]["verdict"] is None
    assert deliveries[0]["jobs"][1]["notes"][0].startswith("triage_verdict dropped")


def _text(dom: str) -> str:
    """The visible text of a dumped DOM: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def test_chromium_shows_jobs_counts_and_verdicts(relay: Relay, tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    url = f"{relay.url}/hud/{REPO}"
    dumped = headless(chromium, tmp_path / "profile", "--no-proxy-server", "--dump-dom", url)
    if "<body" not in dumped.stdout:
        pytest.skip(f"chromium dumped no DOM (exit {dumped.returncode}): {dumped.stderr[-300:]}")
    text = _text(dumped.stdout)
    assert "<title>CRCR HUD: acme/accel</title>" in dumped.stdout  # the script never ran: the title is ours
    for leg in LEGS:
        assert leg in text
    assert "1234 3 56 1293" in text
    assert "upstream (high) torch moved; aten::flip broke" in text
    assert "triage_verdict dropped: category must be" in text
    assert "PR #42 fix" in text
    assert "a" * 40 in text
    assert "push refs/heads/main" in text
    assert "dispatched; no callback yet" in text
    assert "IN_PROGRESS" in text
    assert "COMPLETED" in text
    assert "run report" in text
    png = tmp_path / "hud.png"
    headless(chromium, tmp_path / "profile", "--no-proxy-server", f"--screenshot={png}", "--window-size=1400,900", url)
    if not png.exists():
        pytest.skip("chromium started but wrote no screenshot")
    width, height, shown = pixels(png.read_bytes())
    assert (width, height) == (1400, 900)
    assert b"\xda\xfb\xe1" in set(shown)
    assert b"\xff\xeb\xe9" in set(shown)
