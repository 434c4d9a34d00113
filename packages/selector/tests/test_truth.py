"""`testselect truth`: bad input as one `error:` line, the split by case count, and on the ring device a process
that dies inside a case (recorded crashed, the shard relaunched without it) and a killed run resumed without running
any case twice."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import toytree
from testselect.cli import main
from testselect.truth.cases import split_cases

TESTSELECT = Path(sys.executable).with_name("testselect")  # the console script of this environment
HAVE_RING = importlib.util.find_spec("ringsim") is not None and importlib.util.find_spec("testreuse") is not None
needs_ring = pytest.mark.skipif(not HAVE_RING, reason="needs testreuse and ringsim (the ring device)")

HEADER = """
import os
import pathlib
import signal
import time

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


def ran(name):
    with pathlib.Path(os.environ["TINY_RAN"]).open("a") as stream:
        stream.write(name + "\\n")
"""

CRASHING = (
    HEADER
    + """

class TestTiny(TestCase):
    @dtypes(torch.float32, torch.float16)
    def test_add(self, device, dtype):
        torch.ones(2, device=device, dtype=dtype).add(1)
        ran(f"test_add {dtype}")

    def test_abort(self, device):
        ran("test_abort")
        os.abort()  # kills testreuse's forked worker: testreuse records it

    def test_kill_shard(self, device):
        ran("test_kill_shard")
        os.kill(os.getppid(), signal.SIGKILL)  # kills the shard's pytest process itself: the driver records it

    def test_zmul(self, device):
        torch.ones(3, device=device).mul(2)
        ran("test_zmul")


instantiate_device_type_tests(TestTiny, globals())

if __name__ == "__main__":
    run_tests()
"""
)

SLOW = (
    HEADER
    + """

class TestTiny(TestCase):
    def test_a(self, device):
        ran("test_a")

    def test_b(self, device):
        ran("test_b")

    def test_slow(self, device):
        mark = pathlib.Path(os.environ["TINY_MARK"])
        if not mark.exists():  # the first run is killed while this sleeps
            mark.touch()
            time.sleep(120)
        ran("test_slow")

    def test_z(self, device):
        ran("test_z")


instantiate_device_type_tests(TestTiny, globals())

if __name__ == "__main__":
    run_tests()
