"""pytest hooks for `testselect evidence` (`-p testselect.evidence.plugin`): each case's call runs under an op
recorder, and each case is one JSON line, written as it ends, so a process that dies keeps every finished case.

A `start` line precedes each case: the driver reads a `start` with no `case` line as the case that crashed.
"""

from __future__ import annotations

import faulthandler
import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

_RECORDER = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("testselect-evidence", "op evidence (testselect evidence)")
    group.addoption("--evidence-out", metavar="PATH", help="append one JSON line per test case here (enables this)")
    group.addoption("--evidence-skip", metavar="PATH", help="node ids to deselect, one a line: already recorded")
    group.addoption(
        "--evidence-compiled",
        metavar="PATH",
        help="generic node ids (file::Class::test), one a line, whose compiled graphs are recorded instead",
    )
    group.addoption(
        "--evidence-timeout", type=float, default=0.0, metavar="S", help="end the process when a case runs longer"
    )
    group.addoption(
        "--evidence-device",
        metavar="NAME",
        help="run the cases on the recording privateuse1 device, named NAME: record what reaches the device",
    )
    group.addoption(
        "--evidence-device-ops",
        metavar="PATH",
        help="aten overloads the device registers, one a line, each with a tab and the dtypes it runs (none: any)",
    )
    group.addoption("--evidence-device-count", type=int, default=1, metavar="N", help="devices the recorder has")


def pytest_configure(config: pytest.Config) -> None:
    out = config.getoption("evidence_out")
    if out is None:
        return
    timeout = config.getoption("evidence_timeout")
    if timeout < 0:
        raise pytest.UsageError(f"--evidence-timeout {timeout}: must be 0 (none) or more")
    skip = _ids(config.getoption("evidence_skip"))
    compiled = _ids(config.getoption("evidence_compiled"))
    evidence = Evidence(Path(out), skip, compiled, timeout)
    name = config.getoption("evidence_device")
    if name is not None:  # before collection: the test files instantiate their device classes on import
        from testselect.evidence.device import install

        ops = _export(config.getoption("evidence_device_ops"))
        evidence.device = install(name, config.getoption("evidence_device_count"), build_root(), ops)
        evidence.device_name = name
    config.pluginmanager.register(evidence, "testselect-evidence")


def build_root() -> Path:
    """Where the recording device is compiled, once per torch and source for every store of this user:
    `$TESTSELECT_RECORDER_BUILD`, else the user's cache folder."""
    if folder := os.environ.get("TESTSELECT_RECORDER_BUILD"):
        return Path(folder)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "testselect" / "recorder"


