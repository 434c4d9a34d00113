"""The callback body, field for field against the contract; its caps; and what a run record says in it."""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path

import pytest
from crcr.callback import body as bodies
from crcr.callback import from_run
from crcr.callback.body import CallbackError
from crcr.ci import runner
from crcr.ci.model import (
    BuildResult,
    Candidate,
    Classification,
    Combination,
    CombinationResult,
    RunRecord,
    ShardResult,
    TestOutcome,
    to_json,
)

NOW = datetime.datetime(2026, 12, 1, 17, 0, 5, tzinfo=datetime.UTC)
SHA = "0123456789abcdef0123456789abcdef01234567"
PAYLOAD = {
    "event_type": "pull_request",
    "delivery_id": "6f1c2a40-0000-4000-8000-000000000001",
    "payload": {"action": "synchronize", "pull_request": {"number": 4242, "head": {"sha": SHA}}, "extra": [1, "ü"]},
}
JOB = bodies.Job("downstream", "https://github.com/o/r/actions/runs/99", "99", "2", "test (ring, 3.11)")
HEAD = Candidate("backend", "HEAD", "0.3.0", "b" * 40)
CORE = Candidate("core", "2.14.1", "2.14.1", "e" * 64)
SUITE = Candidate("suite", "embedded", "embedded", "f" * 64)


def test_in_progress_body_field_for_field() -> None:
    sent = bodies.body(PAYLOAD, bodies.workflow(JOB, "in_progress", NOW, conclusion="success"))
    assert {k: v for k, v in sent.items() if k != "workflow"} == PAYLOAD
    assert sent["workflow"] == {
        "schema_version": "1",
        "status": "in_progress",
        "conclusion": None,
        "name": "downstream",
        "url": "https://github.com/o/r/actions/runs/99",
        "run_id": "99",
        "run_attempt": "2",
        "job_name": "test (ring, 3.11)",
        "check_run_id": "99-2",
        "started_at": "2026-12-01T17:00:05Z",
        "completed_at": None,
    }


def test_completed_body_carries_results_extras_and_artifact() -> None:
    job = bodies.Job("downstream", "u", "99", "1", "test", check_run_id="31415")
    verdict = {"category": "flake", "confidence": "low", "summary": "timed out once"}
    flow = bodies.workflow(
        job,
        "completed",
        NOW,
        conclusion="failure",
        test_results={"passed": 3, "failed": 1, "skipped": 2, "total": 6},
        artifact_url="https://example.com/run",
        failed_tests=[{"name": "test_a", "classname": "t.T", "message": "boom", "stacktrace": "x", "duration": 0.5}],
        verdict=verdict,
    )
    assert flow["status"] == "completed"
    assert flow["conclusion"] == "failure"
    assert flow["started_at"] is None
    assert flow["completed_at"] == "2026-12-01T17:00:05Z"
    assert flow["check_run_id"] == "31415"
    assert flow["test_results"] == {"passed": 3, "failed": 1, "skipped": 2, "total": 6}
    assert flow["artifact_url"] == "https://example.com/run"
    assert flow["failed_tests_detail"] == [
        {"name": "test_a", "classname": "t.T", "message": "boom", "stacktrace": "x", "duration": 0.5}
    ]
    assert flow["triage_verdict"] == {"schema_version": 1, **verdict}


def test_completed_needs_a_github_conclusion() -> None:
    with pytest.raises(CallbackError, match="conclusion"):
        bodies.workflow(JOB, "completed", NOW)
    with pytest.raises(CallbackError, match="conclusion"):
        bodies.workflow(JOB, "completed", NOW, conclusion="green")


