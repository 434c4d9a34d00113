"""tools/private_symbols.py: a private torch or pytest symbol used outside a package's guarded module fails here."""

from __future__ import annotations

from pathlib import Path

import pytest
from private_symbols import main, violations

GUARDED_BY_DESIGN = """
import torch
from torch._prims_common import is_float_dtype

def schema(op):
    return op._schema
"""
ESCAPES = """
import torch
import torch._dynamo
from torch.utils import _pytree
from _pytest.nodes import Item

def name(op: torch._ops.OpOverload) -> str:
    return op._schema.name + getattr(op, "_overloadname")
"""
OWN = """
import os, sys

class Shard:
    def __init__(self):
        self._process = None

    def stop(self, other: "Shard"):
        other._process = None
        os._exit(sys._getframe().f_lineno) if other._process else None
        return self._process
"""


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        (src / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (src / "pkg" / name).write_text(text, encoding="utf-8")
    return src


def test_every_package_keeps_its_private_symbols_in_its_guarded_modules(capsys: pytest.CaptureFixture[str]) -> None:
    status = main([])
    assert status == 0, capsys.readouterr().out


def test_a_private_symbol_outside_the_guarded_module_is_named_with_its_line(tmp_path: Path) -> None:
    src = _package(tmp_path, {"torchbridge.py": GUARDED_BY_DESIGN, "kernels.py": ESCAPES})
    found = violations(src, frozenset({src / "pkg" / "torchbridge.py"}))
    kernels = src.resolve() / "pkg" / "kernels.py"
    assert found == [
        f"{kernels}:3: torch._dynamo",
        f"{kernels}:4: torch.utils._pytree",
        f"{kernels}:5: _pytest.nodes.Item",
        f"{kernels}:7: torch._ops",
        f"{kernels}:8: getattr(..., '_overloadname')",
        f"{kernels}:8: op._schema",
    ]


def test_the_guarded_module_itself_and_the_package_s_own_privates_pass(tmp_path: Path) -> None:
    src = _package(tmp_path, {"torchbridge.py": GUARDED_BY_DESIGN, "shards.py": OWN})
    assert violations(src, frozenset({src / "pkg" / "torchbridge.py"})) == []
    bridge = src.resolve() / "pkg" / "torchbridge.py"
    expected = [f"{bridge}:3: torch._prims_common.is_float_dtype", f"{bridge}:6: op._schema"]
    assert violations(src, frozenset()) == expected
