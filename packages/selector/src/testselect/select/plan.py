"""Read the facts a reasoner needs from the store, and write its decisions as testreuse configs (plain YAML data).

The configs follow testreuse's documented dialect (`names`, `mode`, `reason`, `only.dtypes`); testselect never
imports testreuse, whose own `testreuse validate` is the check.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from testselect.evidence import store as evidence
from testselect.index.store import Store, current_join
from testselect.refine import store as device_store
from testselect.refine.rebucket import rebucket
from testselect.select.reasoner import (
    RECORDING,
    CaseFacts,
    Decision,
    FileScope,
    Reasoner,
    RecordedCase,
    TestFacts,
    case_dtype,
)


def facts(store: Store) -> dict[str, tuple[str | None, list[TestFacts]]]:
    """path under test/ -> (parse error, its tests with their class's instantiations and recorded cases)."""
    db = store.db
    classes = {
        (path, name): tuple(json.loads(inst))
        for path, name, inst in db.execute(
            "SELECT f.path, c.name, c.instantiations FROM classes c JOIN files f ON f.id = c.file_id"
        )
    }
    cases: dict[str, list[CaseFacts]] = defaultdict(list)
    on_device: dict[str, list[RecordedCase]] = defaultdict(list)
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'cases'").fetchone():
        evidence.ensure(store)
        ops: dict[int, dict[str, set[str]]] = defaultdict(dict)
        for case_id, op in db.execute("SELECT case_id, op FROM case_ops"):
            ops[case_id].setdefault(op, set())
        for case_id, op, dtype in db.execute("SELECT case_id, op, dtype FROM case_op_dtypes"):
            ops[case_id].setdefault(op, set()).add(dtype)
        raised: dict[int, dict[str, set[str]]] = defaultdict(dict)
        for case_id, op, dtype in db.execute("SELECT case_id, op, dtype FROM case_raised"):
            raised[case_id].setdefault(op, set()).update([dtype] if dtype else [])
        current = "SELECT c.id, c.node_id, c.test_node_id, c.outcome, c.recorder, c.opinfo, c.module, c.case_dtypes, "
        current += "c.case_params "
        current += f"FROM cases c {current_join('c')} "
        current += "ORDER BY c.node_id"  # stale cases: unknown
        for case_id, node_id, test_node_id, outcome, kind, opinfo, module, case_dtypes, params in db.execute(current):
            ran = {op: frozenset(d) for op, d in ops[case_id].items()}
            if kind == "device":
                dtypes = tuple(json.loads(case_dtypes))
                refused = {op: frozenset(d) for op, d in raised[case_id].items()}
                cell = tuple(sorted(json.loads(params).items()))
                on_device[test_node_id].append(
                    RecordedCase(node_id, outcome, ran, opinfo, module, dtypes, refused, cell)
                )
            else:
                cases[test_node_id].append(CaseFacts(node_id, case_dtype(node_id), outcome, ran))
    observed = device_store.device_facts(store)
    files: dict[str, tuple[str | None, list[TestFacts]]] = {
        path: (error, []) for path, error in db.execute("SELECT path, error FROM files ORDER BY path")
    }
    indexed = set()
    for test in store.tests():
        path = test["node_id"].split("::")[0]
        params = test["params"]
        indexed.add(test["node_id"])
        files[path][1].append(
            TestFacts(
                node_id=test["node_id"],
                features=tuple(test["features"]),
                dtypes=tuple(d for d in params.get("dtypes", []) if isinstance(d, str)),
                restrictions=tuple(r["name"] for r in params.get("restrictions", [])),
                instantiations=classes.get((path, test["class_name"]), ()),
                cases=tuple(cases.get(test["node_id"], [])),
                info_driven="ops" in params or "modules" in params,
                device_cases=tuple(observed.get(test["node_id"], [])),
                recorded=tuple(on_device.get(test["node_id"], [])),
            )
        )
    made_at_import = sorted((set(cases) | set(on_device) | set(observed)) - indexed)
    for node_id in made_at_import:  # set by code at import time (a `setattr` loop): only their cases tell of them
        path, class_name = node_id.split("::")[:2]
        if path in files and (path, class_name) in classes:
            files[path][1].append(
                TestFacts(
                    node_id=node_id,
                    features=(),
                    dtypes=(),
                    restrictions=(),
                    instantiations=classes[(path, class_name)],
                    cases=tuple(cases.get(node_id, [])),
                    device_cases=tuple(observed.get(node_id, [])),
                    recorded=tuple(on_device.get(node_id, [])),
                )
            )
    if made_at_import:
        for _error, tests in files.values():
            tests.sort(key=lambda t: t.node_id)
    return files


def plan_scope(store: Store, reasoner: Reasoner) -> list[FileScope]:
    """Every indexed file, in path order, selected or not with the reason."""
    return [reasoner.scope(path, error, tests) for path, (error, tests) in facts(store).items()]


def select(store: Store, reasoner: Reasoner, paths: set[str] | None = None) -> dict[str, list[Decision]]:
    """path -> decisions for each test of every file in scope (of `paths` only, if given), in node-id order.
    Whatever the reasoner predicts, the cases recorded on the profile's device (`testselect refine`) re-bucket it:
    execution beats prediction."""
    files = facts(store)
    chosen = {}
    for path, (error, tests) in files.items():
        if (paths is None or path in paths) and reasoner.scope(path, error, tests).selected:
            chosen[path] = [d for test in tests for d in decide(reasoner, test)]
    return chosen


def decide(reasoner: Reasoner, test: TestFacts) -> list[Decision]:
    """The reasoner's decisions for a test, re-bucketed by its cases observed on the profile's device (unchanged
    when none ran there): every command that buckets a test goes through here."""
    profile = getattr(reasoner, "profile", None)
    device = profile.device if profile is not None else None
    decisions = reasoner.bucket(test)
    if test.recorded and device:  # what reached the recording device decides each case it made
        predicted = [reasoner.predict(case) for case in test.recorded]
        decisions = rebucket(decisions, predicted, RECORDING, source="device-side evidence")
    cases = [c for c in test.device_cases if c.device == device]
    return rebucket(decisions, cases, device) if cases and device else decisions


def config_name(path: str) -> str:
    """`test_ops.py` -> `test_ops.yaml`; a nested `distributed/test_c10d.py` -> `distributed__test_c10d.yaml`."""
    return re.sub(r"\.py$", "", path).replace("/", "__") + ".yaml"


def render(path: str, decisions: list[Decision], device: str) -> str:
    """One testreuse config for an upstream file: an entry per decision, its basis as the comment beside it."""
    quote = json.dumps  # a JSON string is a YAML double-quoted scalar
    lines = [
        f"# Upstream test/{path} on {device}: generated by `testselect select` (rule-based); review, then commit.",
        "test_suite_config:",
        "  files:",
        f"    - path: ${{TORCH_ROOT}}/test/{path}",
        "      unlisted_test_mode: skip",
        "      tests:",
    ]
    for d in decisions:
        name = d.node_id.split("::", 1)[1]
        lines.append(f"        # {d.basis}: {d.reason}")
        lines.append(f"        - names: [{quote(name)}]")
        lines.append(f"          mode: {d.mode}")
        lines.append(f"          reason: {quote(d.reason)}")
        scope = (("ops", d.ops), ("modules", d.modules))
        only = [f"{key}: [{', '.join(quote(v) for v in values)}]" for key, values in scope if values]
        items = ([d.dtype] if d.dtype is not None else []) + [f"[{', '.join(combo)}]" for combo in d.combos]
        if items:
            only.append(f"dtypes: [{', '.join(items)}]")
        if d.params:
            only.append(f"params: {{{', '.join(f'{quote(k)}: [{quote(v)}]' for k, v in d.params)}}}")
        if only:
            lines.append(f"          only: {{{', '.join(only)}}}")
    if not decisions:
        lines[-1] = "      tests: []"
    return "\n".join(lines) + "\n"


def write_configs(chosen: dict[str, list[Decision]], out: Path, device: str) -> Counter[str]:
    """Write one config per upstream file into `out` (never a device file); the entries per mode."""
    out.mkdir(parents=True, exist_ok=True)
    modes: Counter[str] = Counter()
    for path, decisions in chosen.items():
        (out / config_name(path)).write_text(render(path, decisions, device), encoding="utf-8")
        modes.update(d.mode for d in decisions)
    return modes
