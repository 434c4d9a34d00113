"""The package under test is the built wheel, not the source tree."""

import importlib.metadata
import pathlib

import ringsim


def test_imported_from_installed_wheel() -> None:
    assert "site-packages" in pathlib.Path(ringsim.__file__).parts
    assert ringsim.__version__ == importlib.metadata.version("tributary-simulator")
