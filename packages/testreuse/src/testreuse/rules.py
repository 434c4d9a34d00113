"""Which rule decides a case: plain functions over the plan, no pytest and no torch internals."""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass

from testreuse.errors import Location
from testreuse.loader import FilePlan, PlacedRule, Plan
from testreuse.model import EXACT_NAME, NONE_GIVEN, Edits, Mode, name_kind


@dataclass(frozen=True)
class Case:
    """One concrete test as torch parametrized it: generic class and test, plus its op, dtypes and module, and its
    other `@parametrize` arguments as (name, value as text) pairs."""

    generic_class: str
    generic_test: str
    op: str | None = None
    dtypes: tuple[str, ...] = ()
    module: str | None = None
    params: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.generic_class}::{self.generic_test}"


@dataclass(frozen=True)
class Decision:
    mode: Mode
    rule: Location
    reason: str
    labels: tuple[str, ...] = ()


@functools.cache
def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(name)


def name_matches(name: str, key: str) -> bool:
    """`Class::test` compares equal; a glob is fnmatched against `Class::test` (or the method name when it has no
    `::`); a name without `::` is a prefix-anchored regex on the method name in any class (torch-spyre's matching,
    so `test_foo` also matches `test_foo_bar`); any other name is a regex fully matched against `Class::test`."""
    kind = name_kind(name)
    method = key.partition("::")[2]
    if kind == "exact":
        return name == key
    if kind == "glob":
        return fnmatch.fnmatchcase(key if "::" in name else method, name)
    if kind == "method":
        return _pattern(name).match(method) is not None
    return _pattern(name).fullmatch(key) is not None


def _in_scope(placed: PlacedRule, case: Case) -> bool:
    only = placed.rule.only
    if only is None:
        return True
    if not placed.active:  # only.torch excludes the running torch: decided once, when the plan was loaded
        return False
    if only.ops is not None and case.op not in only.ops:
        return False
    if only.dtypes is not None and not any(_dtype_matches(item, case.dtypes) for item in only.dtypes):
        return False
    if only.params is not None and not _params_match(only.params, dict(case.params)):
        return False
    return only.modules is None or case.module in only.modules


def _params_match(scope: dict[str, list[str]], params: dict[str, str]) -> bool:
    """`only.params`: each named argument takes one of its listed values (both as text: YAML `true` is 'True')."""
    return all(params.get(name) in values for name, values in scope.items())


def _dtype_matches(item: str | list[str], dtypes: tuple[str, ...]) -> bool:
    """`only.dtypes` item: a name is one of the case's dtypes; a list is all of them, in torch's order."""
    return item in dtypes if isinstance(item, str) else tuple(item) == dtypes


def _specificity(placed: PlacedRule, case: Case) -> tuple[int, int, int]:
    exact = any(EXACT_NAME.fullmatch(n) and n == case.key for n in placed.rule.names)
    return (placed.rule.only is not None, exact, placed.order)


def matching_rules(file_plan: FilePlan, case: Case) -> list[PlacedRule]:
    """Rules naming this case, most specific last: scoped beats unscoped, exact beats regex, later beats earlier."""
    hits = [p for p in file_plan.rules if any(name_matches(n, case.key) for n in p.rule.names) and _in_scope(p, case)]
    return sorted(hits, key=lambda p: _specificity(p, case))


def _capability_skip(plan: Plan, case: Case) -> Decision | None:
    caps = plan.capabilities
    if case.op is not None and caps.ops is not None and case.op not in caps.ops:
        where = caps.origins["supported_ops"]
        return Decision(Mode.skip, where, f"op {case.op} is not in the backend's supported_ops")
    if case.module is not None and caps.modules is not None and case.module not in caps.modules:
        where = caps.origins["supported_modules"]
        return Decision(Mode.skip, where, f"module {case.module} is not in the backend's supported_modules")
    allowed = caps.op_dtypes(case.op) if case.op is not None else caps.dtypes
    missing = [d for d in case.dtypes if allowed is not None and d not in allowed]
    if missing:
        key = "supported_ops" if case.op is not None and caps.ops and caps.ops.get(case.op) else "supported_dtypes"
        return Decision(Mode.skip, caps.origins[key], f"dtype {missing[0]} is not supported by the backend ({key})")
    return None


