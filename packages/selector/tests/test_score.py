"""`testselect score`: precision, recall and the admitted share of configs against a full execution, the worst false
positives (with triage's cause) and false negatives (with the configs' reason) per test, truth cases the configs do
not make and admitted cases the truth lacks reported apart, and bad input as one `error:` line."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from testselect.cli import main
from testselect.score import score

HAVE_TESTREUSE = importlib.util.find_spec("testreuse") is not None
HAVE_RING = importlib.util.find_spec("ringsim") is not None


def _listed(name: str, mode: str, reason: str = "", generic: str = "TestT::test_x") -> dict:
    return {"nodeid": f"test/t.py::TestTRING::{name}", "generic": generic, "mode": mode, "reason": reason}


def _truth(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _ran(name: str, outcome: str, prefix: str = "test/", generic: str | None = "TestT::test_x") -> dict:
    record = {"nodeid": f"{prefix}t.py::TestTRING::{name}", "outcome": outcome, "duration": 0.1}
    return record | ({"generic": generic} if generic else {})


LISTED = [
    _listed("a", "mandatory_success"),
    _listed("b", "mandatory_success", generic="TestT::test_y"),
    _listed("c", "skip", "dtype float64 is not in ring's supported_dtypes"),
    _listed("d", "mandatory_success"),  # the truth never ran it
    _listed("e", "xfail", "ring lacks aten::stack, run on CPU by 1 of 1 float32 cases"),
]


def test_precision_recall_and_what_is_reported_apart(tmp_path: Path) -> None:
    truth = _truth(
        tmp_path / "truth.jsonl",
        [
            _ran("a", "passed"),
            _ran("b", "failed", generic="TestT::test_y"),
            _ran("c", "passed"),
            _ran("e", "xpassed"),
            _ran("f", "passed"),  # the configs do not make it (capabilities)
            _ran("g", "deselected"),  # did not run: not in the truth
        ],
    )
    result = score(tmp_path, [truth], None, "ring", listed=LISTED)
    assert (result.total, result.passing, result.listed, result.admitted) == (5, 4, 5, 3)
    assert (result.admitted_in_truth, result.true_positives) == (2, 1)
    assert (result.precision, result.recall, result.admitted_ratio) == (0.5, 0.25, 0.4)
    assert (result.not_in_truth, result.not_in_truth_examples, result.not_listed) == (1, ["test/t.py::TestTRING::d"], 1)
    (fp,) = result.false_positives
    assert (fp.test, fp.cases, fp.causes) == (
        "t.py::TestT::test_y",
        1,
        (("failed (the truth record has no failure details)", 1),),
    )
    (fn,) = result.false_negatives
    assert (fn.test, fn.cases) == ("t.py::TestT::test_x", 3)
    assert [cause for cause, _ in fn.causes] == [
        "not made by the configs (their capabilities or edits leave it out)",
        "skip: dtype float64 is not in ring's supported_dtypes",
        "xfail: ring lacks aten::stack, run on CPU by 1 of 1 float32 cases",
    ]


def test_recall_within_the_device_scope_leaves_out_what_the_device_file_filters(tmp_path: Path) -> None:
    truth = _truth(tmp_path / "truth.jsonl", [_ran(n, "passed") for n in "acef"])
    scope = [_listed(n, "mandatory_success") for n in "ace"] + [_listed("f", "skip", "dtype int8 is not supported")]
    result = score(tmp_path, [truth], None, "ring", listed=LISTED, scope=tmp_path, scope_listed=scope)
    assert (result.recall, result.passing_in_scope, result.admitted_in_scope, result.recall_in_scope) == (
        0.25,
        3,
        1,
        0.3333,
    )
    assert score(tmp_path, [truth], None, "ring", listed=LISTED).recall_in_scope is None


def test_truth_of_another_rootdir_and_without_generic_names(tmp_path: Path) -> None:
    root = tmp_path / "torch"
    (root / "test").mkdir(parents=True)
    (root / "test" / "t.py").write_text("")
    prefix = "elsewhere/torch/test/"
    truth = _truth(
        tmp_path / "bare.jsonl",
        [_ran("a", "passed", prefix, None), _ran("b", "passed", prefix, None), _ran("c", "passed", prefix, None)],
    )
    later = _truth(tmp_path / "later.jsonl", [_ran("a", "failed", generic=None)])  # a later file wins per case
    result = score(tmp_path, [truth, later], root, None, listed=LISTED)
    assert (result.total, result.passing, result.true_positives, result.not_listed) == (3, 2, 1, 0)
    assert [g.test for g in result.false_positives] == ["t.py::TestT::test_x"]  # generic from the listing
    assert result.recall == 0.5


def test_score_bad_input_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_ran("a", "passed")) + "\n[1, 2]\n", encoding="utf-8")
    configs = tmp_path / "configs"
    configs.mkdir()
    for argv, expected in [
        (["--truth", str(tmp_path / "nope.jsonl")], f"error: --truth {tmp_path / 'nope.jsonl'}: no such results file"),
        (["--truth", str(bad)], f"error: {bad}:2: a record is a JSON object"),
        (["--truth", str(bad), "--limit", "0"], "error: --limit 0: must be at least 1"),
        (["--truth", str(bad), "--torch-root", str(tmp_path)], f"error: --torch-root {tmp_path}: no test/ folder"),
        (["--truth", str(bad), "--scope", str(tmp_path / "x")], f"error: --scope {tmp_path / 'x'}: no such directory"),
    ]:
        assert main(["score", "--configs", str(configs), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(expected), err
        assert err.count("\n") == 1
    assert main(["score", "--configs", str(tmp_path / "none"), "--truth", str(bad)]) == 2
    assert "no such directory or file" in capsys.readouterr().err


@pytest.mark.skipif(not (HAVE_TESTREUSE and HAVE_RING), reason="needs testreuse and ringsim: `testreuse list` on ring")
def test_score_generated_configs_on_ring(
    toy: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`testreuse list` decides what the configs admit; triage names why an admitted case failed."""
    select = ["select", "--profile", str(toy["profile"]), "--capabilities", str(toy["caps"])]
    assert main([*select, "--store", str(toy["store"]), "--out", str(toy["out"])]) == 0
    capsys.readouterr()
    root = toy["store"].parent / "torch"
    lacks = "ring: aten::cumsum is not implemented on this device (see `ringsim capabilities` for the op set)"
    failure = {
        "type": "NotImplementedError",
        "message": lacks,
        "when": "call",
        "raised_at": "ringsim/ops/register.py:84",
    }
    ids = "test/test_toy.py::TestToyRING::"
    truth = _truth(
        tmp_path / "truth.jsonl",
        [
            {"nodeid": f"{ids}test_add_ring_float32", "generic": "TestToy::test_add", "outcome": "passed"},
            {"nodeid": f"{ids}test_add_ring_float64", "generic": "TestToy::test_add", "outcome": "passed"},
            {"nodeid": f"{ids}test_grad_ring", "generic": "TestToy::test_grad", "outcome": "passed"},
            {"nodeid": f"{ids}test_lacks_ring_float32", "generic": "TestToy::test_lacks", "outcome": "failed"},
            {
                "nodeid": f"{ids}test_some_lack_ring_float32",
                "generic": "TestToy::test_some_lack",
                "outcome": "failed",
                "failure": failure,
            },
        ],
    )
    args = ["score", "--configs", str(toy["out"]), "--truth", str(truth), "--torch-root", str(root)]
    assert main([*args, "--device", "ring", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["modes"] == {"mandatory_success": 2, "skip": 3, "xfail_strict": 1}
    assert (result["total"], result["passing"], result["admitted"], result["true_positives"]) == (5, 3, 2, 1)
    assert (result["precision"], result["recall"], result["admitted_ratio"]) == (0.5, 0.3333, 0.4)
    (fp,) = result["false_positives"]
    assert fp["test"] == "test_toy.py::TestToy::test_some_lack"
    assert fp["causes"] == [["unsupported_op: device lacks aten::cumsum", 1]]
    negatives = {g["test"]: g["causes"] for g in result["false_negatives"]}
    assert negatives == {
        "test_toy.py::TestToy::test_add": [["skip: dtype float64 is not in toy's supported_dtypes", 1]],
        "test_toy.py::TestToy::test_grad": [
            ["skip: needs autograd, which the backend profile does not hook (autograd: no)", 1]
        ],
    }
