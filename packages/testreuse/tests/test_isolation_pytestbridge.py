"""Guards for every private pytest API testreuse touches (all in testreuse/pytestbridge.py): a pytest upgrade that
moves one fails here by name instead of deep inside an isolated run."""

from __future__ import annotations

import inspect

import pytest
from _pytest.runner import SetupState
from testreuse import pytestbridge


def test_runtestprotocol_takes_the_item_log_and_nextitem() -> None:
    parameters = inspect.signature(pytestbridge.runtestprotocol).parameters
    assert list(parameters) == ["item", "log", "nextitem"]


def test_the_session_keeps_a_setup_state_that_tears_down_exactly(request: pytest.FixtureRequest) -> None:
    state = request.session._setupstate
    assert isinstance(state, SetupState)
    assert list(inspect.signature(state.teardown_exact).parameters) == ["nextitem"]


def test_a_hook_caller_keeps_its_implementations_in_a_list(pytestconfig: pytest.Config) -> None:
    impls = pytestconfig.hook.pytest_runtest_logreport._hookimpls
    assert isinstance(impls, list)
    assert all(hasattr(impl, "plugin") for impl in impls)
