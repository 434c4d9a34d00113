"""Makes the fallback device importable for the tests here and for pytest runs they start in subprocesses."""

import os
import pathlib
import sys

import pytest

BACKENDS_DIR = pathlib.Path(__file__).resolve().parent
if str(BACKENDS_DIR) not in sys.path:
    sys.path.insert(0, str(BACKENDS_DIR))

import fallback_backend  # noqa: E402


@pytest.fixture(scope="session")
def fallback_device() -> str:
    """The fallback device, registered in this process."""
    return fallback_backend.load()


@pytest.fixture
def fallback_plugin_args(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Arguments that make a subprocess pytest run load the fallback device before collecting anything."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS_DIR), os.environ.get("PYTHONPATH")])))
    return ["-p", fallback_backend.__name__]