"""
)


def _tree(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "torch"
    toytree.write(root / "test" / "test_tiny.py", source)
    monkeypatch.setenv("TINY_RAN", str(tmp_path / "ran"))
    monkeypatch.setenv("TINY_MARK", str(tmp_path / "mark"))
    return root


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((out / "results").glob("run-*.jsonl")) for line in path.open()]


def _truth(root: Path, out: Path, *extra: str) -> list[str]:
    return ["truth", "--torch-root", str(root), "--device", "ring", "--out", str(out), "--timeout", "60", *extra]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--torch-root", "{tmp}/nowhere"], "error: --torch-root {tmp}/nowhere: not a directory"),
        (["--torch-root", "{tmp}"], "error: {tmp}: no test/ folder"),
        (["--torch-root", "{root}", "--files", "x*.py"], "error: --files x*.py: no test file under {root}/test"),
        (["--torch-root", "{root}", "--shards", "0"], "error: --shards 0: must be at least 1"),
        (["--torch-root", "{root}", "--timeout", "0"], "error: --timeout 0.0: must be more than 0"),
        (["--torch-root", "{root}", "--out", "{root}/test/test_x.py"], "error: --out {root}/test/test_x.py: not a dir"),
        (["--torch-root", "{root}", "--out", "{tmp}/held"], "error: --out {tmp}/held: holds the truth of other on /t"),
    ],
)
def test_bad_input_one_error_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "root"
    toytree.write(root / "test" / "test_x.py", "def test_x():\n    pass\n")
    toytree.write(tmp_path / "held" / "truth.json", json.dumps({"device": "other", "torch_root": "/t"}))
    fill = {"tmp": str(tmp_path), "root": str(root)}
    args = ["truth", "--device", "ring", *argv]
    if "--out" not in argv:
        args += ["--out", str(tmp_path / "out")]
    assert main([arg.format(**fill) for arg in args]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(message.format(**fill))
    assert len([line for line in err if line.startswith("error:")]) == 1
    assert not any("Traceback" in line for line in err)


def test_split_by_case_count_contiguous() -> None:
    cases = [f"test/a.py::T::test_{i:04d}" for i in range(9519)] + ["test/b.py::T::test_x"]
    chunks = split_cases(cases, 3)
    assert [len(c) for c in chunks] == [3174, 3173, 3173]  # one big file spread over every shard
    assert [n for chunk in chunks for n in chunk] == cases
    assert split_cases(cases[:2], 4) == [[cases[0]], [cases[1]]]  # no empty shard
    assert split_cases([], 2) == []


@needs_ring
def test_device_mismatch_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path, CRASHING, monkeypatch)
    argv = _truth(root, tmp_path / "out")
    argv[argv.index("ring")] = "nosuch"
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "error: collection on nosuch: pytest exited 4: the registered privateuse1 backend is 'ring', not 'nosuch'"
    ]


@needs_ring
def test_crash_recorded_and_the_others_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An abort kills testreuse's worker (testreuse records it); a SIGKILL of the shard's own pytest process is
    recorded by the driver, which relaunches the shard without that case; no case runs twice, a rerun runs none."""
    root = _tree(tmp_path, CRASHING, monkeypatch)
    out = tmp_path / "out"
    assert main(_truth(root, out, "--shards", "1")) == 0
    shown = capsys.readouterr().out
    assert "collected 5 cases in 1 files on ring" in shown
    assert (
        "test/test_tiny.py::TestTinyRING::test_kill_shard_ring: the pytest process of shard 0 killed by SIGKILL"
        in shown
    )
    assert "progress: 5/5 cases (shard 0: 5/5)" in shown
    assert "truth: 5 cases of 1 files on ring, 5 recorded (3 passed, 2 crashed); 5 by this run, 0 before;" in shown
    assert f"--truth {out}/results/run-*.jsonl" in shown
    records = {r["nodeid"].rsplit("::", 1)[1]: r for r in _records(out)}
    assert {name: r["outcome"] for name, r in records.items()} == {
        "test_abort_ring": "crashed",
        "test_add_ring_float16": "passed",
        "test_add_ring_float32": "passed",
        "test_kill_shard_ring": "crashed",
        "test_zmul_ring": "passed",
    }
    assert records["test_abort_ring"]["signal"] == "SIGABRT"
    killed = records["test_kill_shard_ring"]
    assert (killed["signal"], killed["generic"], killed["mode"]) == (
        "SIGKILL",
        "TestTiny::test_kill_shard",
        "mandatory_success",
    )
    assert sorted((out / "logs").glob("run-1-shard-*.log")) == [out / "logs" / f"run-1-shard-0-{a}.log" for a in (0, 1)]
    ran = Counter((tmp_path / "ran").read_text().splitlines())
    assert len(ran) == 5
    assert set(ran.values()) == {1}  # no case ran twice
    assert (out / "configs" / "test_tiny.yaml").read_text().splitlines()[-1].strip() == (
        "unlisted_test_mode: mandatory_success"
    )
    assert main(_truth(root, out, "--shards", "1")) == 0  # everything recorded: nothing runs
    assert "5 recorded (3 passed, 2 crashed); 0 by this run, 5 before; 0 without a record" in capsys.readouterr().out
    assert len((tmp_path / "ran").read_text().splitlines()) == 5


@needs_ring
def test_killed_run_resumes_without_rerunning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM while a case runs: the driver stops its shards and says how to resume; the rerun runs only the cases
    without a record, split over two shards."""
    root = _tree(tmp_path, SLOW, monkeypatch)
    out = tmp_path / "out"
    argv = [str(TESTSELECT), *_truth(root, out, "--shards", "1")]
    driver = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (tmp_path / "mark").exists() and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 2
    assert err.splitlines() == ["error: interrupted", f"hint: rerun with --out {out}: only cases without a record run"]
    assert (tmp_path / "ran").read_text().splitlines() == ["test_a", "test_b"]
    again = subprocess.run([*argv[:-2], "--shards", "2"], capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert "2 already recorded; 2 to run in 2 shards (1, 1)" in again.stdout
    assert "4 recorded (4 passed); 2 by this run, 2 before; 0 without a record" in again.stdout
    ran = (tmp_path / "ran").read_text().splitlines()
    assert sorted(ran) == ["test_a", "test_b", "test_slow", "test_z"]  # each once: none ran twice
    assert sorted(Counter(r["nodeid"] for r in _records(out)).values()) == [1, 1, 1, 1]
    assert sorted(p.name for p in (out / "results").glob("*.jsonl")) == [
        "run-1-shard-0-0.jsonl",
        "run-2-shard-0-0.jsonl",
        "run-2-shard-1-0.jsonl",
    ]
