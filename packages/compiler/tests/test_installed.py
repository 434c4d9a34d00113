"""The package under test is the built wheel, not the source tree."""

import importlib.metadata
import pathlib

import ring_inductor


def test_imported_from_installed_wheel() -> None:
    assert "site-packages" in pathlib.Path(ring_inductor.__file__).parts
    assert ring_inductor.__version__ == importlib.metadata.version("tributary-compiler")
