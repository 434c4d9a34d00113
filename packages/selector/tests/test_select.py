"""Steps 3 and 4: the backend profile, plan-scope reasons, and select's buckets on a tiny synthetic tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from testselect.cli import main
from testselect.evidence import store as evidence
from testselect.index.store import Store
from testselect.select.profile import HOOKS, ProfileError, load_profile
from testselect.select.reasoner import RuleReasoner, case_dtype
from testselect.select.reasoner import TestFacts as Facts
from toytree import write

REPO = Path(__file__).resolve().parents[3]


def test_profile_loads_the_repo_profile() -> None:
    profile = load_profile(REPO / "configs" / "backend.yaml")
    assert profile.device == "ring"
    assert profile.hooks["eager_ops"] is True
    assert profile.hooks["autograd"] is False
    assert profile.dtypes == ("float16", "bfloat16", "float32", "bool", "uint8", "int8", "int16", "int32", "int64")


def test_profile_bad_fields_are_located_one_line_each(tmp_path: Path) -> None:
    bad = "device: toy\nhooks:\n  autograd: maybe\n  warp_drive: yes\nmissing_op: explode\ncolour: red\ndevice: x\n"
    with pytest.raises(ProfileError) as info:
        load_profile(write(tmp_path / "bad.yaml", bad))
    path = tmp_path / "bad.yaml"
    assert info.value.problems == [
        f"{path}:6: colour: unknown field (expected one of: device, hooks, dtypes, missing_op, scope, provided_ops)",
        f"{path}:7: device: duplicate key (first on line 1)",
        f"{path}:4: hooks.warp_drive: unknown field (expected one of: {', '.join(HOOKS)})",
        f"{path}:3: hooks.autograd: expected yes/no",
        f"{path}:5: missing_op: 'explode' is not one of: xfail, xfail_strict, skip",
    ]


def test_profile_missing_fields_and_not_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ProfileError, match=r"p\.yaml:1: hooks: required field missing"):
        load_profile(write(tmp_path / "p.yaml", "device: toy\n"))
    with pytest.raises(ProfileError, match=r"q\.yaml:3: profile: not YAML"):
        load_profile(write(tmp_path / "q.yaml", "device: [\nhooks: {\n"))
    assert main(["plan-scope", "--profile", str(tmp_path / "p.yaml"), "--store", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'p.yaml'}:1: hooks: required field missing\n"


def test_plan_scope_reasons(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan-scope", "--profile", str(toy["profile"]), "--store", str(toy["store"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "out  skipme/test_other.py  excluded by scope.exclude",
        "out  test_dist.py  no test can run: 1 needs distributed, which the backend profile does not hook "
        "(distributed: no)",
        "in   test_toy.py  3 of 5 tests can run; out: 1 @onlyCUDA: not instantiated for privateuse1 (toy); "
        "1 needs autograd, which the backend profile does not hook (autograd: no)",
    ]


def test_select_buckets_each_with_its_reason(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["select", "--profile", str(toy["profile"]), "--capabilities", str(toy["caps"])]
    assert main([*args, "--store", str(toy["store"]), "--out", str(toy["out"])]) == 0
    assert "configs: 1 files" in capsys.readouterr().out
    assert sorted(p.name for p in toy["out"].iterdir()) == ["test_toy.yaml"]
    text = (toy["out"] / "test_toy.yaml").read_text()
    config = yaml.safe_load(text)["test_suite_config"]
    (entry,) = config["files"]
    assert entry["path"] == "${TORCH_ROOT}/test/test_toy.py"
    assert entry["unlisted_test_mode"] == "skip"
    got = [(t["names"], t["mode"], t.get("only"), t["reason"]) for t in entry["tests"]]
    assert got == [
        (["TestToy::test_add"], "mandatory_success", None, "no unsupported dtype, op, feature or restriction found"),
        (["TestToy::test_add"], "skip", {"dtypes": ["float64"]}, "dtype float64 is not in toy's supported_dtypes"),
        (["TestToy::test_cuda_only"], "skip", None, "@onlyCUDA: not instantiated for privateuse1 (toy)"),
        (
            ["TestToy::test_grad"],
            "skip",
            None,
            "needs autograd, which the backend profile does not hook (autograd: no)",
        ),
        (["TestToy::test_lacks"], "mandatory_success", None, "no unsupported dtype, op, feature or restriction found"),
        (
            ["TestToy::test_lacks"],
            "xfail_strict",
            {"dtypes": ["float32"]},
            "toy lacks aten::cumsum, run on CPU by 1 of 1 float32 cases",
        ),
        (
            ["TestToy::test_some_lack"],
            "mandatory_success",
            None,
            "no unsupported dtype, op, feature or restriction found",
        ),
    ]
    for line in ("        # device restriction: @onlyCUDA", "        # op evidence: aten ops: toy lacks aten::cumsum"):
        assert any(row.startswith(line) for row in text.splitlines()), line


def test_select_mixed_cases_xfail_and_cpu_failures(toy: dict[str, Path]) -> None:
    store = Store.open(toy["store"])
    for node, outcome, ops in [
        ("test_some_lack_cpu_float32_x", "passed", {"aten::cumsum": ["float32"]}),
        ("test_add_cpu_float64", "failed", {"aten::add.Tensor": ["float64"]}),
        ("test_lacks_cpu_float32_y", "crashed", {}),
    ]:
        generic = node.split("_cpu")[0]
        case = evidence.Case(
            f"test_toy.py::TestToyCPU::{node}",
            f"test_toy.py::TestToy::{generic}",
            outcome,
            1.0,
            {o: 1 for o in ops},
            ops,
        )
        evidence.record(store, case)
    store.commit()
    store.close()
    args = ["select", "--profile", str(toy["profile"]), "--capabilities", str(toy["caps"])]
    assert main([*args, "--store", str(toy["store"]), "--out", str(toy["out"])]) == 0
    tests = yaml.safe_load((toy["out"] / "test_toy.yaml").read_text())["test_suite_config"]["files"][0]["tests"]
    scoped = {(t["names"][0], t["mode"]): t["reason"] for t in tests if t.get("only")}
    assert scoped[("TestToy::test_some_lack", "xfail")] == "toy lacks aten::cumsum, run on CPU by 1 of 2 float32 cases"
    assert scoped[("TestToy::test_lacks", "skip")] == "1 of 2 float32 cases crashed on the CPU reference run"


def test_case_dtype_from_the_node_id() -> None:
    assert case_dtype("f.py::TestXCPU::test_view_as_real_cpu_complex64") == "complex64"
    assert case_dtype("f.py::TestXCPU::test_a_cpu_float32_int64") == "float32"
    assert case_dtype("f.py::TestXCPU::test_a_cpu") is None
    assert case_dtype("f.py::TestX::test_plain") is None
    assert case_dtype("f.py::TestXCPU::test_new_cpu_zeros") is None


def test_plan_scope_json_and_bad_capabilities(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan-scope", "--profile", str(toy["profile"]), "--store", str(toy["store"]), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(s["path"], s["selected"]) for s in shown] == [
        ("skipme/test_other.py", False),
        ("test_dist.py", False),
        ("test_toy.py", True),
    ]
    bad = write(toy["caps"], "supported_dtypes: float32\n")
    args = ["select", "--profile", str(toy["profile"]), "--capabilities", str(bad), "--store", str(toy["store"])]
    assert main([*args, "--out", str(toy["out"])]) == 2
    assert capsys.readouterr().err == f"error: {bad}: supported_dtypes: expected a list\n"
    assert not toy["out"].exists()


def test_complex_blocks_a_whole_test_only_when_nothing_decides_per_dtype() -> None:
    """An @ops/@modules test that names complex dtypes has them per case (the device's dtypes keep them out); a
    plain test with no readable @dtypes that uses complex cannot run."""
    profile = load_profile(REPO / "configs" / "backend.yaml")
    reasoner = RuleReasoner(profile)
    facts = {
        "node_id": "t.py::T::test_x",
        "features": ("complex",),
        "dtypes": (),
        "restrictions": (),
        "instantiations": (),
    }
    (per_case,) = reasoner.bucket(Facts(**facts, info_driven=True))
    assert per_case.mode == "mandatory_success"
    (whole,) = reasoner.bucket(Facts(**facts))
    assert (whole.mode, whole.reason) == (
        "skip",
        "needs complex, which the backend profile does not hook (complex: no)",
    )
