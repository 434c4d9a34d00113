"""testreuse's own CLI, run as a subprocess with this interpreter (`python -m testreuse`): testselect never imports
testreuse, and its triage and collection are the ones a user runs."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ToolError(Exception):
    """testreuse could not be run or said something testselect cannot read: one line, maybe a hint."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def testreuse(args: Sequence[str]) -> str:
    """Run `python -m testreuse ARGS...` and return its standard output; a non-zero exit is a ToolError quoting
    testreuse's own `error:` line."""
    command = [sys.executable, "-m", "testreuse", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ToolError(f"cannot run {sys.executable} -m testreuse: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        if any("No module named testreuse" in line for line in lines):
            raise ToolError(
                f"testreuse is not installed for {sys.executable}",
                hint="install tributary-testreuse into the same environment as testselect",
            )
        said = next((line for line in lines if line.startswith(("error:", "ERROR:"))), lines[-1] if lines else "")
        raise ToolError(f"`testreuse {args[0]}` exited {done.returncode}: {said or 'no message'}")
    return done.stdout


@dataclass(frozen=True)
class Cause:
    """testreuse triage's root cause of one failing case."""

    category: str
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)


def triage(records: Iterable[dict[str, Any]], configs: Sequence[Path], torch_root: Path | None) -> dict[str, Cause]:
    """node id -> cause, for the failing cases among `records` (raw results records), from `testreuse triage --json`
    over a results file holding exactly them."""
    with tempfile.TemporaryDirectory(prefix="testselect-triage-") as tmp:
        results = Path(tmp) / "results.jsonl"
        lines = [json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records]
        if not lines:
            return {}
        results.write_text("".join(lines), encoding="utf-8")
        args = ["triage", str(results), "--config", *(str(c) for c in configs), "--json"]
        if torch_root is not None:
            args += ["--torch-root", str(torch_root)]
        out = testreuse(args)
    try:
        report = json.loads(out)
        rows = report["cases"]
        causes = {}
        for row in rows:
            evidence = row.get("evidence") or {}
            if not isinstance(row["nodeid"], str) or not isinstance(evidence, dict):
                raise TypeError("a case needs a nodeid and an evidence object")
            causes[row["nodeid"]] = Cause(str(row["category"]), " ".join(str(row["reason"]).split()), evidence)
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ToolError(f"`testreuse triage --json` printed something else than its report ({exc})") from None
    return causes


def collected(configs: Sequence[Path], torch_root: Path | None, device: str | None) -> list[dict[str, Any]]:
    """Every concrete case the configs make, with its mode and reason: `testreuse list ... --format json`."""
    args = ["list", *(str(c) for c in configs), "--format", "json"]
    if torch_root is not None:
        args += ["--torch-root", str(torch_root)]
    if device is not None:
        args += ["--device", device]
    out = testreuse(args)
    try:
        cases = json.loads(out)["cases"]
        if not isinstance(cases, list):
            raise TypeError("cases is not a list")
        for case in cases:
            if not isinstance(case, dict) or not isinstance(case.get("nodeid"), str) or "mode" not in case:
                raise TypeError("a case needs a nodeid and a mode")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ToolError(f"`testreuse list --format json` printed something else than its listing ({exc})") from None
    return cases
