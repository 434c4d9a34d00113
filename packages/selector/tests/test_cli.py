"""The CLI end to end: index, similar (text and --like), show, and bad input as one `error:` line with exit 2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from testselect.cli import main


@pytest.fixture
def store(tree: Path, tmp_path: Path) -> Path:
    path = tmp_path / "index.sqlite"
    assert main(["index", "--torch-root", str(tree), "--store", str(path)]) == 0
    return path


def test_index_report(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "index.sqlite"
    assert main(["index", "--torch-root", str(tree), "--store", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["files_added"], report["tests_added"], report["totals"]["tests"]) == (9, 119, 119)
    assert main(["index", "--torch-root", str(tree), "--store", str(path)]) == 0
    assert capsys.readouterr().out.startswith("files: 9 scanned, 0 added, 0 changed, 9 unchanged, 0 removed")


def test_unparsable_file_one_line_and_strict(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tree / "test" / "test_broken.py").write_text("def test_x(:\n", encoding="utf-8")
    path = str(tmp_path / "index.sqlite")
    assert main(["index", "--torch-root", str(tree), "--store", path]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("skipped: test_broken.py:1: syntax error")
    assert main(["index", "--torch-root", str(tree), "--store", path, "--strict"]) == 1


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("view shares storage", "test_ops.py::TestCommon::test_embedded_view_shares_storage"),
        ("view_as_real", "test_view_ops.py::TestViewOps::test_view_as_real"),
        ("module forward matches cpu", "test_modules.py::TestModule::test_forward"),
    ],
)
def test_similar_text(store: Path, query: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["similar", query, "--store", str(store), "--limit", "3", "--json"]) == 0
    matches = json.loads(capsys.readouterr().out)["matches"]
    assert matches[0]["node_id"] == expected
    assert [m["score"] for m in matches] == sorted((m["score"] for m in matches), reverse=True)


def test_similar_like_and_deterministic(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    like = "test_view_ops.py::TestViewOps::test_view_as_real"
    argv = ["similar", "--like", like, "--store", str(store), "--limit", "5"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == first
    lines = first.splitlines()
    assert len(lines) == 5
    assert like not in first
    assert "test_view_ops.py::TestViewOps::test_real_imag_view" in lines[0]  # the other complex view test
    assert all("view" in line.split()[1] for line in lines)
    tied = [line.split()[1] for line in lines if line.split()[0] == lines[-1].split()[0]]
    assert tied == sorted(tied)  # ties broken by node id


def test_similar_no_match_is_1(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["similar", "zzzqqq", "--store", str(store)]) == 1
    assert capsys.readouterr().out == ""


def test_show(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "test_ops.py::TestCommon::test_compare_cpu", "--store", str(store)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["params"]["ops"]["expr"] == "op_db"


def _not_ours(tmp_path: Path) -> str:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (x)")
    return str(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (lambda t: ["index", "--torch-root", str(t / "missing")], "not a directory"),
        (lambda t: ["index", "--torch-root", str(t)], "no test/ folder"),
        (lambda t: ["index", "--torch-root", str(t), "--store", _not_ours(t)], "not a testselect index"),
        (lambda t: ["similar", "x", "--store", _not_ours(t)], "not a testselect index"),
        (lambda t: ["similar", "x", "--store", str(t / "none.sqlite")], "no index here"),
        (lambda t: ["similar", "--store", str(t / "none.sqlite")], "either TEXT or --like"),
        (lambda t: ["similar", "x", "--limit", "0"], "--limit 0"),
        (lambda t: ["show", "nope::X::test_y", "--store", str(t / "none.sqlite")], "no index here"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path: Path, argv, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv(tmp_path)) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: ")
    assert message in err[0]


def test_unknown_like_and_usage(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["similar", "--like", "nope::X::test_y", "--store", str(store)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: --like nope::X::test_y: no such test")
    assert main(["frobnicate"]) == 2
    assert main(["--help"]) == 0
