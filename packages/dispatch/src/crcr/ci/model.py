"""The run record's vocabulary: candidates, combinations, per-test outcomes and their classification.

Every type round-trips through plain JSON (`to_json` / `from_json`), because the record outlives the process that
wrote it: the report, the history, attribution and `reproduce` all read it back from disk.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

CandidateKind = Literal["backend", "core", "suite"]
Matrix = Literal["primary", "backend", "core"]
#: How a combination ended. `build_failed` and `incompatible` are results, not crashes: no test ran.
Status = Literal["passed", "failed", "build_failed", "incompatible", "error"]
#: Who a failure is blamed on (the relay's triage verdict is derived from this).
FailureClass = Literal["upstream", "backend", "infra", "flake", "unknown"]
#: A test's final outcome; `not_run` is a selected test that no shard reported (its shard died twice); `xpassed` is a
#: strict xfail that passed (a failure, as pytest says), `promotable` a non-strict one that passed (its rule may be
#: promoted to mandatory_success: a signal, never a failure).
Outcome = Literal[
    "passed",
    "failed",
    "error",
    "skipped",
    "xfailed",
    "xpassed",
    "promotable",
    "crashed",
    "timeout",
    "deselected",
    "not_run",
]
FAILING: frozenset[str] = frozenset({"failed", "error", "xpassed", "crashed", "timeout", "not_run"})

T = TypeVar("T")


@dataclass(frozen=True)
class Candidate:
    """One version of one moving part: a backend git ref, a torch wheel, or a test suite tree."""

    kind: CandidateKind
    name: str  # what people call it: "HEAD", "v0.2.0", "2.14.1", "embedded"
    version: str  # a package version, torch's version, or the suite's label
    sha: str  # git commit, wheel sha256, or the suite tree's content digest
    git: str = ""  # a core's source commit (torch.version.git_version in its wheel); "" when not known


@dataclass(frozen=True)
class Combination:
    """One job: a backend x a core x a suite, run with the device profile's config folders or, for a `variant`,
    with that variant's. `name` is unique within a run and stable across runs."""

    name: str
    matrix: Matrix
    backend: Candidate
    core: Candidate
    suite: Candidate
    variant: str = ""  # a variant of the device profile ("compile"); "" for its plain configs
    dispatched: str = ""  # what its core and suite are to the dispatched commit, one sentence ("" = none dispatched)

    def candidates(self) -> tuple[Candidate, Candidate, Candidate]:
        return (self.backend, self.core, self.suite)


@dataclass(frozen=True)
class BuildResult:
    """The backend's wheels for one (backend sha, torch wheel sha256); `first_error` is the compiler's first error
    line when the build failed."""

    ok: bool
    wheels: dict[str, str] = field(default_factory=dict)  # distribution -> wheel path
    wheel_sha256: dict[str, str] = field(default_factory=dict)  # distribution -> sha256
    first_error: str = ""
    log: str = ""  # path of the full build log
    cached: bool = False


@dataclass(frozen=True)
class Classification:
    """Why a failure happened, said from the run's facts; `evidence` is a short log excerpt."""

    klass: FailureClass
    reason: str
    evidence: str = ""


@dataclass
class TestOutcome:
    """One selected test of one combination: its final outcome and every attempt that led to it."""

    __test__ = False  # a record of a test, not one for pytest to collect

    nodeid: str
    outcome: Outcome
    mode: str = ""  # the testreuse bucket: mandatory_success, xfail, xfail_strict, skip
    duration: float = 0.0
    shard: int = 0
    attempts: list[str] = field(default_factory=list)  # outcomes in order: first run, then each retry
    failure: dict[str, Any] = field(default_factory=dict)  # testreuse's failure facts (type, message, raised_at)
    classification: Classification | None = None
    follows: str = ""  # attribution: the candidate kind whose last-green version makes it pass ("" = unknown)

    @property
    def flaky(self) -> bool:
        """Failed first, passed on a retry."""
        return len(self.attempts) > 1 and self.attempts[0] in FAILING and self.attempts[-1] == "passed"

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING


