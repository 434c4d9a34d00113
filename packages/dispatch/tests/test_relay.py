"""The local relay over real HTTP: tokens, the 400 rules, the state machine, rate limit, levels, extras, sweeper."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jwt
import pytest
from crcr.relay.dispatch import DispatchError, UnknownConsumer
from crcr.relay.issuer import AUDIENCE, new_key, with_audience
from crcr.relay.server import Relay, build, running_issuer, running_relay, start
from crcr.relay.store import Store
from crcr.relay.validate import DETAIL_MAX, SUMMARY_MAX, Rejected, check
from crcr.relay.web import Reply, Request, base_url, bind, serving

REPO = "acme/accel"
SHA = "c" * 40
PR_WEBHOOK = {
    "action": "synchronize",
    "number": 7,
    "pull_request": {"number": 7, "title": "make it faster", "head": {"sha": "a" * 40, "repo": {"full_name": "x/y"}},
                     "base": {"ref": "main"}, "labels": [], "merged": False},
    "repository": {"full_name": "pytorch/pytorch"},
}  # fmt: skip


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    with running_relay(tmp_path / "relay.db", allowlist={REPO: 2, "acme/listener": 1}, rate_limit=1000) as running:
        yield running


def post(
    url: str, body: Any, token: str | None, extra: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One POST with no retries: the status, JSON answer and headers exactly as the relay gave them."""
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    headers |= extra or {}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method="POST"), timeout=30) as answer:
            return answer.status, json.loads(answer.read()), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def workflow(status: str, job_name: str = "test (default, 1, 2)", run_id: str = "100", **extra: Any) -> dict[str, Any]:
    """A schema-1 workflow object for `status`, as the callback action sends it."""
    started = status == "in_progress"
    return {
        "schema_version": "1",
        "status": status,
        "conclusion": None if started else "success",
        "name": "downstream",
        "url": f"https://github.com/{REPO}/actions/runs/{run_id}",
        "run_id": run_id,
        "run_attempt": "1",
        "job_name": job_name,
        "check_run_id": f"{run_id}-1",
        "started_at": "2026-12-01T10:00:00Z" if started else None,
        "completed_at": None if started else "2026-12-01T10:20:00Z",
        **extra,
    }


def callback(relay: Relay, payload: dict[str, Any], flow: dict[str, Any], repo: str = REPO) -> tuple[int, dict]:
    status, answer, _ = post(relay.callback_url, {**payload, "workflow": flow}, relay.issuer.mint(repository=repo))
    return status, answer


