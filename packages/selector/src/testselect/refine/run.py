"""One refinement pass: a run on the device recorded in the store (with testreuse triage's causes), the configs
re-selected with those facts, and the change as a diff of the generated configs plus counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from testselect.index.store import Store
from testselect.refine import store as device_store
from testselect.refine.configs import Generated, read_dir
from testselect.refine.rebucket import Entry, deciding
from testselect.refine.records import Record, Run
from testselect.refine.tool import Cause, triage
from testselect.select import configdiff, plan
from testselect.select.reasoner import DeviceCase, Reasoner


@dataclass
class RefineReport:
    runs: list[str]
    device: str
    observed: Counter[str] = field(default_factory=Counter)  # outcome -> cases recorded
    causes: Counter[str] = field(default_factory=Counter)  # category -> failing cases recorded
    not_indexed: int = 0  # observed cases of tests the index does not have (not recorded)
    not_upstream: int = 0  # records of files outside test/ (a device tree's own tests)
    files: list[str] = field(default_factory=list)  # generated configs that change
    unchanged: list[str] = field(default_factory=list)  # generated configs that stay as they are
    left_alone: list[str] = field(default_factory=list)  # configs testselect did not generate
    out_of_scope: list[str] = field(default_factory=list)  # generated configs whose file select no longer picks
    entries: Counter[str] = field(default_factory=Counter)  # added, removed, modified
    promoted: int = 0  # observed cases now mandatory_success that were not
    demoted: int = 0  # observed cases mandatory_success before, not now
    demoted_by_cause: Counter[str] = field(default_factory=Counter)
    diff: str = ""
    written: bool = False

    def as_json(self) -> dict:
        """Every field, counters as plain objects (`dataclasses.asdict` would rebuild a Counter from its items)."""
        return {f.name: (dict(v) if isinstance(v := getattr(self, f.name), Counter) else v) for f in fields(self)}


def _case(record: Record, run: Run, cause: Cause | None, device: str) -> tuple[str, DeviceCase] | None:
    """(generic test node id, the case as a device fact) for a record of an upstream file, else None."""
    file, _, rest = record.nodeid.partition("::")
    if not file.startswith("test/") or record.generic is None:
        return None
    path = file.removeprefix("test/")
    if run.flaky(record.nodeid):
        seen = ", ".join(run.outcomes[record.nodeid])
        category, reason, evidence = "flaky", f"flaky on {device} in run {run.run_id}: {seen}", {}
    elif record.passed:
        category, reason, evidence = None, "", {}
    elif cause is not None:
        category, reason, evidence = cause.category, cause.reason, cause.evidence
    else:  # triage names a cause for every failing case; keep the outcome if it ever does not
        category, reason, evidence = "exception", f"{record.outcome} on {device} (no cause from triage)", {}
    fact = DeviceCase(
        f"{path}::{rest}", device, run.run_id, record.outcome, record.op, record.module, record.dtypes, category,
        reason, evidence, record.params,
    )  # fmt: skip
    return f"{path}::{record.generic}", fact


def record_runs(
    store: Store, runs: Sequence[Run], device: str, configs: Sequence[Path], torch_root: Path | None
) -> RefineReport:
    """Every observed case of each run (in order: a later run replaces an earlier one's observation) into the store,
    the failing ones with triage's cause."""
    report = RefineReport([run.run_id for run in runs], device)
    device_store.ensure(store)
    indexed = {row[0] for row in store.db.execute("SELECT node_id FROM tests")}
    for run in runs:
        records = [r for r in run.records.values() if r.observed]
        failing = [r.raw for r in records if not r.passed]  # failed, errored, xfailed, died, skipped itself
        causes = triage(failing, configs, torch_root)
        for record in records:
            found = _case(record, run, causes.get(record.nodeid), device)
            if found is None:
                report.not_upstream += 1
                continue
            test, case = found
            if test not in indexed:
                report.not_indexed += 1
                continue
            device_store.record(store, test, case)
            report.observed[record.outcome] += 1
            if case.category is not None:
                report.causes[case.category] += 1
    store.commit()
    return report


def _mode(entries: list[Entry], case: DeviceCase, unlisted: str) -> str:
    at = deciding(entries, case)
    return entries[at].mode if at is not None else unlisted


def compare(report: RefineReport, config: Generated, after: dict[str, list[Entry]], cases: dict) -> None:
    """Entry changes of one config (by test and scope) and the promoted / demoted observed cases."""
    for node_id in sorted(set(config.entries) | set(after)):
        old = {e.scope: e for e in config.entries.get(node_id, [])}
        new = {e.scope: e for e in after.get(node_id, [])}
        report.entries["added"] += len(new.keys() - old.keys())
        report.entries["removed"] += len(old.keys() - new.keys())
        report.entries["modified"] += sum(
            1 for k in old.keys() & new.keys() if (old[k].mode, old[k].reason) != (new[k].mode, new[k].reason)
        )
        for case in cases.get(node_id, []):
            was = _mode(config.entries.get(node_id, []), case, config.unlisted)
            now = _mode(after.get(node_id, []), case, "skip")
            if was != "mandatory_success" and now == "mandatory_success":
                report.promoted += 1
            elif was == "mandatory_success" and now != "mandatory_success":
                report.demoted += 1
                report.demoted_by_cause[case.category or "passed"] += 1


def refine(
    store: Store,
    reasoner: Reasoner,
    device: str,
    runs: Sequence[Run],
    directory: Path,
    torch_root: Path | None,
    write: bool,
) -> RefineReport:
    """Record the runs, re-select with the device facts, and diff (and with `write` rewrite) the generated configs."""
    generated, others = read_dir(directory)
    report = record_runs(store, runs, device, [directory], torch_root)
    report.left_alone = others
    chosen = plan.select(store, reasoner)
    observed = {t: [c for c in cs if c.device == device] for t, cs in device_store.device_facts(store).items()}
    before, after = {}, {}
    for config in generated:
        decisions = chosen.get(config.path)
        if decisions is None:
            report.out_of_scope.append(config.name)
            continue
        text = plan.render(config.path, decisions, device)
        entries: dict[str, list[Entry]] = {}
        for d in decisions:
            entries.setdefault(d.node_id, []).append(Entry.of(d))
        compare(report, config, entries, observed)
        if text == config.text:
            report.unchanged.append(config.name)
            continue
        report.files.append(config.name)
        before[config.name], after[config.name] = config.text, text
    report.diff = configdiff.unified(before, after)
    if write:
        for name, text in after.items():
            (directory / name).write_text(text, encoding="utf-8")
        report.written = bool(after)
    return report