def test_self_report_body() -> None:
    flow = bodies.workflow(JOB, "completed", NOW, conclusion="success")
    assert bodies.body(bodies.self_report("nightly", SHA), flow) == {
        "event_type": "nightly",
        "delivery_id": SHA,
        "payload": {"repository": {"full_name": "pytorch/pytorch"}, "head_sha": SHA},
        "workflow": flow,
    }
    with pytest.raises(CallbackError):
        bodies.self_report("weekly", SHA)
    with pytest.raises(CallbackError):
        bodies.self_report("periodic", "main")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not JSON"),
        ("[1]", "JSON object"),
        ('{"event_type": "push"}', "delivery_id"),
        ('{"delivery_id": "", "event_type": "push"}', "delivery_id"),
        ('{"delivery_id": "d", "event_type": 3}', "event_type"),
        ('{"delivery_id": "d", "event_type": "push", "payload": []}', "payload"),
        ('{"delivery_id": "d", "event_type": "push", "x": "' + "a" * (1024 * 1024) + '"}', "bytes"),
    ],
)
def test_bad_client_payloads_are_one_line_errors(text: str, says: str) -> None:
    with pytest.raises(CallbackError, match=says) as caught:
        bodies.load_client_payload(text)
    assert "\n" not in str(caught.value)


def test_matrix_legs_are_named_like_github() -> None:
    assert bodies.job_name("test", ["device=ring", "python=3.11"]) == "test (ring, 3.11)"
    assert bodies.job_name("test", []) == "test"
    with pytest.raises(CallbackError, match="KEY=VALUE"):
        bodies.job_name("test", ["ring"])


def test_truncation_keeps_whole_characters() -> None:
    text = "é" * 600  # two bytes each
    cut = bodies.truncate_utf8(text, 1023)
    assert len(cut.encode()) == 1022
    assert cut == "é" * 511
    assert bodies.truncate_utf8("short", 10) == "short"
    assert bodies.truncate_utf8("€" * 3, 8) == "€€"  # three bytes each: never half a character


def test_failed_tests_detail_caps() -> None:
    entries = [
        {"name": f"test_{i}", "classname": "c", "message": "m" * 5000, "stacktrace": "漢" * 5000, "duration": 1}
        for i in range(1500)
    ]
    capped = bodies.cap_failed_tests(entries)
    assert len(capped) == 1000
    assert len(capped[0]["message"].encode()) == 1024
    assert len(capped[0]["stacktrace"].encode()) <= 4096
    assert capped[0]["stacktrace"] == "漢" * 1365


def test_verdict_caps_and_the_relays_rules() -> None:
    evidence = [
        {"job": "j" * 300, "test": f"t{i}", "log_url": "https://ci.example/log", "excerpt": "ü" * 2000}
        for i in range(15)
    ]
    verdict = bodies.cap_verdict(
        {
            "category": "backend",
            "confidence": "high",
            "summary": "s" * 5000,
            "suspected_upstream": {"pr": 1, "commit": SHA},  # not an upstream verdict: dropped, not sent
            "evidence": evidence,
            "reproduced_on_retry": True,
        }
    )
    assert len(json.dumps(verdict).encode()) <= 16 * 1024
    assert "suspected_upstream" not in verdict
    assert len(verdict["summary"].encode()) <= 1000
    assert 0 < len(verdict["evidence"]) < 10  # 1 KB excerpts of escaped characters: shrunk until it fits
    assert all(len(e["job"]) <= 200 and len(e["excerpt"].encode()) <= 1000 for e in verdict["evidence"])
    small = [{"test": f"t{i}", "excerpt": "plain"} for i in range(20)]
    many = bodies.cap_verdict({"category": "infra", "confidence": "low", "summary": "x", "evidence": small})
    assert [e["test"] for e in many["evidence"]] == [f"t{i}" for i in range(10)]
    with pytest.raises(CallbackError):
        bodies.cap_verdict({"category": "cosmic-rays", "confidence": "high", "summary": "x"})


def test_verdict_suspect_and_links_follow_the_relay() -> None:
    up = bodies.cap_verdict(
        {
            "category": "upstream",
            "confidence": "medium",
            "summary": "  ",
            "suspected_upstream": {"reason": "no pr, no commit"},
            "evidence": [{"log_url": "javascript:alert(1)", "excerpt": "e"}, {"log_url": "https://a@b.c/x"}],
        }
    )
    assert up["summary"] == "classified upstream"  # the relay drops an empty summary with the whole verdict
    assert "suspected_upstream" not in up  # the relay drops a suspicion naming neither a pr nor a commit
    assert up["evidence"] == [{"excerpt": "e"}]


