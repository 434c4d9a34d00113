"""`testselect upgrade` between two versions of a small tree that differ by known edits, and its bad input."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from testselect.cli import main
from testselect.evidence import store as evidence
from testselect.index.build import index_tree
from testselect.index.store import Store

HEAD = """
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestToy(TestCase):
"""
KEEP = """
    @dtypes(torch.float32)
    def test_keep(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype).cumsum(0)
"""
GONE = """
    @dtypes(torch.float32)
    def test_gone(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype)
"""
BODY_OLD = """
    def test_body(self, device):
        torch.ones(2, device=device)
"""
BODY_NEW = """
    def test_body(self, device):
        torch.ones(2, device=device, requires_grad=True).sum().backward()
"""
DTYPES_OLD = """
    @dtypes(torch.float32)
    def test_dtypes(self, device, dtype):
        torch.zeros(2, device=device, dtype=dtype)
"""
DTYPES_NEW = DTYPES_OLD.replace("@dtypes(torch.float32)", "@dtypes(torch.float32, torch.float64)")
ADDED = """
    @dtypes(torch.float16)
    def test_new(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype).neg()
"""
TAIL = "\n\ninstantiate_device_type_tests(TestToy, globals())\n"
OTHER = """
from torch.testing._internal.common_utils import TestCase


class TestOther(TestCase):
    def test_other(self):
        pass
"""
# test_body now needs autograd (skip), test_dtypes gains float64 (skipped by dtype), test_gone goes, test_new
# comes; test_keep keeps its CPU failure's xfail_strict, because its recorded case is carried over unchanged.
EXPECTED_DIFF = """\
--- a/test_toy.yaml
+++ b/test_toy.yaml
@@ -4,18 +4,19 @@
     - path: ${TORCH_ROOT}/test/test_toy.py
       unlisted_test_mode: skip
       tests:
-        # rules: no unsupported dtype, op, feature or restriction found
+        # profile hooks: needs autograd, which the backend profile does not hook (autograd: no)
         - names: ["TestToy::test_body"]
-          mode: mandatory_success
-          reason: "no unsupported dtype, op, feature or restriction found"
+          mode: skip
+          reason: "needs autograd, which the backend profile does not hook (autograd: no)"
         # rules: no unsupported dtype, op, feature or restriction found
         - names: ["TestToy::test_dtypes"]
           mode: mandatory_success
           reason: "no unsupported dtype, op, feature or restriction found"
-        # rules: no unsupported dtype, op, feature or restriction found
-        - names: ["TestToy::test_gone"]
-          mode: mandatory_success
-          reason: "no unsupported dtype, op, feature or restriction found"
+        # capabilities: dtypes: dtype float64 is not in the profile's compute dtypes of ring
+        - names: ["TestToy::test_dtypes"]
+          mode: skip
+          reason: "dtype float64 is not in the profile's compute dtypes of ring"
+          only: {dtypes: [float64]}
         # rules: no unsupported dtype, op, feature or restriction found
         - names: ["TestToy::test_keep"]
           mode: mandatory_success
@@ -25,3 +26,7 @@
           mode: xfail_strict
           reason: "1 of 1 float32 cases failed on the CPU reference run"
           only: {dtypes: [float32]}
+        # rules: no unsupported dtype, op, feature or restriction found
+        - names: ["TestToy::test_new"]
+          mode: mandatory_success
+          reason: "no unsupported dtype, op, feature or restriction found"
"""
PROFILE = """
device: ring
hooks: {eager_ops: yes, autograd: no}
dtypes: [float16, bfloat16, float32]
"""


def _tree(root: Path, toy: str, other: str) -> Path:
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_toy.py").write_text(HEAD + toy + TAIL)
    (root / "test" / "test_other.py").write_text(other)
    return root


@pytest.fixture
def trees(tmp_path: Path) -> dict[str, Path]:
    """OLD and NEW: one test added, one removed, one body edited, one's dtypes changed, test_other.py broken."""
    old = _tree(tmp_path / "old", KEEP + GONE + BODY_OLD + DTYPES_OLD, OTHER)
    new = _tree(tmp_path / "new", KEEP + BODY_NEW + DTYPES_NEW + ADDED, OTHER + "\n    def broken(:\n")
    profile = tmp_path / "backend.yaml"
    profile.write_text(PROFILE)
    store = tmp_path / "old.sqlite"
    index = Store.open(store)
    index_tree(old, index)
    evidence.ensure(index)
    for test, outcome in (("test_keep", "failed"), ("test_gone", "passed"), ("test_body", "passed")):
        suffix = "_cpu_float32" if test != "test_body" else "_cpu"
        case = f"test_toy.py::TestToyCPU::{test}{suffix}"
        evidence.record(index, evidence.Case(case, f"test_toy.py::TestToy::{test}", outcome, 0.1))
    index.commit()
    index.close()
    return {"old": old, "new": new, "profile": profile, "store": store, "dir": tmp_path / "upgrade"}


def _args(trees: dict[str, Path], *extra: str) -> list[str]:
    return [
        "upgrade",
        "--from",
        str(trees["old"]),
        "--to",
        str(trees["new"]),
        "--profile",
        str(trees["profile"]),
        "--store",
        str(trees["store"]),
        "--store-dir",
        str(trees["dir"]),
        *extra,
    ]


