"""The package under test is the built wheel, not the source tree."""

import importlib.metadata
import pathlib

import testreuse


def test_imported_from_installed_wheel() -> None:
    assert "site-packages" in pathlib.Path(testreuse.__file__).parts
    assert testreuse.__version__ == importlib.metadata.version("tributary-testreuse")
