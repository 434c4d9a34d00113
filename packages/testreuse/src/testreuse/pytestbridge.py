"""Every contact with pytest's private API, in one place: tests/test_isolation_pytestbridge.py fails loudly if a
pytest upgrade moves one. The isolated runner needs pytest's own per-item protocol without its logging (the parent
logs the reports, the subtests' included), and the teardown pytest does at session end, in the process that set the
fixtures up."""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol


def run_item(item: pytest.Item, nextitem: pytest.Item | None, *, log: bool) -> list[pytest.TestReport]:
    """pytest's setup/call/teardown for one item; `nextitem` decides which module and class fixtures survive."""
    return runtestprotocol(item, log=log, nextitem=nextitem)


def teardown_all(session: pytest.Session) -> None:
    """Tear down every fixture still set up, as pytest does when a session ends (or stops early under -x)."""
    session._setupstate.teardown_exact(None)


class _Held:
    """The reports a test logs itself while it runs (each subtest's, as it ends)."""

    def __init__(self) -> None:
        self.reports: list[pytest.TestReport] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reports.append(report)


def hold_logged_reports(config: pytest.Config) -> list[pytest.TestReport]:
    """From now on in this process, a report logged through pytest's hook reaches only the returned list: in a
    forked worker the parent logs every report, and the plugins the fork inherited (xdist's, which sends a report
    with the index of the item the fork started at; the terminal's) must not see them."""
    held = _Held()
    config.pluginmanager.register(held, "testreuse-held-reports")
    caller = config.hook.pytest_runtest_logreport
    caller._hookimpls[:] = [impl for impl in caller._hookimpls if impl.plugin is held]
    return held.reports
