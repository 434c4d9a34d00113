"""Crash isolation end to end: real runtime skips, xfails, setup errors, a segfault and a hang, run through pytester
under each isolation mode; pytest's own reporters (JUnit, `-r`, xdist, `--lf`) must take the reports as they come."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

BACKENDS = Path(__file__).resolve().parent / "backends"
TIMEOUT = "3"

UPSTREAM = """\
import os
import signal
import time

import torch
from torch.testing._internal.common_utils import TestCase


def _log(line):
    with open(os.environ["ISO_LOG"], "a") as log:
        log.write(f"{os.getpid()} {line}\\n")


class TestLife(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        _log("setUpClass")

    @classmethod
    def tearDownClass(cls):
        _log("tearDownClass")
        super().tearDownClass()

    def test_a_passes(self):
        _log("a")
        self.assertEqual(torch.ones(2).sum().item(), 2)

    def test_b_fails(self):
        _log("b")
        value = torch.ones(2).sum().item()
        self.assertEqual(value, 3)  # b raises here

    def test_c_segfaults(self):
        _log("c")
        if os.fork() == 0:  # a process holding the worker's pipes past its death, as a DataLoader worker would
            time.sleep(10)
            os._exit(0)
        os.kill(os.getpid(), signal.SIGSEGV)

    def test_d_after_crash(self):
        _log("d")

    def test_e_hangs(self):
        _log("e")
        time.sleep(600)

    def test_f_after_hang(self):
        _log("f")


class TestBuckets(TestCase):
    def test_skips_itself(self):
        self.skipTest("needs a bigger device")

    def test_xfails(self):
        raise ValueError("bad value\\nsecond line")  # xfails raises here

    def test_mandatory_skips(self):
        self.skipTest("not today")


class TestSubtests(TestCase):
    def test_s1_first(self):
        pass

    def test_s2_subtests(self):
        for n in range(2):
            with self.subTest(n=n):
                self.assertEqual(n, n)


class TestBrokenSetup(TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("no device context")  # setUpClass raises here

    def test_never_reached(self):
        pass
"""

CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_iso.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [TestBuckets::test_skips_itself, TestBuckets::test_xfails]
          mode: xfail
          reason: known broken on this device
"""

EXPECTED = {
    "test_a_passes": "passed",
    "test_b_fails": "failed",
    "test_c_segfaults": "crashed",
    "test_d_after_crash": "passed",
    "test_e_hangs": "timeout",
    "test_f_after_hang": "passed",
    "test_skips_itself": "skipped",  # a runtime skip inside the xfail bucket: the report JUnit used to refuse
    "test_xfails": "xfailed",
    "test_mandatory_skips": "failed",
    "test_never_reached": "error",
    "test_s1_first": "passed",
    "test_s2_subtests": "passed",
}
BUCKETS = ("test_skips_itself", "test_xfails", "test_mandatory_skips")


def line_of(marker: str) -> int:
    return next(n for n, line in enumerate(UPSTREAM.splitlines(), 1) if marker in line)


@pytest.fixture
def iso(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """An upstream tree holding test_iso.py and a runner returning (result, records by test, class-log lines)."""
    root = tmp_path / "torch_root"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_iso.py").write_text(UPSTREAM)
    config = pytester.path / "iso.yaml"
    config.write_text(CONFIG)
    log = tmp_path / "log.txt"
    monkeypatch.setenv("ISO_LOG", str(log))
    extensions = os.environ.get("TORCH_EXTENSIONS_DIR") or str(Path.home() / ".cache" / "torch_extensions")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", extensions)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))

    def run(*extra: str) -> tuple[pytest.RunResult, dict[str, dict], list[str]]:
        results = pytester.path / "results.jsonl"
        results.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
        args = ["--rootdir", str(pytester.path), "--testreuse-config", str(config), "--torch-root", str(root)]
        args += ["--testreuse-backend"]
        args += ["fallback_backend:load", "--testreuse-results", str(results), "--testreuse-timeout", TIMEOUT, *extra]
        result = pytester.runpytest_subprocess(*args, timeout=300)
        lines = results.read_text().splitlines() if results.exists() else []
        records = {r["nodeid"].rsplit("::", 1)[1]: r for r in map(json.loads, lines)}
        return result, records, log.read_text().splitlines() if log.exists() else []

    run.junit = pytester.path / "junit.xml"
    return run


def outcomes(records: dict[str, dict]) -> dict[str, str]:
    return {name: r["outcome"] for name, r in records.items()}


def life_by_process(log: list[str]) -> list[list[str]]:
    """TestLife's events grouped by the process they happened in, in order."""
    by_pid: dict[str, list[str]] = defaultdict(list)
    for line in log:
        pid, event = line.split()
        by_pid[pid].append(event)
    return list(by_pid.values())


def junit_cases(path: Path) -> dict[str, tuple[str, str]]:
    """Per test name: the JUnit element that says how it ended, and its message."""
    cases = {}
    for case in ET.parse(path).iter("testcase"):
        ending = [e for e in case if e.tag in ("failure", "error", "skipped")]
        cases[case.get("name")] = (ending[0].tag, ending[0].get("message", "")) if ending else ("passed", "")
    return cases


def test_worker_reports_reach_junit_and_summaries_and_node_ids_rerun(iso) -> None:
    """One worker per class until a crash or hang kills it: setUpClass runs once per worker and tearDownClass after
    the class's last test; the successor sets the class up again; the parent never runs a test itself."""
    result, records, log = iso("-rA", f"--junitxml={iso.junit}")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert outcomes(records) == EXPECTED
    junit = junit_cases(iso.junit)
    assert set(junit) == set(EXPECTED), "every test is in the JUnit report"
    assert junit["test_skips_itself"] == ("skipped", "needs a bigger device")
    assert junit["test_xfails"][0] == "skipped"
    assert junit["test_xfails"][1].startswith("known broken on this device [")
    assert junit["test_c_segfaults"] == ("failure", "test process killed by SIGSEGV")
    assert junit["test_e_hangs"][0] == "failure"
    assert junit["test_never_reached"][0] == "error"
    assert junit["test_a_passes"] == ("passed", "")
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED [[]1[]] *test_iso.py:*: needs a bigger device",
            "XFAIL test/test_iso.py::TestBuckets::test_xfails - known broken on this device*",
            "FAILED test/test_iso.py::TestLife::test_c_segfaults - test process killed*",  # (cut to the width)
            "FAILED test/test_iso.py::TestLife::test_e_hangs - test exceeded the*",
            "ERROR test/test_iso.py::TestBrokenSetup::test_never_reached - RuntimeError*",
        ]
    )
    assert life_by_process(log) == [
        ["setUpClass", "a", "b", "c"],
        ["setUpClass", "d", "e"],
        ["setUpClass", "f", "tearDownClass"],
    ]

    nodeid = records["test_b_fails"]["nodeid"]
    assert nodeid == "test/test_iso.py::TestLife::test_b_fails"
    result, again, _ = iso(nodeid, "test/test_iso.py::TestBuckets")
    assert outcomes(again) == {k: EXPECTED[k] for k in ("test_b_fails", *BUCKETS)}
    result, last_failed, _ = iso("--lf")  # the first run's failures, from pytest's cache
    failures = {k: v for k, v in EXPECTED.items() if v in ("failed", "crashed", "timeout", "error")}
    assert outcomes(last_failed) == failures
    result.stdout.fnmatch_lines(["*run-last-failure: rerun previous 5 failures*"])


def test_the_record_carries_the_failure_the_same_without_isolation_and_with_a_fork_per_test(iso) -> None:
    _, forked, log = iso("--testreuse-isolation", "fork")
    assert outcomes(forked) == EXPECTED
    torn_down = [["setUpClass", name, *(["tearDownClass"] if name not in "ce" else [])] for name in "abcdef"]
    assert life_by_process(log) == torn_down, "a fresh fork per test: the class set up (and torn down) each time"
    failed = forked["test_b_fails"]["failure"]
    assert (failed["type"], failed["message"], failed["when"]) == ("AssertionError", "Scalars are not close!", "call")
    assert failed["test_at"] == f"test/test_iso.py:{line_of('# b raises here')}"
    assert failed["raised_at"].startswith("torch/testing/")
    xfailed = forked["test_xfails"]["failure"]
    assert (xfailed["type"], xfailed["message"]) == ("ValueError", "bad value")
    assert xfailed["raised_at"] == xfailed["test_at"] == f"test/test_iso.py:{line_of('# xfails raises here')}"
    setup = forked["test_never_reached"]["failure"]
    assert (setup["type"], setup["message"], setup["when"]) == ("RuntimeError", "no device context", "setup")
    assert setup["test_at"] == f"test/test_iso.py:{line_of('# setUpClass raises here')}"
    assert forked["test_mandatory_skips"]["failure"]["message"].startswith("not today")
    assert forked["test_c_segfaults"]["signal"] == "SIGSEGV"
    assert forked["test_c_segfaults"]["failure"] == {"message": "test process killed by SIGSEGV"}
    assert forked["test_e_hangs"]["timeout"] == TIMEOUT

    _, here, _ = iso("-k", "not segfaults and not hangs", "--testreuse-isolation", "none")
    assert outcomes(here) == {k: v for k, v in EXPECTED.items() if k not in ("test_c_segfaults", "test_e_hangs")}
    assert {k: r.get("failure") for k, r in here.items()} == {k: forked[k].get("failure") for k in here}


def test_under_xdist_every_report_reaches_junit(iso) -> None:
    result, records, _ = iso("-n", "2", f"--junitxml={iso.junit}")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert outcomes(records) == EXPECTED
    junit = junit_cases(iso.junit)
    assert set(junit) == set(EXPECTED)
    assert junit["test_skips_itself"] == ("skipped", "needs a bigger device")


def test_subtests_of_a_forked_worker_s_second_test_are_logged_by_the_parent(iso) -> None:
    """The parent logs each subtest's report, with the item it runs: the child's inherited xdist plugin would send it
    with the index of the item the fork started at, and xdist fails the test on that."""
    result, records, _ = iso("-n", "1", "-k", "TestSubtests")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert outcomes(records) == {"test_s1_first": "passed", "test_s2_subtests": "passed"}


def test_an_unwritable_results_path_is_a_one_line_usage_error(iso, pytester: pytest.Pytester) -> None:
    (pytester.path / "a_directory").mkdir()
    result, _, _ = iso("--testreuse-results", str(pytester.path / "a_directory"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output
    result.stderr.fnmatch_lines([f"ERROR: --testreuse-results: cannot write {pytester.path / 'a_directory'}: *"])


def test_a_folder_argument_runs_each_upstream_test_once_under_its_config(iso, tmp_path: Path) -> None:
    """`pytest --torch-root R R/test` from another folder: the folder names its upstream files, which pytest would
    otherwise collect a second time as plain modules that no config decides."""
    result, records, _ = iso(str(tmp_path / "torch_root" / "test"))
    assert outcomes(records) == EXPECTED
    assert all("mode" in record for record in records.values()), "every case was decided by the config"
    counted = result.parseoutcomes()
    assert sum(counted.get(k, 0) for k in ("passed", "failed", "skipped", "xfailed", "errors")) == len(EXPECTED)
