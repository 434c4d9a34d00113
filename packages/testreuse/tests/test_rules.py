"""Which rule decides a case: plain functions over a loaded plan, tested without pytest runs or a device."""

from __future__ import annotations

from pathlib import Path

import pytest
from testreuse.errors import ConfigError
from testreuse.loader import load_plan
from testreuse.model import Mode
from testreuse.rules import Case, decide, excluded_shapes

CONFIG = """
test_suite_config:
  labels: [trunk]
  files:
    - path: ${TORCH_ROOT}/test/test_small.py
      unlisted_test_mode: xfail_strict
      tests:
        - names: ["TestSmall::test_.*"]
          mode: xfail
          reason: regex
        - names: [TestSmall::test_op]
          mode: mandatory_success
          labels: [nightly]
          edits: {dtypes: {exclude: [{name: int64}]}, samples: {exclude: [{shape: [5, 5]}]}}
        - names: [TestSmall::test_op]
          only: {ops: [mul]}
          mode: skip
          reason: mul hangs
        - names: ["TestSmall::test_fill"]
          mode: xfail
          reason: later regex-free rule
  global:
    supported_dtypes: [{name: float32}, {name: int64}]
    supported_ops: [{name: add}, {name: mul}, {name: sub, dtypes: [{name: float16}]}]
"""


@pytest.fixture
def decide_case(write, tmp_path: Path, torch_root: Path):
    plan = load_plan([write(tmp_path / "c.yaml", CONFIG)], torch_root)
    (file_plan,) = plan.files.values()

    def run(case: Case):
        return decide(plan, file_plan, case), excluded_shapes(file_plan, case)

    return run


@pytest.mark.parametrize(
    ("case", "mode", "line", "reason"),
    [
        (Case("TestSmall", "test_plain"), Mode.xfail, 7, "regex"),
        (Case("TestSmall", "test_fill", dtypes=("float32",)), Mode.xfail, 18, "later regex-free rule"),
        (Case("TestSmall", "test_op", "add", ("float32",)), Mode.mandatory_success, 10, "listed"),
        (Case("TestSmall", "test_op", "mul", ("float32",)), Mode.skip, 14, "mul hangs"),
        (Case("TestSmall", "test_op", "add", ("int64",)), Mode.skip, 10, "dtype int64 excluded by edits"),
        (
            Case("TestSmall", "test_op", "sin", ("float32",)),
            Mode.skip,
            23,
            "op sin is not in the backend's supported_ops",
        ),
        (
            Case("TestSmall", "test_op", "sub", ("float32",)),
            Mode.skip,
            23,
            "dtype float32 is not supported by the backend (supported_ops)",
        ),
        (
            Case("TestSmall", "test_fill", dtypes=("bool",)),
            Mode.skip,
            22,
            "dtype bool is not supported by the backend (supported_dtypes)",
        ),
        (Case("TestOther", "test_x"), Mode.xfail_strict, 5, "not listed: unlisted_test_mode is xfail_strict"),
    ],
)
def test_decisions(decide_case, case: Case, mode: Mode, line: int, reason: str) -> None:
    decision, _ = decide_case(case)
    assert (decision.mode, decision.rule.line, decision.reason) == (mode, line, reason)


def test_labels_and_shapes_come_from_every_matching_rule(decide_case) -> None:
    decision, shapes = decide_case(Case("TestSmall", "test_op", "add", ("float32",)))
    assert decision.labels == ("trunk", "nightly")
    assert shapes == [(5, 5)]


PAIRS = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_small.py
      tests:
        - names: [TestSmall::test_pair]
        - names: [TestSmall::test_pair]
          only: {dtypes: [[float32, int64], bool]}
          mode: xfail_strict
          reason: one cell and every bool case
"""


@pytest.mark.parametrize(
    ("dtypes", "mode"),
    [
        (("float32", "int64"), Mode.xfail_strict),
        (("int64", "float32"), Mode.mandatory_success),  # a combination is ordered, as torch names the case
        (("float32", "float32"), Mode.mandatory_success),
        (("float32",), Mode.mandatory_success),
        (("float32", "int64", "int64"), Mode.mandatory_success),
        (("bool", "float32"), Mode.xfail_strict),
    ],
)
def test_only_dtypes_combination_matches_one_cell(
    write, tmp_path: Path, torch_root: Path, dtypes: tuple[str, ...], mode: Mode
) -> None:
    plan = load_plan([write(tmp_path / "c.yaml", PAIRS)], torch_root)
    (file_plan,) = plan.files.values()
    assert decide(plan, file_plan, Case("TestSmall", "test_pair", dtypes=dtypes)).mode == mode


CELLS = """
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_small.py
      tests:
        - names: [TestSmall::test_cell]
        - names: [TestSmall::test_cell]
          only: {dtypes: [float32], params: {sparse_grad: [true], reduce: [sum, "mean"]}}
          mode: xfail_strict
          reason: sparse gradients are not supported
        - names: [TestSmall::test_cell]
          only: {params: {alpha: [0.5, null]}}
          mode: skip
          reason: alpha hangs
"""


@pytest.mark.parametrize(
    ("dtype", "params", "mode"),
    [
        ("float32", (("reduce", "sum"), ("sparse_grad", "True")), Mode.xfail_strict),
        ("float32", (("reduce", "mean"), ("sparse_grad", "True")), Mode.xfail_strict),
        ("float32", (("reduce", "amax"), ("sparse_grad", "True")), Mode.mandatory_success),
        ("float32", (("reduce", "sum"), ("sparse_grad", "False")), Mode.mandatory_success),
        ("float32", (("sparse_grad", "True"),), Mode.mandatory_success),  # no `reduce` argument: not this cell
        ("float64", (("reduce", "sum"), ("sparse_grad", "True")), Mode.mandatory_success),
        ("float32", (("alpha", "0.5"),), Mode.skip),
        ("float32", (("alpha", "None"),), Mode.skip),
        ("float32", (("alpha", "1.5"),), Mode.mandatory_success),
    ],
)
def test_only_params_matches_the_parametrized_cells_by_value_text(
    write, tmp_path: Path, torch_root: Path, dtype: str, params: tuple[tuple[str, str], ...], mode: Mode
) -> None:
    plan = load_plan([write(tmp_path / "c.yaml", CELLS)], torch_root)
    (file_plan,) = plan.files.values()
    assert decide(plan, file_plan, Case("TestSmall", "test_cell", dtypes=(dtype,), params=params)).mode == mode


@pytest.mark.parametrize("params", ["{}", "{sparse_grad: []}", "{sparse_grad: true}", "{'': [true]}"])
def test_an_empty_or_malformed_params_scope_is_refused(write, tmp_path: Path, torch_root: Path, params: str) -> None:
    text = CELLS.replace("{params: {alpha: [0.5, null]}}", f"{{params: {params}}}")
    with pytest.raises(ConfigError, match="params"):
        load_plan([write(tmp_path / "c.yaml", text)], torch_root)
