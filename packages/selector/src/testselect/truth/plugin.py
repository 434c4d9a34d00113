"""pytest hooks for `testselect truth` (`-p testselect.truth.plugin`): run only the cases listed in a file, and note
each case as it starts, so the driver can name the case a pytest process died in (testreuse writes a case's record
only when it ends).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("testselect-truth", "ground-truth runs (testselect truth)")
    group.addoption("--truth-cases", metavar="PATH", help="run only these node ids, one a line (enables this)")
    group.addoption("--truth-started", metavar="PATH", help="append one JSON line per case as it starts")


def pytest_configure(config: pytest.Config) -> None:
    cases = config.getoption("truth_cases")
    if cases is None:
        return
    started = config.getoption("truth_started")
    if started is None:
        raise pytest.UsageError("--truth-cases needs --truth-started PATH")
    wanted = set(Path(cases).read_text(encoding="utf-8").splitlines())
    config.pluginmanager.register(Truth(wanted, Path(started)), "testselect-truth")


class Truth:
    """The enabled plugin's state: the node ids to keep and the stream of started cases."""

    def __init__(self, cases: set[str], started: Path) -> None:
        self.cases = cases
        self.started = started.open("a", encoding="utf-8")

    @pytest.hookimpl(trylast=True)  # after testreuse has classified every item
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        dropped = [item for item in items if item.nodeid not in self.cases]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.nodeid in self.cases]

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started.write(json.dumps({"nodeid": nodeid, "started": time.time()}, sort_keys=True) + "\n")
        self.started.flush()

    def pytest_unconfigure(self) -> None:
        self.started.close()