def test_upstream_change_from_a_dispatch() -> None:
    assert bodies.upstream_change(PAYLOAD) == {"pr": 4242, "commit": SHA}
    push = {"payload": {"ref": "refs/heads/main", "after": SHA}}
    assert bodies.upstream_change(push) == {"commit": SHA}
    assert bodies.upstream_change({"payload": {"after": "0" * 40}}) == {}


def _test(nodeid: str, outcome: str, klass: str = "", *, attempts: tuple[str, ...] = (), **failure: str) -> TestOutcome:
    reason = {"upstream": "only the core (torch) moved since the last green run"}.get(klass, f"{klass} fact")
    return TestOutcome(
        nodeid,
        outcome,  # type: ignore[arg-type]
        duration=0.25,
        attempts=list(attempts or (outcome,)),
        failure=dict(failure),
        classification=Classification(klass, reason, f"evidence of {nodeid}") if klass else None,  # type: ignore[arg-type]
    )


def _record(tests: list[TestOutcome], status: str = "failed", **extra: object) -> RunRecord:
    primary = CombinationResult(Combination("primary", "primary", HEAD, CORE, SUITE), status, tests=tests, **extra)  # type: ignore[arg-type]
    older = CombinationResult(Combination("core@2.13.0", "core", HEAD, CORE, SUITE), "passed")
    return RunRecord("20261201T170000Z-abcdef", "2026-12-01T17:00:00+00:00", {}, {}, "dev", [primary, older],
                     finished="2026-12-01T17:30:00+00:00")  # fmt: skip


UPSTREAM_FAILS = [
    _test(
        "test/test_ops.py::TestOpsDEV::test_add_float32",
        "failed",
        "upstream",
        attempts=("failed", "failed"),
        type="AssertionError",
        message="Tensor-likes are not close!",
        raised_at="test/test_ops.py:12",
    ),
    _test("test/test_ops.py::TestOpsDEV::test_mul_float32", "error", "upstream", type="RuntimeError", message="boom"),
    _test("test/test_nn.py::test_conv", "timeout", "backend"),
]
OTHERS = [
    _test("test/test_ops.py::TestOpsDEV::test_sub", "passed"),
    _test("test/test_ops.py::TestOpsDEV::test_flaky", "passed", attempts=("failed", "passed")),
    _test("test/test_ops.py::TestOpsDEV::test_known_bad", "xfailed"),
    _test("test/test_ops.py::TestOpsDEV::test_cuda_only", "skipped"),
    _test("test/test_ops.py::TestOpsDEV::test_other_device", "deselected"),
]


