"""The compiler benchmarks' command lines: a bad option is one error line and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = ["passes.py", "compiled_scratchpad.py", "relayout.py", "fusion.py", "layout.py"]


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_names_the_quick_mode(script: str):
    done = _run(script, "--help")
    assert done.returncode == 0
    assert "--quick" in done.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_unknown_option_is_one_error_line(script: str):
    done = _run(script, "--fast")
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith(f"{script}: error:")]
    assert len(errors) == 1
    assert "Traceback" not in done.stderr
