"""Device-side evidence: cases run on the recording privateuse1 device under the device's name, so that only what
reaches the device is recorded (not the CPU work of torch's comparison helpers, not a composite the device never
sees), and the selection decides each case from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from testselect.cli import main

TESTSELECT = Path(sys.executable).with_name("testselect")

DEVICE_TESTS = """
import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, parametrize, run_tests


class TestDev(TestCase):
    def test_compare(self, device):
        a = torch.ones(3, device=device)
        self.assertEqual((a + a).cpu(), torch.full((3,), 2.0))

    def test_mixed(self, device):
        a, b = torch.ones(3, device=device), torch.ones(3, device=device, dtype=torch.float64)
        self.assertEqual((a + b).dtype, torch.float64)  # add runs for its first operand, float32: promoted

    def test_complex_operand(self, device):
        a, b = torch.ones(3, device=device), torch.ones(3, dtype=torch.complex64).to(device)
        self.assertEqual((a + b).dtype, torch.complex64)  # no op of dev computes in complex64: add needs it too

    def test_host_scalar_first(self, device):
        a = torch.ones(2, device=device)
        self.assertEqual(torch.add(torch.tensor(1.0), a).device, a.device)  # the result is the device's

    def test_stack(self, device):
        a = torch.ones(2, device=device)
        self.assertEqual(torch.stack([a, a]).shape, (2, 2))

    @dtypes(torch.float32, torch.float64)
    def test_cumsum(self, device, dtype):
        self.assertEqual(torch.ones(3, device=device, dtype=dtype).cumsum(0)[-1].item(), 3.0)

    def test_refused(self, device):
        a = torch.ones(2, 3, device=device)
        with self.assertRaises(RuntimeError):  # the CPU kernel's shape check raises; a device lacking mm refuses it
            torch.mm(a, a, out=torch.empty(2, 2, device=device))

    def test_refused_with_cpu_message(self, device):
        a = torch.ones(2, 3, device=device)
        with self.assertRaisesRegex(RuntimeError, "cannot be multiplied"):  # not what a device lacking mm says
            torch.mm(a, a, out=torch.empty(2, 2, device=device))

    def test_fails_anywhere(self, device):
        self.assertEqual(torch.ones(1, device=device).item(), 2.0)

    @parametrize("absolute", [False, True])
    @dtypes(torch.float32)
    def test_cell(self, device, dtype, absolute):
        a = torch.ones(2, device=device, dtype=dtype)
        self.assertEqual((a.abs() if absolute else a).cpu(), torch.ones(2))  # dev lacks abs: one float32 cell fails

    @dtypes(*[(a, b) for a in (torch.float32, torch.float64) for b in (torch.float32, torch.float64)])
    def test_pair(self, device, dtypes):
        a = torch.ones(3, device=device, dtype=dtypes[0])
        b = torch.ones(3, device=device, dtype=dtypes[1])
        self.assertEqual(a.cumsum(0)[-1].item() + b[0].item(), 4.0)


def _made(scale):
    def test(self, device):
        a = torch.ones(2, device=device)
        self.assertEqual((a + a).cpu(), torch.full((2,), 2.0) * scale)

    return test


for _scale in (1, 2):  # made at import time: the syntax tree has no such test
    setattr(TestDev, f"test_made_{_scale}", _made(_scale))


instantiate_device_type_tests(TestDev, globals())

if __name__ == "__main__":
    run_tests()