def test_a_pair_moves_the_job_through_the_state_machine_and_is_stored(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert set(payload) == {"event_type", "delivery_id", "payload"}
    assert payload["payload"] == PR_WEBHOOK
    assert callback(relay, payload, workflow("in_progress")) == (200, {"state": "IN_PROGRESS", "notes": []})
    counts = {"passed": 10, "failed": 1, "skipped": 2, "total": 13}
    done = workflow("completed", conclusion="failure", test_results=counts, artifact_url="https://example.org/r.html")
    assert callback(relay, payload, done) == (200, {"state": "COMPLETED", "notes": []})
    [job] = relay.jobs()
    assert (job["delivery_id"], job["repo"], job["status"], job["conclusion"]) == (
        payload["delivery_id"], REPO, "COMPLETED", "failure")  # fmt: skip
    assert job["started_at"] == "2026-12-01T10:00:00Z"
    assert job["completed_at"] == "2026-12-01T10:20:00Z"
    assert job["test_results"] == counts
    assert job["artifact_url"] == "https://example.org/r.html"
    assert [c["status"] for c in relay.callbacks()] == ["in_progress", "completed"]


def test_a_matrix_of_legs_each_completes_its_own_pair(relay: Relay) -> None:
    payload = relay.dispatch("push", {"ref": "refs/heads/main", "before": "b" * 40, "after": "d" * 40})
    legs = [f"test (openreg, {shard}, 3, torch-{torch})" for shard in (1, 2, 3) for torch in ("2.13", "2.14")]
    for leg in legs:
        assert callback(relay, payload, workflow("in_progress", leg))[0] == 200
    for leg in reversed(legs):
        assert callback(relay, payload, workflow("completed", leg))[0] == 200
    assert sorted(j["job_name"] for j in relay.jobs()) == sorted(legs)
    assert {j["status"] for j in relay.jobs()} == {"COMPLETED"}


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda b: b.pop("delivery_id"), "missing-field"),
        (lambda b: b["workflow"].pop("status"), "missing-field"),
        (lambda b: b["workflow"].pop("run_id"), "missing-field"),
        (lambda b: b.pop("workflow"), "missing-field"),
        (lambda b: b["workflow"].update(schema_version=1), "schema-version"),
        (lambda b: b["workflow"].update(status="queued"), "status"),
        (lambda b: b["workflow"].update(conclusion="success"), "conclusion"),
        (lambda b: b["workflow"].update(started_at="yesterday"), "times"),
        (lambda b: b["workflow"].update(completed_at="2026-12-01T10:00:00Z"), "times"),
        (lambda b: b["workflow"].update(test_results={"passed": 1}), "test-results"),
        (lambda b: b["workflow"].update(test_results={"passed": -1, "failed": 0, "skipped": 0, "total": 0}),
         "test-results"),
        (lambda b: b["workflow"].update(artifact_url="javascript:alert(1)"), "artifact-url"),
        (lambda b: b.update(event_type="pull_request_target"), "event-type"),
        (lambda b: b.update(delivery_id="not-dispatched"), "no-dispatch"),
    ],
)  # fmt: skip
def test_a_malformed_or_undispatched_callback_is_a_400_naming_the_rule(relay: Relay, mutate: Any, rule: str) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    body = {**payload, "workflow": workflow("in_progress")}
    mutate(body)
    status, answer, _ = post(relay.callback_url, body, relay.issuer.mint(repository=REPO))
    assert (status, answer["rule"]) == (400, rule), answer
    assert relay.jobs() == []
    assert relay.callbacks() == []


