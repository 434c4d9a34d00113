"""Every contact with pytest's private API, in one place: tests/test_isolation_pytestbridge.py fails loudly if a
pytest upgrade moves one. The isolated runner needs pytest's own per-item protocol without its logging (the parent
logs the reports), and the teardown pytest does at session end, in the process that set the fixtures up."""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol


def run_item(item: pytest.Item, nextitem: pytest.Item | None, *, log: bool) -> list[pytest.TestReport]:
    """pytest's setup/call/teardown for one item; `nextitem` decides which module and class fixtures survive."""
    return runtestprotocol(item, log=log, nextitem=nextitem)


def teardown_all(session: pytest.Session) -> None:
    """Tear down every fixture still set up, as pytest does when a session ends (or stops early under -x)."""
    session._setupstate.teardown_exact(None)
