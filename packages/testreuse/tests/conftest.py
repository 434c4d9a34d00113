"""Shared helpers: upstream-style files and configs written into temporary directories.

The fallback device is registered here, first thing in every test process: tests that import torch's test machinery
in-process (config validation reads op_db) would otherwise make a later registration impossible in that process.
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

BACKENDS = Path(__file__).resolve().parent / "backends"
sys.path.insert(0, str(BACKENDS))
import fallback_backend  # noqa: E402

fallback_backend.load()

pytest_plugins = ["pytester"]

SMALL_UPSTREAM = """
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

_OPS = [op for op in op_db if op.name in ("add", "mul", "sin")]


class TestSmall(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_fill(self, device, dtype):
        x = torch.zeros(4, device=device, dtype=dtype)
        self.assertEqual(x.fill_(2).cpu(), torch.full((4,), 2, dtype=dtype))

    def test_plain(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)

    @ops(_OPS)
    def test_op(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            op(sample.input, *sample.args, **sample.kwargs)
            break


instantiate_device_type_tests(TestSmall, globals())

if __name__ == "__main__":
    run_tests()
"""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def write() -> Callable[[Path, str], Path]:
    """Write dedented text to a file (creating folders) and return its path."""
    return _write


@pytest.fixture
def torch_root(tmp_path: Path) -> Path:
    """A tiny upstream tree: `test/test_small.py` written the way upstream writes device-generic tests."""
    root = tmp_path / "torch_root"
    _write(root / "test" / "test_small.py", SMALL_UPSTREAM)
    return root


@pytest.fixture(scope="session")
def extensions_dir() -> str:
    """Where the fallback device is compiled, read before pytester points HOME at a scratch folder."""
    return os.environ.get("TORCH_EXTENSIONS_DIR") or str(Path.home() / ".cache" / "torch_extensions")