def test_a_completed_without_in_progress_is_a_400(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert callback(relay, payload, workflow("completed"))[1]["rule"] == "completed-without-in-progress"


def test_duplicates_are_400s_and_change_nothing(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert callback(relay, payload, workflow("in_progress"))[0] == 200
    assert callback(relay, payload, workflow("in_progress")) == (400, {
        "error": "a second in_progress for this job", "rule": "duplicate"})  # fmt: skip
    assert callback(relay, payload, workflow("completed"))[0] == 200
    assert callback(relay, payload, workflow("completed"))[1]["rule"] == "already-completed"
    assert callback(relay, payload, workflow("in_progress"))[1]["rule"] == "already-completed"
    assert len(relay.callbacks()) == 2


def test_a_callback_for_another_repos_dispatch_or_event_is_a_400(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert callback(relay, {**payload, "event_type": "push"}, workflow("in_progress"))[1]["rule"] == "no-dispatch"


def test_labeled_is_not_dispatched_every_push_is(relay: Relay) -> None:
    assert relay.dispatch("pull_request", {**PR_WEBHOOK, "action": "labeled"}) is None
    deletion = {"ref": "refs/tags/ciflow/crcr/openreg/7", "before": "a" * 40, "after": "0" * 40, "deleted": True}
    assert relay.dispatch("push", deletion)["payload"] == deletion
    for action in ("opened", "reopened", "synchronize", "closed"):
        assert relay.dispatch("pull_request", {**PR_WEBHOOK, "action": action}) is not None
    assert {d["repo"] for d in relay.deliveries()} == {REPO, "acme/listener"}
    assert len(relay.deliveries(REPO)) == 5


class Consumer:
    """A downstream repo's dispatch endpoint on a real local server: records each POST (path, JSON body) and answers
    the next scripted status (204 once the script is spent)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.script: list[int] = []
        self.url = ""

    def __call__(self, request: Request) -> Reply:
        self.received.append((request.path, json.loads(request.body)))
        return Reply(self.script.pop(0) if self.script else 204, b"")


@contextmanager
def consuming() -> Iterator[Consumer]:
    found = Consumer()
    with serving(bind(found)) as server:
        found.url = f"{base_url(server)}/dispatches"
        yield found


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    with consuming() as found:
        yield found


@pytest.fixture
def fed(tmp_path: Path, consumer: Consumer) -> Iterator[Relay]:
    """A relay configured to post acme/accel's dispatches to the consumer."""
    allowlist = {REPO: 2, "acme/listener": 1}
    with running_relay(tmp_path / "fed.db", allowlist=allowlist, consumers={REPO: consumer.url}) as running:
        yield running


def test_the_dispatch_route_posts_a_repository_dispatch_to_the_consumer(fed: Relay, consumer: Consumer) -> None:
    asked = {"event_type": "pull_request", "payload": PR_WEBHOOK, "to": consumer.url}
    status, answer, _ = post(f"{fed.url}/dispatch", asked, None)
    assert status == 200
    assert answer["repositories"] == ["acme/accel", "acme/listener"]
    assert answer["repeated"] is False
    sent = {"event_type": "pull_request", "client_payload": answer["client_payload"]}
    assert consumer.received == [("/dispatches", sent)]
    consumer.script = [404]
    status, answer, _ = post(f"{fed.url}/dispatch", asked, None)
    assert status == 502
    assert "404" in answer["error"]
    edited = {"event_type": "pull_request", "payload": {**PR_WEBHOOK, "action": "edited"}}
    status, answer, _ = post(f"{fed.url}/dispatch", edited, None)
    assert status == 200
    assert answer["client_payload"] is None
    assert "edited" in answer["skipped"]
    assert post(f"{fed.url}/dispatch", {"event_type": "issues", "payload": {}}, None)[0] == 400
    assert post(f"{fed.url}/dispatch", b"{", None)[0] == 400


def test_a_to_that_is_not_a_configured_consumer_is_refused_and_nothing_is_posted(
    fed: Relay, relay: Relay, consumer: Consumer
) -> None:
    with consuming() as stranger:
        near_misses = [stranger.url, f"{consumer.url}/", f"{consumer.url}?x=1", consumer.url.replace("127.0.0.1",
                       "localhost"), "http://169.254.169.254/latest/meta-data/"]  # fmt: skip
        for to in near_misses:
            status, answer, _ = post(f"{fed.url}/dispatch", {"event_type": "push", "payload": {}, "to": to}, None)
            assert status == 403, to
            assert "is not a configured consumer" in answer["error"]
            assert len(answer["error"].splitlines()) == 1
        with pytest.raises(UnknownConsumer):
            fed.dispatch("push", {"ref": "refs/heads/main"}, to=stranger.url)
        asked = {"event_type": "push", "payload": {}, "to": consumer.url}
        assert post(f"{relay.url}/dispatch", asked, None)[0] == 403  # a relay with no consumers posts nowhere
    assert stranger.received == consumer.received == []
    assert fed.deliveries() == relay.deliveries() == []


@pytest.mark.parametrize(
    ("consumers", "message"),
    [({"stranger/repo": "http://127.0.0.1:9/d"}, "not an allowlisted repository"),
     ({REPO: "file:///etc/passwd"}, "is not an http(s) URL"), ({REPO: "http:///no-host"}, "is not an http(s) URL")],
)  # fmt: skip
def test_a_consumer_must_be_an_allowlisted_repos_http_url(tmp_path: Path, consumers: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build(tmp_path / "r.db", allowlist={REPO: 2}, consumers=consumers)


GUID = "72d3162e-cc78-11e3-81ab-4c9367dc0958"


@pytest.mark.parametrize("where", ["header", "body"])
def test_a_redelivered_webhook_is_dispatched_and_posted_once(fed: Relay, consumer: Consumer, where: str) -> None:
    asked = {"event_type": "pull_request", "payload": PR_WEBHOOK, "to": consumer.url}
    headers = {"X-GitHub-Delivery": GUID} if where == "header" else {}
    asked |= {"delivery_id": GUID} if where == "body" else {}
    first = post(f"{fed.url}/dispatch", asked, None, headers)
    again = post(f"{fed.url}/dispatch", asked, None, headers)
    assert (first[0], again[0]) == (200, 200)
    assert first[1]["client_payload"]["delivery_id"] == GUID
    assert again[1]["client_payload"] == first[1]["client_payload"]
    assert (first[1]["repeated"], again[1]["repeated"]) == (False, True)
    assert again[1]["repositories"] == first[1]["repositories"]
    assert len(consumer.received) == 1
    assert sorted(d["repo"] for d in fed.deliveries()) == ["acme/accel", "acme/listener"]
    assert callback(fed, first[1]["client_payload"], workflow("in_progress"))[0] == 200
    assert fed.dispatch("pull_request", PR_WEBHOOK, delivery_id=GUID) == first[1]["client_payload"]  # Python API
    assert len(fed.deliveries()) == 2


def test_a_delivery_id_reused_for_another_event_or_webhook_is_a_409(fed: Relay, consumer: Consumer) -> None:
    asked = {"event_type": "pull_request", "payload": PR_WEBHOOK, "to": consumer.url, "delivery_id": GUID}
    assert post(f"{fed.url}/dispatch", asked, None)[0] == 200
    for changed in ({"payload": {**PR_WEBHOOK, "action": "closed"}}, {"event_type": "push", "payload": {}}):
        status, answer, _ = post(f"{fed.url}/dispatch", asked | changed, None)
        assert (status, answer) == (409, {"error": f"delivery {GUID} was already dispatched for another event or "
                                                   "webhook"})  # fmt: skip
    assert len(consumer.received) == 1
    assert {json.dumps(d["payload"]) for d in fed.deliveries()} == {json.dumps(PR_WEBHOOK)}


@pytest.mark.parametrize(
    ("headers", "field"),
    [({"X-GitHub-Delivery": ""}, None), ({}, ""), ({}, "x" * 129), ({}, "../../etc"), ({}, "two words"),
     ({}, "line\nbreak"), ({}, 42), ({"X-GitHub-Delivery": GUID}, GUID.replace("7", "8"))],
    ids=["empty-header", "empty", "too-long", "dots", "space", "newline", "number", "disagree"],
)  # fmt: skip
def test_a_malformed_delivery_id_is_a_one_line_400(fed: Relay, consumer: Consumer, headers: dict, field: Any) -> None:
    asked = {"event_type": "push", "payload": {}, "to": consumer.url, "delivery_id": field}
    status, answer, _ = post(f"{fed.url}/dispatch", asked, None, headers)
    assert status == 400
    assert "delivery_id" in answer["error"]
    assert len(answer["error"].splitlines()) == 1
    assert consumer.received == []
    assert fed.deliveries() == []


def test_a_delivery_that_never_reached_its_consumer_is_dispatched_on_redelivery(fed: Relay, consumer: Consumer) -> None:
    consumer.script = [404]
    asked = {"event_type": "push", "payload": {"ref": "refs/heads/main"}, "to": consumer.url}
    assert post(f"{fed.url}/dispatch", asked, None, {"X-GitHub-Delivery": GUID})[0] == 502
    assert fed.deliveries() == []
    status, answer, _ = post(f"{fed.url}/dispatch", asked, None, {"X-GitHub-Delivery": GUID})
    assert (status, answer["repeated"]) == (200, False)
    assert [body["client_payload"]["delivery_id"] for _, body in consumer.received] == [GUID, GUID]
    assert len(fed.deliveries()) == 2


def good_token(relay: Relay) -> str:
    return relay.issuer.mint(repository=REPO)


@pytest.mark.parametrize(
    "token",
    [
        lambda r: r.issuer.mint(repository=REPO, expires_in=-60),
        lambda r: r.issuer.mint(repository=REPO, audience="sts.amazonaws.com"),
        lambda r: r.issuer.mint(repository=REPO, issuer="https://token.actions.githubusercontent.com"),
        lambda r: r.issuer.mint(repository=REPO, key=new_key()),
        lambda r: good_token(r)[:-4] + "AAAA",
        lambda r: "not-a-jwt",
        lambda r: None,
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "key-not-in-jwks", "tampered", "garbage", "missing"],
)
def test_a_bad_or_missing_token_is_a_401(relay: Relay, token: Any) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    status, answer, _ = post(relay.callback_url, {**payload, "workflow": workflow("in_progress")}, token(relay))
    assert status == 401
    assert "token" in answer["error"]
    assert relay.callbacks() == []


def runner_token(relay: Relay) -> str:
    """A token from the relay's runner endpoint, as a job's `getIDToken` gets it."""
    url = with_audience(relay.issuer.token_request_url, AUDIENCE)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {relay.issuer.request_token}"})
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())["value"]


def test_the_runner_token_endpoint_mints_for_the_asked_audience(relay: Relay) -> None:
    url = with_audience(relay.issuer.token_request_url, AUDIENCE)
    assert url.startswith(relay.url)
    assert "&audience=pytorch-cross-repo-ci-relay" in url
    token = runner_token(relay)
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert post(relay.callback_url, {**payload, "workflow": workflow("in_progress")}, token)[0] == 200
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": "Bearer wrong"}))
    assert refused.value.code == 401


def test_a_runner_token_is_refused_once_its_configured_lifetime_is_over(tmp_path: Path) -> None:
    with running_relay(tmp_path / "r.db", token_lifetime=2, leeway=0) as relay:
        token = runner_token(relay)
        claims = jwt.decode(token, options={"verify_signature": False})
        assert claims["exp"] - claims["iat"] == 2
        payload = relay.dispatch("pull_request", PR_WEBHOOK)
        assert post(relay.callback_url, {**payload, "workflow": workflow("in_progress")}, token)[0] == 200
        time.sleep(max(0.0, claims["exp"] - time.time()) + 0.2)
        status, answer, _ = post(relay.callback_url, {**payload, "workflow": workflow("completed")}, token)
        assert (status, answer) == (401, {"error": "invalid token: expired (its exp has passed)"})
        assert [c["status"] for c in relay.callbacks()] == ["in_progress"]
    with running_relay(tmp_path / "default.db") as relay:
        claims = jwt.decode(runner_token(relay), options={"verify_signature": False})
        assert claims["exp"] - claims["iat"] == 300


@pytest.mark.parametrize("lifetime", [0, -5, 2.5, True])
def test_a_token_lifetime_must_be_a_positive_whole_number(tmp_path: Path, lifetime: Any) -> None:
    with pytest.raises(ValueError, match="positive whole number of seconds"):
        build(tmp_path / "r.db", token_lifetime=lifetime)


def test_the_discovery_document_names_the_jwks(relay: Relay) -> None:
    with urllib.request.urlopen(f"{relay.url}/.well-known/openid-configuration") as answer:
        found = json.loads(answer.read())
    assert found["issuer"] == relay.issuer.url
    with urllib.request.urlopen(found["jwks_uri"]) as answer:
        [key] = json.loads(answer.read())["keys"]
    assert (key["kty"], key["alg"], key["kid"]) == ("RSA", "RS256", relay.issuer.kid)


def test_a_relay_trusts_a_standalone_issuer(tmp_path: Path) -> None:
    with running_issuer() as issuer:
        relay = build(tmp_path / "r.db", allowlist={REPO: 2})
        with serving(start(relay, issuer_url=issuer.url)):
            payload = relay.dispatch("pull_request", PR_WEBHOOK)
            body = {**payload, "workflow": workflow("in_progress")}
            assert post(relay.callback_url, body, issuer.mint(repository=REPO))[0] == 200
            assert post(relay.callback_url, body, relay.issuer.mint(repository=REPO))[0] == 401


def test_below_l2_is_ignored_with_200_and_nothing_stored(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    for repo in ("acme/listener", "stranger/repo"):
        status, answer = callback(relay, payload, workflow("in_progress"), repo=repo)
        assert status == 200
        assert "below L2" in answer["ignored"]
    assert relay.jobs() == []
    assert relay.callbacks() == []


def test_over_the_rate_limit_is_a_429_with_retry_after(tmp_path: Path) -> None:
    with running_relay(tmp_path / "r.db", allowlist={REPO: 2, "acme/other": 2}, rate_limit=3) as relay:
        payload = relay.dispatch("pull_request", PR_WEBHOOK)
        statuses = [callback(relay, payload, workflow("in_progress", f"leg {i}"))[0] for i in range(3)]
        status, answer, headers = post(relay.callback_url, {**payload, "workflow": workflow("in_progress", "leg 3")},
                                       relay.issuer.mint(repository=REPO))  # fmt: skip
        assert statuses == [200, 200, 200]
        assert status == 429
        assert 1 <= int(headers["Retry-After"]) <= 60
        assert "3/minute" in answer["error"]
        assert callback(relay, payload, workflow("in_progress"), repo="acme/other")[0] == 200  # per repo
        assert len(relay.jobs(REPO)) == 3


def verdict(**changes: Any) -> dict[str, Any]:
    """A sound triage verdict, changed as asked."""
    return {
        "schema_version": 1,
        "category": "upstream",
        "confidence": "high",
        "summary": "torch 2.14 broke aten::flip on the device",
        "suspected_upstream": {"pr": "123", "commit": "e" * 40, "reason": "only the core moved"},
        "evidence": [{"job": "test", "test": "test_flip", "log_url": "https://x", "excerpt": "boom"}],
        "reproduced_on_retry": True,
        "analyzer": {"name": "crcr", "version": "0.1.0", "model": "rules", "prompt_version": "1"},
        "analyzed_at": "2026-12-01T10:21:00Z",
        **changes,
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"summary": "x" * (SUMMARY_MAX + 1)},
        {"category": "cosmic-rays"},
        {"evidence": [{"excerpt": "e"}] * 11},
        {"evidence": [{"excerpt": "e" * 1025}]},
        {"category": "backend"},  # suspected_upstream only for upstream
        {"extra": 1},
        {"schema_version": "1"},
        {"summary": "s", "evidence": [{"excerpt": "e" * 1000}] * 10, "analyzer": {"name": "x" * 9000}},
    ],
    ids=["summary", "category", "evidence-count", "excerpt", "suspect", "unknown-key", "version", "whole-16k"],
)
def test_a_verdict_over_the_caps_is_dropped_but_the_callback_is_stored(relay: Relay, bad: dict) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert callback(relay, payload, workflow("in_progress"))[0] == 200
    status, answer = callback(
        relay, payload, workflow("completed", conclusion="failure", triage_verdict=verdict(**bad))
    )
    assert status == 200
    assert answer["state"] == "COMPLETED"
    assert len(answer["notes"]) == 1
    assert answer["notes"][0].startswith("triage_verdict dropped: ")
    [job] = relay.jobs()
    assert job["verdict"] is None
    assert job["notes"] == answer["notes"]


def test_a_sound_verdict_and_failed_tests_detail_are_kept(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    detail = [{"name": "test_flip", "classname": "TestOps", "message": "m", "stacktrace": "s", "duration": 0.5}]
    assert callback(relay, payload, workflow("in_progress"))[0] == 200
    done = workflow("completed", conclusion="failure", triage_verdict=verdict(), failed_tests_detail=detail)
    assert callback(relay, payload, done) == (200, {"state": "COMPLETED", "notes": []})
    [job] = relay.jobs()
    assert job["verdict"] == verdict()
    assert job["failed_tests"] == detail


def test_failed_tests_detail_over_its_caps_is_dropped(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    assert callback(relay, payload, workflow("in_progress"))[0] == 200
    detail = [{"name": "t", "message": "m"}] * (DETAIL_MAX + 1)
    status, answer = callback(relay, payload, workflow("completed", failed_tests_detail=detail))
    assert status == 200
    assert answer["notes"][0].startswith("failed_tests_detail dropped: ")
    assert relay.jobs()[0]["failed_tests"] is None


def nightly(sha: str = SHA) -> dict[str, Any]:
    return {"event_type": "nightly", "delivery_id": sha,
            "payload": {"repository": {"full_name": "pytorch/pytorch"}, "head_sha": sha}}  # fmt: skip


def test_a_self_reported_nightly_needs_no_dispatch_but_only_completed(relay: Relay) -> None:
    assert callback(relay, nightly(), workflow("in_progress"))[1]["rule"] == "self-report"
    assert callback(relay, nightly(), workflow("completed")) == (200, {"state": "COMPLETED", "notes": []})
    assert callback(relay, nightly(), workflow("completed"))[1]["rule"] == "already-completed"
    assert callback(relay, nightly("C" * 40), workflow("completed"))[1]["rule"] == "self-report"
    [delivery] = relay.deliveries(REPO)
    assert delivery["self_reported"]
    assert delivery["event_type"] == "nightly"
    assert len(delivery["jobs"]) == 1


def test_the_sweeper_closes_a_job_left_in_progress(tmp_path: Path) -> None:
    with running_relay(tmp_path / "r.db", allowlist={REPO: 2}, sweep_after=0.4) as relay:
        payload = relay.dispatch("pull_request", PR_WEBHOOK)
        assert callback(relay, payload, workflow("in_progress", "stuck"))[0] == 200
        time.sleep(0.5)
        assert callback(relay, payload, workflow("in_progress", "fresh"))[0] == 200  # a request runs the sweeper
        jobs = {job["job_name"]: job for job in relay.jobs()}
        assert (jobs["stuck"]["status"], jobs["stuck"]["conclusion"]) == ("COMPLETED", "timed_out")
        assert "sweeper" in jobs["stuck"]["notes"][0]
        assert jobs["fresh"]["status"] == "IN_PROGRESS"
        status, answer = callback(relay, payload, workflow("completed", "stuck"))
        assert (status, answer["rule"]) == (400, "timed-out")
        assert answer["error"].startswith("completed too late: the sweeper closed this job as timed_out at 20")
        assert callback(relay, payload, workflow("completed", "fresh"))[0] == 200
        assert callback(relay, payload, workflow("completed", "fresh"))[1]["rule"] == "already-completed"
        with urllib.request.urlopen(f"{relay.url}/hud/{REPO}") as answer:
            assert "closed by the sweeper" in answer.read().decode()


def _body(status: str, job_name: str) -> dict[str, Any]:
    return {"event_type": "pull_request", "delivery_id": "d-1", "payload": PR_WEBHOOK,
            "workflow": workflow(status, job_name)}  # fmt: skip


def _apply(store: Store, status: str, job_name: str, now: float) -> str:
    body = _body(status, job_name)
    return store.apply(REPO, check(body), body, now=now)


def test_the_store_refuses_a_swept_jobs_late_completed_as_timed_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    store.record_dispatch("d-1", [REPO], "pull_request", PR_WEBHOOK)
    for job_name in ("swept", "real"):
        assert _apply(store, "in_progress", job_name, now=1000.0) == "IN_PROGRESS"
    assert _apply(store, "completed", "real", now=1500.0) == "COMPLETED"
    assert store.sweep(600, now=1700.0) == 1
    with pytest.raises(Rejected) as late:
        _apply(store, "completed", "swept", now=1800.0)
    assert late.value.rule == "timed-out"
    assert str(late.value) == "completed too late: the sweeper closed this job as timed_out at 1970-01-01T00:28:20Z"
    with pytest.raises(Rejected) as again:
        _apply(store, "completed", "real", now=1800.0)
    assert again.value.rule == "already-completed"
    jobs = {job["job_name"]: job for job in store.jobs()}
    assert (jobs["swept"]["conclusion"], jobs["swept"]["swept_at"]) == ("timed_out", 1700.0)
    assert jobs["real"]["swept_at"] is None
    assert len(store.callbacks()) == 3  # the two refusals stored nothing


def test_a_database_from_before_the_swept_mark_gains_it(tmp_path: Path) -> None:
    Store(tmp_path / "old.db")
    with sqlite3.connect(tmp_path / "old.db") as db:
        db.execute("ALTER TABLE jobs DROP COLUMN swept_at")
    store = Store(tmp_path / "old.db")
    store.record_dispatch("d-1", [REPO], "pull_request", PR_WEBHOOK)
    _apply(store, "in_progress", "swept", now=1000.0)
    assert store.sweep(600, now=1700.0) == 1
    assert store.jobs()[0]["swept_at"] == 1700.0


def test_injected_faults_answer_429_or_503_and_change_no_state(tmp_path: Path) -> None:
    with running_relay(tmp_path / "r.db", allowlist={REPO: 2}, fail_ratio=0.5, fail_seed=7) as relay:
        payload = relay.dispatch("pull_request", PR_WEBHOOK)
        seen = [callback(relay, payload, workflow("in_progress", f"leg {i}"))[0] for i in range(30)]
        assert set(seen) == {200, 429, 503}
        assert relay.faults.injected == seen.count(429) + seen.count(503)
        assert len(relay.callbacks()) == len(relay.jobs()) == seen.count(200)


def test_concurrent_callbacks_for_one_job_pass_the_state_machine_once(relay: Relay) -> None:
    payload = relay.dispatch("pull_request", PR_WEBHOOK)
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: callback(relay, payload, workflow("in_progress"))[0], range(16)))
        assert sorted(statuses) == [200] + [400] * 15
        statuses = list(pool.map(lambda _: callback(relay, payload, workflow("completed"))[0], range(16)))
        assert sorted(statuses) == [200] + [400] * 15
    assert [c["status"] for c in relay.callbacks()] == ["in_progress", "completed"]


def test_a_client_payload_over_githubs_cap_is_not_dispatched(relay: Relay) -> None:
    with pytest.raises(DispatchError, match="over GitHub's 65535"):
        relay.dispatch("pull_request", {**PR_WEBHOOK, "body": "x" * 70_000})
    assert relay.deliveries() == []


def test_an_unknown_route_is_a_404(relay: Relay) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{relay.url}/github/callbacks")
    assert refused.value.code == 404


def raw_exchange(url: str, request: bytes, timeout: float = 2.0) -> bytes:
    """Send `request` as raw bytes and read until the server closes the connection: all it answered. A server that
    keeps the connection waiting fails the test with a timeout."""
    parts = urllib.parse.urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "framing",
    [b"Content-Length: -1", b"Content-Length: abc", b"Content-Length: +5", b"Content-Length: \xb2",
     b"Content-Length: 5\r\nContent-Length: 6", b"Transfer-Encoding: chunked"],
    ids=["negative", "not-a-number", "signed", "superscript-digit", "conflicting", "chunked"],
)  # fmt: skip
def test_a_bad_content_length_is_a_400_at_once_and_the_relay_serves_on(relay: Relay, framing: bytes) -> None:
    started = time.monotonic()
    head = b"POST /dispatch HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n" + framing + b"\r\n\r\n"
    answer = raw_exchange(relay.url, head + b'{"event_type": "push"')  # the body never completes: no waiting for it
    assert time.monotonic() - started < 2
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 400 "), answer
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"Connection: close" in headers
    assert list(json.loads(body)) == ["error"]
    assert post(f"{relay.url}/dispatch", {"event_type": "push", "payload": {"ref": "refs/heads/main"}}, None)[0] == 200
    assert len(relay.deliveries()) == 2  # the good request's, to both allowlisted repos; nothing from the bad one
