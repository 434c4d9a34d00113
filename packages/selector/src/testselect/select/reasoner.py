"""The decisions of steps 3 and 4 behind one `Reasoner` protocol; `RuleReasoner` is the deterministic default.

A reasoner sees facts only (index rows, recorded cases, the profile, the capabilities) and returns decisions with
their reasons; reading the store and writing configs happen elsewhere, so another reasoner can be swapped in.
"""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from testselect.index.dtypes import DTYPES
from testselect.select.capabilities import Capabilities
from testselect.select.profile import Profile

# Device restrictions that keep a test from being instantiated for a privateuse1 device.
OTHER_DEVICE_ONLY = ("onlyCUDA", "onlyCPU", "onlyMPS", "onlyXPU", "onlyHPU", "onlyMTIA", "skipPRIVATEUSE1")
# Features the index infers that are extension points (float64 is a dtype, decided by the capabilities).
HOOK_FEATURES = ("autograd", "complex", "distributed", "dynamo", "inductor", "jit", "multi_device", "sparse")
COMPLEX = frozenset({"complex32", "complex64", "complex128"})
CPU_FAILED = frozenset({"failed", "error"})
CPU_DIED = frozenset({"crashed", "timeout"})
#: The device a prediction from device-side evidence is phrased for (its reasons read "passed on ...").
RECORDING = "the recording device"
#: How a case that did not pass on the recording device would end on the device: (category, reason).
RECORDED_ENDS = {
    "skipped": ("runtime_skip", "skips itself at runtime on the recording device"),
    "xfailed": ("upstream_xfail", "upstream expects it to fail (expectedFailure) on this device type"),
    "failed": ("recorder_failure", "fails on the recording device, which computes every op on CPU"),
    "error": ("recorder_failure", "errors in setup or teardown on the recording device"),
    "crashed": ("crash", "crashed the recording device's process"),
    "timeout": ("timeout", "timed out on the recording device"),
}


@dataclass(frozen=True)
class TestFacts:
    """An indexed test with its class's instantiation calls and its recorded CPU cases."""

    node_id: str  # file::Class::test
    features: tuple[str, ...]
    dtypes: tuple[str, ...]  # read from @dtypes; empty when unread or @ops-driven
    restrictions: tuple[str, ...]  # decorator names
    instantiations: tuple[dict, ...]
    cases: tuple[CaseFacts, ...] = ()
    info_driven: bool = False  # @ops / @modules: each case's dtype comes from its OpInfo / ModuleInfo
    device_cases: tuple[DeviceCase, ...] = ()  # observed on the device (current content hash): beat prediction
    recorded: tuple[RecordedCase, ...] = ()  # run on the recording device under the device's name


@dataclass(frozen=True)
class RecordedCase:
    """One case run on the recording device: how it ended there (every op computed on CPU), the aten ops that
    reached the device with the dtypes of the device's tensors, and the OpInfo / ModuleInfo / dtypes torch gave it."""

    node_id: str  # as the device would name it: file::TestFooPRIVATEUSE1::test_bar_ring_float32
    outcome: str
    ops: dict[str, frozenset[str]]
    op: str | None = None
    module: str | None = None
    dtypes: tuple[str, ...] = ()
    raised: dict[str, frozenset[str]] = field(default_factory=dict)  # the calls whose kernel raised
    params: tuple[tuple[str, str], ...] = ()  # its other `@parametrize` arguments: (name, value as text), by name


@dataclass(frozen=True)
class CaseFacts:
    """One case recorded on CPU: its dtype (from the node id's `_cpu_<dtype>` suffix) and the ops it ran."""

    node_id: str
    dtype: str | None
    outcome: str
    ops: dict[str, frozenset[str]] = field(default_factory=dict)  # aten op -> dtypes of its tensor arguments


@dataclass(frozen=True)
class DeviceCase:
    """One case as a run on the device ended (`testselect refine` records them): its OpInfo / ModuleInfo and dtypes
    as the testreuse plugin parametrized it, and for a failure testreuse triage's cause."""

    node_id: str  # file::TestFooRING::test_bar_ring_float32 (under test/)
    device: str
    run: str  # the run it was observed in
    outcome: str  # passed xpassed failed error xfailed skipped crashed timeout
    op: str | None = None  # OpInfo full name
    module: str | None = None  # ModuleInfo name
    dtypes: tuple[str, ...] = ()
    category: str | None = None  # None: it passed; else triage's (unsupported_op, numerics, crash, ...) or flaky
    reason: str = ""  # triage's one-line reason
    evidence: dict = field(default_factory=dict, compare=False)  # triage's figures (numerics: max_abs, ...)
    params: tuple[tuple[str, str], ...] = ()  # its other `@parametrize` arguments: (name, value as text), by name


@dataclass(frozen=True)
class FileScope:
    path: str
    selected: bool
    reason: str


