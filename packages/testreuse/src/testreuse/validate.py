"""Checks that need torch's catalogs or the upstream files: op and module names, and test names that still exist."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence, Set
from pathlib import Path

from testreuse.catalog import module_names, op_names
from testreuse.errors import ConfigError, Problem, format_path
from testreuse.loader import PlacedRule, Plan, load_plan
from testreuse.model import NONE_GIVEN, name_kind
from testreuse.rules import name_matches
from testreuse.torchbridge import testcase_methods
from testreuse.upstream import generic_tests

_KIND_WORD = {"glob": "glob", "method": "method name pattern", "regex": "regex"}


OP_DBS = "op_db or python_ref_db"


def validate(
    inputs: Sequence[str | os.PathLike[str]],
    torch_root: Path,
    *,
    run_commands: bool = False,
    collected: Mapping[Path, Set[str]] | None = None,
    strict: bool = False,
) -> Plan:
    """What `testreuse validate` checks, as a function: the merged plan, or ConfigError with every problem.

    Export commands run only when asked: checking a config must not execute what it names. `collected` (generic
    `Class::test` names per upstream file, from a collection) replaces the syntax tree's names: tests made at
    import time (`setattr` loops, classes imported from other modules) exist only there; a file it does not hold
    is not checked. `strict` also refuses what a run accepts with a warning (`missing_reasons`)."""
    plan = load_plan(inputs, torch_root, run_commands=run_commands)
    problems = check_plan(plan, collected)
    if strict:
        problems += missing_reasons(plan, strict=True)
    if problems:
        raise ConfigError(problems)
    return plan


def check_plan(plan: Plan, collected: Mapping[Path, Set[str]] | None = None) -> list[Problem]:
    """Every problem found, one per offending value, in file order."""
    problems: list[Problem] = []
    problems += missing_test_names(plan, collected)
    ops, modules = op_names(), module_names()
    for placed in _unique_rules(plan):
        problems += _check_rule_names(placed, ops, modules)
    caps = plan.capabilities
    for declared, catalog, kind, db in (
        (caps.op_locations, ops, "op", OP_DBS),
        (caps.module_locations, modules, "module", "module_db"),
    ):
        for name, (where, path) in declared.items():
            if name not in catalog:
                problems.append(Problem(where, path, f"{kind} {name!r} is not in {db}"))
    return problems


def missing_reasons(plan: Plan, *, strict: bool = False) -> list[Problem]:
    """One line per entry whose mode needs a reason and that has none (no `reason`, no comment above it or trailing
    its lines), at the entry: a warning for a run, whose cases record NONE_GIVEN, or an error when `strict`."""
    problems = []
    for placed in _unique_rules(plan):
        if placed.rule.lacks_reason:
            mode = placed.rule.mode.value
            if strict:
                message = f"mode {mode} needs a reason: a `reason:` or a comment above the entry or on its lines"
            else:
                message = f"mode {mode} has no reason (no `reason:` or comment): its cases record {NONE_GIVEN!r}"
            problems.append(Problem(placed.location, format_path(placed.path), message))
    return problems


def ignored_export_ops(plan: Plan) -> list[str]:
    """Ops a backend's export lists that are no OpInfo (kernel names such as `_to_copy`): they narrow nothing."""
    return sorted(plan.capabilities.exported_ops - op_names())


def _unique_rules(plan: Plan) -> list[PlacedRule]:
    seen: dict[int, PlacedRule] = {}
    for file_plan in plan.files.values():
        for placed in file_plan.rules:
            seen.setdefault(placed.order, placed)
    return [seen[k] for k in sorted(seen)]


def missing_test_names(plan: Plan, collected: Mapping[Path, Set[str]] | None) -> list[Problem]:
    """A name must exist in at least one upstream file its rule's entry expanded to: by the files' syntax trees,
    and with `collected` (what collection produced per file; rules only in files it lacks are not checked) also by
    collection, which adds the tests made at import time. A test the file defines can have no case on a device
    (every op or dtype it is parametrized with is outside the device's): naming it is no typo."""
    known: dict[int, set[str]] = defaultdict(set)
    rules: dict[int, PlacedRule] = {}
    problems: list[Problem] = []
    for path, file_plan in plan.files.items():
        if collected is not None and path not in collected:
            continue
        try:
            tests = generic_tests(path) | (collected[path] if collected is not None else set())
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
            # ValueError: null bytes; RecursionError and MemoryError: nesting too deep for Python's own parser
            where = file_plan.entry_locations[0]
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            problems.append(Problem(where, "path", f"cannot parse upstream file {path.name}: {why}"))
            continue
        for placed in file_plan.rules:
            known[placed.order] |= tests
            rules[placed.order] = placed
    for order, placed in sorted(rules.items()):
        for index, name in enumerate(placed.rule.names):
            if any(name_matches(name, key) for key in known[order]):
                continue
            kind = name_kind(name)
            what = f"no test {name!r}" if kind == "exact" else f"{_KIND_WORD[kind]} {name!r} matches no test"
            problems.append(Problem(placed.locate("names", index), _path(placed, "names", index), f"{what} upstream"))
    return problems


def _check_rule_names(placed: PlacedRule, ops: frozenset[str], modules: frozenset[str]) -> list[Problem]:
    rule = placed.rule
    found: list[tuple[tuple[str | int, ...], str, str]] = []
    if rule.only is not None:
        found += [(("only", "ops", i), n, "op") for i, n in enumerate(rule.only.ops or ())]
        found += [(("only", "modules", i), n, "module") for i, n in enumerate(rule.only.modules or ())]
    edits = rule.edits
    if edits is not None:
        for kind, edit in (("op", edits.ops), ("module", edits.modules)):
            if edit is None:
                continue
            for group in ("include", "exclude"):
                names = getattr(edit, group) or ()
                found += [(("edits", f"{kind}s", group, i, "name"), n.name, kind) for i, n in enumerate(names)]
        found += [(("edits", "precision", i, "op"), p.op, "op") for i, p in enumerate(edits.precision)]
    problems = []
    moved = edits.functions.cpu_move if edits is not None and edits.functions is not None else []
    for i, function in enumerate(moved):
        if function.name not in testcase_methods():
            sub = ("edits", "functions", "cpu_move", i, "name")
            message = f"{function.name!r} is not a method of torch's TestCase"
            problems.append(Problem(placed.locate(*sub), _path(placed, *sub), message))
    for sub, name, kind in found:
        catalog, db = (ops, OP_DBS) if kind == "op" else (modules, "module_db")
        if name not in catalog:
            problems.append(Problem(placed.locate(*sub), _path(placed, *sub), f"{kind} {name!r} is not in {db}"))
    return problems


def _path(placed: PlacedRule, *sub: str | int) -> str:
    return format_path((*placed.path, *sub))