def _export(path: str | None) -> dict[str, list[str]]:
    """`aten::add.Tensor\tfloat32,int64` lines as {op: dtypes}."""
    export: dict[str, list[str]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines() if path else []:
        op, _, dtypes = line.partition("\t")
        export[op] = [d for d in dtypes.split(",") if d]
    return export


def _ids(path: str | None) -> set[str]:
    return set(Path(path).read_text(encoding="utf-8").split()) if path else set()


def generic_id(item: pytest.Item, device: str) -> str:
    """`file::TestFoo::test_bar` for `file::TestFooCPU::test_bar_cpu_float32`: the index's node id.

    The device class's generic class is the most basic class of its MRO whose name prefixes its own, and
    torch's instantiation wraps each test with `functools.wraps`, so `__name__` is the generic method's when the
    function was defined in a class body. A test set under another name (a factory's `test` in a `setattr` loop,
    a lambda) is named by its instantiated name up to the `_<device>` suffix torch appends.
    """
    path = item.nodeid.split("::", 1)[0]
    obj = getattr(item, "obj", None)
    name = getattr(obj, "__name__", item.name)
    cls = getattr(item, "cls", None)
    if cls is None:
        return f"{path}::{name}"
    qualname = getattr(obj, "__qualname__", "")
    if "." not in qualname or qualname.split(".")[-2] == "<locals>":  # not `Cls.test`: set under another name
        cut = item.name.rfind(f"_{device}") if getattr(cls, "device_type", None) else -1
        name = item.name[:cut] if cut > 0 else item.name
    generic = next(c for c in reversed(cls.__mro__) if cls.__name__.startswith(c.__name__) and c.__name__ != "object")
    return f"{path}::{generic.__name__}::{name}"


class Evidence:
    """The enabled plugin's state: the output stream, the ids to deselect, the tests that compile, the timeout."""

    def __init__(self, out: Path, skip: set[str], compiled: set[str], timeout: float) -> None:
        self.stream: IO[str] = out.open("a", encoding="utf-8")
        self.fault: IO[str] = out.with_suffix(".fault").open("a", encoding="utf-8")
        self.skip = skip
        self.compiled = compiled
        self.timeout = timeout
        self.reports: dict[str, list[pytest.TestReport]] = {}
        self.device: Any = None  # the recording device's extension, when the cases run on it
        self.device_name = "cpu"  # the device the cases are instantiated for: their names end `_<device>...`

    def _write(self, line: dict) -> None:
        self.stream.write(json.dumps(line, sort_keys=True) + "\n")
        self.stream.flush()

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        dropped = [item for item in items if item.nodeid in self.skip]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid not in self.skip]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        generic = generic_id(item, self.device_name)
        self._write({"event": "start", "nodeid": item.nodeid, "generic": generic})
        from testselect.torchprivate import case_params  # torch only once a case runs

        params = case_params(item)
        if self.timeout:
            faulthandler.dump_traceback_later(self.timeout, exit=True, file=self.fault)
        started = time.monotonic()
        if self.device is not None:
            self.device.take()  # what collection and earlier teardowns sent is not this case's
        try:
            return (yield)
        finally:
            if self.timeout:
                faulthandler.cancel_dump_traceback_later()
            if self.device is not None:  # setup, call and teardown: all of it reached the device
                seen, failed = self.device.take()
                counts = {op: count for op, (count, _) in seen.items()}
                dtypes = {op: sorted(kinds) for op, (_, kinds) in seen.items()}
                raised = {op: sorted(kinds) for op, (_, kinds) in failed.items()}
                kind = "device"
            else:
                recorder = item.stash.get(_RECORDER, None)
                counts = dict(recorder.counts) if recorder else {}
                dtypes = {op: sorted(d) for op, d in recorder.dtypes.items()} if recorder else {}
                raised = {op: sorted(d) for op, d in recorder.raised.items()} if recorder else {}
                kind = "compiled" if generic in self.compiled else "eager"
            self._write(
                {
                    "event": "case",
                    "nodeid": item.nodeid,
                    "generic": generic,
                    "outcome": outcome(self.reports.pop(item.nodeid, [])),
                    "recorder": kind,
                    "duration": round(time.monotonic() - started, 4),
                    "ops": dict(sorted(counts.items())),
                    "dtypes": dict(sorted(dtypes.items())),
                    "raised": dict(sorted(raised.items())),
                    **params,
                }
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """A test that compiles runs under the compiled-graph recorder alone: with a dispatch mode active, dynamo
        would not compile at all and the graph's ops would go unseen."""
        if self.device is not None:  # the device records what reaches it; a dispatch mode would see CPU ops too
            return (yield)
        from testselect.torchprivate import CompiledOpRecorder, OpRecorder  # torch only once a case runs

        compiled = generic_id(item, self.device_name) in self.compiled
        recorder = item.stash[_RECORDER] = CompiledOpRecorder() if compiled else OpRecorder()
        with recorder:
            return (yield)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.setdefault(report.nodeid, []).append(report)

    def pytest_unconfigure(self) -> None:
        self.stream.close()
        self.fault.close()


def outcome(reports: list[pytest.TestReport]) -> str:
    """One word per case from its phase reports: passed, failed, error (setup/teardown), skipped, xfailed, xpassed."""
    if any(report.failed and report.when != "call" for report in reports):
        return "error"
    for report in reports:
        if report.skipped:
            return "xfailed" if hasattr(report, "wasxfail") else "skipped"
        if report.when == "call":
            if hasattr(report, "wasxfail"):
                return "xpassed" if report.passed else "xfailed"
            return "passed" if report.passed else "failed"
    return "error"