def _edit_skip(rules: list[PlacedRule], case: Case) -> Decision | None:
    for placed in reversed(rules):
        edits = placed.rule.edits
        if edits is None:
            continue
        why = _dropped_by(edits, case)
        if why:
            reason = f"{why} by edits" + (f" ({placed.rule.reason})" if placed.rule.reason else "")
            return Decision(Mode.skip, placed.location, reason)
    return None


def _dropped_by(edits: Edits, case: Case) -> str:
    """`exclude` drops a case; `include` only adds (at instantiation), so it never drops one."""
    checks = (
        (edits.dtypes, list(case.dtypes), "dtype"),
        (edits.ops, [case.op] if case.op else [], "op"),
        (edits.modules, [case.module] if case.module else [], "module"),
    )
    for edit, values, what in checks:
        excluded = {e.name for e in edit.exclude} if edit is not None else set()
        for value in values:
            if value in excluded:
                return f"{what} {value} excluded"
    return ""


def excluded_shapes(file_plan: FilePlan, case: Case) -> list[tuple[int, ...]]:
    """Sample-input shapes every matching rule drops for this case."""
    shapes = []
    for placed in matching_rules(file_plan, case):
        samples = placed.rule.edits.samples if placed.rule.edits is not None else None
        shapes += [tuple(s.shape) for s in samples.exclude] if samples is not None else []
    return shapes


def decide(plan: Plan, file_plan: FilePlan, case: Case) -> Decision:
    """Capabilities first (a backend cannot run what it lacks), then per-case edits, then the most specific rule,
    then the file's unlisted_test_mode."""
    rules = matching_rules(file_plan, case)
    labels = tuple(dict.fromkeys([*plan.labels, *(label for p in rules for label in p.rule.labels)]))
    for early in (_capability_skip(plan, case), _edit_skip(rules, case)):
        if early is not None:
            return Decision(early.mode, early.rule, early.reason, labels)
    if rules:
        winner = rules[-1].rule
        reason = NONE_GIVEN if winner.lacks_reason else winner.reason or "listed"
        decision = Decision(winner.mode, rules[-1].location, reason, labels)
    else:
        mode = file_plan.unlisted_mode
        reason = f"not listed: unlisted_test_mode is {mode.value}"
        decision = Decision(mode, file_plan.unlisted_origin, reason, labels)
    forced = _forced_xfail(plan, rules, case) if decision.mode is Mode.mandatory_success else None
    return Decision(Mode.xfail, forced[0], forced[1], labels) if forced else decision


def _forced_xfail(plan: Plan, rules: list[PlacedRule], case: Case) -> tuple[Location, str] | None:
    """`force_xfail` on the case's op (supported_ops), on one of its dtypes (supported_dtypes), or on an
    `edits.dtypes.include` item of a rule naming it: where it was written and the reason."""
    dialect = plan.dialect
    if case.op is not None and case.op in dialect.forced_ops:
        return dialect.forced_ops[case.op], f"force_xfail on op {case.op} (supported_ops)"
    for placed in reversed(rules):
        edit = placed.rule.edits.dtypes if placed.rule.edits is not None else None
        for index, item in enumerate(edit.include or () if edit is not None else ()):
            if item.force_xfail and item.name in case.dtypes:
                where = placed.locate("edits", "dtypes", "include", index, "force_xfail")
                return where, f"force_xfail on dtype {item.name} (edits.dtypes.include)"
    dtype = next((d for d in case.dtypes if d in dialect.forced_dtypes), None)
    if dtype is not None:
        return dialect.forced_dtypes[dtype], f"force_xfail on dtype {dtype} (supported_dtypes)"
    return None
