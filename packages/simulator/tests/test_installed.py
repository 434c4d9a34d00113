"""The package under test is the built wheel, not the source tree."""

import importlib.metadata
import pathlib

import ringsim


def test_imported_from_installed_wheel() -> None:
    assert "site-packages" in pathlib.Path(ringsim.__file__).parts
    assert ringsim.__version__ == importlib.metadata.version("tributary-simulator")


def test_the_wheel_requires_the_torch_it_was_built_against() -> None:
    """The extension links against one torch: pip must refuse the wheel beside any other release."""
    import torch

    requires = importlib.metadata.requires("tributary-simulator") or []
    torch_requirements = [r for r in requires if r.split(";")[0].strip().startswith("torch")]
    assert torch_requirements == [f"torch=={torch.__version__.partition('+')[0]}"]