@dataclass(frozen=True)
class Decision:
    """One config entry: `mode` for the test (or only its `dtype` cases), why, and the facts it rests on."""

    node_id: str
    mode: str
    reason: str
    basis: str  # the kind of fact: written as the comment beside the entry
    dtype: str | None = None
    ops: tuple[str, ...] = ()  # only these OpInfos' cases (`only: {ops: [...]}`)
    modules: tuple[str, ...] = ()  # only these ModuleInfos' cases (`only: {modules: [...]}`)
    combos: tuple[tuple[str, ...], ...] = ()  # only cases of exactly these dtypes (`only: {dtypes: [[a, b]]}`)
    params: tuple[tuple[str, str], ...] = ()  # only the cases whose arguments take these values (`only: {params}`)


class Reasoner(Protocol):
    """Decides scope per file and buckets per test; the default is `RuleReasoner` (no LLM reasoner exists yet)."""

    def scope(self, path: str, error: str | None, tests: list[TestFacts]) -> FileScope: ...

    def bucket(self, test: TestFacts) -> list[Decision]: ...

    def predict(self, case: RecordedCase) -> DeviceCase: ...


def shortlist(ops: list[str]) -> str:
    """The first three, and how many more: a reason stays one line however many it names."""
    return ", ".join(ops[:3]) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")


def case_dtype(node_id: str) -> str | None:
    """The dtype of a CPU case from its name (`test_x_cpu_float32` -> float32); None for an un-dtyped case."""
    match = re.search(r"_cpu((?:_[a-z]+[0-9]*)*)$", node_id)
    if not match or not match.group(1):
        return None
    first = match.group(1).split("_")[1]
    return first if first in DTYPES else None  # `_cpu_zeros` is a parametrization, not a dtype


