"""The chat messages for a batch of tests: the task and answer shape, then the facts as JSON (nothing else)."""

from __future__ import annotations

import fnmatch
import json
from collections import Counter

from testselect.select.capabilities import Capabilities
from testselect.select.profile import HOOKS, Profile
from testselect.select.reasoner import TestFacts

MODES = ("mandatory_success", "xfail", "xfail_strict", "skip")

SYSTEM = f"""\
You bucket upstream PyTorch tests for an out-of-tree privateuse1 device into test-run modes.
Modes: {", ".join(MODES)}. mandatory_success: every case must pass on the device. xfail: cases may fail.
xfail_strict: every case must fail. skip: not run.
You get JSON facts: the device (its hooked extension points, compute dtypes, and for each aten op the tests ran on CPU
whether the device registers it and for which dtypes), and per test its node id, inferred features, @dtypes,
decorators, class instantiation calls, and its CPU reference cases grouped by dtype with outcomes and aten ops.
Answer with one JSON object {{"decisions": [...]}}; each decision is
{{"test": <node id>, "mode": <mode>, "reason": <one sentence>, "dtype": <one of the test's dtypes, or null>}}.
Give one decision with dtype null per test, plus one per dtype whose cases need another mode than the test's.
A skip, xfail or xfail_strict reason must name the fact it rests on: an aten op, dtype, feature or decorator
from the facts. mandatory_success is refused where a test is not instantiated for the device, needs an unhooked
feature or dtype, ran an op the device lacks, or crashed on CPU.
"""


def _op_support(op: str, profile: Profile, capabilities: Capabilities | None) -> str | list[str]:
    if capabilities is None:
        return "unknown (no capability export)"
    have = capabilities.aten_ops.get(op)
    if have is not None:
        return sorted(have) if have else "any dtype"
    if any(fnmatch.fnmatchcase(op, glob) for glob in profile.provided_ops):
        return "provided by the backend"
    return "not registered"


def summary(test: TestFacts) -> dict:
    """A test as the model sees it: its CPU cases summarised per dtype (outcome counts, the union of ops)."""
    groups: dict[str, tuple[Counter[str], set[str]]] = {}
    for case in test.cases:
        outcomes, ops = groups.setdefault(case.dtype or "", (Counter(), set()))
        outcomes[case.outcome] += 1
        ops.update(case.ops)
    cases = [
        {"dtype": dtype or None, "outcomes": dict(sorted(outcomes.items())), "ops": sorted(ops)}
        for dtype, (outcomes, ops) in sorted(groups.items())
    ]
    return {
        "test": test.node_id,
        "features": list(test.features),
        "dtypes": list(test.dtypes),
        "decorators": list(test.restrictions),
        "instantiations": list(test.instantiations),
        "cpu_cases": cases,
    }


def messages(tests: list[TestFacts], profile: Profile, capabilities: Capabilities | None) -> list[dict[str, str]]:
    """System instructions, then the device and the batch's tests as sorted JSON, so equal facts ask equally."""
    ops = sorted({op for test in tests for case in test.cases for op in case.ops})
    device = {
        "device": profile.device,
        "hooks": {name: profile.hooks.get(name, False) for name in HOOKS},
        "compute_dtypes": list(profile.dtypes) or "every supported dtype",
        "supported_dtypes": sorted(capabilities.dtypes) if capabilities else "unknown (no capability export)",
        "ops": {op: _op_support(op, profile, capabilities) for op in ops},
    }
    facts = {"device": device, "tests": [summary(test) for test in tests]}
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": json.dumps(facts, sort_keys=True)},
    ]
