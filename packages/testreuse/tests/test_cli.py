"""`testreuse validate | list | explain`: one-line errors, exit codes, and dry runs computed by the plugin."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import testreuse
from testreuse.cli import ExitCode, main

BACKENDS = Path(__file__).resolve().parent / "backends"
EMBEDDED = Path(testreuse.__file__).resolve().parent / "upstream"

CONFIG = """\
# yaml-language-server: $schema=testreuse-config.schema.json
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_indexing.py
      unlisted_test_mode: xfail
      tests:
        - names: [TestIndexing::test_embedded_take]
          mode: skip
          reason: take is not implemented on this device
        - names: ["TestIndexing::test_embedded_index_.*"]
          mode: mandatory_success
  global:
    supported_dtypes: [{name: float32}, {name: int64}]
"""


def digest(root: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        sha.update(str(path.relative_to(root)).encode())
        if path.is_file():
            sha.update(path.read_bytes())
    return sha.hexdigest()


def test_validate_ok_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(CONFIG)
    assert main(["validate", str(good)]) == ExitCode.OK
    assert capsys.readouterr().out.startswith("ok: 1 config file(s), 1 upstream file(s), 2 rule placement(s)")
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("test_embedded_take]", "test_taken]").replace("int64", "int65"))
    assert main(["validate", str(bad)]) == ExitCode.INVALID_CONFIG
    assert capsys.readouterr().err.splitlines() == [
        f"error: {bad}:13:48: test_suite_config.global.supported_dtypes[1].name: 'int65' is not a torch dtype"
    ]


def test_usage_errors_and_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == ExitCode.USAGE
    assert main(["validate", str(tmp_path / "missing.yaml")]) == ExitCode.INVALID_CONFIG
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == f"error: {tmp_path / 'missing.yaml'}: no such config file or directory"
    )
    assert main(["--help"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "exit codes:" in out
    assert all(f"{code.value}  {code.name.lower()}" in out for code in ExitCode)


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))
    return ["--backend", "fallback_backend:load", "--device", "fallbackdev"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testreuse", *args], capture_output=True, text=True, check=False)


def test_list_and_explain_on_the_embedded_tree(tmp_path: Path, cli_env: list[str]) -> None:
    config = tmp_path / "device.yaml"
    config.write_text(CONFIG)
    before = digest(EMBEDDED)
    listed = run_cli("list", str(config), *cli_env)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    modes = {nodeid.rsplit("::", 1)[1]: (mode, rule.rsplit(":", 2)[-2], reason) for nodeid, mode, rule, reason in rows}
    assert modes["test_embedded_take_fallbackdev_float32"] == ("skip", "7", "take is not implemented on this device")
    assert modes["test_embedded_index_select_fallbackdev_int64"] == ("mandatory_success", "10", "listed")
    assert modes["test_embedded_put_fallbackdev_float32"] == ("xfail", "5", "not listed: unlisted_test_mode is xfail")
    assert modes["test_embedded_put_fallbackdev_bool"] == (
        "skip",
        "13",
        "dtype bool is not supported by the backend (supported_dtypes)",
    )
    assert all(nodeid.startswith("test/test_indexing.py::TestIndexingFALLBACKDEV::") for nodeid, *_ in rows)
    only_skip = run_cli("list", str(config), "--mode", "skip", *cli_env)
    assert {line.split("\t")[1] for line in only_skip.stdout.splitlines()} == {"skip"}
    document = run_cli("list", str(config), "--format", "json", *cli_env)
    cases = json.loads(document.stdout)["cases"]  # one JSON document, not a line per case
    assert [(c["nodeid"], c["mode"], c["rule"], c["reason"]) for c in cases] == [tuple(row) for row in rows]
    lines = run_cli("list", str(config), "--format", "jsonl", *cli_env)
    assert [json.loads(line) for line in lines.stdout.splitlines()] == cases

    case = "TestIndexingFALLBACKDEV::test_embedded_take_fallbackdev_float32"
    explained = run_cli("explain", str(config), case, *cli_env)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines() == [
        "test/test_indexing.py::TestIndexingFALLBACKDEV::test_embedded_take_fallbackdev_float32",
        "  generic: TestIndexing::test_embedded_take",
        "  mode: skip",
        f"  rule: {config}:7:11",
        "  reason: take is not implemented on this device",
        "  dtypes: float32",
    ]
    missing = run_cli("explain", str(config), "TestIndexing::test_nothing", *cli_env)
    assert missing.returncode == ExitCode.NOT_FOUND
    assert missing.stderr.splitlines()[0] == "error: no collected case matches 'TestIndexing::test_nothing'"
    assert digest(EMBEDDED) == before


def test_explain_says_none_given_for_an_entry_without_a_reason(tmp_path: Path, cli_env: list[str]) -> None:
    config = tmp_path / "device.yaml"
    config.write_text(
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_indexing.py\n      tests:\n"
        "        - names: [TestIndexing::test_embedded_int_index_on_device_tensor]\n          mode: xfail\n"
    )
    explained = run_cli("explain", str(config), "TestIndexing::test_embedded_int_index_on_device_tensor", *cli_env)
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines()[2:5] == ["  mode: xfail", f"  rule: {config}:5:11", "  reason: none given"]


def test_list_without_a_device_is_one_error_line(tmp_path: Path) -> None:
    config = tmp_path / "device.yaml"
    config.write_text(CONFIG)
    done = run_cli("list", str(config), "--device", "nosuchdevice")
    assert done.returncode == ExitCode.COLLECTION_FAILED
    assert done.stderr.splitlines()[0].startswith("error: ")
    assert "Traceback" not in done.stderr


GENERATED = """
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestMade(TestCase):
    def test_written(self, device):
        pass


