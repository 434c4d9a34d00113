"""What enabling one aten op on the device would change: the tests waiting on it (from the op reverse index), the
entries it admits, the ones still blocked by other ops, and the config diff."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from testselect.evidence import store as evidence
from testselect.index.store import Store
from testselect.select import configdiff, plan
from testselect.select.capabilities import Capabilities
from testselect.select.reasoner import Decision, RuleReasoner


@dataclass(frozen=True)
class Change:
    """One config entry whose mode the op changes."""

    node_id: str
    dtype: str | None
    before: str
    after: str
    reason: str  # the new entry's reason: why it is admitted, or what still blocks it


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

Key = tuple[str, str | None, tuple[str, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]


def _key(decision: Decision) -> Key:
    """What an entry decides: its test, and the dtype, OpInfos, ModuleInfos and dtype combinations it is scoped to."""
    return decision.node_id, decision.dtype, decision.ops, decision.modules, decision.combos


def _effective(entries: dict[Key, Decision], key: Key) -> Decision:
    """The entry deciding these cases now: one of the same scope, else the test's dtype entry, else the test's."""
    node_id, dtype = key[0], key[1]
    return entries.get(key) or entries.get((node_id, dtype, (), (), ())) or entries[(node_id, None, (), (), ())]


def enable_op(store: Store, reasoner: RuleReasoner, op: str, dtypes: tuple[str, ...]) -> EnableOpReport:
    """Re-bucket the files of the tests waiting on `op` with and without it; every other file is untouched.

    An entry counts when the op evidence held it back before: admitted if it is mandatory_success now, else still
    blocked, with the reason that holds it now (another op, the op in another dtype, a CPU failure).
    """
    if reasoner.capabilities is None:
        raise ValueError("enable-op needs the device's capability export")
    cases = evidence.tests_of(store, op, None)
    waiting = tuple(sorted({case["test"] for case in cases}))
    files = {node_id.split("::")[0] for node_id in waiting}
    enabled = RuleReasoner(reasoner.profile, with_op(reasoner.capabilities, op, dtypes))
    before = plan.select(store, reasoner, files)
    after = plan.select(store, enabled, files)
    device = reasoner.profile.device
    old = {plan.config_name(p): plan.render(p, d, device) for p, d in before.items()}
    new = {plan.config_name(p): plan.render(p, d, device) for p, d in after.items()}
    was = {_key(d): d for decisions in before.values() for d in decisions}
    now = {_key(d): d for decisions in after.values() for d in decisions}
    admitted, blocked = [], []
    for key, entry in sorted(was.items(), key=lambda item: (item[0][0], item[0][1] or "", item[0][2:])):
        if entry.node_id not in waiting or entry.basis not in HELD_BY_OPS:
            continue
        current = _effective(now, key)
        change = Change(entry.node_id, entry.dtype, entry.mode, current.mode, current.reason)
        (admitted if current.mode == "mandatory_success" else blocked).append(change)
    return EnableOpReport(
        op, dtypes, len(cases), waiting, tuple(admitted), tuple(blocked), configdiff.unified(old, new)
    )
