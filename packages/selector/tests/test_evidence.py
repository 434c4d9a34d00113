"""Op evidence end to end: the plugin's ops on a tiny file and on embedded cases, a crash kept per case, resume,
the reverse-index queries, and bad input as one `error:` line."""

from __future__ import annotations

import functools
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from testselect.cli import main
from testselect.evidence import run as evidence_run

TESTSELECT = Path(sys.executable).with_name("testselect")  # the console script of this environment

TINY = """
import os
import pathlib
import signal
import time

import torch
from torch.testing._internal.common_utils import TestCase, run_tests


class TestTiny(TestCase):
    def test_add(self):
        self.assertEqual(torch.add(torch.ones(2), torch.ones(2)).sum().item(), 4.0)

    def test_mm(self):
        torch.mm(torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64))

    def test_zcrash(self):
        mark = pathlib.Path(os.environ["TINY_MARK"])  # abort, or interrupt the driver, only the first time
        if not mark.exists():
            mark.touch()
            if os.environ.get("TINY_INTERRUPT"):
                os.kill(os.getppid(), signal.SIGINT)
                time.sleep(30)
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
        "recorder": "eager",
    }
    again = _evidence(tiny, store)  # everything recorded: nothing reruns
    assert (again["observed"], again["already_recorded"]) == ({}, 4)
    assert (tmp_path / "ran").read_text() == "test_zmul\n"


def test_reverse_index_and_edit_reobserves(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mark").touch()  # no crash this time
    store = tmp_path / "index.sqlite"
    assert _evidence(tiny, store, "--shards", "2")["observed"] == {"passed": 4}
    argv = ["tests", "--op", "aten::mul.Tensor", "--dtype", "float64", "--store", str(store), "--json"]
    assert main(argv) == 0
    found = json.loads(capsys.readouterr().out)
    assert [c["node_id"] for c in found["cases"]] == ["test_tiny.py::TestTiny::test_zmul"]
    assert main([*argv[:3], "--store", str(store)]) == 0
    assert capsys.readouterr().out.split() == ["1", "test_tiny.py::TestTiny::test_zmul", "passed"]
    assert main(["tests", "--op", "aten::mm", "--dtype", "bool", "--store", str(store)]) == 1  # nothing: exit 1
    source = tiny / "test" / "test_tiny.py"
    source.write_text(source.read_text().replace("* 2.0", "* 3.0"), encoding="utf-8")
    again = _evidence(tiny, store)  # only the edited test reruns
    assert (again["observed"], again["already_recorded"]) == ({"passed": 1}, 3)
    assert (tmp_path / "ran").read_text() == "test_zmul\ntest_zmul\n"


def test_embedded_view_ops_cases(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "index.sqlite"
    report = _evidence(tree, store, "--files", "test_view_ops.py")
    assert report["observed"]["passed"] > 200
    ops = _ops(store, "test_view_ops.py::TestViewOpsCPU::test_view_as_real_cpu_complex64", capsys)
    assert ops["aten::view_as_real"]["dtypes"] == ["complex64"]
    assert main(["ops", "--test", "test_view_ops.py::TestViewOps::test_view_as_real", "--store", str(store)]) == 0
    shown = capsys.readouterr().out  # the generic test: both its cases
    assert "TestViewOpsCPU::test_view_as_real_cpu_complex128" in shown
    assert "TestViewOpsCPU::test_view_as_real_cpu_complex64" in shown


def test_long_run_says_how_far_it_got(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(evidence_run, "PROGRESS_SECONDS", 0.0)  # a line at every poll
    assert main(["evidence", "--torch-root", str(tiny), "--store", str(tmp_path / "index.sqlite")]) == 0
    out, err = capsys.readouterr()
    counts = [
        int(n)
        for n in re.findall(r"^progress: (\d+) cases observed by this run \(shard 0: \d+ in attempt \d\)", err, re.M)
    ]
    assert counts
    assert counts == sorted(counts)
    assert counts[-1] <= 4
    assert "progress:" not in out
    assert out.startswith("cases: 4 observed")


def test_interrupted_run_resumes(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_INTERRUPT", "1")  # test_zcrash sends SIGINT to the driver, its parent
    store = tmp_path / "index.sqlite"
    argv = [TESTSELECT, "evidence", "--torch-root", str(tiny), "--store", str(store)]
    # the driver gets SIGINT's default action whatever this process inherited (a shell's background job ignores it)
    default_sigint = functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL)
    first = subprocess.run(argv, capture_output=True, text=True, check=False, preexec_fn=default_sigint)
    assert (first.returncode, first.stderr.strip()) == (2, "error: interrupted")
    second = _evidence(tiny, store)
    assert (second["already_recorded"], second["observed"]) == (2, {"passed": 2})  # add and mm not rerun


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evidence", "--torch-root", "{tmp}/nowhere"], "error: --torch-root {tmp}/nowhere: not a directory"),
        (["evidence", "--torch-root", "{tmp}"], "error: {tmp}: no test/ folder"),
        (["evidence", "--torch-root", "{tiny}", "--shards", "0"], "error: --shards 0: must be at least 1"),
        (["evidence", "--torch-root", "{tiny}", "--store", "{tiny}/test/test_tiny.py"], "error: {tiny}/test/"),
        (["evidence", "--torch-root", "{tiny}", "--store", "{tmp}/s", "--files", "x*.py"], "error: --files x*.py"),
        (["ops", "--test", "x.py::T::t", "--store", "{tmp}/none.sqlite"], "error: {tmp}/none.sqlite: no index here"),
        (["tests", "--op", "aten::mm", "--store", "{tiny}/test/test_tiny.py"], "error: {tiny}/test/test_tiny.py"),
    ],
)
def test_bad_input_one_error_line(
    argv: list[str], message: str, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill = {"tmp": str(tmp_path), "tiny": str(tiny)}
    assert main([arg.format(**fill) for arg in argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(message.format(**fill))
    assert len([line for line in err if line.startswith("error:")]) == 1


def test_ops_unknown_case(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "index.sqlite"
    assert main(["index", "--torch-root", str(tiny), "--store", str(store)]) == 0
    assert main(["ops", "--test", "test_tiny.py::TestTiny::test_add", "--store", str(store)]) == 2
    assert capsys.readouterr().err.startswith("error: --test test_tiny.py::TestTiny::test_add: no recorded case")


COMPILED = """
import torch
from torch.testing._internal.common_utils import TestCase, run_tests