def test_facts_from_a_failed_run(tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text(json.dumps(to_json(_record(UPSTREAM_FAILS + OTHERS))))
    record = from_run.load_record(from_run.resolve_run_dir(tmp_path))
    found = from_run.facts(record, job="test", log_url="https://ci.example/run/1", upstream={"pr": 7, "commit": SHA})
    assert found.conclusion == "failure"
    assert found.test_results == {"passed": 3, "failed": 3, "skipped": 1, "total": 7}
    assert [t["name"] for t in found.failed_tests] == ["test_conv", "test_add_float32", "test_mul_float32"]
    conv, add = found.failed_tests[0], found.failed_tests[1]
    assert add["classname"] == "test.test_ops.TestOpsDEV"
    assert add["message"] == "AssertionError: Tensor-likes are not close!"
    assert "raised_at: test/test_ops.py:12" in add["stacktrace"]
    assert add["duration"] == 0.25
    assert conv["classname"] == "test.test_nn"
    assert conv["message"] == "hung until its timeout"
    verdict = bodies.cap_verdict(found.verdict or {})
    assert verdict["category"] == "upstream"  # two of three failures
    assert verdict["confidence"] == "medium"  # two thirds, each with evidence
    assert verdict["summary"].startswith("2 of 3 failing test(s) upstream in primary (also backend 1): only the core")
    assert "suspected_upstream" not in verdict  # a release core ran, not the dispatched commit: no PR is named
    assert verdict["summary"].endswith(
        "; the core that ran, torch 2.14.1 (no recorded source commit), is not the dispatched commit 0123456789ab, "
        "and whether it contains it is not known here"
    )
    assert [e["test"] for e in verdict["evidence"]][:2] == [UPSTREAM_FAILS[0].nodeid, UPSTREAM_FAILS[1].nodeid]
    assert verdict["evidence"][0] == {
        "job": "test",
        "test": UPSTREAM_FAILS[0].nodeid,
        "log_url": "https://ci.example/run/1",
        "excerpt": f"evidence of {UPSTREAM_FAILS[0].nodeid}",
    }
    assert verdict["reproduced_on_retry"] is True
    assert verdict["analyzer"]["name"] == "tributary-crcr"
    assert verdict["analyzed_at"] == "2026-12-01T17:30:00Z"


def test_the_verdict_says_what_the_run_found_its_core_to_be_to_the_dispatched_commit() -> None:
    """The run asked git (in the suite checkout) what its core is to the commit: the verdict says that, and a core
    that merely contains the commit still names no PR."""
    record = _record(UPSTREAM_FAILS)
    record.trigger["sha"] = SHA  # the run was for the dispatched commit
    said = f"the core (git {'c' * 12}) contains the dispatched commit {SHA[:12]} but was not built from it"
    primary = record.combinations[0]
    primary.combination = dataclasses.replace(primary.combination, dispatched=f"{said}; the suite was taken at it")
    verdict = from_run.facts(record, upstream={"pr": 7, "commit": SHA}).verdict or {}
    assert verdict["summary"].endswith(f"; {said}; the suite was taken at it")
    assert "suspected_upstream" not in verdict
    other = from_run.facts(record, upstream={"pr": 8, "commit": "9" * 40}).verdict or {}
    assert (
        "the core that ran, torch 2.14.1 (no recorded source commit), is not the dispatched commit" in other["summary"]
    )


def test_consistent_failures_are_high_confidence_and_unknown_is_low() -> None:
    backend = [_test(f"t.py::test_{i}", "crashed", "backend") for i in range(3)]
    assert from_run.facts(_record(backend)).verdict["confidence"] == "high"  # type: ignore[index]
    unknown = [_test(f"t.py::test_{i}", "failed", "unknown") for i in range(3)]
    verdict = from_run.facts(_record(unknown)).verdict
    assert verdict is not None
    assert (verdict["category"], verdict["confidence"]) == ("unknown", "low")
    assert "suspected_upstream" not in verdict
    assert "reproduced_on_retry" not in verdict


def test_a_passed_combination_has_no_verdict_and_others_are_found_by_name() -> None:
    record = _record(OTHERS, status="passed")
    found = from_run.facts(record)
    assert (found.conclusion, found.verdict, found.failed_tests) == ("success", None, [])
    assert from_run.facts(record, "core@2.13.0").test_results == {"passed": 0, "failed": 0, "skipped": 0, "total": 0}
    with pytest.raises(CallbackError, match="no combination 'nope'"):
        from_run.facts(record, "nope")


def test_an_upstream_verdict_names_the_pr_only_when_its_commit_is_the_core_that_ran() -> None:
    record = _record(UPSTREAM_FAILS + OTHERS)
    built = dataclasses.replace(record.combinations[0].combination, core=dataclasses.replace(CORE, git=SHA))
    record.combinations[0].combination = built
    verdict = from_run.facts(record, upstream={"pr": 7, "commit": SHA}).verdict or {}
    assert verdict["suspected_upstream"] == {"pr": 7, "commit": SHA, "reason": verdict["suspected_upstream"]["reason"]}
    assert "torch 2.14.1" in verdict["suspected_upstream"]["reason"]
    assert verdict["summary"].endswith("; the core was built from the dispatched commit 0123456789ab")
    other = from_run.facts(record, upstream={"pr": 7, "commit": "f" * 40}).verdict or {}
    assert "suspected_upstream" not in other
    assert f"(git {SHA[:12]}), is not the dispatched commit ffffffffffff" in other["summary"]


def test_a_build_failure_reports_its_first_error_and_whom_it_blames() -> None:
    build = BuildResult(False, first_error="ring.cpp:5:2: error: C++20 or later compatible compiler is required")
    core = dataclasses.replace(CORE, git=SHA)
    record = _record([], status="build_failed", build=build, attributed_to="core")
    record.combinations[0].combination = dataclasses.replace(record.combinations[0].combination, core=core)
    found = from_run.facts(record, upstream={"pr": 3, "commit": SHA})
    assert found.conclusion == "failure"
    assert found.test_results is None
    verdict = bodies.cap_verdict(found.verdict or {})
    assert (verdict["category"], verdict["confidence"]) == ("upstream", "high")
    assert "C++20 or later" in verdict["summary"]
    assert verdict["summary"].startswith("build failed")
    assert verdict["suspected_upstream"]["pr"] == 3
    blamed = from_run.facts(_record([], status="build_failed", build=build, attributed_to="backend")).verdict
    assert blamed is not None
    assert blamed["category"] == "backend"
    assert "suspected_upstream" not in blamed


def test_incompatible_is_neutral_and_a_bad_run_dir_is_one_line(tmp_path: Path) -> None:
    assert from_run.facts(_record([], status="incompatible")).conclusion == "neutral"
    with pytest.raises(CallbackError, match="neither a run directory"):
        from_run.resolve_run_dir(tmp_path)
    (tmp_path / "record.json").write_text("{not json")
    with pytest.raises(CallbackError, match="not a readable run record"):
        from_run.load_record(tmp_path)


def test_newest_run_of_a_runs_folder(tmp_path: Path) -> None:
    for run_id in ("20261201T170000Z-aaaaaa", "20261201T180000Z-bbbbbb"):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "record.json").write_text("{}")
    assert from_run.resolve_run_dir(tmp_path).name == "20261201T180000Z-bbbbbb"


