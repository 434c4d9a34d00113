"""Attribution: probes pin one moved candidate back each; a failure follows the one whose pinning fixes it."""

from __future__ import annotations

from crcr.ci.attribution import attribute, core_matrix_upstream, explain, pinned_kind, plan_attribution, version_key
from crcr.ci.classify import classify, moved_since
from crcr.ci.model import Candidate, Combination, CombinationResult
from crcr.ci.model import TestOutcome as Case

GREEN_BACKEND = Candidate("backend", "v0.2.0", "0.2.0", "aaa111")
NEW_BACKEND = Candidate("backend", "HEAD", "0.3.0.dev0", "bbb222")
OLD_CORE = Candidate("core", "2.13.0", "2.13.0", "wheel-213")
NEW_CORE = Candidate("core", "2.14.1", "2.14.1", "wheel-2141")
SUITE = Candidate("suite", "embedded", "embedded", "suite-1")

BREAKS_OP = "test/test_ops.py::TestCommonDEV::test_noncontiguous_samples_<script>mul</script>_float32"
UPSTREAM = "test/test_torch.py::TestTorchDEV::test_\"'&_new_default_dtype"
BOTH = "test/test_view_ops.py::TestViewOpsDEV::test_both_needed"
EITHER = "test/test_view_ops.py::TestViewOpsDEV::test_either_fixes"


def test_two_moved_candidates_get_one_probe_each() -> None:
    last = Combination("primary", "primary", GREEN_BACKEND, OLD_CORE, SUITE)
    current = Combination("primary", "primary", NEW_BACKEND, NEW_CORE, SUITE)
    probes = plan_attribution(current, last, [BREAKS_OP, UPSTREAM])
    assert [p.name for p in probes] == ["primary~backend@v0.2.0", "primary~core@2.13.0"]
    backend_probe, core_probe = probes
    assert (backend_probe.backend, backend_probe.core, backend_probe.suite) == (GREEN_BACKEND, NEW_CORE, SUITE)
    assert (core_probe.backend, core_probe.core, core_probe.suite) == (NEW_BACKEND, OLD_CORE, SUITE)
    assert [pinned_kind(p) for p in probes] == ["backend", "core"]
    assert pinned_kind("primary") == ""

    # the probes ran only the failures; each passing set is what passed there
    passing = {backend_probe.name: {BREAKS_OP, EITHER}, core_probe.name: {UPSTREAM, EITHER}}
    pinned = {p.name: pinned_kind(p) for p in probes}
    follows = attribute([BREAKS_OP, UPSTREAM, BOTH, EITHER], passing, pinned)
    assert follows == {BREAKS_OP: "backend", UPSTREAM: "core", BOTH: "", EITHER: ""}
    reasons = explain([BOTH, EITHER], passing, pinned)
    assert "fails with each moved candidate pinned back (backend, core)" in reasons[BOTH][1]
    assert "any of backend, core" in reasons[EITHER][1]

    # classification then uses what was found
    moved = moved_since(current, last)
    assert moved == {"backend", "core"}
    classes = {}
    for nodeid in follows:
        test = Case(nodeid, "failed", attempts=["failed", "failed"], failure={"message": "mismatch"})
        test.follows = follows[nodeid]
        classes[nodeid] = classify(test, moved, "").klass
    assert classes == {BREAKS_OP: "backend", UPSTREAM: "upstream", BOTH: "unknown", EITHER: "unknown"}


def test_one_moved_candidate_needs_no_probe() -> None:
    last = Combination("primary", "primary", NEW_BACKEND, OLD_CORE, SUITE)
    current = Combination("primary", "primary", NEW_BACKEND, NEW_CORE, SUITE)
    assert plan_attribution(current, last, [UPSTREAM]) == []
    both = Combination("primary", "primary", GREEN_BACKEND, OLD_CORE, SUITE)
    assert plan_attribution(Combination("primary", "primary", NEW_BACKEND, NEW_CORE, SUITE), both, []) == []


def test_a_candidate_that_kept_its_name_is_named_by_sha() -> None:
    rebuilt = Candidate("backend", "HEAD", "0.3.0.dev0", "ccc333")
    last = Combination("primary", "primary", rebuilt, OLD_CORE, SUITE)
    current = Combination("primary", "primary", NEW_BACKEND, NEW_CORE, SUITE)
    assert [p.name for p in plan_attribution(current, last, [BOTH])] == [
        "primary~backend@HEAD:ccc333",
        "primary~core@2.13.0",
    ]


def test_a_probe_that_did_not_run_passes_nothing() -> None:
    assert attribute([BOTH], {}, {"primary~core@2.13.0": "core"}) == {BOTH: ""}
    assert "no probe ran" in explain([BOTH], {}, {})[BOTH][1]


def _leg(
    name: str, core: Candidate, outcomes: dict[str, str], matrix: str = "core", variant: str = ""
) -> CombinationResult:
    combination = Combination(name, matrix, NEW_BACKEND, core, SUITE, variant)  # type: ignore[arg-type]
    return CombinationResult(
        combination,
        "failed" if "failed" in outcomes.values() else "passed",
        tests=[Case(n, o) for n, o in outcomes.items()],  # type: ignore[arg-type]
    )


def test_a_failure_only_on_the_newer_torch_is_upstreams() -> None:
    old = _leg("core-2.13.0", OLD_CORE, {UPSTREAM: "passed", BREAKS_OP: "failed", EITHER: "skipped", BOTH: "passed"})
    new = _leg("core-2.14.1", NEW_CORE, {UPSTREAM: "failed", BREAKS_OP: "failed", EITHER: "failed", BOTH: "crashed"})
    other_backend = CombinationResult(
        Combination("backend-v0.2.0", "backend", GREEN_BACKEND, NEW_CORE, SUITE),
        "failed",
        tests=[Case(BREAKS_OP, "failed")],
    )
    build_failed = CombinationResult(Combination("x", "core", NEW_BACKEND, OLD_CORE, SUITE), "build_failed")
    # BREAKS_OP fails on both (the backend's), EITHER did not run on 2.13.0 (no evidence)
    assert core_matrix_upstream([new, other_backend, old, build_failed]) == {"core-2.14.1": {UPSTREAM, BOTH}}


def test_only_the_same_variant_on_the_older_torch_is_evidence() -> None:
    """A compiled failure that passes eagerly on the older torch says nothing about torch: eager never compiled."""
    eager_old = _leg("core@2.13.0", OLD_CORE, {UPSTREAM: "passed", BOTH: "passed"})
    eager_new = _leg("primary", NEW_CORE, {UPSTREAM: "failed", BOTH: "passed"}, "primary")
    compiled_old = _leg("core@2.13.0+compile", OLD_CORE, {UPSTREAM: "passed", BOTH: "failed"}, variant="compile")
    compiled_new = _leg("primary+compile", NEW_CORE, {UPSTREAM: "passed", BOTH: "failed"}, "primary", "compile")
    found = core_matrix_upstream([eager_new, compiled_new, eager_old, compiled_old])
    assert found == {"primary": {UPSTREAM}}


def test_versions_order_numerically() -> None:
    assert version_key("2.14.1+cu128") > version_key("2.13.0") > version_key("2.9.1")
