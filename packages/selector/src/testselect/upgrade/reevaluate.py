"""Re-bucket only the tests a move touched, render the affected files' configs before and after, and diff them."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from testselect.select.plan import config_name, render
from testselect.select.reasoner import Decision, Reasoner, TestFacts

Facts = dict[str, tuple[str | None, list[TestFacts]]]  # path under test/ -> (parse error, tests), as plan.facts


@dataclass
class Reevaluation:
    """Decisions per file in scope before and after, how many tests were bucketed again, and the config diff."""

    before: dict[str, dict[str, list[Decision]]]
    after: dict[str, dict[str, list[Decision]]]
    reevaluated: int = 0
    total: int = 0  # tests of the files in scope after the move
    diff: list[str] = field(default_factory=list)
    files_changed: list[str] = field(default_factory=list)

    def new_decisions(self) -> dict[str, list[Decision]]:
        """path -> the NEW decisions in node-id order, as `plan.write_configs` takes them."""
        return {path: [d for node in sorted(per) for d in per[node]] for path, per in self.after.items()}


def _in_scope(facts: Facts, reasoner: Reasoner) -> dict[str, list[TestFacts]]:
    return {path: tests for path, (error, tests) in facts.items() if reasoner.scope(path, error, tests).selected}


def reevaluate(before: Facts, after: Facts, affected: set[str], reasoner: Reasoner, device: str) -> Reevaluation:
    """Bucket OLD's tests once; in NEW bucket again only `affected` tests and tests OLD did not have."""
    old = {path: {t.node_id: reasoner.bucket(t) for t in tests} for path, tests in _in_scope(before, reasoner).items()}
    result = Reevaluation(before=old, after={})
    for path, tests in _in_scope(after, reasoner).items():
        kept = old.get(path, {})
        per = {}
        for test in tests:
            if test.node_id in affected or test.node_id not in kept:
                per[test.node_id] = reasoner.bucket(test)
                result.reevaluated += 1
            else:
                per[test.node_id] = kept[test.node_id]
        result.after[path] = per
        result.total += len(tests)
    for path in sorted(set(old) | set(result.after)):
        lines = [_config(path, old.get(path), device), _config(path, result.after.get(path), device)]
        name = config_name(path)
        diff = list(difflib.unified_diff(*lines, f"a/{name}", f"b/{name}", lineterm=""))
        if diff:
            result.diff.extend(line.rstrip("\n") for line in diff)
            result.files_changed.append(path)
    return result


def _config(path: str, per: dict[str, list[Decision]] | None, device: str) -> list[str]:
    if per is None:
        return []
    return render(path, [d for node in sorted(per) for d in per[node]], device).splitlines(keepends=True)


def diff_size(diff: list[str]) -> tuple[int, int]:
    """Lines added and removed by a unified diff (its headers not counted)."""
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    return added, removed
