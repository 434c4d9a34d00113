"""Failure classification from the run's facts: retries, device-fatal patterns, infrastructure, what moved."""

from __future__ import annotations

import dataclasses

import pytest
from crcr.ci.classify import EVIDENCE_LIMIT, DevicePatterns, classify, moved_since, verdict
from crcr.ci.model import Candidate, Classification, Combination
from crcr.ci.model import TestOutcome as Case

NODE = "test/test_ops.py::TestCommonDEV::test_<script>add</script>_\"'&_float32"


def combo(backend: str = "b1", core: str = "c1", suite: str = "s1") -> Combination:
    return Combination(
        "primary",
        "primary",
        Candidate("backend", "HEAD", "0.1.0", backend),
        Candidate("core", "2.14.1", "2.14.1", core),
        Candidate("suite", "embedded", "embedded", suite),
    )


def failed(message: str = "AssertionError: Tensor-likes are not close!", **kw: object) -> Case:
    facts = {"type": "AssertionError", "message": message}
    return Case(NODE, kw.pop("outcome", "failed"), attempts=kw.pop("attempts", ["failed", "failed"]), failure=facts)  # type: ignore[arg-type]


def test_moved_since_compares_shas() -> None:
    assert moved_since(combo(), combo()) == set()
    assert moved_since(combo(core="c2"), combo()) == {"core"}
    assert moved_since(combo(backend="b2", suite="s2"), combo()) == {"backend", "suite"}
    assert moved_since(combo(), None) == {"backend", "core", "suite"}
    renamed = dataclasses.replace(combo(), core=Candidate("core", "other name", "9", "c1"))
    assert moved_since(renamed, combo()) == set()  # names do not matter, content does


def test_passed_on_retry_is_a_flake() -> None:
    test = Case(NODE, "passed", attempts=["failed", "passed"], failure={"message": "Connection refused"})
    c = classify(test, {"backend"}, "")
    assert c.klass == "flake"
    assert "retry" in c.reason
    assert "failed -> passed" in c.reason


@pytest.mark.parametrize(
    ("message", "label"),
    [
        ("ConnectionRefusedError: [Errno 111] Connection refused", "connection refused"),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", "connection reset"),
        ("OSError: [Errno 28] No space left on device: '/tmp/x'", "no space left on device"),
        ("OSError: [Errno 24] Too many open files", "too many open files"),
        ("worker 'gw1' lost, replacing it", "a lost worker"),
        ("pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool read timed out", "package network"),
        ("error: uv failed to fetch https://index/simple/torch: network unreachable", "package network"),
    ],
)
def test_transient_infrastructure_errors_are_infra(message: str, label: str) -> None:
    c = classify(failed(message), {"backend"}, "")
    assert c.klass == "infra"
    assert label in c.reason
    assert c.evidence


def test_infra_is_found_in_the_log_too() -> None:
    log = "collected 12 items\n" + "x" * 2000 + "\nE   OSError: [Errno 28] No space left on device\nmore lines"
    c = classify(failed("RuntimeError: write failed"), {"core"}, log)
    assert c.klass == "infra"
    assert c.evidence.startswith("E OSError: [Errno 28] No space left on device")
    assert len(c.evidence) <= EVIDENCE_LIMIT


def test_a_crash_with_a_signal_is_the_backend() -> None:
    crash = Case(NODE, "crashed", attempts=["crashed", "crashed"], failure={"message": "worker crashed", "signal": 6})
    c = classify(crash, {"core"}, "Fatal Python error: Aborted")
    assert c.klass == "backend"
    assert "signal 6" in c.reason
    by_text = Case(NODE, "crashed", failure={"message": "node down: killed by SIGSEGV"})
    assert classify(by_text, {"core", "suite"}, "").reason.startswith("the test process crashed with SIGSEGV")


