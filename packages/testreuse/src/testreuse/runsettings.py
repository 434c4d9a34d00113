"""What a case runs with beyond its bucket: marks from `tags`, `no_grad`, `cpu_move`, the seed and a tolerance.

Plain functions over the plan (no pytest, no torch): the plugin applies them to each test instance while it runs."""

from __future__ import annotations

from dataclasses import dataclass

from testreuse.loader import PlacedRule, Plan
from testreuse.rules import Case


@dataclass(frozen=True)
class RunSettings:
    """Everything is off by default: a case no dialect field touches runs exactly as upstream wrote it."""

    tags: tuple[str, ...] = ()
    no_grad: bool = False
    cpu_move: tuple[str, ...] = ()
    seed: int | None = None
    precision: tuple[float, float] | None = None

    @property
    def patches_instance(self) -> bool:
        return self.no_grad or bool(self.cpu_move) or self.seed is not None or self.precision is not None


def run_settings(plan: Plan, rules: list[PlacedRule], case: Case) -> RunSettings:
    """Union of the matching rules' tags, no_grad and cpu_move; the global seed; the case's dtype tolerance."""
    tags = tuple(dict.fromkeys(tag for p in rules for tag in p.rule.tags))
    no_grad = any(p.rule.no_grad for p in rules)
    moved = [f.name for p in rules if p.rule.edits and p.rule.edits.functions for f in p.rule.edits.functions.cpu_move]
    return RunSettings(tags, no_grad, tuple(dict.fromkeys(moved)), plan.dialect.seed, _precision(plan, rules, case))


def _precision(plan: Plan, rules: list[PlacedRule], case: Case) -> tuple[float, float] | None:
    """Most specific first: a rule's `edits.precision` (torch's toleranceOverride applies it, so none here), an
    `edits.dtypes.include` item of the latest rule naming the dtype, the op's dtype in supported_ops, then
    supported_dtypes."""
    edits = [p.rule.edits for p in rules if p.rule.edits is not None]
    if any(t.op == case.op and t.dtype in case.dtypes for e in edits for t in e.precision):
        return None
    for dtype in case.dtypes:
        for e in reversed(edits):
            for item in e.dtypes.include or () if e.dtypes is not None else ():
                if item.name == dtype and item.precision is not None:
                    return item.precision.atol, item.precision.rtol
        if case.op is not None and (case.op, dtype) in plan.dialect.op_precision:
            return plan.dialect.op_precision[(case.op, dtype)]
        if dtype in plan.dialect.dtype_precision:
            return plan.dialect.dtype_precision[dtype]
    return None