for _name in ("alpha", "beta"):
    setattr(TestMade, f"test_made_{_name}", lambda self, device: None)


def _factory():
    def test(self, device):  # named `test`, as upstream's factories name theirs
        pass

    return test


setattr(TestMade, "test_factory_made", _factory())
instantiate_device_type_tests(TestMade, globals())
"""

GENERATED_CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_made.py
      tests:
        - names: [TestMade::test_written, TestMade::test_made_alpha, TestMade::test_factory_made]
          mode: mandatory_success
        - names: [TestMade::test_made_gamma]
          mode: skip
          reason: never made
"""


def test_validate_collect_checks_names_against_tests_made_at_import(
    tmp_path: Path, cli_env: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "root" / "test").mkdir(parents=True)
    (tmp_path / "root" / "test" / "test_made.py").write_text(GENERATED)
    config = tmp_path / "made.yaml"
    config.write_text(GENERATED_CONFIG)
    root = ["--torch-root", str(tmp_path / "root")]
    assert main(["validate", str(config), *root]) == ExitCode.INVALID_CONFIG
    from_syntax = capsys.readouterr().err
    assert "no test 'TestMade::test_made_alpha' upstream" in from_syntax
    collected = run_cli("validate", str(config), *root, "--collect", *cli_env)
    assert collected.returncode == ExitCode.INVALID_CONFIG, collected.stderr
    where = f"{config}:7:19: test_suite_config.files[0].tests[1].names[0]"
    assert collected.stderr.splitlines() == [f"error: {where}: no test 'TestMade::test_made_gamma' upstream"]


def test_triage_checks_names_against_its_records_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "root" / "test").mkdir(parents=True)
    (tmp_path / "root" / "test" / "test_made.py").write_text(GENERATED)
    config = tmp_path / "made.yaml"
    config.write_text(GENERATED_CONFIG.split("        - names: [TestMade::test_made_gamma]")[0])
    results = tmp_path / "run.jsonl"
    made = ("test_made_alpha", "test_factory_made")
    results.write_text(
        "".join(
            json.dumps({"nodeid": f"test/test_made.py::TestMadeCPU::{n}_cpu", "file": "test/test_made.py",
                        "generic": f"TestMade::{n}", "outcome": "passed"}) + "\n"
            for n in made
        )
    )  # fmt: skip
    root = ["--torch-root", str(tmp_path / "root")]
    assert main(["triage", str(results), "--config", str(config), *root]) == 0, capsys.readouterr().err
    assert "warning" not in capsys.readouterr().err
    results.write_text(results.read_text().replace("test_factory_made", "test_other"))  # the run skipped it whole
    assert main(["triage", str(results), "--config", str(config), *root]) == 0
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith("warning: ")
    assert warning.endswith("no test 'TestMade::test_factory_made' upstream")


NO_CASE_HERE = """\
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase


class TestNarrow(TestCase):
    def test_any(self, device):
        pass

    @ops([op for op in op_db if op.name == "sub"], allowed_dtypes=(torch.float32,))
    def test_sub_only(self, device, dtype, op):
        pass


instantiate_device_type_tests(TestNarrow, globals())
"""

NO_CASE_CONFIG = """\
test_suite_config:
  global:
    supported_ops: [{name: add}]
  files:
    - path: ${TORCH_ROOT}/test/test_narrow.py
      tests:
        - names: [TestNarrow::test_any]
          mode: mandatory_success
        - names: [TestNarrow::test_sub_only]
          mode: skip
          reason: the device has no sub kernel
"""


def test_a_defined_test_with_no_case_on_the_device_may_be_named(tmp_path: Path, cli_env: list[str]) -> None:
    """Its only op is outside the device's supported_ops, so collection makes no case of it; naming it is no typo."""
    (tmp_path / "root" / "test").mkdir(parents=True)
    (tmp_path / "root" / "test" / "test_narrow.py").write_text(NO_CASE_HERE)
    config = tmp_path / "narrow.yaml"
    config.write_text(NO_CASE_CONFIG)
    collected = run_cli("validate", str(config), "--torch-root", str(tmp_path / "root"), "--collect", *cli_env)
    assert collected.returncode == ExitCode.OK, collected.stderr
