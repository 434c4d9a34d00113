"""Every private torch symbol ringsim uses still exists; a moved one fails naming the symbol and torch version."""

from __future__ import annotations

import importlib
import re

import pytest
import torch
from ringsim import torchbridge


@pytest.mark.parametrize(("module", "name"), torchbridge.SYMBOLS, ids=[".".join(s) for s in torchbridge.SYMBOLS])
def test_symbol_exists(module: str, name: str) -> None:
    try:
        found = hasattr(importlib.import_module(module), name)
    except ImportError:
        found = False
    assert found, f"torch {torch.__version__} moved {module}.{name}, which ringsim.torchbridge relies on"


@pytest.mark.parametrize("name", torchbridge.OVERLOAD_ATTRIBUTES)
def test_overloads_keep_their_private_attribute(name: str) -> None:
    assert hasattr(torch.ops.aten.add.Tensor, name), (
        f"torch {torch.__version__}: OpOverload no longer has {name}, which ringsim.torchbridge relies on"
    )


def test_qualname_drops_the_namespace_and_a_default_overload() -> None:
    assert torchbridge.qualname(torch.ops.aten.add.Tensor) == "add.Tensor"
    assert torchbridge.qualname(torch.ops.aten.abs.default) == "abs"


@pytest.mark.parametrize(("module", "name"), [("torch._C", "_no_such_thing"), ("torch._no_such_module", "op_db")])
def test_a_missing_symbol_fails_loudly_naming_it_and_the_version(module: str, name: str) -> None:
    with pytest.raises(ImportError, match=rf"{re.escape(f'{module}.{name}')}.*\({re.escape(torch.__version__)}\)"):
        torchbridge._resolve(module, name)