class RuleReasoner:
    """Deterministic rules: restrictions, then unhooked features, then dtypes, then op evidence and CPU outcomes."""

    def __init__(self, profile: Profile, capabilities: Capabilities | None = None) -> None:
        self.profile = profile
        self.capabilities = capabilities

    def _hooked(self, feature: str) -> bool:
        return self.profile.hooks.get(feature, False)

    def _blocker(self, test: TestFacts) -> tuple[str, str] | None:
        """Why no case of the test can run on the device (reason, basis), or None."""
        device = self.profile.device
        for name in test.restrictions:
            if name in OTHER_DEVICE_ONLY:
                return f"@{name}: not instantiated for privateuse1 ({device})", "device restriction"
        for call in test.instantiations:
            only_for = call.get("kwargs", {}).get("only_for")
            if only_for and "privateuse1" not in only_for and device not in only_for:
                return f"class instantiated only_for={only_for}", "device restriction"
            except_for = call.get("kwargs", {}).get("except_for", "")
            if "privateuse1" in except_for or device in except_for:
                return f"class instantiated except_for={except_for}", "device restriction"
        for feature in test.features:
            if feature not in HOOK_FEATURES or self._hooked(feature):
                continue
            if feature == "complex" and (test.dtypes or test.info_driven):
                continue  # decided per dtype below, or by the device's dtypes per OpInfo case
            return f"needs {feature}, which the backend profile does not hook ({feature}: no)", "profile hooks"
        return None

    def _dtype_ok(self, dtype: str) -> str | None:
        """None if the device computes in `dtype`, else why not."""
        device = self.profile.device
        if dtype in COMPLEX and not self._hooked("complex"):
            return f"dtype {dtype}: complex is not hooked by {device} (complex: no)"
        if self.profile.dtypes and dtype not in self.profile.dtypes:
            return f"dtype {dtype} is not in the profile's compute dtypes of {device}"
        if self.capabilities is not None and dtype not in self.capabilities.dtypes:
            return f"dtype {dtype} is not in {device}'s supported_dtypes"
        return None

    def _missing(self, case: CaseFacts) -> list[str]:
        """Each aten op the case ran on CPU that the device lacks, or `op (dtype)` when it lacks it for the case's
        dtype. Only the case's own dtype counts: an int64 index or a CPU-side reference in another dtype is not the
        case."""
        own = frozenset({case.dtype}) if case.dtype is not None else frozenset()
        return self._lacking({op: dtypes & own for op, dtypes in case.ops.items()}, self.profile.provided_ops)

    def predict(self, case: RecordedCase) -> DeviceCase:
        """How the case would end on the device: as on the recording device, unless an op reached it that the
        device does not register, or not for a dtype it passed."""

        def ended(category: str | None, reason: str = "") -> DeviceCase:
            outcome = "passed" if category is None else "failed"
            return DeviceCase(
                case.node_id,
                RECORDING,
                "testselect evidence",
                outcome,
                case.op,
                case.module,
                case.dtypes,
                category,
                reason,
                params=case.params,
            )

        refused = self._lacking(case.raised, ())
        if case.outcome == "failed" and refused:  # the recorder raised the device's refusal in place of CPU's error
            device = self.profile.device
            return ended("unsupported_op", f"{device} lacks {shortlist(refused)}: the test fails on {device}'s refusal")
        if case.outcome in RECORDED_ENDS:
            return ended(*RECORDED_ENDS[case.outcome])
        lacking = self._lacking(case.ops, ())  # what reached the device is registered there or not: no globs
        if lacking:
            return ended("unsupported_op", f"{self.profile.device} lacks {shortlist(lacking)}")
        return ended(None)

    def _lacking(self, ops: dict[str, frozenset[str]], provided: tuple[str, ...]) -> list[str]:
        """The ops (or `op (dtype)`) whose dtypes the device's export does not register them for; an op the export
        lists without dtypes takes any, and one it does not list is lacking unless a `provided` glob names it."""
        if self.capabilities is None:
            return []
        lacking = []
        for op, dtypes in sorted(ops.items()):
            have = self.capabilities.aten_ops.get(op)
            if have is None:
                if not any(fnmatch.fnmatchcase(op, glob) for glob in provided):
                    lacking.append(op)
            elif have:
                lacking.extend(f"{op} ({d})" for d in sorted(dtypes - have))
        return lacking

    def scope(self, path: str, error: str | None, tests: list[TestFacts]) -> FileScope:
        """A file is worth analysing when it is in the profile's scope and some test of it can run on the device."""
        if any(fnmatch.fnmatch(path, glob) for glob in self.profile.exclude):
            return FileScope(path, False, "excluded by scope.exclude")
        if not any(fnmatch.fnmatch(path, glob) for glob in self.profile.include):
            return FileScope(path, False, "not matched by scope.include")
        if error is not None:
            return FileScope(path, False, f"unparsable: {error}")
        if not tests:
            return FileScope(path, False, "no tests indexed")
        blocked: dict[str, int] = defaultdict(int)
        for test in tests:
            blocker = self._blocker(test)
            if blocker is not None:
                blocked[blocker[0]] += 1
        usable = len(tests) - sum(blocked.values())
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(blocked.items()))
        if usable == 0:
            return FileScope(path, False, f"no test can run: {why}")
        return FileScope(path, True, f"{usable} of {len(tests)} tests can run" + (f"; out: {why}" if why else ""))

    def bucket(self, test: TestFacts) -> list[Decision]:
        """The whole test's mode, then scoped entries for the dtypes whose cases differ from it."""
        blocker = self._blocker(test)
        if blocker is not None:
            return [Decision(test.node_id, "skip", *blocker)]
        decisions = [
            Decision(
                test.node_id, "mandatory_success", "no unsupported dtype, op, feature or restriction found", "rules"
            )
        ]
        groups: dict[str | None, list[CaseFacts]] = defaultdict(list)
        for case in test.cases:
            groups[case.dtype].append(case)
        dtypes = sorted(set(test.dtypes) | {d for d in groups if d is not None})
        for dtype in dtypes:
            unsupported = self._dtype_ok(dtype)
            if unsupported is not None:
                decisions.append(Decision(test.node_id, "skip", unsupported, "capabilities: dtypes", dtype))
            elif (evidence := self._evidence(test.node_id, groups.get(dtype, []), dtype)) is not None:
                decisions.append(evidence)
        if (evidence := self._evidence(test.node_id, groups.get(None, []), None)) is not None:
            decisions[0] = evidence  # the un-dtyped cases decide the whole test
        return decisions

    def _evidence(self, node_id: str, cases: list[CaseFacts], dtype: str | None) -> Decision | None:
        """From the cases recorded on CPU: ops the device lacks, or a case that failed or died on CPU already."""
        ran = [c for c in cases if c.outcome != "skipped"]
        if not ran:
            return None
        where = f" {dtype}" if dtype else ""
        died = [c for c in ran if c.outcome in CPU_DIED]
        if died:
            reason = f"{len(died)} of {len(ran)}{where} cases {died[0].outcome} on the CPU reference run"
            return Decision(node_id, "skip", reason, "op evidence: CPU outcome", dtype)
        lacking = {c.node_id: self._missing(c) for c in ran}
        short = sorted({op for ops in lacking.values() for op in ops})
        hit = sum(1 for ops in lacking.values() if ops)
        if hit:
            reason = f"{self.profile.device} lacks {shortlist(short)}, run on CPU by {hit} of {len(ran)}{where} cases"
            mode = self.profile.missing_op if hit == len(ran) else "xfail"
            return Decision(node_id, mode, reason, "op evidence: aten ops", dtype)
        failed = [c for c in ran if c.outcome in CPU_FAILED]
        if failed:
            reason = f"{len(failed)} of {len(ran)}{where} cases failed on the CPU reference run"
            mode = "xfail_strict" if len(failed) == len(ran) else "xfail"
            return Decision(node_id, mode, reason, "op evidence: CPU outcome", dtype)
        return None
