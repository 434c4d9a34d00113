"""`compile:` in a config: the run goes through torch's own PYTORCH_TEST_WITH_* switch, and says so per case."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

BACKENDS = Path(__file__).resolve().parent / "backends"

UPSTREAM = """
import os

import torch
from torch.testing._internal import common_utils
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, run_tests


def _scaled_sum(x):
    return (x * 2 + 1).sum()


class TestCompiled(TestCase):
    def test_flag_is_on(self, device):
        self.assertTrue(common_utils.TEST_WITH_TORCHDYNAMO)

    def test_math(self, device):
        x = torch.arange(6.0, device=device)
        self.assertEqual(_scaled_sum(x).item(), 36.0)

    def test_automatic_dynamic_shapes(self, device):
        import torch._dynamo.config

        expected = os.environ.get("EXPECT_AUTOMATIC_DYNAMIC", "1") == "1"
        self.assertEqual(torch._dynamo.config.automatic_dynamic_shapes, expected)


instantiate_device_type_tests(TestCompiled, globals())

if __name__ == "__main__":
    run_tests()
"""

RULES = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_compiled.py
      tests:
        - names: ["*"]
          mode: mandatory_success
"""


def _compile_config(mode: str = "dynamo", backend: str | None = None, dynamic: bool | None = None) -> str:
    extra = f", backend: {backend}" if backend else ""
    extra += f", dynamic: {str(dynamic).lower()}" if dynamic is not None else ""
    return f"test_suite_config:\n  labels: [compile]\n  compile: {{mode: {mode}{extra}}}\n"


@pytest.fixture
def compiled(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, extensions_dir: str):
    """A one-file upstream tree and a runner taking config texts (written in order) and extra pytest options."""
    root = tmp_path / "torch_root"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_compiled.py").write_text(UPSTREAM)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", extensions_dir)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))
    for flag in ("PYTORCH_TEST_WITH_DYNAMO", "PYTORCH_TEST_WITH_INDUCTOR", "PYTORCH_TEST_WITH_AOT_EAGER",
                 "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES", "EXPECT_AUTOMATIC_DYNAMIC"):  # fmt: skip
        monkeypatch.delenv(flag, raising=False)

    def run(*configs: str) -> tuple[pytest.RunResult, dict[str, dict]]:
        folder = tmp_path / "configs"
        folder.mkdir(exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for index, text in enumerate(configs):
            (folder / f"{index:02d}.yaml").write_text(text)
        results = tmp_path / "results.jsonl"
        results.unlink(missing_ok=True)
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--testreuse-config", str(folder), "--torch-root", str(root),
            "--testreuse-backend", "fallback_backend:load", "--testreuse-device", "fallbackdev",
            "--testreuse-results", str(results), timeout=600,
        )  # fmt: skip
        lines = results.read_text().splitlines() if results.exists() else []
        records = [json.loads(line) for line in lines]
        return result, {r["nodeid"].rsplit("::", 1)[1]: r for r in records}

    return run


def test_compiled_run_sets_torchs_flag_and_counts_graphs(compiled) -> None:
    result, records = compiled(_compile_config(), RULES)
    assert result.ret == 0, result.stdout.str()
    assert {name: r["outcome"] for name, r in records.items()} == {
        "test_flag_is_on_fallbackdev": "passed",
        "test_math_fallbackdev": "passed",
        "test_automatic_dynamic_shapes_fallbackdev": "passed",
    }
    math = records["test_math_fallbackdev"]
    assert math["compile"] == "dynamo"
    assert math["labels"] == ["compile"]
    assert math["compiled_graphs"] >= 1


def test_dynamic_false_keeps_recompiles_static(compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPECT_AUTOMATIC_DYNAMIC", "0")
    result, records = compiled(_compile_config(dynamic=False), RULES)
    assert result.ret == 0, result.stdout.str()
    assert records["test_automatic_dynamic_shapes_fallbackdev"]["outcome"] == "passed"
    _, records = compiled(_compile_config(), RULES)  # torch's default: the same expectation fails
    assert records["test_automatic_dynamic_shapes_fallbackdev"]["outcome"] == "failed"


def test_eager_run_is_not_compiled(compiled) -> None:
    result, records = compiled(RULES)
    assert result.ret == 1
    assert records["test_flag_is_on_fallbackdev"]["outcome"] == "failed"
    assert "compile" not in records["test_math_fallbackdev"]
    assert "compiled_graphs" not in records["test_math_fallbackdev"]


def test_configs_that_disagree_on_compile_are_one_error(compiled) -> None:
    result, _ = compiled(_compile_config("dynamo"), _compile_config("inductor"), RULES)
    assert result.ret == 4
    line = next(x for x in result.stderr.lines if "compile" in x)
    assert "01.yaml:3:" in line
    assert "differs from" in line
    assert "00.yaml:3:" in line


def test_a_compiler_backend_that_cannot_be_imported_names_the_config(compiled) -> None:
    result, _ = compiled(_compile_config("inductor", "no_such_compiler"), RULES)
    assert result.ret == 4
    line = next(x for x in result.stderr.lines if "no_such_compiler" in x)
    assert "00.yaml:3:" in line
    assert "compile.backend: cannot import no_such_compiler" in line
    assert "Traceback" not in result.stderr.str()


def test_helpers_imported_before_the_plugin_cannot_silently_run_eager(compiled, pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import torch.testing._internal.common_utils\n")
    result, _ = compiled(_compile_config(), RULES)
    assert result.ret == 4
    assert any("set PYTORCH_TEST_WITH_DYNAMO=1 in the environment" in x for x in result.stderr.lines)