class TestCompiled(TestCase):
    def test_gelu_compiled(self):
        f = torch.compile(lambda x: torch.nn.functional.gelu(x) + 1)
        x = torch.randn(4, 8)
        self.assertEqual(f(x), torch.nn.functional.gelu(x) + 1)

    def test_gelu_eager(self):
        torch.nn.functional.gelu(torch.randn(4, 8))


if __name__ == "__main__":
    run_tests()
"""


def test_compiled_test_records_its_graph_ops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A test that compiles records the decomposed ops of Inductor's graph (gelu's erf, not aten::gelu); one that
    does not keeps the eager recorder."""
    root = tmp_path / "comp"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_comp.py").write_text(COMPILED, encoding="utf-8")
    store = tmp_path / "s.sqlite"
    report = _evidence(root, store, "--timeout", "0")
    assert report["observed"] == {"passed": 2}
    assert main(["ops", "--test", "test_comp.py::TestCompiled::test_gelu_compiled", "--store", str(store)]) == 0
    assert "(compiled graphs)" in capsys.readouterr().out
    compiled = _ops(store, "test_comp.py::TestCompiled::test_gelu_compiled", capsys)
    assert "aten::erf" in compiled
    assert "aten::gelu" not in compiled
    assert compiled["aten::erf"]["dtypes"] == ["float32"]
    eager = _ops(store, "test_comp.py::TestCompiled::test_gelu_eager", capsys)
    assert "aten::gelu" in eager
    assert "aten::erf" not in eager