def test_tree_move_counts_and_diff(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(trees, "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tests"] == {
        "added": ["test_toy.py::TestToy::test_new"],
        "removed": ["test_toy.py::TestToy::test_gone"],
        "modified": ["test_toy.py::TestToy::test_body", "test_toy.py::TestToy::test_dtypes"],
        "unchanged": 1,
    }
    assert report["stale_cases"] == 2  # test_gone's and test_body's; test_keep's failure is carried over
    assert report["skipped"] == ["test_other.py:9: syntax error: invalid syntax"]
    assert report["tests_reevaluated"] == 3  # added and modified only
    assert report["tests_total"] == 5  # test_toy's 4 and test_other's, kept from OLD
    assert report["files_changed"] == ["test_toy.py"]
    assert "\n".join(report["diff"]) + "\n" == EXPECTED_DIFF
    assert report["diff_lines"] == {"added": 12, "removed": 7}
    assert report["entries"] == {"before": 6, "after": 7}


def test_tree_move_text_and_out(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = trees["dir"] / "configs"
    assert main(_args(trees, "--out", str(out))) == 0
    shown = capsys.readouterr()
    assert shown.err == "skipped: test_other.py:9: syntax error: invalid syntax\n"
    lines = shown.out.splitlines()
    assert lines[1:7] == [
        "tests: 3 of 4 in NEW added or modified (1 added, 2 modified), 1 of 4 in OLD removed, 1 unchanged; "
        "stale recorded cases: 2",
        "  added: test_toy.py::TestToy::test_new",
        "  removed: test_toy.py::TestToy::test_gone",
        "  modified: test_toy.py::TestToy::test_body, test_toy.py::TestToy::test_dtypes",
        "tests re-evaluated: 3 of 5 in the files in scope",
        "configs: 1 files differ (test_toy.py); entries 6 -> 7; diff +12 -7 lines",
    ]
    written = sorted(p.name for p in out.iterdir())
    assert written == ["test_other.yaml", "test_toy.yaml"]
    toy = (out / "test_toy.yaml").read_text()
    assert "TestToy::test_new" in toy
    assert "TestToy::test_gone" not in toy
    assert 'reason: "1 of 1 float32 cases failed on the CPU reference run"' in toy  # test_keep's evidence kept


def test_same_tree_twice_is_an_empty_delta(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    trees["new"] = trees["old"]
    assert main(_args(trees, "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tests"] == {"added": [], "removed": [], "modified": [], "unchanged": 5}
    assert (report["tests_reevaluated"], report["diff"], report["stale_cases"]) == (0, [], 0)


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


def test_bad_from_and_to(trees: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not an interpreter\n")
    bare = tmp_path / "bare"
    bare.mkdir()
    cases = {
        str(tmp_path / "nowhere"): "no such file or folder",
        str(text): "not executable",
        str(bare): "a folder without test/",
    }
    for value, message in cases.items():
        trees["old"] = Path(value)
        assert main(_args(trees)) == 2
        line = _error(capsys)
        assert line.startswith(f"error: --from {value}: ")
        assert message in line
    python = Path(sys.executable)
    trees["old"], trees["new"] = trees["new"], python
    assert main(_args(trees)) == 2
    assert _error(capsys) == "error: --from is a tree but --to is a python: compare two trees or two interpreters"


def test_an_executable_that_is_not_python(tmp_path: Path, trees: dict[str, Path], capsys) -> None:
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\necho '{\"format\": 1}'\n")
    script.chmod(0o755)
    trees["old"] = trees["new"] = script
    assert main([*_args(trees), "--torch-root", str(trees["new"].parent)]) == 2
    assert "--torch-root" in _error(capsys)
    assert main([*_args(trees), "--torch-root", str(tmp_path / "old")]) == 2
    assert _error(capsys) == f"error: {script}: the dump is not a testselect-core-dump/1 object (field format)"


def test_fuzzed_new_trees_never_raise(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Random cuts and byte flips of NEW's file: the move is reported (or the file skipped), never a traceback."""
    source = (trees["new"] / "test" / "test_toy.py").read_bytes()
    rng = random.Random(11)
    for _ in range(12):
        cut = bytearray(source[: rng.randrange(len(source))])
        for _ in range(rng.randrange(4)):
            if cut:
                cut[rng.randrange(len(cut))] = rng.randrange(256)
        (trees["new"] / "test" / "test_toy.py").write_bytes(bytes(cut))
        assert main(_args(trees, "--json")) == 0
        report = json.loads(capsys.readouterr().out)
        toy = [line for line in report["skipped"] if line.startswith("test_toy.py:")]
        named = [n for key in ("added", "removed", "modified") for n in report["tests"][key]]
        if toy:  # skipped: none of its tests is claimed added, removed or modified
            assert not any(n.startswith("test_toy.py::") for n in named)
        else:
            assert (
                report["tests"]["unchanged"] + len(report["tests"]["modified"]) + len(report["tests"]["removed"]) == 4
            )  # each of OLD's 4 test_toy tests is unchanged, modified or removed
