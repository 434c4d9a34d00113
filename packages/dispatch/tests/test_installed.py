"""The package under test is the built wheel, not the source tree."""

import importlib.metadata
import pathlib

import crcr


def test_imported_from_installed_wheel() -> None:
    assert "site-packages" in pathlib.Path(crcr.__file__).parts
    assert crcr.__version__ == importlib.metadata.version("tributary-dispatch")
