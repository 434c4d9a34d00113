"""The cases an `@ops` / `@modules` test has under a torch version, read from the index's params and a core dump.

A device-type test driven by `@ops(L)` has one case per (op of L, dtype): the op's supported dtypes (CPU's, which
a privateuse1 device inherits), narrowed by `allowed_dtypes`, or the explicit `dtypes=` list; `OpDTypes.any_one` /
`none` give one case per op. Ops filtered by name (`params.ops.names`) keep only those names.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from testselect.select.reasoner import TestFacts
from testselect.upgrade.core import CASE_FIELDS, CoreDump

MODULE_SOURCE = "module_db"
ONE_PER_OP = ("OpDTypes.any_one", "OpDTypes.none", "OpDTypes.any_common_cpu_cuda_one")
ONE = "any"  # the dtype of a one-case-per-op test
# The device types whose decorations reach a case: any, and CPU, where evidence is recorded (upstream decorations
# never name an out-of-tree backend's device type).
DEVICES = (None, "cpu")


@dataclass(frozen=True)
class TestCases:
    """One test's cases (full op or module name, dtype) before and after, and those whose op changed."""

    node_id: str
    source: str
    before: frozenset[tuple[str, str]]
    after: frozenset[tuple[str, str]]
    changed: frozenset[tuple[str, str]] = field(default_factory=frozenset)

    @property
    def added(self) -> frozenset[tuple[str, str]]:
        return self.after - self.before

    @property
    def removed(self) -> frozenset[tuple[str, str]]:
        return self.before - self.after


def driver(params: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """("ops" or "modules", its params) for a test generated from a database, else None."""
    for kind in ("ops", "modules"):
        if isinstance(params.get(kind), dict):
            return kind, params[kind]
    return None


def cases(kind: str, entry: dict[str, Any], dump: CoreDump) -> frozenset[tuple[str, str]] | None:
    """The (name, dtype) cases of a test under `dump`; None when its source list is not one the dump knows."""
    source = entry.get("source", "")
    if kind == "modules":
        if source != MODULE_SOURCE:
            return None
        members = {name: (m["name"], m["module_cls"], m["dtypes"]) for name, m in dump.modules.items()}
    else:
        if source not in dump.lists:
            return None
        members = {name: (dump.ops[name]["name"], "", dump.ops[name]["dtypes_cpu"]) for name in dump.lists[source]}
    names = set(entry.get("names", []))
    allowed = set(entry.get("allowed_dtypes", []))
    expr = entry.get("dtypes_expr", "")
    explicit = set(entry.get("dtypes", [])) if expr and expr not in ONE_PER_OP else None
    found = set()
    for full, (name, cls, dtypes) in members.items():
        if names and name not in names and cls.rsplit(".", 1)[-1] not in names:
            continue
        if expr in ONE_PER_OP:
            found.add((full, ONE))
            continue
        chosen = explicit if explicit is not None else set(dtypes)
        found.update((full, d) for d in chosen if not allowed or d in allowed)
    return frozenset(found)


def test_cases(test: dict[str, Any], old: CoreDump, new: CoreDump) -> TestCases | None:
    """The test's cases under both dumps, or None for a test no database drives or whose list is unknown."""
    found = driver(test["params"])
    if found is None:
        return None
    kind, entry = found
    before, after = cases(kind, entry, old), cases(kind, entry, new)
    if before is None or after is None:
        return None
    table_old, table_new = (old.modules, new.modules) if kind == "modules" else (old.ops, new.ops)
    differ = {
        name
        for name in {n for n, _ in before & after}
        if any(table_old[name].get(f) != table_new[name].get(f) for f in CASE_FIELDS)
    }
    return TestCases(
        test["node_id"], entry["source"], before, after, frozenset(c for c in before & after if c[0] in differ)
    )


def case_key(test_name: str, case_node_id: str, dtype: str | None) -> tuple[str, str] | None:
    """A recorded case's (full op name, dtype) from `...::test_x_<op>_cpu_<dtype>`; None if it is not of that shape."""
    method = case_node_id.rsplit("::", 1)[-1]
    prefix, suffix = f"{test_name}_", f"_cpu_{dtype}" if dtype else "_cpu"
    if not (method.startswith(prefix) and method.endswith(suffix)):
        return None
    return method[len(prefix) : len(method) - len(suffix)], dtype or ONE


def without_stale(test: TestFacts, delta: TestCases) -> TestFacts:
    """The test's facts minus the recorded cases of ops removed or changed by the move: what they showed is stale."""
    stale = delta.removed | delta.changed
    name = test.node_id.rsplit("::", 1)[-1]

    def current(case_node_id: str, dtype: str | None) -> bool:
        key = case_key(name, case_node_id, dtype)
        return key is None or (key not in stale and (key[0], ONE) not in stale)

    return replace(test, cases=tuple(c for c in test.cases if current(c.node_id, c.dtype)))
