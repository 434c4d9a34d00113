"""What one combination of a `crcr ci` run says to the relay: a conclusion, test counts, failed tests, a verdict.

Counting: `passed`, `xfailed` and `promotable` are passes (an expected failure that failed as expected is the outcome
the config asked for, and the pipeline's verdict is green with it; a non-strict xfail that passed is a signal to
promote its rule, not a failure); `skipped` is skipped; `deselected` tests were never selected
and count nowhere; every failing outcome (`failed`, `error`, `xpassed`, `crashed`, `timeout`, `not_run`) is a
failure. `total` is the sum of the three. A flaky test ended passed and counts as passed.

The verdict's category is the most common class among the failures (ties go to the worse class, in the order
backend > upstream > infra > unknown > flake that the report uses); its confidence is high when every failure has that
class and evidence and the class is not `unknown`, medium when at least two thirds do, low otherwise. A build
failure's class is whom the build was attributed to (the backend, or upstream when the core or suite moved).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crcr import __version__
from crcr.callback.body import MAX_SUMMARY, CallbackError, truncate_utf8
from crcr.ci.classify import SEVERITY, failure_text
from crcr.ci.model import FAILING, CombinationResult, RunRecord, TestOutcome, from_json

PASSES = frozenset({"passed", "xfailed", "promotable"})
ANALYZER = {"name": "tributary-crcr", "version": __version__}


@dataclass(frozen=True)
class Facts:
    """A combination's part of a completed callback."""

    conclusion: str
    test_results: dict[str, int] | None
    failed_tests: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None


def resolve_run_dir(path: Path) -> Path:
    """`path` when it holds a record.json, else its newest run directory (run ids sort by their start time)."""
    if (path / "record.json").is_file():
        return path
    runs = sorted(p.parent for p in path.glob("*/record.json")) if path.is_dir() else []
    if not runs:
        raise CallbackError(f"{path}: neither a run directory nor a folder of runs")
    return runs[-1]


