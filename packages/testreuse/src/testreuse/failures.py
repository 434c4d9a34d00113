"""The failure itself, taken from the exception where the test ran, so a results record can be triaged without
rerunning the test: exception type, the first line of its message, the raising frame and the test's own frame, and
the same for the exception it was raised from (torch's comparison helpers wrap a device error in "Comparing ...")."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from testreuse.triage.numerics import mismatch

MESSAGE_LIMIT = 300


def failure_facts(exc: BaseException, test_file: Path, torch_root: Path) -> dict[str, Any]:
    """`raised_at` is the innermost frame (often inside torch's helpers), `test_at` the innermost frame in the test
    file: the line to read first. A comparison failure also keeps its figures (`mismatch`: greatest errors and
    the tolerances), which its first line does not carry."""
    facts = _summary(exc, torch_root)
    figures = mismatch(str(exc))
    if figures:
        facts["mismatch"] = figures
    frames = traceback.extract_tb(exc.__traceback__)
    in_test = [f for f in frames if Path(f.filename) == test_file]
    if in_test:
        facts["test_at"] = _where(in_test[-1], torch_root)
    cause = _innermost_cause(exc)
    if cause is not None:
        facts["cause"] = _summary(cause, torch_root)
    return facts


def _innermost_cause(exc: BaseException) -> BaseException | None:
    """The first exception of an explicit `raise ... from` chain (bounded: a chain can be made to loop)."""
    found, seen = None, {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen and len(seen) < 32:
        exc = found = exc.__cause__
        seen.add(id(exc))
    return found


def _summary(exc: BaseException, torch_root: Path) -> dict[str, Any]:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    facts: dict[str, Any] = {"type": type(exc).__name__, "message": lines[0].strip()[:MESSAGE_LIMIT] if lines else ""}
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        facts["raised_at"] = _where(frames[-1], torch_root)
    return facts


def _where(frame: traceback.FrameSummary, torch_root: Path) -> str:
    """`file:line`, the file relative to TORCH_ROOT (like node ids) or to its import root (`torch/...`)."""
    path = Path(frame.filename)
    roots = [torch_root, *sorted((Path(p) for p in sys.path if p), key=lambda p: len(p.parts), reverse=True)]
    for root in roots:
        if path.is_relative_to(root):
            return f"{path.relative_to(root).as_posix()}:{frame.lineno}"
    return f"{frame.filename}:{frame.lineno}"
