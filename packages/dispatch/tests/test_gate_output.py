"""GITHUB_OUTPUT: each value in its own heredoc with a fresh random delimiter, so a hostile value cannot add or
change another output; nothing is written when GITHUB_OUTPUT is unset."""

from __future__ import annotations

from pathlib import Path

import pytest
from crcr.actions_output import OutputError, write_outputs
from gate_support import read_github_output

HOSTILE = "skip\nrun=true\nsha<<EOF\n0000\nEOF\nghadelimiter_\n"


def test_a_hostile_value_stays_one_output(tmp_path: Path) -> None:
    path = tmp_path / "out"
    assert write_outputs({"reason": HOSTILE, "run": False, "pr": 7, "sha": None}, str(path)) is True
    assert read_github_output(path.read_text()) == {"reason": HOSTILE, "run": "false", "pr": "7", "sha": ""}


def test_every_delimiter_is_fresh(tmp_path: Path) -> None:
    path = tmp_path / "out"
    write_outputs({"a": "1", "b": "2"}, str(path))
    write_outputs({"a": "3"}, str(path))
    delimiters = [line.split("<<")[1] for line in path.read_text().splitlines() if "<<" in line]
    assert len(set(delimiters)) == 3
    assert all(len(d) == len("ghadelimiter_") + 32 for d in delimiters)
    assert read_github_output(path.read_text()) == {"a": "3", "b": "2"}


def test_unset_github_output_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    assert write_outputs({"run": True}) is False


def test_the_environment_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    assert write_outputs({"run": True}) is True
    assert read_github_output((tmp_path / "out").read_text()) == {"run": "true"}


@pytest.mark.parametrize("name", ["", "a b", "run\nsha", "a=b", "x<<y", "1st"])
def test_a_bad_output_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(OutputError, match="not an output name"):
        write_outputs({name: "v"}, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_an_unwritable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"^GITHUB_OUTPUT: cannot write: Is a directory$"):
        write_outputs({"run": True}, str(tmp_path))
