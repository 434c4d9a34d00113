"""End to end: the plugin collects an upstream-style file from a tree it never writes to, on the fallback device."""

from __future__ import annotations

import hashlib
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

BACKENDS = Path(__file__).resolve().parent / "backends"
BACKEND = "fallback_backend:load"
DEVICE = "fallbackdev"

UPSTREAM = """
import os
import time

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, run_tests

_OPS = [op for op in op_db if op.name in ("add", "mul", "sin")]
_MODULES = [info for info in module_db if info.name in ("nn.Linear", "nn.ReLU")]


def _ran(name):
    open(os.path.join(os.environ["E2E_RAN_DIR"], name), "w").close()


class TestOutcomes(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_fill(self, device, dtype):
        x = torch.zeros(4, device=device, dtype=dtype).fill_(2)
        self.assertEqual(x.cpu(), torch.full((4,), 2, dtype=dtype))

    def test_passes(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)

    def test_fails(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 3)

    def test_strict_passes(self, device):
        self.assertTrue(True)

    def test_never_run(self, device):
        _ran("never_run")

    def test_aborts(self, device):
        os.abort()

    def test_hangs(self, device):
        time.sleep(600)

    def test_skips_itself(self, device):
        print("probing the device for its feature")
        self.skipTest("not on this device")

    def test_new_upstream(self, device):
        self.assertEqual(torch.arange(3, device=device).cpu().tolist(), [0, 1, 2])

    @ops(_OPS)
    def test_op(self, device, dtype, op):
        sample = next(iter(op.sample_inputs(device, dtype)))
        op(sample.input, *sample.args, **sample.kwargs)

    @ops(_OPS, allowed_dtypes=(torch.float32,))
    def test_tolerance(self, device, dtype, op):
        self.assertEqual(torch.tensor(1.0), torch.tensor(1.05))

    @ops(_OPS, allowed_dtypes=(torch.float32,))
    def test_samples(self, device, dtype, op):
        self.assertNotIn((5, 5), [tuple(s.input.shape) for s in op.sample_inputs(device, dtype)])

    @modules(_MODULES)
    def test_module(self, device, dtype, module_info, training):
        self.assertIn(module_info.name, ("nn.Linear", "nn.ReLU"))


instantiate_device_type_tests(TestOutcomes, globals())

if __name__ == "__main__":
    run_tests()
"""

CONFIG = """\
# yaml-language-server: $schema=testreuse-config.schema.json
test_suite_config:
  labels: [trunk]
  files:
    - path: ${TORCH_ROOT}/test/test_e2e.py
      unlisted_test_mode: mandatory_success
      tests:
        - names: [TestOutcomes::test_fill]
          mode: mandatory_success
          edits: {dtypes: {exclude: [{name: int64}]}}
        - names: [TestOutcomes::test_passes, TestOutcomes::test_fails]
          mode: xfail
          reason: known broken on this device
        - names: [TestOutcomes::test_strict_passes]
          mode: xfail_strict
          reason: expected to fail
        - names: ["TestOutcomes::test_never.*"]
          mode: skip
          reason: takes the device down
        - names: [TestOutcomes::test_aborts, TestOutcomes::test_hangs]
          mode: mandatory_success
          labels: [crashy]
        - names: [TestOutcomes::test_tolerance]
          mode: mandatory_success
          edits: {precision: [{op: add, dtype: float32, atol: 0.1, rtol: 0.0}]}
        - names: [TestOutcomes::test_tolerance]
          only: {ops: [mul]}
          mode: xfail
          reason: no tolerance declared for mul
        - names: [TestOutcomes::test_samples]
          mode: mandatory_success
          edits: {samples: {exclude: [{shape: [5, 5]}]}, ops: {exclude: [{name: mul}]}}
  global:
    supported_dtypes: [{name: float32}, {name: int64}]
    supported_ops: [{name: add}, {name: mul, dtypes: [{name: float32}]}]
    supported_modules: [{name: nn.Linear}]
"""