def test_a_hang_and_oom_are_the_backend() -> None:
    hang = Case(NODE, "timeout", attempts=["timeout"], failure={"message": "Timeout (>60.0s) from pytest-timeout"})
    c = classify(hang, {"core"}, "")
    assert (c.klass, "hung" in c.reason) == ("backend", True)
    oom = failed("RuntimeError: DEV out of memory: tried to allocate 64.00 GiB")
    c = classify(oom, {"core"}, "")
    assert c.klass == "backend"
    assert "out of memory" in c.reason


RING = DevicePatterns(transient=("TransientDeviceError",), refusal=("TooLargeError",))


def test_a_devices_own_failures_come_from_its_profile() -> None:
    """The pipeline names no device: the profile says a TransientDeviceError is transient and a TooLargeError a
    refusal, which is deterministic, so never out of memory; without the profile they are ordinary failures."""
    transient = Case(NODE, "failed", failure={"type": "TransientDeviceError", "message": "transient device error"})
    c = classify(transient, {"backend"}, device=RING)
    assert (c.klass, c.reason) == ("infra", "a transient device error (TransientDeviceError, a transient error of this "
                                            "device's profile)")  # fmt: skip
    too_large = failed("TooLargeError: one row's operands overflow a scratchpad")
    c = classify(too_large, {"core"}, device=RING)
    assert c.klass == "backend"
    assert c.reason.startswith("the device refused the work (TooLargeError: a deterministic refusal")
    assert "out of memory" not in c.reason.replace("not out of memory", "")
    assert classify(transient, {"core"}).klass == "upstream"  # no profile: only what moved says
    assert classify(too_large, {"core"}).klass == "upstream"


def test_only_the_tests_own_output_is_read() -> None:
    """A neighbour's segfault in the shard log is not this test's: the test carries its own captured output."""
    own = failed("AssertionError: Tensor-likes are not close!")
    own.failure["output"] = "computing the reference on CPU\n"
    c = classify(own, {"core"})
    assert c.klass == "upstream"
    own.failure["output"] = "ConnectionResetError: [Errno 104] Connection reset by peer\n"
    assert classify(own, {"core"}).klass == "infra"


@pytest.mark.parametrize(
    ("moved", "klass", "said"),
    [
        ({"core"}, "upstream", "only the core (torch) moved"),
        ({"suite"}, "upstream", "only the suite moved"),
        ({"core", "suite"}, "upstream", "only the core and the suite moved"),
        ({"backend"}, "backend", "only the backend moved"),
        ({"backend", "core"}, "unknown", "several candidates moved since the last green run (backend, core)"),
        (set(), "unknown", "no candidate moved"),
    ],
)
def test_what_moved_decides_the_rest(moved: set[str], klass: str, said: str) -> None:
    c = classify(failed(), moved, "")
    assert c.klass == klass
    assert said in c.reason
    assert "failed on every retry (failed -> failed)" in c.reason
    assert c.evidence == "AssertionError: Tensor-likes are not close!"


def test_an_attribution_already_made_decides_over_what_moved() -> None:
    test = failed()
    test.follows = "core"
    c = classify(test, {"backend", "core"}, "")
    assert c.klass == "upstream"
    assert "core pinned back" in c.reason
    test.follows = "backend"
    assert classify(test, {"backend", "core"}, "").klass == "backend"


def test_evidence_is_short_and_single_spaced() -> None:
    c = classify(failed("boom " + "<script>" * 200), {"backend"}, "")
    assert len(c.evidence) <= EVIDENCE_LIMIT
    assert c.evidence.endswith("...")


def test_the_worst_class_wins_the_verdict() -> None:
    assert verdict([]) == ""
    assert verdict(["flake"]) == "flake"
    assert verdict(["flake", "unknown"]) == "unknown"
    assert verdict(["unknown", "infra", "flake"]) == "infra"
    assert verdict(["infra", "upstream"]) == "upstream"
    assert verdict([Classification("upstream", "r"), Classification("backend", "r")]) == "backend"