"""

RUNTIME = ["_copy_from", "_copy_from_and_resize", "_local_scalar_dense", "as_strided", "empty.memory_format"]
RUNTIME += ["empty_strided", "resize_", "view", "_reshape_alias"]
CAPABILITIES = {
    "device": "dev",
    "supported_dtypes": [{"name": "float32"}, {"name": "float64"}],
    "aten_ops": [
        *({"name": f"aten::{name}"} for name in RUNTIME),
        {"name": "aten::add.Tensor", "dtypes": [{"name": "float32"}]},
        {"name": "aten::cat", "dtypes": [{"name": "float32"}]},
        {"name": "aten::fill_.Scalar", "dtypes": [{"name": "float32"}, {"name": "float64"}]},
        {"name": "aten::cumsum", "dtypes": [{"name": "float32"}]},
    ],
}
PROFILE = """\
device: dev
hooks: {eager_ops: yes}
dtypes: [float32, float64]
missing_op: xfail_strict
scope: {include: ["test_*.py"]}
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One evidence run on the recording device named `dev`, with a relative `--store` (run from its folder)."""
    base = tmp_path_factory.mktemp("device")
    (base / "root" / "test").mkdir(parents=True)
    (base / "root" / "test" / "test_dev.py").write_text(DEVICE_TESTS, encoding="utf-8")
    (base / "caps.yaml").write_text(yaml.safe_dump(CAPABILITIES), encoding="utf-8")
    (base / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    argv = ["evidence", "--torch-root", "root", "--store", "rel.sqlite", "--device", "dev"]
    argv += ["--capabilities", "caps.yaml", "--json"]
    done = subprocess.run([TESTSELECT, *argv], cwd=base, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["observed"] == {"failed": 3, "passed": 15}, report
    return {"base": base, "store": base / "rel.sqlite"}


def _case_ops(store: Path, node: str, capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    assert main(["ops", "--test", node, "--store", str(store), "--json"]) == 0
    [case] = json.loads(capsys.readouterr().out)
    assert case["recorder"] == "device"
    return {op["op"]: op["dtypes"] for op in case["ops"]}


def test_only_what_reaches_the_device_is_recorded(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ops = _case_ops(recorded["store"], "test_dev.py::TestDevDEV::test_compare_dev", capsys)
    assert ops["aten::add.Tensor"] == ["float32"]
    assert "aten::_copy_from" in ops  # `.cpu()` leaves the device
    # assertEqual compares on CPU: its subtraction, abs and isclose never reach the device
    assert not {"aten::sub.Tensor", "aten::abs", "aten::isclose", "aten::eq.Tensor"} & ops.keys()
    assert main(["tests", "--op", "aten::sub.Tensor", "--store", str(recorded["store"])]) == 1


def test_a_call_that_raised_is_kept_apart(recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ops", "--test", "test_dev.py::TestDevDEV::test_refused_dev", "--store", str(recorded["store"]), "--json"]
    assert main(argv) == 0
    [case] = json.loads(capsys.readouterr().out)
    assert {"op": "aten::mm.out", "raised": True, "dtypes": ["float32"]} in case["ops"]
    assert main(["tests", "--op", "aten::mm.out", "--store", str(recorded["store"])]) == 1  # no case needs mm to work


def test_composites_are_seen_as_the_device_sees_them(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ops = _case_ops(recorded["store"], "test_dev.py::TestDevDEV::test_stack_dev", capsys)
    assert "aten::cat" in ops  # the device registers cat: stack's composite kernel runs above it
    assert "aten::stack" not in ops


def test_select_decides_each_dtype_from_the_device_side_evidence(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, out = recorded["base"], recorded["base"] / "configs"
    argv = ["select", "--profile", str(base / "profile.yaml"), "--capabilities", str(base / "caps.yaml")]
    assert main([*argv, "--store", str(recorded["store"]), "--out", str(out)]) == 0
    entries = yaml.safe_load((out / "test_dev.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    modes = {(e["names"][0], tuple(map(str, e.get("only", {}).get("dtypes", [])))): e for e in entries}
    assert modes[("TestDev::test_cumsum", ())]["mode"] == "mandatory_success"
    lacking = modes[("TestDev::test_cumsum", ("float64",))]
    assert lacking["mode"] == "xfail_strict"
    assert lacking["reason"] == "dev lacks aten::cumsum (float64)"
    assert modes[("TestDev::test_compare", ())]["mode"] == "mandatory_success"
    assert modes[("TestDev::test_stack", ())]["mode"] == "mandatory_success"
    assert modes[("TestDev::test_host_scalar_first", ())]["mode"] == "mandatory_success"
    assert modes[("TestDev::test_mixed", ())]["mode"] == "mandatory_success"  # the export's dtypes: the first operand's
    foreign = modes[("TestDev::test_complex_operand", ())]
    assert (foreign["mode"], foreign["reason"]) == ("xfail_strict", "dev lacks aten::add.Tensor (complex64)")
    assert modes[("TestDev::test_refused", ())]["mode"] == "mandatory_success"  # dev refuses mm, as the test asks
    refused = modes[("TestDev::test_refused_with_cpu_message", ())]
    assert refused["mode"] == "xfail_strict"
    assert refused["reason"] == "dev lacks aten::mm.out: the test fails on dev's refusal"
    failing = modes[("TestDev::test_fails_anywhere", ())]
    assert failing["mode"] == "xfail_strict"
    assert "fails on the recording device" in failing["reason"]


def test_cells_and_tests_made_at_import_are_decided_from_their_cases(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, out = recorded["base"], recorded["base"] / "cells"
    argv = ["select", "--profile", str(base / "profile.yaml"), "--capabilities", str(base / "caps.yaml")]
    assert main([*argv, "--store", str(recorded["store"]), "--out", str(out)]) == 0
    entries = yaml.safe_load((out / "test_dev.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    pair = [(e["mode"], e.get("only")) for e in entries if e["names"] == ["TestDev::test_pair"]]
    # cumsum lacks float64: the cells whose first tensor is float64, and only those, are held back
    assert pair == [
        ("mandatory_success", None),
        ("xfail_strict", {"dtypes": [["float64", "float32"], ["float64", "float64"]]}),
    ]
    cells = [(e["mode"], e.get("only")) for e in entries if e["names"] == ["TestDev::test_cell"]]
    # abs is lacking: its `@parametrize` cell alone is held back, not every float32 case of the test
    assert cells[1:] == [
        ("mandatory_success", {"dtypes": ["float32"], "params": {"absolute": ["False"]}}),
        ("xfail_strict", {"dtypes": ["float32"], "params": {"absolute": ["True"]}}),
    ]
    made = {e["names"][0]: (e["mode"], e["reason"]) for e in entries if e["names"][0].startswith("TestDev::test_made")}
    assert made == {
        "TestDev::test_made_1": ("mandatory_success", "no unsupported dtype, op, feature or restriction found"),
        "TestDev::test_made_2": ("xfail_strict", "fails on the recording device, which computes every op on CPU"),
    }


def test_enable_op_names_exactly_the_cases_that_ran_it(
    recorded: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = recorded["base"]
    argv = ["enable-op", "aten::cumsum", "--dtypes", "float64", "--profile", str(base / "profile.yaml")]
    argv += ["--capabilities", str(base / "caps.yaml"), "--store", str(recorded["store"]), "--json"]
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    admitted = {case for entry in shown["admitted"] for case in entry["cases"]}
    query = ["tests", "--op", "aten::cumsum", "--dtype", "float64", "--store", str(recorded["store"]), "--json"]
    assert main(query) == 0
    ran = {case["node_id"] for case in json.loads(capsys.readouterr().out)["cases"]}
    assert admitted == ran  # exactly the cases whose device-side evidence ran cumsum in float64
    assert {case.rsplit("::", 1)[1] for case in admitted} == {
        "test_cumsum_dev_float64",
        "test_pair_dev_float64_float32",  # cumsum runs on the first dtype's tensor
        "test_pair_dev_float64_float64",
    }
    assert shown["still_blocked"] == []
    argv[1] = "aten::abs.out"  # the device sees abs as its out variant
    assert main(argv[:2] + argv[4:]) == 0  # any dtype
    shown = json.loads(capsys.readouterr().out)
    admitted = {case.rsplit("::", 1)[1] for entry in shown["admitted"] for case in entry["cases"]}
    assert admitted == {"test_cell_absolute_True_dev_float32"}  # its cell only: the other cell never ran abs


def test_a_pytest_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "root" / "test").mkdir(parents=True)
    (tmp_path / "root" / "test" / "test_dev.py").write_text(DEVICE_TESTS, encoding="utf-8")
    argv = ["evidence", "--torch-root", "root", "--store", "s.sqlite"]
    env = {"PYTEST_ADDOPTS": "--no-such-option", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([TESTSELECT, *argv], cwd=tmp_path, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 1
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert "pytest exited 4" in line
    assert "--no-such-option" in line
