"""`crcr env`: a venv holding one torch core, made as a combination's is; a stand-in torch, already in its
wheelhouse as a complete fetch leaves it, keeps it fast and offline."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from crcr.ci import cores
from crcr.ci.envs import KEY_FILE
from crcr.cli import main
from test_ci_build import fake_torch


def test_the_venv_holds_the_core_and_is_made_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    folder = cores.wheelhouse("9.9.0", cache)
    cores.mark(folder, fake_torch(folder), {"index": ""})
    assert main(["env", "--core", "9.9.0", "--cache", str(cache)]) == 0
    python = Path(capsys.readouterr().out.strip())
    assert python.parent.parent.parent == cache / "envs"
    probe = [str(python), "-c", "import torch; print(torch.__version__)"]
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "9.9.0"
    key = python.parent.parent / KEY_FILE
    made = key.stat().st_mtime_ns
    assert main(["env", "--core", "9.9.0", "--cache", str(cache)]) == 0
    assert capsys.readouterr().out.strip() == str(python)
    assert key.stat().st_mtime_ns == made  # reused, not made again


def test_a_core_never_obtained_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--core", "nightly", "--cache", str(tmp_path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith("error: core 'nightly': not a torch version, and no core of that name was obtained")
