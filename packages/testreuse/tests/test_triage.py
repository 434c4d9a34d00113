"""`testreuse triage`: each failing case of a real run gets its root cause and evidence, and the configs the diff it
implies; the run is real (pytester, the plugin, the fallback device, torch's own errors)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.testing._internal.common_methods_invocations  # imported before pytester snapshots sys.modules
from testreuse.cli import main
from testreuse.triage.causes import classify
from testreuse.triage.numerics import mismatch

BACKENDS = Path(__file__).resolve().parent / "backends"

UPSTREAM = """
import os
import unittest

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


class TestCauses(TestCase):
    def test_passes(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2)

    def test_lacks_op(self, device):
        torch.zeros(2, 2).to_sparse().diagonal()

    def test_numerics(self, device):
        self.assertEqual(torch.ones(3, device=device), torch.full((3,), 1.05))

    def test_crashes(self, device):
        os.abort()

    def test_skips_itself(self, device):
        self.skipTest("needs two devices")

    def test_asserts(self, device):
        self.assertTrue(torch.zeros(1, device=device).item() > 1)

    def test_raises(self, device):
        torch.ones(2, 3, device=device) @ torch.ones(2, 3, device=device)

    def test_wrapped_refusal(self, device):
        try:
            raise NotImplementedError("fallbackdev: aten::eq.Tensor is not supported for dtype complex64")
        except NotImplementedError as error:
            raise RuntimeError("Comparing\\n\\nTensorLikePair(...)") from error

    @unittest.expectedFailure
    def test_upstream_expects_failure(self, device):
        self.assertEqual(1, 2)


instantiate_device_type_tests(TestCauses, globals())

if __name__ == "__main__":
    run_tests()
"""

CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_causes.py
      unlisted_test_mode: skip
      tests:
        - names: ["TestCauses::test_.*"]
          mode: xfail
          reason: results differ (device numerics)
        - names: [TestCauses::test_passes]
          mode: xfail
          reason: never checked
"""


@pytest.fixture
def triaged(
    pytester: pytest.Pytester, write, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path, Path]:
    root = tmp_path / "root"
    write(root / "test" / "test_causes.py", UPSTREAM)
    config = write(tmp_path / "configs" / "causes.yaml", CONFIG)
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))
    pytester.runpytest_subprocess(
        "--testreuse-config", str(config), "--torch-root", str(root),
        "--testreuse-backend", "fallback_backend:load", "--testreuse-device", "fallbackdev",
        "--testreuse-results", str(results), "--testreuse-timeout", "60", timeout=600,
    )  # fmt: skip
    return root, config, results


def _causes(results: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for line in results.read_text().splitlines():
        record = json.loads(line)
        cause = classify(record)
        if cause is not None:
            out[record["nodeid"].rsplit("::", 1)[-1]] = (cause.category, cause.reason())
    return out


def test_each_failure_gets_its_root_cause_with_evidence(triaged: tuple[Path, Path, Path]) -> None:
    causes = _causes(triaged[2])
    assert causes["test_lacks_op_fallbackdev"] == ("unsupported_op", "device lacks aten::as_strided")
    category, reason = causes["test_numerics_fallbackdev"]
    assert category == "numerics"
    assert reason.startswith("results not close, max abs error 0.05 (allowed 1e-05)")
    assert causes["test_crashes_fallbackdev"] == ("crash", "crash: the test process was killed by SIGABRT")
    skipped = causes["test_skips_itself_fallbackdev"]
    assert skipped == ("runtime_skip", "upstream skips it at runtime: needs two devices")
    category, reason = causes["test_asserts_fallbackdev"]
    asserting = "        self.assertTrue(torch.zeros(1, device=device).item() > 1)"
    line = UPSTREAM.lstrip("\n").splitlines().index(asserting) + 1
    assert (category, reason) == ("assertion", f"a non-numeric assertion fails at test/test_causes.py:{line}")
    category, reason = causes["test_raises_fallbackdev"]
    assert category == "exception"
    assert reason.startswith("RuntimeError at ")
    assert "cannot be multiplied" in reason
    category, reason = causes["test_wrapped_refusal_fallbackdev"]
    assert category == "unsupported_op"
    assert reason.startswith("device lacks aten::eq.Tensor for complex64 (needed by test/test_causes.py")
    assert causes["test_upstream_expects_failure_fallbackdev"] == ("upstream_xfail", "upstream expects it to fail")
    assert "test_passes_fallbackdev" not in causes


def test_the_proposed_diff_rebuckets_from_causes_and_validates(
    triaged: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, config, results = triaged
    monkeypatch.chdir(config.parent.parent)
    assert main(["triage", str(results), "--config", str(config), "--torch-root", str(root), "--diff"]) == 0
    diff = capsys.readouterr().out
    assert "-          reason: results differ (device numerics)" in diff
    assert '+          reason: "device lacks aten::as_strided"' in diff
    assert main(["triage", str(results), "--config", str(config), "--torch-root", str(root), "--write"]) == 0
    text = config.read_text()
    assert "never checked" not in text  # the passing rule became mandatory_success, its reason dropped
    assert "crash: the test process was killed by SIGABRT" in text
    assert "mode: skip" in text
    assert "upstream skips it at runtime: needs two devices" in text
    assert main(["validate", str(config), "--torch-root", str(root)]) == 0


def test_a_malformed_results_line_is_one_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text('{"nodeid": "a", "outcome": "passed"}\n{not json\n')
    assert main(["triage", str(results), "--config", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {results}:2: not a JSON record (Expecting property name enclosed in double quotes)"]


def test_comparison_figures_are_read_from_torchs_messages() -> None:
    with pytest.raises(AssertionError) as caught:
        torch.testing.assert_close(torch.ones(4), torch.ones(4) + 1e-3)
    figures = mismatch(str(caught.value))
    assert figures["mismatched"] == 4
    assert figures["abs_allowed"] == 1e-05
    assert figures["max_abs"] == pytest.approx(1e-3, rel=1e-3)
    with pytest.raises(AssertionError) as caught:
        torch.testing.assert_close(torch.zeros(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
    assert mismatch(str(caught.value))["abs_allowed"] == 0.0
