"""What enabling one aten op on the device would change: the tests waiting on it (from the op reverse index), the
entries it admits, the ones still blocked by other ops, and the config diff."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

from testselect.evidence import store as evidence
from testselect.index.store import Store
from testselect.select import configdiff, plan
from testselect.select.capabilities import Capabilities
from testselect.select.reasoner import Decision, RuleReasoner, case_dtype


@dataclass(frozen=True)
class Change:
    """One config entry whose mode the op changes for the waiting cases it decides."""

    node_id: str
    dtype: str | None
    ops: tuple[str, ...]  # the entry's OpInfo scope (`only: {ops}`), empty: every OpInfo
    before: str
    after: str
    reason: str  # the new entry's reason: why it is admitted, or what still blocks it
    cases: tuple[str, ...]  # the recorded cases that ran the op and that this entry decides


@dataclass(frozen=True)
class EnableOpReport:
    op: str
    dtypes: tuple[str, ...]  # the dtypes the op is enabled for; empty: every dtype
    waiting_cases: int  # recorded cases that ran the op
    waiting_tests: tuple[str, ...]  # their generic tests
    admitted: tuple[Change, ...]  # now mandatory_success
    still_blocked: tuple[Change, ...]  # held back by the op before, and by something else now
    diff: str


def with_op(capabilities: Capabilities, op: str, dtypes: tuple[str, ...]) -> Capabilities:
    """The export as it would be with `op` registered for `dtypes` (empty: any), added to what it has."""
    ops = dict(capabilities.aten_ops)
    have = ops.get(op)
    ops[op] = frozenset() if not dtypes or have == frozenset() else (have or frozenset()) | frozenset(dtypes)
    return dataclasses.replace(capabilities, aten_ops=ops)


#: The bases of entries that an op the device lacks holds back: CPU op evidence, or device-side evidence.
HELD_BY_OPS = ("op evidence: aten ops", "device-side evidence: unsupported_op")


def _specificity(decision: Decision) -> tuple[bool, bool, bool]:
    return bool(decision.ops or decision.modules), bool(decision.dtype or decision.combos), bool(decision.params)


def _covers(decision: Decision, case: dict) -> bool:
    """Whether the entry's scope holds the case: its test, OpInfo, ModuleInfo and dtypes (a CPU case's dtype from
    its name when torch's record has none)."""
    dtypes = tuple(case["dtypes"]) or ((dtype,) if (dtype := case_dtype(case["node_id"])) else ())
    return (
        decision.node_id == case["test"]
        and (not decision.ops or case["opinfo"] in decision.ops)
        and (not decision.modules or case["module"] in decision.modules)
        and (decision.dtype is None or dtypes == (decision.dtype,))
        and (not decision.combos or dtypes in decision.combos)
        and all(case["params"].get(name) == value for name, value in decision.params)
    )


def _deciding(decisions: list[Decision], case: dict) -> Decision | None:
    """The entry that decides the case: the most specific one holding it (a later one on a tie, as rebucket writes
    narrower entries after wider ones)."""
    holding = [(d, i) for i, d in enumerate(decisions) if _covers(d, case)]
    return max(holding, key=lambda held: (_specificity(held[0]), held[1]))[0] if holding else None


def enable_op(store: Store, reasoner: RuleReasoner, op: str, dtypes: tuple[str, ...]) -> EnableOpReport:
    """Re-bucket the files of the tests waiting on `op` with and without it; every other file is untouched.

    Each recorded case that ran the op is followed from the entry deciding it before to the one deciding it after.
    It counts when the op evidence held it back before: admitted if it is mandatory_success now, else still blocked,
    with the reason that holds it now (another op, the op in another dtype, a failure). Cases are grouped by the
    entries that decide them.
    """
    if reasoner.capabilities is None:
        raise ValueError("enable-op needs the device's capability export")
    evidence.ensure(store)  # a store recorded before the parametrization columns gets them
    cases = evidence.tests_of(store, op, None)
    waiting = tuple(sorted({case["test"] for case in cases}))
    files = {node_id.split("::")[0] for node_id in waiting}
    enabled = RuleReasoner(reasoner.profile, with_op(reasoner.capabilities, op, dtypes))
    before = plan.select(store, reasoner, files)
    after = plan.select(store, enabled, files)
    device = reasoner.profile.device
    old = {plan.config_name(p): plan.render(p, d, device) for p, d in before.items()}
    new = {plan.config_name(p): plan.render(p, d, device) for p, d in after.items()}
    was, now = _by_test(before), _by_test(after)
    groups: dict[tuple[Decision, Decision], list[str]] = defaultdict(list)
    for case in cases:
        entry = _deciding(was.get(case["test"], []), case)
        current = _deciding(now.get(case["test"], []), case)
        if entry is not None and current is not None and entry.basis in HELD_BY_OPS:
            groups[(entry, current)].append(case["node_id"])
    admitted, blocked = [], []
    for (entry, current), names in sorted(groups.items(), key=lambda item: item[1][0]):
        change = Change(
            entry.node_id, entry.dtype, entry.ops, entry.mode, current.mode, current.reason, tuple(sorted(names))
        )
        (admitted if current.mode == "mandatory_success" else blocked).append(change)
    return EnableOpReport(
        op, dtypes, len(cases), waiting, tuple(admitted), tuple(blocked), configdiff.unified(old, new)
    )


def _by_test(chosen: dict[str, list[Decision]]) -> dict[str, list[Decision]]:
    tests: dict[str, list[Decision]] = defaultdict(list)
    for decisions in chosen.values():
        for decision in decisions:
            tests[decision.node_id].append(decision)
    return tests
