"""`only: {torch: SPECIFIERS}`: a rule that applies on some torch versions only, decided once per loaded plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from packaging.version import Version
from testreuse.errors import ConfigError
from testreuse.loader import load_plan
from testreuse.model import Mode
from testreuse.rules import Case, decide, excluded_shapes
from testreuse.torchversion import installed_torch_version, torch_in_scope
from testreuse.triage.proposal import propose
from testreuse.validate import check_plan

BACKENDS = Path(__file__).resolve().parent / "backends"

CONFIG = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_small.py
      unlisted_test_mode: skip
      tests:
        - names: ["*"]
          mode: mandatory_success
        - names: [TestSmall::test_plain]
          only: {torch: ">=2.14"}
          mode: xfail_strict
          reason: fails on 2.14 only
        - names: [TestSmall::test_op]
          only: {ops: [mul], torch: ">=2.13,<2.14"}
          mode: xfail
          reason: mul on 2.13 only
        - names: [TestSmall::test_fill]
          only: {torch: "<2.14"}
          mode: mandatory_success
          edits: {dtypes: {exclude: [{name: int64}]}, samples: {exclude: [{shape: [5, 5]}]}}
"""


@pytest.mark.parametrize(
    ("specifier", "version", "applies"),
    [
        (None, "2.13.0", True),
        (">=2.14", "2.14.1", True),
        (">=2.14", "2.13.0", False),
        (">=2.14", "2.14.1+cu130", True),  # local labels never take part
        ("<2.14", "2.13.0+cpu", True),
        ("==2.13.0", "2.13.0+cpu", True),
        (">=2.13,<2.14", "2.13.5", True),
        (">=2.13,<2.14", "2.14.0", False),
        ("~=2.13.0", "2.13.1", True),
        (">=2.14", "2.15.0.dev20260101+cpu", True),  # a nightly compares by PEP 440 order
        (">=2.14", "2.14.0a0+git1234", False),  # a 2.14.0 pre-release comes before 2.14.0
        (">=2.14", "not a version", False),
    ],
)
def test_torch_in_scope(specifier: str | None, version: str, applies: bool) -> None:
    assert torch_in_scope(specifier, version) is applies


@pytest.fixture
def plan_for(write, tmp_path: Path, torch_root: Path):
    config = write(tmp_path / "c.yaml", CONFIG)

    def load(version: str):
        plan = load_plan([config], torch_root, torch_version=version)
        (file_plan,) = plan.files.values()
        return plan, file_plan

    return load


@pytest.mark.parametrize(
    ("version", "case", "mode", "reason"),
    [
        ("2.14.1", Case("TestSmall", "test_plain"), Mode.xfail_strict, "fails on 2.14 only"),
        ("2.13.0+cpu", Case("TestSmall", "test_plain"), Mode.mandatory_success, "listed"),
        ("2.13.0+cpu", Case("TestSmall", "test_op", "mul", ("float32",)), Mode.xfail, "mul on 2.13 only"),
        ("2.13.0+cpu", Case("TestSmall", "test_op", "add", ("float32",)), Mode.mandatory_success, "listed"),
        ("2.14.1", Case("TestSmall", "test_op", "mul", ("float32",)), Mode.mandatory_success, "listed"),
        ("2.13.0", Case("TestSmall", "test_fill", dtypes=("int64",)), Mode.skip, "dtype int64 excluded by edits"),
        ("2.14.1", Case("TestSmall", "test_fill", dtypes=("int64",)), Mode.mandatory_success, "listed"),
    ],
)
def test_a_rule_applies_only_on_the_torch_versions_it_names(plan_for, version, case, mode, reason) -> None:
    plan, file_plan = plan_for(version)
    decision = decide(plan, file_plan, case)
    assert (decision.mode, decision.reason) == (mode, reason)


def test_an_out_of_scope_rule_edits_nothing_and_is_still_checked(plan_for, write, tmp_path, torch_root) -> None:
    plan, file_plan = plan_for("2.14.1")
    assert plan.torch_version == "2.14.1"
    assert excluded_shapes(file_plan, Case("TestSmall", "test_fill", dtypes=("float32",))) == []
    assert [p.active for p in file_plan.rules] == [True, True, False, False]
    _, older = plan_for("2.13.0")
    assert excluded_shapes(older, Case("TestSmall", "test_fill", dtypes=("float32",))) == [(5, 5)]
    stale = write(tmp_path / "stale.yaml", CONFIG.replace("[TestSmall::test_fill]", "[TestSmall::test_gone]"))
    (problem,) = check_plan(load_plan([stale], torch_root, torch_version="2.14.1"))
    gone = "test_suite_config.files[0].tests[3].names[0]: no test 'TestSmall::test_gone' upstream"
    assert str(problem).endswith(gone)


