"""`python -m testreuse.shards`: plan, merge, select and matrix end to end; bad input is one line and exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testreuse.shards.cli import ExitCode, main

STORE = {"default": {"default": {"a.py": {"A": {"x": 30, "y": 10}}, "b.py": {"B": 25}, "c.py": 15}}}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "durations.json"
    path.write_text(json.dumps(STORE))
    return path


def test_plan_select_and_matrix(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    assert main(["plan", "--durations", str(store), "--shards", "2", "--setup", "5", "--output", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    assert [s["test_seconds"] for s in doc["shards"]] == [40.0, 40.0]
    assert main(["select", str(plan), "--shard", "1"]) == 0
    first = capsys.readouterr().out.split()
    assert main(["select", str(plan), "--shard", "2"]) == 0
    assert sorted(first + capsys.readouterr().out.split()) == ["a.py", "b.py", "c.py"]
    assert main(["matrix", str(plan)]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert [(leg["shard"], leg["shards"]) for leg in matrix["include"]] == [(1, 2), (2, 2)]


def test_plan_output_is_byte_identical_across_runs(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for _ in range(2):
        assert main(["plan", "--durations", str(store), "--cap", "50", "--setup", "5"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert all(s["predicted_seconds"] <= 50 for s in json.loads(outputs[0])["shards"])


def test_collected_tests_without_durations_are_flagged(store: Path, tmp_path: Path, capsys) -> None:
    tests = tmp_path / "tests.txt"
    tests.write_text("a.py::A::x\na.py::A::new\n\nd.py::test_fresh\n")
    assert main(["plan", "--durations", str(store), "--tests", str(tests), "--shards", "1"]) == 0
    (shard,) = json.loads(capsys.readouterr().out)["shards"]
    assert shard["estimated_tests"] == 2
    assert shard["units"] == [
        {"id": "a.py", "seconds": 50.0, "estimated": True},  # x: 30 known, new: 20, the median of class A
        {"id": "d.py", "seconds": 20.0, "estimated": True},  # the median of every timed test
    ]


def test_a_new_config_is_estimated_from_its_fallback_configs_not_a_constant(tmp_path: Path, capsys) -> None:
    store = tmp_path / "durations.json"
    eager = {"a.py": {"A": {"x": 0.5, "y": 0.5}}}
    store.write_text(json.dumps({"ci": {"one+compile": {"a.py": {"A": {"x": 8, "y": 2}}}, "two+compile": {
        "a.py": {"A": {"x": 12}}}, "one": eager}}))  # fmt: skip
    tests = tmp_path / "tests.txt"
    tests.write_text("a.py::A::x\na.py::A::y\n")
    argv = ["plan", "--durations", str(store), "--job", "ci", "--config", "three+compile", "--tests", str(tests)]
    assert main([*argv, "--shards", "1", "--fallback", "one+compile", "--fallback", "two+compile"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["shards"][0]["test_seconds"] == 12.0  # x: median(8, 12) = 10, y: 2
    assert "estimated from the medians of one+compile, two+compile" in err
    assert main([*argv, "--shards", "1", "--fallback", "gone"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["shards"][0]["test_seconds"] == 2.0  # nothing like it: the constant, 1 s a test
    assert "estimated from 1 s a test" in err


def test_merge_folds_results_into_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store.json"
    shards = []
    for n, (nodeid, seconds) in enumerate([("a.py::A::x", 4.0), ("b.py::test_b", 2.0)]):
        shards.append(tmp_path / f"results-{n}.jsonl")
        shards[-1].write_text(json.dumps({"nodeid": nodeid, "duration": seconds, "outcome": "passed"}) + "\n")
    assert main(["merge", "--store", str(store), *map(str, shards)]) == 0
    assert json.loads(store.read_text()) == {
        "default": {"default": {"a.py": {"A": {"x": 4.0}}, "b.py": {"": {"test_b": 2.0}}}}
    }
    first = store.read_text()
    assert main(["merge", "--store", str(store), "--alpha", "0.5", str(shards[0])]) == 0
    assert store.read_text() == first


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"default": {"default": {"a.py": {"A": "slow"}}}}', "durations.json: default.default.a.py.A: expected"),
        ('{"default": {"default": {"a.py": -3}}}', "durations.json: default.default.a.py: seconds must be"),
        ("[1, 2]", "durations.json: top level: expected an object"),
        ('{"default": ', "durations.json:1:13: not JSON"),
        ('{"other": {"default": {}}}', "durations.json: default.default: no such job and test config"),
    ],
)
def test_malformed_durations_are_one_line_and_exit_2(tmp_path: Path, content: str, expected: str, capsys) -> None:
    path = tmp_path / "durations.json"
    path.write_text(content)
    assert main(["plan", "--durations", str(path), "--shards", "2"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert expected in err


def test_a_bad_collected_node_id_names_its_line(store: Path, tmp_path: Path, capsys) -> None:
    tests = tmp_path / "tests.txt"
    tests.write_text("a.py::A::x\n\na.py\n")
    assert main(["plan", "--durations", str(store), "--tests", str(tests), "--shards", "1"]) == ExitCode.USAGE
    assert "tests.txt:3: nodeid: not a test node id" in capsys.readouterr().err


def test_bad_shard_index_and_bad_plan_exit_2(store: Path, tmp_path: Path, capsys) -> None:
    plan = tmp_path / "plan.json"
    assert main(["plan", "--durations", str(store), "--shards", "2", "--output", str(plan)]) == 0
    assert main(["select", str(plan), "--shard", "3"]) == ExitCode.USAGE
    assert "shard: 3 is not in 1..2" in capsys.readouterr().err
    plan.write_text("not json")
    assert main(["matrix", str(plan)]) == ExitCode.USAGE
    assert "cannot read a plan" in capsys.readouterr().err


def test_usage_errors_exit_2(store: Path, capsys) -> None:
    assert main(["plan", "--durations", str(store)]) == 2
    assert main(["plan", "--durations", str(store), "--cap", "60", "--setup", "90"]) == ExitCode.USAGE
    assert "must exceed the per-shard set-up" in capsys.readouterr().err


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(), st.text(max_size=4)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@given(JSONISH)
@settings(max_examples=150, deadline=None)
def test_any_json_store_plans_or_fails_in_one_line(tmp_path_factory: pytest.TempPathFactory, document: object) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "d.json"
    path.write_text(json.dumps({"default": {"default": document}}))
    argv = ["plan", "--durations", str(path), "--shards", "2", "--output", str(path.with_suffix(".plan"))]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (ExitCode.OK, ExitCode.USAGE)
    assert (code == ExitCode.OK) == (err.getvalue() == "")
    assert err.getvalue().count("\n") == (code == ExitCode.USAGE)


def test_runs_as_a_module(store: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testreuse.shards", "plan", "--durations", str(store), "--shards", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "error: the shard count must be >= 1, got 0\n"
