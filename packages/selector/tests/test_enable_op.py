"""`testselect enable-op`: the tests waiting on an op, what enabling it admits, and the config diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testselect.cli import main


def _args(toy: dict[str, Path], *extra: str) -> list[str]:
    return ["enable-op", *extra, "--profile", str(toy["profile"]), "--capabilities", str(toy["caps"]), "--store",
            str(toy["store"])]  # fmt: skip


def test_enabling_the_missing_op_admits_its_test(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(toy, "aten::cumsum")) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        "aten::cumsum: 1 recorded cases of 1 tests ran it; 1 cases admitted, 0 still blocked; diff +0 -5 lines"
    )
    admitted = "admitted  test_toy.py::TestToy::test_lacks [float32]  xfail_strict -> ok: test_lacks_cpu_float32"
    assert lines[1] == admitted
    assert "--- a/test_toy.yaml" in out
    assert "+++ b/test_toy.yaml" in out
    removed = [line for line in lines if line.startswith("-") and not line.startswith("---")]
    assert removed == [
        "-        # op evidence: aten ops: toy lacks aten::cumsum, run on CPU by 1 of 1 float32 cases",
        '-        - names: ["TestToy::test_lacks"]',
        "-          mode: xfail_strict",
        '-          reason: "toy lacks aten::cumsum, run on CPU by 1 of 1 float32 cases"',
        "-          only: {dtypes: [float32]}",
    ]


def test_enabling_it_for_another_dtype_leaves_it_blocked(
    toy: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_args(toy, "aten::cumsum", "--dtypes", "float16"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["admitted"] == []
    (blocked,) = report["still_blocked"]
    assert blocked["node_id"] == "test_toy.py::TestToy::test_lacks"
    assert blocked["reason"] == "toy lacks aten::cumsum (float32), run on CPU by 1 of 1 float32 cases"
    assert report["waiting_tests"] == ["test_toy.py::TestToy::test_lacks"]
    assert report["diff"].count("\n-") == report["diff"].count("\n+") - 1  # only the reason line changed


def test_an_op_nobody_ran_is_exit_1(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(toy, "aten::flip")) == 1
    assert capsys.readouterr().out.startswith("aten::flip: 0 recorded cases of 0 tests ran it; 0 cases admitted")


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["cumsum"], "error: OP 'cumsum': not an aten overload name"),
        (["aten::cumsum", "--dtypes", "float99"], "error: --dtypes float99: not a torch dtype name"),
    ],
)
def test_bad_input_is_one_error_line(
    toy: dict[str, Path], capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    assert main(_args(toy, *extra)) == 2
    assert capsys.readouterr().err.splitlines()[0] == error


def test_capabilities_are_required(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["enable-op", "aten::cumsum", "--profile", str(toy["profile"]), "--store", str(toy["store"])]
    assert main(args) == 2
    assert capsys.readouterr().err == "error: enable-op needs --capabilities: the export the op is added to\n"


def test_a_missing_store_is_one_error_line(toy: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(toy, "aten::cumsum")
    args[-1] = str(toy["store"].with_name("absent.sqlite"))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert err.count("\n") == 1
