"""The plugin's state for one pytest run: the plan, the decision per item, the results file and the summary."""

from __future__ import annotations

import contextlib
import importlib
import json
import time
import unittest
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testreuse import compiled, torchbridge
from testreuse.catalog import dtype_names, module_names, op_names
from testreuse.compiled import CompileModeError
from testreuse.errors import ConfigError
from testreuse.failures import failure_facts
from testreuse.importer import import_upstream
from testreuse.isolation import Death, ForkedWorker
from testreuse.loader import (
    CompileSetting,
    FilePlan,
    PlacedRule,
    Plan,
    load_plan,
    resolve_device_root,
    resolve_torch_root,
)
from testreuse.model import Mode
from testreuse.pytestbridge import run_item
from testreuse.results import ResultsFile
from testreuse.rules import Case, Decision, decide, excluded_shapes, matching_rules, name_matches
from testreuse.runsettings import RunSettings, run_settings
from testreuse.selection import claim_node_ids, is_selected, selected_modules
from testreuse.upstream import generic_tests
from testreuse.validate import check_plan, missing_reasons, missing_test_names

CASE_KEY = pytest.StashKey["CaseRecord"]()
GRAPHS_KEY = pytest.StashKey[int]()


@dataclass(frozen=True)
class CaseRecord:
    """Everything testreuse knows about one collected item; goes into marks, JUnit properties and results."""

    nodeid: str
    file: str
    case: Case
    decision: Decision
    op: Any = None
    excluded_shapes: tuple[tuple[int, ...], ...] = ()
    settings: RunSettings = field(default_factory=RunSettings)
    compile: str | None = None  # the compiled mode the case runs in (torch's PYTORCH_TEST_WITH_* flag)

    def facts(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "file": self.file,
            "generic": self.case.key,
            "op": self.case.op,
            "dtypes": list(self.case.dtypes),
            "module": self.case.module,
            "params": dict(self.case.params),
            "mode": self.decision.mode.value,
            "rule": str(self.decision.rule),
            "reason": self.decision.reason,
            "labels": list(self.decision.labels),
            "tags": list(self.settings.tags),
            **({"compile": self.compile} if self.compile else {}),
        }

    def marks(self) -> list[str]:
        names = [f"mode__{self.decision.mode.value}"]
        names += [f"op__{self.case.op}"] if self.case.op else []
        names += [f"dtype__{d}" for d in self.case.dtypes]
        names += [f"module__{self.case.module}"] if self.case.module else []
        return names + [f"label__{label}" for label in self.decision.labels] + list(self.settings.tags)


def _property_text(value: Any) -> str:
    """A fact as one JUnit property value: lists comma-joined, parameters as `name=value` pairs."""
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return ",".join(value) if isinstance(value, list) else str(value)


class UpstreamModule(pytest.Module):
    """An upstream file collected from its own path, imported without writing into the tree."""

    def _getobj(self) -> Any:
        try:
            return import_upstream(self.path)
        except (pytest.skip.Exception, unittest.SkipTest):
            raise
        except Exception as exc:
            raise self.CollectError(f"cannot import upstream file {self.path}: {type(exc).__name__}: {exc}") from exc