def test_one_shard_of_a_merged_run_is_reported_as_its_legs_own() -> None:
    """A leg's callback, sent from the merged record: only its shard's tests count, and a test its killed leg never
    reported (not_run, with the merge's reason) fails it, while the other leg's shard is a success."""
    why = {"type": "not_run", "message": "leg killed: leg-2: no leg.json; 1 of 2 tests reported"}
    killed = TestOutcome("test/test_a.py::T::test_late", "not_run", shard=2, attempts=["not_run"], failure=why)
    tests = [TestOutcome("test/test_a.py::T::test_one", "passed", shard=1, attempts=["passed"]),
             TestOutcome("test/test_a.py::T::test_early", "passed", shard=2, attempts=["passed"]), killed]  # fmt: skip
    record = _record(tests, status="error", shards=[ShardResult(1, 1.0, 1.0, 0), ShardResult(2, 1.0, 0.5, -1)])
    first = from_run.facts(record, shard=1)
    assert (first.conclusion, first.test_results) == ("success", {"passed": 1, "failed": 0, "skipped": 0, "total": 1})
    second = from_run.facts(record, shard=2)
    assert (second.conclusion, second.test_results) == ("failure", {"passed": 1, "failed": 1, "skipped": 0, "total": 2})
    assert second.failed_tests[0]["message"].startswith("not_run: leg killed: leg-2")
    with pytest.raises(CallbackError, match=r"primary has no shard 3 \(its shards: 1, 2\)"):
        from_run.facts(record, shard=3)


def test_an_unexpected_pass_fails_only_a_strict_xfail() -> None:
    """testreuse records both as `xpassed` with the rule's mode: a strict one is a failure (as pytest says), a
    non-strict one is `promotable`, a pass that says its rule may be promoted, never retried or failed."""
    assert runner.outcome_of({"outcome": "xpassed", "mode": "xfail_strict"}) == "xpassed"
    assert runner.outcome_of({"outcome": "xpassed", "mode": "xfail"}) == "promotable"
    assert runner.outcome_of({"outcome": "failed", "mode": "xfail"}) == "failed"
    strict, loose = _test("t.py::T::test_strict", "xpassed"), _test("t.py::T::test_loose", "promotable")
    assert strict.failing
    assert not loose.failing
    found = from_run.facts(_record([strict, loose]))
    assert found.test_results == {"passed": 1, "failed": 1, "skipped": 0, "total": 2}
    assert [t["name"] for t in found.failed_tests] == ["test_strict"]