def tree_digest(root: Path) -> str:
    """Hash of every path and byte under `root`: any file written, removed or changed alters it."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def e2e(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extensions_dir: str):
    """An upstream tree with test_e2e.py, its config, and a runner that passes the plugin options."""
    root = tmp_path / "torch_root"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_e2e.py").write_text(UPSTREAM)
    config = pytester.path / "device.yaml"
    config.write_text(CONFIG)
    ran = tmp_path / "ran"
    ran.mkdir()
    monkeypatch.setenv("E2E_RAN_DIR", str(ran))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", extensions_dir)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))

    def run(*extra: str) -> tuple[pytest.RunResult, list[dict]]:
        results = pytester.path / "results.jsonl"
        results.unlink(missing_ok=True)
        args = ["-p", "no:cacheprovider", "--strict-markers", "--testreuse-config", str(config)]
        args += ["--torch-root", str(root), "--testreuse-backend", BACKEND, "--testreuse-device", DEVICE]
        args += ["--testreuse-results", str(results), "--testreuse-timeout", "20", *extra]
        result = pytester.runpytest_subprocess(*args, timeout=600)
        records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
        return result, records

    run.root = root
    run.ran = ran
    run.junit = pytester.path / "junit.xml"
    return run


def by_test(records: list[dict]) -> dict[str, dict]:
    return {r["nodeid"].rsplit("::", 1)[1]: r for r in records}


def test_every_control_and_outcome(e2e) -> None:
    before = tree_digest(e2e.root)
    result, records = e2e("-rA", f"--junitxml={e2e.junit}")
    assert tree_digest(e2e.root) == before, "the upstream tree was written to"
    assert not list(e2e.root.rglob("__pycache__"))
    got = {name: r["outcome"] for name, r in by_test(records).items()}
    assert {k: v for k, v in got.items() if not k.startswith("test_module")} == {
        "test_fill_fallbackdev_float32": "passed",
        "test_fill_fallbackdev_int64": "deselected",  # edits.dtypes.exclude
        "test_passes_fallbackdev": "xpassed",  # xfail: ran, unexpected pass
        "test_fails_fallbackdev": "xfailed",
        "test_strict_passes_fallbackdev": "xpassed",  # xfail_strict: fails the run
        "test_never_run_fallbackdev": "deselected",  # skip: never executed
        "test_aborts_fallbackdev": "crashed",
        "test_hangs_fallbackdev": "timeout",
        "test_skips_itself_fallbackdev": "failed",  # mandatory_success must pass, not skip
        "test_new_upstream_fallbackdev": "passed",  # unlisted_test_mode
        "test_op_add_fallbackdev_float32": "passed",
        "test_op_add_fallbackdev_int64": "passed",
        "test_op_mul_fallbackdev_float32": "passed",  # mul int64 and every sin case: not in the capabilities
        "test_tolerance_add_fallbackdev_float32": "passed",  # precision override through toleranceOverride
        "test_tolerance_mul_fallbackdev_float32": "xfailed",  # a rule scoped with `only`
        "test_samples_add_fallbackdev_float32": "passed",  # the (5, 5) samples were dropped
        "test_samples_mul_fallbackdev_float32": "deselected",  # edits.ops.exclude
    }
    assert not (e2e.ran / "never_run").exists()
    outputs = {name: r["output"] for name, r in by_test(records).items() if "output" in r}
    assert outputs["test_skips_itself_fallbackdev"] == "probing the device for its feature\n"  # its own, no other's
    assert "test_fill_fallbackdev_float32" not in outputs  # a pass has nothing to explain
    modules = [r for name, r in by_test(records).items() if name.startswith("test_module")]
    assert {(r["module"], r["dtypes"][0], r["outcome"]) for r in modules} == {
        ("nn.Linear", "float32", "passed"),
        ("nn.Linear", "float64", "deselected"),
        ("nn.ReLU", "float32", "deselected"),
        ("nn.ReLU", "float64", "deselected"),
    }
    records_by = by_test(records)
    assert records_by["test_aborts_fallbackdev"]["signal"] == "SIGABRT"
    assert records_by["test_hangs_fallbackdev"]["timeout"] == "20"
    assert records_by["test_passes_fallbackdev"]["promotion_candidate"] is True
    never = records_by["test_never_run_fallbackdev"]
    assert never["mode"] == "skip"
    assert never["reason"] == "takes the device down"
    assert never["rule"].endswith("device.yaml:17:11")
    assert records_by["test_op_mul_fallbackdev_float32"]["op"] == "mul"
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 4  # strict XPASS, abort, hang, runtime skip of a mandatory test
    assert outcomes["xpassed"] == 1
    assert outcomes["xfailed"] == 2
    result.stdout.fnmatch_lines(["*promotion candidate (unexpected pass under xfail): *test_passes_fallbackdev*"])
    properties = {
        (case.get("name"), prop.get("name"), prop.get("value"))
        for case in ET.parse(e2e.junit).iter("testcase")
        for prop in case.iter("property")
    }
    assert ("test_op_add_fallbackdev_int64", "testreuse_op", "add") in properties
    assert ("test_op_add_fallbackdev_int64", "testreuse_dtypes", "int64") in properties
    assert ("test_fails_fallbackdev", "testreuse_mode", "xfail") in properties


def test_marks_select_exactly_and_crashes_are_isolated_under_xdist(e2e) -> None:
    result, records = e2e("-n", "2", "-m", "op__add or label__crashy")
    got = {name: r["outcome"] for name, r in by_test(records).items() if r["outcome"] != "deselected"}
    assert got == {
        "test_op_add_fallbackdev_float32": "passed",
        "test_op_add_fallbackdev_int64": "passed",
        "test_tolerance_add_fallbackdev_float32": "passed",
        "test_samples_add_fallbackdev_float32": "passed",
        "test_aborts_fallbackdev": "crashed",
        "test_hangs_fallbackdev": "timeout",
    }
    assert result.parseoutcomes()["passed"] == 4


def test_only_a_strict_unexpected_pass_fails_the_run(e2e) -> None:
    result, records = e2e("-m", "mode__xfail or mode__xfail_strict")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = result.parseoutcomes()
    assert (outcomes["failed"], outcomes["xpassed"], outcomes["xfailed"]) == (1, 1, 2)
    assert "passed" not in outcomes
    result.stdout.fnmatch_lines(["*XPASS(strict)*expected to fail*"])
    strict = by_test(records)["test_strict_passes_fallbackdev"]
    assert (strict["outcome"], strict["promotion_candidate"]) == ("xpassed", True)