class TestreuseSession:
    """Registered only when --testreuse-config is given."""

    __test__ = False

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        option = config.option
        device_root = resolve_device_root(option.torch_device_root)
        self.plan: Plan = load_plan(
            option.testreuse_config, resolve_torch_root(option.torch_root), device_root=device_root
        )
        self.isolation: str = option.testreuse_isolation
        self.timeout: float = option.testreuse_timeout
        self.results = ResultsFile(Path(option.testreuse_results)) if option.testreuse_results else None
        self.plan_out = Path(option.testreuse_plan) if option.testreuse_plan else None
        self.compile = _enable_compile(self.plan.compile)
        self.prepared = False
        # xdist's own record of this process's role: the environment variable is also inherited by a pytest
        # started from inside a worker, which is not itself a worker.
        workerinput = getattr(config, "workerinput", None)
        self.worker: str | None = workerinput["workerid"] if workerinput else None
        self.modes: Counter[str] = Counter()
        self.promotions: list[str] = []
        self.seen_marks: set[str] = set()
        self.selections: list[str] = []
        self.forked: ForkedWorker | None = None
        self.torch_state: torchbridge.Preparation | None = None

    def config_warnings(self) -> list[str]:
        """What the configs do that a run accepts but should not go unsaid, one line each; said once, by the process
        that is no xdist worker (a worker's warnings would repeat the controller's)."""
        return [] if self.worker is not None else [str(problem) for problem in missing_reasons(self.plan)]

    # -- preparation --------------------------------------------------------------------------------------------
    def prepare_torch(self) -> None:
        """Once per collecting process: semantic checks (need op_db), then torch's knobs."""
        if self.prepared:
            return
        self.prepared = True
        problems = check_plan(self.plan, collected={})  # test names are checked against what collection makes
        if problems:
            raise ConfigError(problems)
        self.torch_state = torchbridge.prepare(self.plan.capabilities, self._tolerances(), self._added())
        self._register_marks()

    def _register_marks(self) -> None:
        """Every name a mark can take, so `-m op__add` is checked against real names under --strict-markers."""
        names = [f"op__{op}" for op in op_names()] + [f"module__{m}" for m in module_names()]
        names += [f"dtype__{d}" for d in dtype_names()] + [f"label__{label}" for label in self.plan.labels]
        rules = [p.rule for fp in self.plan.files.values() for p in fp.rules]
        names += [f"label__{label}" for rule in rules for label in rule.labels] + [t for r in rules for t in r.tags]
        for name in sorted(set(names)):
            self._register_mark(name)

    def _tolerances(self) -> list[torchbridge.Tolerance]:
        """Precision edits bound to the exact generic tests their rule names (regexes expanded from the file)."""
        found = {
            torchbridge.Tolerance(cls, test, p.op, p.dtype, p.atol, p.rtol)
            for placed, (cls, test) in self._named_tests()
            if placed.rule.edits is not None
            for p in placed.rule.edits.precision
        }
        return sorted(found, key=lambda t: (t.generic_class, t.generic_test, t.op, t.dtype))

    def _added(self) -> torchbridge.Added:
        """`edits.*.include` per exact generic test: the dtypes, ops and modules its parametrization gains."""
        added: dict[str, dict[tuple[str, str], list[str]]] = {"dtypes": {}, "ops": {}, "modules": {}}
        for placed, key in self._named_tests():
            for kind, table in added.items():
                edit = getattr(placed.rule.edits, kind)
                for item in edit.include or () if edit is not None else ():
                    table.setdefault(key, []).append(item.name)
        return torchbridge.Added(**added)

    def _named_tests(self) -> Iterator[tuple[PlacedRule, tuple[str, str]]]:
        """Each active rule with edits and every generic (class, test) of its file that one of its names matches."""
        for path, file_plan in self.plan.files.items():
            with_edits = [p for p in file_plan.rules if p.rule.edits is not None and p.active]
            tests = generic_tests(path) if with_edits else set()
            for placed in with_edits:
                for key in sorted(k for k in tests if any(name_matches(n, k) for n in placed.rule.names)):
                    cls, _, test = key.partition("::")
                    yield placed, (cls, test)

    def module_node_ids(self) -> dict[str, Path]:
        """Each planned file by its node id: relative to TORCH_ROOT, so ids read the same on every machine."""
        root = self.plan.torch_root
        return {
            (p.relative_to(root).as_posix() if p.is_relative_to(root) else p.as_posix()): p for p in self.plan.files
        }

    def claim_args(self, args: list[str]) -> list[str]:
        """Keep upstream node ids given as arguments for selection; return the arguments left for pytest."""
        self.selections, rest = claim_node_ids(args, self.module_node_ids(), self.config.rootpath)
        return rest

    def upstream_modules(self, session: pytest.Session) -> list[UpstreamModule]:
        """Every planned file, or only those that node ids on the command line name."""
        wanted = selected_modules(self.selections) if self.selections else None
        return [
            UpstreamModule.from_parent(session, path=path, nodeid=nodeid)
            for nodeid, path in self.module_node_ids().items()
            if wanted is None or nodeid in wanted
        ]

    # -- collection ---------------------------------------------------------------------------------------------
    def classify(self, items: list[pytest.Item]) -> list[pytest.Item]:
        """Stash a record, marks and properties on each upstream item; return the items that `skip` deselects.

        Raises ConfigError when a rule names a test that collection did not make in the files it collected."""
        problems = missing_test_names(self.plan, self._collected_names(items))
        if problems:
            raise ConfigError(problems)
        if self.selections:
            items[:] = [i for i in items if not _is_upstream(i) or is_selected(i.nodeid, self.selections)]
        deselected = []
        for item in items:
            module = item.getparent(pytest.Module)
            if not isinstance(module, UpstreamModule):
                continue
            file_plan = self.plan.files[module.path]
            record = self._record(item, module, file_plan)
            item.stash[CASE_KEY] = record
            self.modes[record.decision.mode.value] += 1
            for name in record.marks():
                self._register_mark(name)
                item.add_marker(name)
            item.user_properties.extend(
                (f"testreuse_{k}", _property_text(v)) for k, v in record.facts().items() if v and k != "nodeid"
            )
            mode = record.decision.mode
            if mode is Mode.skip:
                deselected.append(item)
            elif mode in (Mode.xfail, Mode.xfail_strict):
                reason = f"{record.decision.reason} [{record.decision.rule}]"
                item.add_marker(pytest.mark.xfail(reason=reason, strict=mode is Mode.xfail_strict, run=True))
        return deselected

    def _collected_names(self, items: list[pytest.Item]) -> dict[Path, set[str]]:
        """Generic `Class::test` names per collected upstream file, tests made at import time included."""
        names: dict[Path, set[str]] = {}
        for item in items:
            module = item.getparent(pytest.Module)
            cls = getattr(item, "cls", None)
            if isinstance(module, UpstreamModule) and cls is not None:
                params = torchbridge.case_params(cls, item.name)
                names.setdefault(module.path, set()).add(f"{params.generic_class}::{params.generic_test}")
        return names

    def _record(self, item: pytest.Item, module: UpstreamModule, file_plan: FilePlan) -> CaseRecord:
        cls = getattr(item, "cls", None)
        params = torchbridge.case_params(cls, item.name) if cls is not None else torchbridge.CaseParams("", item.name)
        op_name = getattr(params.op, "full_name", None)
        case = Case(params.generic_class, params.generic_test, op_name, params.dtypes, params.module, params.params)
        shapes = tuple(excluded_shapes(file_plan, case))
        settings = run_settings(self.plan, matching_rules(file_plan, case), case)
        decision = decide(self.plan, file_plan, case)
        return CaseRecord(item.nodeid, module.nodeid, case, decision, params.op, shapes, settings, self.compile)

    def _register_mark(self, name: str) -> None:
        if name not in self.seen_marks:
            self.seen_marks.add(name)
            self.config.addinivalue_line("markers", f"{name}: added by testreuse")

    def finish_collection(self, items: list[pytest.Item], deselected: list[pytest.Item]) -> None:
        records = [item.stash[CASE_KEY] for item in [*items, *deselected] if CASE_KEY in item.stash]
        if self.plan_out is not None:
            lines = sorted(records, key=lambda r: r.nodeid)
            self.plan_out.parent.mkdir(parents=True, exist_ok=True)
            self.plan_out.write_text("".join(_json_line(r.facts()) for r in lines), encoding="utf-8")
        if self.results is not None and self.worker in (None, "gw0"):
            for item in deselected:
                record = item.stash[CASE_KEY]
                self.results.append({**record.facts(), "outcome": "deselected", "duration": 0.0})
        if self.torch_state is not None:
            self.torch_state.end_collection()  # the device-only switch was for importing upstream files only

    # -- running ------------------------------------------------------------------------------------------------
    def run_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """pytest's protocol for one item, here or in the forked worker; the parent logs the reports either way,
        so JUnit, xdist, `-r` and `--lf` see the same report objects."""
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        started = time.monotonic()
        death: Death | None = None
        if self.isolation == "none":
            reports = self._run_here(item, nextitem, log=True)
        else:
            if self.forked is None:
                self.forked = ForkedWorker(item.session.items, self._run_here, self.timeout)
            reports, death = self.forked.run(item, nextitem)
            if self.isolation == "fork":
                self.forked.close()
            for report in reports:
                ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        self._record_result(item, reports, death, time.monotonic() - started)

    def _run_here(self, item: pytest.Item, nextitem: pytest.Item | None, log: bool = False) -> list[pytest.TestReport]:
        record = item.stash.get(CASE_KEY, None)
        shapes = list(record.excluded_shapes) if record is not None else []
        with torchbridge.samples_without_shapes(record.op if record is not None else None, shapes):
            return run_item(item, nextitem, log=log)

    @contextlib.contextmanager
    def running(self, item: pytest.Item) -> Iterator[None]:
        """The call phase of one test with its dialect settings (`no_grad`, `cpu_move`, seed, tolerance); in a
        compiled run, counts the graphs dynamo compiled for it."""
        before = torchbridge.compiled_graphs() if self.compile else 0
        try:
            with self._patched(item):
                yield
        finally:
            if self.compile:
                item.stash[GRAPHS_KEY] = torchbridge.compiled_graphs() - before

    def _patched(self, item: pytest.Item) -> contextlib.AbstractContextManager[Any]:
        record = item.stash.get(CASE_KEY, None)
        instance = getattr(item, "instance", None)
        if record is None or instance is None or not record.settings.patches_instance:
            return contextlib.nullcontext()
        s = record.settings
        return torchbridge.patched_test(
            instance, no_grad=s.no_grad, cpu_move=s.cpu_move, seed=s.seed, precision=s.precision
        )

    def stop_isolation(self, graceful: bool) -> None:
        """At session end: the worker tears down its fixtures and exits (killed at once if the run was interrupted)."""
        if self.forked is not None:
            self.forked.close(graceful=graceful)

    def _record_result(
        self, item: pytest.Item, reports: list[pytest.TestReport], death: Death | None, took: float
    ) -> None:
        record = item.stash.get(CASE_KEY, None)
        outcome = _outcome(reports, death)
        if record is not None and outcome == "xpassed":
            self.promotions.append(item.nodeid)
        if self.results is None:
            return
        entry: dict[str, Any] = record.facts() if record is not None else {"nodeid": item.nodeid}
        entry.update(outcome=outcome, duration=round(took, 4))
        if death is not None:
            entry[death.kind] = death.detail
            entry["failure"] = {"message": death.message()}
        failure = next((r.testreuse_failure for r in reports if hasattr(r, "testreuse_failure")), None)
        if failure is not None:
            entry["failure"] = failure
        if outcome not in QUIET_OUTCOMES and (output := _captured(reports)):
            entry["output"] = output
        graphs = next((r.testreuse_graphs for r in reports if hasattr(r, "testreuse_graphs")), None)
        if graphs is not None:
            entry["compiled_graphs"] = graphs
        if outcome == "xpassed":
            entry["promotion_candidate"] = True
        self.results.append(entry)

    def note_failure(self, item: pytest.Item, report: pytest.TestReport, excinfo: Any) -> None:
        """Carry the exception's facts on the report (a plain dict, so it crosses the fork and xdist)."""
        if excinfo is not None and _is_upstream(item):
            facts = failure_facts(excinfo.value, item.path, self.plan.torch_root)
            report.testreuse_failure = {**facts, "when": report.when}

    def note_graphs(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """A compiled run's call report carries the graphs compiled for the test (a plain int crosses the fork)."""
        if report.when == "call" and GRAPHS_KEY in item.stash:
            report.testreuse_graphs = item.stash[GRAPHS_KEY]

    def mandatory_skip_to_failure(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """A mandatory_success test that skips itself at runtime did not pass: say so instead of hiding it."""
        record = item.stash.get(CASE_KEY, None)
        if record is None or record.decision.mode is not Mode.mandatory_success:
            return
        if report.skipped and not hasattr(report, "wasxfail"):
            why = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = f"mandatory_success test skipped at runtime ({why}); rule {record.decision.rule}"

    def summary(self, terminal: Any) -> None:
        """Only in processes that collected (an xdist controller has nothing to say)."""
        if not self.modes:
            return
        counts = ", ".join(f"{mode} {n}" for mode, n in sorted(self.modes.items()))
        terminal.write_sep("-", "testreuse")
        terminal.write_line(f"cases by mode: {counts}")
        for nodeid in self.promotions:
            terminal.write_line(f"promotion candidate (unexpected pass under xfail): {nodeid}")

    def close(self) -> None:
        self.stop_isolation(graceful=False)
        if self.torch_state is not None:
            self.torch_state.close()
        if self.results is not None:
            self.results.close()


def _enable_compile(setting: CompileSetting | None) -> str | None:
    """torch's compiled-test flag on, the config's compiler backend imported; the mode the run's cases run in."""
    compiled.enable(setting)
    if setting is not None and setting.backend:
        try:
            import_backend(setting.backend)
        except ImportError as exc:
            raise CompileModeError(
                f"{setting.location}: compile.backend: cannot import {setting.backend}: {exc}"
            ) from None
    return compiled.mode_of_environment()


def import_backend(spec: str | None) -> None:
    """`MODULE` is imported; `MODULE:FUNCTION` is imported and FUNCTION() called (a backend's explicit loader)."""
    if not spec:
        return
    module_name, _, function = spec.partition(":")
    module = importlib.import_module(module_name)
    if function:
        loader = getattr(module, function, None)
        if not callable(loader):
            raise ImportError(f"{module_name} has no callable {function!r}")
        loader()


def _is_upstream(item: pytest.Item) -> bool:
    return isinstance(item.getparent(pytest.Module), UpstreamModule)


def _outcome(reports: list[pytest.TestReport], death: Death | None) -> str:
    if death is not None:
        return {"signal": "crashed", "timeout": "timeout"}.get(death.kind, "crashed")
    for report in reports:
        if report.failed:
            if report.when == "call" and str(report.longrepr).startswith("[XPASS(strict)]"):
                return "xpassed"
            return "failed" if report.when == "call" else "error"
    for report in reports:
        if report.when == "call" and hasattr(report, "wasxfail"):
            return "xpassed" if report.passed else "xfailed"
        if report.skipped:
            return "xfailed" if hasattr(report, "wasxfail") else "skipped"
    return "passed"


#: Outcomes whose captured output the results record leaves out: nothing went wrong to explain.
QUIET_OUTCOMES = frozenset({"passed", "skipped", "xfailed", "deselected"})
#: How much of a test's captured output its record keeps: the end, where a failure says why.
OUTPUT_TAIL = 2000


def _captured(reports: list[pytest.TestReport]) -> str:
    """The test's own captured stdout and stderr, every phase, its last OUTPUT_TAIL characters: what a reader (or a
    classifier) needs to explain this test's failure without reading its neighbours' output in a shard log."""
    sections: dict[str, str] = {}  # a later phase's report repeats the earlier phases' sections: each once
    for report in reports:
        sections.update((title, body) for title, body in report.sections if title.startswith("Captured std"))
    return "".join(sections.values())[-OUTPUT_TAIL:]


def _json_line(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"
