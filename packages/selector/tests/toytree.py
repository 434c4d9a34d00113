"""A tiny synthetic upstream-style tree with recorded CPU cases: the facts the selection tests decide on."""

from __future__ import annotations

import textwrap
from pathlib import Path

from testselect.evidence import store as evidence
from testselect.index.build import index_tree
from testselect.index.store import Store

TOY = """
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, onlyCUDA
from torch.testing._internal.common_utils import TestCase


class TestToy(TestCase):
    @dtypes(torch.float32, torch.float64)
    def test_add(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype).add(1)

    @onlyCUDA
    def test_cuda_only(self, device):
        torch.ones(2, device=device)

    def test_grad(self, device):
        x = torch.ones(2, device=device, requires_grad=True)
        x.sum().backward()

    @dtypes(torch.float32)
    def test_lacks(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype).cumsum(0)

    @dtypes(torch.float32)
    def test_some_lack(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype)


instantiate_device_type_tests(TestToy, globals())
"""

DIST = """
import torch.distributed as dist
from torch.testing._internal.common_utils import TestCase


class TestDist(TestCase):
    def test_group(self):
        dist.init_process_group("gloo")
"""

PROFILE = """\
device: toy
hooks:
  eager_ops: yes
  autograd: no
  distributed: no
dtypes: [float32, float64]
provided_ops: ["aten::empty*"]
scope:
  exclude: ["skipme/*"]
"""

CAPS = """\
device: toy
supported_dtypes: [{name: float32}, {name: int64}]
aten_ops:
  - {name: "aten::add.Tensor", dtypes: [{name: float32}]}
  - {name: "aten::ones", dtypes: [{name: float32}]}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def build(tmp_path: Path) -> dict[str, Path]:
    """A store over test_toy.py, test_dist.py and an excluded file, with recorded CPU cases for two tests."""
    root = tmp_path / "torch"
    write(root / "test" / "test_toy.py", TOY)
    write(root / "test" / "test_dist.py", DIST)
    write(root / "test" / "skipme" / "test_other.py", TOY)
    db = tmp_path / "s.sqlite"
    store = Store.open(db)
    index_tree(root, store)
    evidence.ensure(store)
    cases = [
        ("TestToyCPU::test_add_cpu_float32", "test_add", "passed", {"aten::add.Tensor": ["float32"]}),
        ("TestToyCPU::test_lacks_cpu_float32", "test_lacks", "passed", {"aten::cumsum": ["float32"]}),
        (
            "TestToyCPU::test_some_lack_cpu_float32",
            "test_some_lack",
            "passed",
            {"aten::ones": ["float32"], "aten::empty.memory_format": []},
        ),
    ]
    for node, test, outcome, ops in cases:
        case = evidence.Case(
            f"test_toy.py::{node}", f"test_toy.py::TestToy::{test}", outcome, 0.1, {o: 1 for o in ops}, ops
        )
        evidence.record(store, case)
    store.commit()
    store.close()
    return {
        "store": db,
        "profile": write(tmp_path / "backend.yaml", PROFILE),
        "caps": write(tmp_path / "caps.yaml", CAPS),
        "out": tmp_path / "out",
    }
