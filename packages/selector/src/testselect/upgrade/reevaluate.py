"""Re-bucket only the tests a move touched, render the affected files' configs before and after, and diff them."""

from __future__ import annotations

from dataclasses import dataclass, field

from testselect.select import configdiff
from testselect.select.plan import config_name, decide, render
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
    old = {path: {t.node_id: decide(reasoner, t) for t in tests} for path, tests in _in_scope(before, reasoner).items()}
    result = Reevaluation(before=old, after={})
    for path, tests in _in_scope(after, reasoner).items():
        kept = old.get(path, {})
        per = {}
        for test in tests:
            if test.node_id in affected or test.node_id not in kept:
                per[test.node_id] = decide(reasoner, test)
                result.reevaluated += 1
            else:
                per[test.node_id] = kept[test.node_id]
        result.after[path] = per
        result.total += len(tests)
    configs = [_configs(old, device), _configs(result.after, device)]
    result.diff = configdiff.unified(*configs).splitlines()
    result.files_changed = sorted(p for p in set(old) | set(result.after) if _differs(p, *configs))
    return result


def _configs(files: dict[str, dict[str, list[Decision]]], device: str) -> dict[str, str]:
    """config name -> the rendered config of each file's decisions."""
    return {
        config_name(path): render(path, [d for node in sorted(per) for d in per[node]], device)
        for path, per in files.items()
    }


def _differs(path: str, before: dict[str, str], after: dict[str, str]) -> bool:
    return before.get(config_name(path)) != after.get(config_name(path))