def load_record(run_dir: Path) -> RunRecord:
    """The run record in `run_dir` (its record.json)."""
    path = run_dir / "record.json"
    try:
        return from_json(RunRecord, json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise CallbackError(f"{path}: no run record there (is it a crcr ci run directory?)") from None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise CallbackError(f"{path}: not a readable run record ({type(exc).__name__})") from None


def combination(record: RunRecord, name: str = "") -> CombinationResult:
    """The named combination, or the primary one."""
    for result in record.combinations:
        if result.combination.name == name if name else result.combination.matrix == "primary":
            return result
    names = ", ".join(r.combination.name for r in record.combinations) or "none"
    raise CallbackError(f"run {record.run_id} has no {'combination ' + repr(name) if name else 'primary combination'}"
                        f" (it has: {names})")  # fmt: skip


def facts(
    record: RunRecord,
    name: str = "",
    *,
    job: str = "",
    log_url: str = "",
    upstream: Mapping[str, Any] | None = None,
    shard: int | None = None,
) -> Facts:
    """The callback's facts for one combination, or for one `shard` of it (a leg of a distributed run, reported
    from the merged record). `job` and `log_url` go into the verdict's evidence, `upstream` ({pr, commit} of the
    change under test) into its `suspected_upstream` when the failures are upstream's."""
    result = combination(record, name)
    result = result if shard is None else shard_part(result, shard)
    conclusion = {"passed": "success", "incompatible": "neutral"}.get(result.status, "failure")
    counted = result.status not in ("build_failed", "incompatible") or bool(result.tests)
    failing = sorted((t for t in result.tests if t.outcome in FAILING), key=lambda t: t.nodeid)
    verdict = None
    if result.status == "build_failed":
        verdict = _build_verdict(result, job, log_url, upstream or {})
    elif conclusion == "failure":
        verdict = _test_verdict(result, failing, job, log_url, upstream or {})
    if verdict is not None:
        verdict |= {"analyzer": ANALYZER, "analyzed_at": _z(record.finished or record.started)}
        ran_for = str(record.trigger.get("sha") or "")
        if relation := core_relation(result, upstream or {}, ran_for):  # said whole: the summary gives way if need be
            room = MAX_SUMMARY - len(relation.encode()) - 2
            verdict["summary"] = f"{truncate_utf8(verdict['summary'], room)}; {relation}"
    return Facts(conclusion, counts(result) if counted else None, [failed_test(t) for t in failing], verdict)


def shard_part(result: CombinationResult, shard: int) -> CombinationResult:
    """One shard of a combination as a combination of its own: its tests, failed when one of them fails (a test
    its leg never reported is `not_run`, which fails)."""
    if not any(s.index == shard for s in result.shards):
        known = ", ".join(str(s.index) for s in result.shards) or "none"
        raise CallbackError(f"{result.combination.name} has no shard {shard} (its shards: {known})")
    tests = [t for t in result.tests if t.shard == shard]
    status = "failed" if any(t.failing for t in tests) else "passed"
    shards = [s for s in result.shards if s.index == shard]
    return dataclasses.replace(result, status=status, tests=tests, shards=shards)


def counts(result: CombinationResult) -> dict[str, int]:
    """{passed, failed, skipped, total} for a combination's tests."""
    by = Counter(t.outcome for t in result.tests)
    passed = sum(by[o] for o in PASSES)
    failed = sum(by[o] for o in FAILING)
    return {"passed": passed, "failed": failed, "skipped": by["skipped"], "total": passed + failed + by["skipped"]}


def failed_test(test: TestOutcome) -> dict[str, Any]:
    """One failed-tests-detail entry: JUnit-style name and classname from the nodeid, the failure's text."""
    path, _, rest = test.nodeid.partition("::")
    parts = rest.split("::") if rest else [path]
    module = path.removesuffix(".py").replace("/", ".")
    classname = ".".join([module, *parts[:-1]]) if rest else module
    return {
        "name": parts[-1],
        "classname": classname,
        "message": _headline(test),
        "stacktrace": failure_text(test),
        "duration": test.duration,
    }


def _headline(test: TestOutcome) -> str:
    kind, message = str(test.failure.get("type") or ""), str(test.failure.get("message") or "")
    if kind or message:
        return f"{kind}: {message}" if kind and message else kind or message
    return {
        "xpassed": "passed, but it is expected to fail (strict xfail)",
        "not_run": "not run: no shard reported it",
        "timeout": "hung until its timeout",
        "crashed": "the test process crashed",
    }.get(test.outcome, test.outcome)


def _test_verdict(
    result: CombinationResult, failing: list[TestOutcome], job: str, log_url: str, upstream: Mapping[str, Any]
) -> dict[str, Any]:
    if not failing:
        reason = result.reason or f"the combination ended {result.status}"
        return {"category": "unknown", "confidence": "low", "summary": f"{result.status}: {reason}"}
    classes = [t.classification.klass if t.classification else "unknown" for t in failing]
    tally = Counter(classes)
    category = min(tally, key=lambda k: (-tally[k], SEVERITY.index(k)))
    ours = [t for t, k in zip(failing, classes, strict=True) if k == category]
    backed = sum(1 for t in ours if t.classification and t.classification.evidence)
    if category == "unknown" or 3 * backed < 2 * len(failing):
        confidence = "low"
    else:
        confidence = "high" if backed == len(failing) else "medium"
    first = ours[0].classification
    others = ", ".join(f"{k} {n}" for k, n in sorted(tally.items()) if k != category)
    summary = (
        f"{len(ours)} of {len(failing)} failing test(s) {category} in {result.combination.name}"
        f"{f' (also {others})' if others else ''}: {first.reason if first else 'not classified'}"
    )
    evidence = [
        {
            "job": job,
            "test": t.nodeid,
            "log_url": log_url,
            "excerpt": t.classification.evidence if t.classification else "",
        }
        for t in ours + [t for t in failing if t not in ours]
    ]
    verdict: dict[str, Any] = {"category": category, "confidence": confidence, "summary": summary, "evidence": evidence}
    retried = [t for t in ours if len(t.attempts) > 1]
    if retried:
        verdict["reproduced_on_retry"] = all(a in FAILING for t in retried for a in t.attempts)
    if category == "upstream" and ran_the_commit(result, upstream):
        verdict["suspected_upstream"] = _suspect(result, upstream, first.reason if first else "")
    return verdict


def _build_verdict(result: CombinationResult, job: str, log_url: str, upstream: Mapping[str, Any]) -> dict[str, Any]:
    error = (result.build.first_error if result.build else "") or result.reason or "no error line was captured"
    who = result.attributed_to
    category = "backend" if who == "backend" else "upstream" if who in ("core", "suite") else "unknown"
    basis = result.attribution_basis or ("unattributed: no probe build" if not who else f"attributed to the {who}")
    summary = truncate_utf8(f"build failed ({basis}): {error}", MAX_SUMMARY)
    verdict: dict[str, Any] = {
        "category": category,
        "confidence": "high" if who else "low",
        "summary": summary,
        "evidence": [{"job": job, "test": "build", "log_url": log_url, "excerpt": error}],
    }
    if category == "upstream" and ran_the_commit(result, upstream):
        verdict["suspected_upstream"] = _suspect(result, upstream, f"the build broke when the {who} moved")
    return verdict


def ran_the_commit(result: CombinationResult, upstream: Mapping[str, Any]) -> bool:
    """Whether the core that ran was built from the dispatched commit: only then may an upstream verdict name the
    dispatched PR as the suspect (a release or nightly core's failure is not that change's)."""
    commit = str(upstream.get("commit") or "")
    return bool(commit) and result.combination.core.git == commit


def core_relation(result: CombinationResult, upstream: Mapping[str, Any], ran_for: str = "") -> str:
    """What the core that ran is to the dispatched commit, in one sentence ("" when the dispatch names none): the
    run's own finding (ancestry asked of the suite checkout) when the run was for that commit (`ran_for`)."""
    commit = str(upstream.get("commit") or "")
    if not commit:
        return ""
    combination = result.combination
    if combination.dispatched and ran_for == commit:
        return combination.dispatched
    core = combination.core
    if core.git == commit:
        return f"the core was built from the dispatched commit {commit[:12]}"
    built = f"git {core.git[:12]}" if core.git else "no recorded source commit"
    suite = "; the suite was taken at it" if combination.suite.sha == commit else ""
    return (f"the core that ran, torch {core.version} ({built}), is not the dispatched commit {commit[:12]}, and "
            f"whether it contains it is not known here{suite}")  # fmt: skip


def _suspect(result: CombinationResult, upstream: Mapping[str, Any], reason: str) -> dict[str, Any]:
    core = result.combination.core
    return {**upstream, "reason": f"torch {core.version}: {reason}"}


def _z(stamp: str) -> str:
    return stamp.replace("+00:00", "Z") if stamp.endswith("+00:00") else stamp
