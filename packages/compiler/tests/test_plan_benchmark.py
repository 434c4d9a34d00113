"""The passes benchmark's command line: a bad option is one error line and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "passes.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARK), *args], capture_output=True, text=True, timeout=120)


def test_help_names_the_quick_mode():
    done = _run("--help")
    assert done.returncode == 0
    assert "--quick" in done.stdout


def test_an_unknown_option_is_one_error_line():
    done = _run("--fast")
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("passes.py: error:")]
    assert len(errors) == 1
    assert "Traceback" not in done.stderr
