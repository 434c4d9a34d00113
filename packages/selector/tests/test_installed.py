"""The package under test is the built wheel, not the source tree."""

import importlib.metadata
import pathlib

import testselect


def test_imported_from_installed_wheel() -> None:
    assert "site-packages" in pathlib.Path(testselect.__file__).parts
    assert testselect.__version__ == importlib.metadata.version("tributary-selector")
