"""Check each proposal of a reply against the facts and the rule decisions; only consistent ones replace a rule's.

The evidence bounds the model from above: it may demote a test or change how a blocked one is run, naming the
fact it rests on, but never promote past a blocker the rules found. A rejected proposal leaves the rule decision.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from testselect.select.llm.prompt import MODES
from testselect.select.reasoner import Decision, TestFacts

# Rule bases where the test cannot run at all on the device (not instantiated, or died on CPU): only skip stands.
SKIP_ONLY = ("device restriction", "op evidence: CPU outcome")
REASON_LENGTH = 300  # a reason is one line of a config comment
ATEN = re.compile(r"aten::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


@dataclass(frozen=True)
class Rejection:
    node_id: str | None  # None: the reply as a whole
    dtype: str | None
    why: str


@dataclass
class Verdict:
    """The decisions per test after validation, and what was accepted, rejected or left unanswered."""

    decisions: dict[str, list[Decision]]
    accepted: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)


class _Refused(Exception):
    pass


def dtypes_of(test: TestFacts) -> set[str]:
    """The dtypes a test has: its @dtypes and those of its recorded cases."""
    return set(test.dtypes) | {case.dtype for case in test.cases if case.dtype is not None}


def _facts(test: TestFacts) -> set[str]:
    """Every name a reason may cite: ops (with and without overload), dtypes, features, decorators, bad outcomes."""
    ops = {op for case in test.cases for op in case.ops}
    kwargs = {key for call in test.instantiations for key in call.get("kwargs", {})}
    outcomes = {case.outcome for case in test.cases} - {"passed", "skipped"}
    named = ops | {op.split(".")[0] for op in ops} | dtypes_of(test) | set(test.features) | set(test.restrictions)
    return named | (kwargs & {"only_for", "except_for"}) | outcomes


def named_facts(test: TestFacts, reason: str) -> list[str]:
    """The facts of `test` that `reason` names as whole words, longest first."""
    found = []
    for fact in sorted(_facts(test), key=lambda f: (-len(f), f)):
        named = re.search(rf"(?<![\w:]){re.escape(fact)}(?!\w)", reason, re.IGNORECASE)
        if named and not any(fact in f for f in found):
            found.append(fact)
    return found


def _check(item: object, tests: dict[str, TestFacts], rules: dict[str, list[Decision]]) -> Decision:
    """The proposal as a decision, or _Refused saying which fact it contradicts."""
    if not isinstance(item, dict):
        raise _Refused("a decision is not a JSON object")
    node_id, mode, reason, dtype = (item.get(k) for k in ("test", "mode", "reason", "dtype"))
    for name, value in (("test", node_id), ("mode", mode), ("reason", reason)):
        if not isinstance(value, str) or not value.strip():
            raise _Refused(f"field {name!r} missing or not a string")
    if node_id not in tests:
        raise _Refused(f"{node_id!r} is not a test of this request")
    if mode not in MODES:
        raise _Refused(f"mode {mode!r} is not one of: {', '.join(MODES)}")
    if "\n" in reason or len(reason) > REASON_LENGTH:
        raise _Refused(f"the reason is not one line of at most {REASON_LENGTH} characters")
    test = tests[node_id]
    if dtype is not None and (not isinstance(dtype, str) or dtype not in dtypes_of(test)):
        raise _Refused(f"dtype {dtype!r} is not one of the test's: {', '.join(sorted(dtypes_of(test))) or 'none'}")
    whole, *scoped = rules[node_id]
    rule = next((d for d in scoped if d.dtype == dtype), whole) if dtype else whole
    unknown = sorted({op for op in ATEN.findall(reason) if op not in _facts(test)})
    if unknown:
        raise _Refused(f"the reason names {', '.join(unknown)}, which no recorded case of the test ran")
    if mode == "mandatory_success":
        if rule.mode != "mandatory_success":
            raise _Refused(f"mandatory_success where the rules found: {rule.reason}")
        return Decision(node_id, mode, reason, "llm (validated): the rules found no blocker", dtype)
    if rule.basis in SKIP_ONLY and rule.mode == "skip" and mode != "skip":
        raise _Refused(f"{mode} where only skip can stand ({rule.basis}: {rule.reason})")
    named = named_facts(test, reason)
    if not named:
        raise _Refused(f"a {mode} reason names no op, dtype, feature or decorator of the test")
    return Decision(node_id, mode, reason, f"llm (validated): {', '.join(named)}", dtype)


def _proposals(content: str) -> list[object]:
    try:
        reply = json.loads(content)
    except ValueError as exc:
        raise _Refused(f"not JSON ({exc})") from None
    proposals = reply.get("decisions") if isinstance(reply, dict) else None
    if not isinstance(proposals, list):
        raise _Refused('not an object with a "decisions" list')
    return proposals


def _place(entries: list[Decision], decision: Decision) -> None:
    """Replace the entry for the decision's dtype (None: the whole test), or add it in dtype order."""
    at = next((i for i, d in enumerate(entries) if d.dtype == decision.dtype), None)
    if at is not None:
        entries[at] = decision
        return
    entries.append(decision)
    entries[1:] = sorted(entries[1:], key=lambda d: d.dtype or "")


def validate(content: str, tests: list[TestFacts], rules: dict[str, list[Decision]]) -> Verdict:
    """Rule decisions per test with each consistent proposal in place of the rule's entry for its test and dtype."""
    verdict = Verdict({node_id: list(decisions) for node_id, decisions in rules.items()})
    by_id = {test.node_id: test for test in tests}
    try:
        proposals = _proposals(content)
    except _Refused as exc:
        verdict.rejected.append(Rejection(None, None, str(exc)))
        verdict.unanswered = sorted(by_id)
        return verdict
    answered: set[str] = set()
    seen: set[tuple[str, object]] = set()
    for item in proposals:
        node_id = item.get("test") if isinstance(item, dict) else None
        dtype = item.get("dtype") if isinstance(item, dict) else None
        known = node_id if isinstance(node_id, str) and node_id in by_id else None
        try:
            if known is not None and (known, json.dumps(dtype)) in seen:
                raise _Refused("a second decision for the same test and dtype")
            if known is not None:
                seen.add((known, json.dumps(dtype)))
                answered.add(known)
            decision = _check(item, by_id, rules)
        except _Refused as exc:
            verdict.rejected.append(Rejection(known, dtype if isinstance(dtype, str) else None, str(exc)))
            continue
        verdict.accepted += 1
        _place(verdict.decisions[decision.node_id], decision)
    verdict.unanswered = sorted(set(by_id) - answered)
    return verdict
