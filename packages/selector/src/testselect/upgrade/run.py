"""The two moves end to end: find the delta, re-evaluate only it, and return the facts a report shows (plain data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testselect.index.build import index_tree
from testselect.index.store import Store
from testselect.select import plan
from testselect.select.configdiff import changed_lines
from testselect.select.reasoner import Decision, Reasoner
from testselect.upgrade import cases as case_map
from testselect.upgrade.core import CoreDelta, CoreDump, change_kinds, compare, full_name, release
from testselect.upgrade.reevaluate import Reevaluation, reevaluate
from testselect.upgrade.tree import index_both, tree_delta


def _configs(result: Reevaluation) -> dict[str, Any]:
    entries = {
        side: sum(len(d) for per in getattr(result, side).values() for d in per.values())
        for side in ("before", "after")
    }
    added, removed = changed_lines("\n".join(result.diff))
    return {
        "tests_reevaluated": result.reevaluated,
        "tests_total": result.total,
        "files_changed": result.files_changed,
        "entries": entries,
        "diff_lines": {"added": added, "removed": removed},
        "diff": result.diff,
    }


def tree_upgrade(
    old_root: Path, new_root: Path, old_store: Store, new_path: Path, reasoner: Reasoner, device: str
) -> tuple[dict[str, Any], Reevaluation]:
    """OLD's store brought up to date, NEW indexed into a copy of it; added and modified tests bucketed again."""
    new_store = index_both(old_root, new_root, old_store, new_path)
    try:
        delta = tree_delta(old_store, new_store)
        before, after = plan.facts(old_store), plan.facts(new_store)
    finally:
        new_store.close()
    for path in delta.left_out:  # an unparsable NEW file keeps OLD's tests and decisions
        if path in before:
            after[path] = before[path]
    result = reevaluate(before, after, set(delta.modified), reasoner, device)
    report = {
        "kind": "tree",
        "from": str(old_root),
        "to": str(new_root),
        "tests": {
            "added": delta.added,
            "removed": delta.removed,
            "modified": delta.modified,
            "unchanged": delta.unchanged,
        },
        "stale_cases": delta.stale_cases,
        "skipped": delta.skipped,
        **_configs(result),
    }
    return report, result


def _pending(
    node_id: str, added: frozenset[tuple[str, str]], decisions: list[Decision], new: CoreDump
) -> list[dict[str, str]]:
    """Added cases the NEW config does not already skip: each needs an entry scoped to its op to be decided."""
    if any(d.mode == "skip" and d.dtype is None for d in decisions):
        return []
    skipped = {d.dtype for d in decisions if d.mode == "skip" and d.dtype is not None}
    found = []
    for name, dtype in sorted(added):
        if dtype in skipped:
            continue
        kind = "ops" if name in new.ops else "modules"
        found.append(
            {
                "test": node_id,
                kind: full_name(new.ops[name]) if kind == "ops" else new.modules[name]["name"],
                "dtype": dtype,
                "torch": release(new.torch),
            }
        )
    return found


def _changed(delta: CoreDelta) -> dict[str, dict[str, list[Any]]]:
    """Each changed entry's fields as [old, new]; decoration lists as their lengths, to keep the JSON readable."""
    return {
        name: {f: [len(v[0] or []), len(v[1] or [])] if f == "decorations" else v for f, v in fields.items()}
        for name, fields in delta.changed.items()
    }


def core_upgrade(
    root: Path, store: Store, old: CoreDump, new: CoreDump, reasoner: Reasoner, device: str
) -> tuple[dict[str, Any], Reevaluation]:
    """Map the OpInfo/ModuleInfo delta onto the tests of the files in scope; re-bucket the tests it touches."""
    index_tree(root, store)
    before = plan.facts(store)
    rows = {test["node_id"]: test for test in store.tests()}
    per_file: dict[str, dict[str, int]] = {}
    moved: dict[str, case_map.TestCases] = {}
    unresolved: dict[str, str] = {}
    after = {}
    for path, (error, tests) in before.items():
        if not reasoner.scope(path, error, tests).selected:
            after[path] = (error, tests)
            continue
        counts = per_file.setdefault(path, {"added": 0, "removed": 0, "changed": 0, "total": 0})
        kept = []
        for test in tests:
            found = case_map.test_cases(rows[test.node_id], old, new)
            driven = case_map.driver(rows[test.node_id]["params"])
            if found is None and driven is not None:
                unresolved[test.node_id] = driven[1].get("source", "")
            if found is not None:
                counts["total"] += len(found.after)
                counts["added"] += len(found.added)
                counts["removed"] += len(found.removed)
                counts["changed"] += len(found.changed)
                if found.added or found.removed or found.changed:
                    moved[test.node_id] = found
                    test = case_map.without_stale(test, found)
            kept.append(test)
        after[path] = (error, kept)
    result = reevaluate(before, after, set(moved), reasoner, device)
    pending = []
    for node_id, found in moved.items():
        pending += _pending(node_id, found.added, result.after[node_id.split("::")[0]][node_id], new)
    per_test = {
        node_id: {
            "added": [f"{op} {dtype}" for op, dtype in sorted(found.added)],
            "removed": [f"{op} {dtype}" for op, dtype in sorted(found.removed)],
            "changed": len(found.changed),
        }
        for node_id, found in moved.items()
    }
    ops, modules = compare(old.ops, new.ops), compare(old.modules, new.modules)
    totals = {key: sum(c[key] for c in per_file.values()) for key in ("added", "removed", "changed", "total")}
    report = {
        "kind": "core",
        "from": {"torch": old.torch, "dump_seconds": round(old.seconds, 1)},
        "to": {"torch": new.torch, "dump_seconds": round(new.seconds, 1)},
        "opinfos": {"added": ops.added, "removed": ops.removed, "changed": _changed(ops), "kinds": change_kinds(ops)},
        "moduleinfos": {"added": modules.added, "removed": modules.removed, "changed": _changed(modules)},
        "cases": totals | {"per_file": per_file, "per_test": per_test},
        "unresolved_sources": unresolved,
        "per_op_entries": pending,
        **_configs(result),
    }
    return report, result
