"""How good generated configs are against a full execution: which cases they admit (`testreuse list`), against a
results record in which every case ran (the truth), as precision, recall and the admitted share.

- admitted: a case the configs give `mandatory_success` (testreuse's own decision, capabilities included);
- really passing: the truth's outcome is `passed` (or `xpassed`); anything else that ran is failing, with testreuse
  triage's cause;
- precision: admitted cases in the truth that really pass / admitted cases in the truth; recall: really-passing cases
  that are admitted / really-passing cases. Admitted cases the truth lacks are counted apart, never guessed; truth
  cases the configs do not make at all (capabilities narrowed them away) count as not admitted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testselect.refine.records import Record, read_records, upstream_nodeid
from testselect.refine.tool import collected, triage

ADMITTED = "mandatory_success"


@dataclass(frozen=True)
class Group:
    """One generic test's wrong cases, with their causes (most frequent first) and a few node ids."""

    test: str  # file::Class::test
    cases: int
    causes: tuple[tuple[str, int], ...]
    examples: tuple[str, ...]


@dataclass
class Score:
    truth_files: list[str]
    configs: str
    total: int = 0  # cases that ran in the truth
    passing: int = 0  # of them, really passing
    listed: int = 0  # cases the configs make (testreuse list)
    admitted: int = 0  # listed as mandatory_success
    admitted_in_truth: int = 0
    true_positives: int = 0  # admitted and really passing
    precision: float | None = None
    recall: float | None = None
    scope: str | None = None  # configs whose mandatory_success cases are the device's declared scope
    passing_in_scope: int = 0  # really-passing cases in that scope (the same for every configs scored)
    admitted_in_scope: int = 0  # of those, admitted
    recall_in_scope: float | None = None  # the selection's own recall: admitted_in_scope / passing_in_scope
    admitted_ratio: float | None = None  # admitted / total
    not_in_truth: int = 0  # admitted cases the truth lacks (not counted either way)
    not_in_truth_examples: list[str] = field(default_factory=list)
    not_listed: int = 0  # truth cases the configs do not make
    modes: dict[str, int] = field(default_factory=dict)  # listed cases per mode
    false_positives: list[Group] = field(default_factory=list)
    false_negatives: list[Group] = field(default_factory=list)
    false_positive_cases: int = 0
    false_negative_cases: int = 0


def read_truth(paths: Sequence[Path], torch_root: Path | None = None) -> dict[str, Record]:
    """The last record of each case that ran, over every truth file in order, by its node id under TORCH_ROOT."""
    truth: dict[str, Record] = {}
    for path in paths:
        for record in read_records(path):
            nodeid = upstream_nodeid(record.nodeid, torch_root)
            if record.observed:
                truth[nodeid] = record
            else:
                truth.pop(nodeid, None)  # a later record that did not run says nothing either way
    return truth


def _died(record: Record) -> bool:
    return record.outcome in ("crashed", "timeout") or any(k in record.raw for k in ("signal", "timeout", "exit"))


def generic(nodeid: str, generic_name: str | None) -> str:
    """`test/test_x.py::TestXRING::test_y_ring_float32` with generic `TestX::test_y` -> `test_x.py::TestX::test_y`."""
    file = nodeid.split("::", 1)[0].removeprefix("test/")
    return f"{file}::{generic_name}" if generic_name else nodeid.removeprefix("test/")


def _groups(wrong: dict[str, tuple[str, str]], limit: int) -> list[Group]:
    """node id -> (generic test, cause) grouped by test, the largest first."""
    by_test: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for nodeid, (test, cause) in sorted(wrong.items()):
        by_test[test].append((nodeid, cause))
    ordered = sorted(by_test.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    groups = []
    for test, items in ordered:
        causes = Counter(cause for _, cause in items)
        top = tuple(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])))
        groups.append(Group(test, len(items), top, tuple(n for n, _ in items[:3])))
    return groups


def score(
    configs: Path,
    truth_paths: Sequence[Path],
    torch_root: Path | None,
    device: str | None,
    limit: int = 10,
    listed: list[dict[str, Any]] | None = None,
    scope: Path | None = None,
    scope_listed: list[dict[str, Any]] | None = None,
) -> Score:
    """Score the configs in `configs` against the truth files (`listed`: `testreuse list` output, if already made).

    `scope`: configs that admit what the device declares it can run (its device file with every test
    `mandatory_success`; `scope_listed`: their listing, if already made): recall within it separates the
    selection's misses from the device file's filters."""
    truth = read_truth(truth_paths, torch_root)
    cases = listed if listed is not None else collected([configs], torch_root, device)
    result = Score([str(p) for p in truth_paths], str(configs))
    modes = {c["nodeid"]: str(c["mode"]) for c in cases}
    reasons = {c["nodeid"]: str(c.get("reason") or "") for c in cases}
    generics = {c["nodeid"]: c.get("generic") for c in cases}
    result.listed = len(modes)
    result.modes = dict(sorted(Counter(modes.values()).items()))
    admitted = {n for n, mode in modes.items() if mode == ADMITTED}
    result.admitted = len(admitted)
    result.total = len(truth)
    passing = {n for n, r in truth.items() if r.passed}
    result.passing = len(passing)
    in_truth = admitted & truth.keys()
    result.admitted_in_truth = len(in_truth)
    result.true_positives = len(in_truth & passing)
    absent = sorted(admitted - truth.keys())
    result.not_in_truth, result.not_in_truth_examples = len(absent), absent[:limit]
    result.not_listed = len(truth.keys() - modes.keys())
    if in_truth:
        result.precision = round(result.true_positives / len(in_truth), 4)
    if passing:
        result.recall = round(result.true_positives / len(passing), 4)
    if scope is not None:
        scoped = scope_listed if scope_listed is not None else collected([scope], torch_root, device)
        declared = {c["nodeid"] for c in scoped if c["mode"] == ADMITTED}
        result.scope = str(scope)
        result.passing_in_scope = len(declared & passing)
        result.admitted_in_scope = len(declared & passing & admitted)
        if result.passing_in_scope:
            result.recall_in_scope = round(result.admitted_in_scope / result.passing_in_scope, 4)
    if truth:
        result.admitted_ratio = round(len(admitted & truth.keys()) / len(truth), 4)
    false_pos = sorted(in_truth - passing)
    detailed = [n for n in false_pos if truth[n].raw.get("failure") or _died(truth[n])]
    causes = triage([truth[n].raw for n in detailed], [configs], torch_root) if detailed else {}
    wrong = {}
    for n in false_pos:
        cause = causes.get(truth[n].nodeid)
        if cause is not None:
            shown = f"{cause.category}: {cause.reason}"
        else:
            shown = f"{truth[n].outcome} (the truth record has no failure details)"
        wrong[n] = (generic(n, truth[n].generic or generics.get(n)), shown)
    result.false_positive_cases, result.false_positives = len(wrong), _groups(wrong, limit)
    missed = {}
    for n in sorted(passing - admitted):
        if n in modes:
            shown = f"{modes[n]}: {reasons[n]}" if reasons[n] else modes[n]
        else:
            shown = "not made by the configs (their capabilities or edits leave it out)"
        missed[n] = (generic(n, truth[n].generic or generics.get(n)), shown)
    result.false_negative_cases, result.false_negatives = len(missed), _groups(missed, limit)
    return result