@dataclass(frozen=True)
class ShardResult:
    index: int  # 1-based
    planned_seconds: float
    seconds: float  # wall time of the shard's runs, reruns included
    exit_status: int
    reran: bool = False  # the shard died and was rerun once
    tests: int = 0
    note: str = ""  # a distributed run's leg that did not finish: "leg killed after 12 of 40 tests (leg-3)"


@dataclass
class CombinationResult:
    combination: Combination
    status: Status
    build: BuildResult | None = None
    reason: str = ""  # one line: why it is build_failed / incompatible / error
    shards: list[ShardResult] = field(default_factory=list)
    tests: list[TestOutcome] = field(default_factory=list)
    seconds: float = 0.0  # shard time: the sum of its shards' wall times
    wall_seconds: float = 0.0  # the combination's own wall time, from check-out to its last retry
    cached: str = ""  # the run id whose results this one reuses (its inputs were identical, by hash); "" = ran
    inputs: str = ""  # the hash of its inputs (wheels, torch, suite, configs, profile, limits; see crcr.ci.reuse)
    regressions: list[str] = field(default_factory=list)  # failing now, passing in the previous green run
    fixes: list[str] = field(default_factory=list)  # passing now, failing in the previous green run
    attributed_to: str = ""  # build failures: the candidate kind that moved since the last green build
    attribution_basis: str = ""  # what `attributed_to` rests on (a probe build and its outcome), or why it is ""

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for test in self.tests:
            found[test.outcome] = found.get(test.outcome, 0) + 1
        return dict(sorted(found.items()))


@dataclass
class Prepared:
    """A combination ready to run: its backend built, its suite collected (nodeid -> mode) and planned into shards.
    What a build-once job hands to the shard legs of a distributed run."""

    combination: Combination
    build: BuildResult
    modes: dict[str, str]
    plan: dict[str, Any]  # testreuse's shard plan
    inputs: str = ""  # the hash of its inputs (crcr.ci.reuse)

    def shard_indexes(self) -> list[int]:
        return [int(shard["shard"]) for shard in self.plan.get("shards", [])]


@dataclass(frozen=True)
class Artifact:
    name: str  # path relative to the run directory, or a wheel's file name
    sha256: str


@dataclass
class RunRecord:
    run_id: str
    started: str  # ISO 8601, UTC
    trigger: dict[str, Any]
    environment: dict[str, Any]
    device: str
    combinations: list[CombinationResult] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    finished: str = ""
    verdict: str = ""  # "green", or "red: <one line>"
    skipped_variants: list[str] = field(default_factory=list)  # ci.yaml's, undeclared by this device


def to_json(value: Any) -> Any:
    """A dataclass tree as plain JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def from_json(kind: type[T], data: Any) -> T:
    """The inverse of `to_json` for the types of this module."""
    return _build(kind, data)


_NESTED: dict[tuple[str, str], type] = {}


def _build(kind: Any, data: Any) -> Any:
    if not dataclasses.is_dataclass(kind):
        return data
    values = {}
    for f in dataclasses.fields(kind):
        if f.name not in data:
            continue
        nested = _NESTED.get((kind.__name__, f.name))
        raw = data[f.name]
        if nested is None:
            values[f.name] = raw
        elif isinstance(raw, list):
            values[f.name] = [_build(nested, item) for item in raw]
        else:
            values[f.name] = None if raw is None else _build(nested, raw)
    return kind(**values)


_NESTED.update(
    {
        ("Combination", "backend"): Candidate,
        ("Combination", "core"): Candidate,
        ("Combination", "suite"): Candidate,
        ("TestOutcome", "classification"): Classification,
        ("CombinationResult", "combination"): Combination,
        ("CombinationResult", "build"): BuildResult,
        ("CombinationResult", "shards"): ShardResult,
        ("CombinationResult", "tests"): TestOutcome,
        ("RunRecord", "combinations"): CombinationResult,
        ("RunRecord", "artifacts"): Artifact,
        ("Prepared", "combination"): Combination,
        ("Prepared", "build"): BuildResult,
    }
)
