"""Op evidence end to end: the plugin's ops on a tiny file and on embedded cases, a crash kept per case, resume,
the reverse-index queries, and bad input as one `error:` line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testselect.cli import main

TESTSELECT = Path(sys.executable).with_name("testselect")  # the console script of this environment

TINY = """
import os
import pathlib

import torch
from torch.testing._internal.common_utils import TestCase, run_tests


class TestTiny(TestCase):
    def test_add(self):
        self.assertEqual(torch.add(torch.ones(2), torch.ones(2)).sum().item(), 4.0)

    def test_mm(self):
        torch.mm(torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64))

    def test_zcrash(self):
        if not pathlib.Path(os.environ["TINY_MARK"]).exists():
            os.abort()

    def test_zmul(self):
        torch.ones(3, dtype=torch.float64) * 2.0
        pathlib.Path(os.environ["TINY_RAN"]).open("a").write("test_zmul\\n")


if __name__ == "__main__":
    run_tests()
"""


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A torch root with one small test file: add, mm (float64), a case that aborts, mul (float64)."""
    root = tmp_path / "tiny"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_tiny.py").write_text(TINY, encoding="utf-8")
    monkeypatch.setenv("TINY_MARK", str(tmp_path / "mark"))
    monkeypatch.setenv("TINY_RAN", str(tmp_path / "ran"))
    return root


def _evidence(root: Path, store: Path, *extra: str) -> dict:
    argv = ["evidence", "--torch-root", str(root), "--store", str(store), "--json", *extra]
    done = subprocess.run([TESTSELECT, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _ops(store: Path, node: str, capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    assert main(["ops", "--test", node, "--store", str(store), "--json"]) == 0
    [case] = json.loads(capsys.readouterr().out)
    return {op["op"]: op for op in case["ops"]}


def test_crash_kept_per_case_and_resume(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "index.sqlite"
    report = _evidence(tiny, store)
    assert report["observed"] == {"crashed": 1, "passed": 3}
    assert report["launches"] == 2  # the shard was restarted without the aborting case
    ops = _ops(store, "test_tiny.py::TestTiny::test_add", capsys)
    assert ops["aten::add.Tensor"]["dtypes"] == ["float32"]
    assert _ops(store, "test_tiny.py::TestTiny::test_mm", capsys)["aten::mm"]["dtypes"] == ["float64"]
    assert main(["ops", "--test", "test_tiny.py::TestTiny::test_zcrash", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0] == {
        "duration": 0.0,
        "node_id": "test_tiny.py::TestTiny::test_zcrash",
        "ops": [],
        "outcome": "crashed",
    }
    again = _evidence(tiny, store)  # everything recorded: nothing reruns
    assert (again["observed"], again["already_recorded"]) == ({}, 4)
    assert (tmp_path / "ran").read_text() == "test_zmul\n"