def test_the_installed_torch_is_read_from_its_metadata() -> None:
    import torch

    assert Version(installed_torch_version()).public == Version(torch.__version__).public


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"=>2.14"', "'=>2.14' is not a PEP 440 version specifier set (e.g. '>=2.14' or '>=2.13,<2.14')"),
        ("garbage", "'garbage' is not a PEP 440 version specifier set"),
        ('">=2.x"', "'>=2.x' is not a PEP 440 version specifier set"),
        ('"2.14"', "'2.14' is not a PEP 440 version specifier set"),
        ("2.14", "Input should be a valid string"),
        ("214", "Input should be a valid string"),
        ('""', "an empty torch specifier would match every version: give one, e.g. '>=2.14'"),
        ('"  "', "an empty torch specifier would match every version"),
        ("[2.14]", "Input should be a valid string"),
        ("{min: 2.14}", "Input should be a valid string"),
        ('"==2.13.0+cpu"', "'==2.13.0+cpu' has a local label: torch's version is compared without it"),
        ("null", "an empty scope matches no case: give ops, dtypes, modules, params or torch"),
    ],
)
def test_a_bad_specifier_is_one_line_naming_file_and_field(write, tmp_path, torch_root, value, message) -> None:
    body = CONFIG.replace('only: {torch: ">=2.14"}', f"only: {{torch: {value}}}")
    config = write(tmp_path / "c.yaml", body)
    with pytest.raises(ConfigError) as caught:
        load_plan([config], torch_root)
    (problem,) = (str(p) for p in caught.value.problems)
    assert "\n" not in problem
    field = "only" if value == "null" else "only.torch"
    assert problem.startswith(f"{config}:9:")
    assert f": test_suite_config.files[0].tests[1].{field}: {message}" in problem


def test_triage_keeps_a_split_rules_torch_scope(plan_for) -> None:
    plan, file_plan = plan_for("2.13.0")
    scoped = file_plan.rules[2].location  # only: {ops: [mul], torch: ">=2.13,<2.14"}
    where = f"{scoped.file}:{scoped.line}:{scoped.column}"
    failure = {"type": "RuntimeError", "message": "boom", "raised_at": "x.py:1", "test_at": "test/t.py:3"}
    records = [
        {"nodeid": f"t::{n}", "generic": "TestSmall::test_op", "op": "mul", "dtypes": [d], "rule": where, **extra}
        for n, d, extra in [
            ("a", "float32", {"outcome": "xpassed"}),
            ("b", "float32", {"outcome": "xpassed"}),
            ("c", "int64", {"outcome": "xfailed", "failure": {**failure, "when": "call"}}),
        ]
    ]
    (change,), _ = propose(plan, records)
    assert change.after.count('torch: ">=2.13,<2.14"') == 2, change.after


def _e2e_config(ours: str) -> str:
    """One rule scoped to the running torch's minor series and one to the next: only the first applies."""
    release = Version(ours).release
    nxt = f"{release[0]}.{release[1] + 1}"
    return f"""\
test_suite_config:
  files:
    - path: ${{TORCH_ROOT}}/test/test_small.py
      unlisted_test_mode: skip
      tests:
        - names: [TestSmall::test_plain, TestSmall::test_fill]
          mode: mandatory_success
        - names: [TestSmall::test_fill]
          only: {{torch: "<{nxt}"}}
          mode: skip
          reason: scoped to this torch
        - names: [TestSmall::test_plain]
          only: {{torch: ">={nxt}"}}
          mode: xfail_strict
          reason: scoped to the next torch
"""


def test_the_plugin_and_list_apply_the_running_torchs_rules_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, torch_root: Path, capsys
) -> None:
    """On the installed torch (2.13.0: `<2.14` applies, `>=2.14` does not), through a real run and `testreuse list`."""
    from testreuse.cli import main

    config = pytester.path / "scoped.yaml"
    config.write_text(_e2e_config(installed_torch_version()))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")])))
    results = pytester.path / "results.jsonl"
    device = ["--testreuse-backend", "fallback_backend:load", "--testreuse-device", "fallbackdev"]
    run = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--testreuse-config", str(config), "--torch-root", str(torch_root), *device,
        "--testreuse-results", str(results), "--testreuse-timeout", "60", timeout=600,
    )  # fmt: skip
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()
    records = {r["nodeid"].rsplit("::", 1)[1]: r for r in map(json.loads, results.read_text().splitlines())}
    assert records["test_plain_fallbackdev"]["outcome"] == "passed"
    assert records["test_plain_fallbackdev"]["mode"] == "mandatory_success"
    fill = {k: (r["mode"], r["outcome"], r["reason"]) for k, r in records.items() if k.startswith("test_fill")}
    assert set(fill.values()) == {("skip", "deselected", "scoped to this torch")}
    assert len(fill) == 2
    capsys.readouterr()
    cli_device = ["--backend", "fallback_backend:load", "--device", "fallbackdev"]
    assert main(["list", str(config), "--torch-root", str(torch_root), "--format", "json", *cli_device]) == 0
    cases = json.loads(capsys.readouterr().out)["cases"]
    listed = {r["nodeid"].rsplit("::", 1)[1]: r["mode"] for r in cases}
    assert {k: listed[k] for k in records} == {k: r["mode"] for k, r in records.items()}
