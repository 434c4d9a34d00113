"""The JSON-lines results file: one record per test, appended the moment the test finishes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class UnwritableResults(Exception):
    """The results path cannot be opened for appending: a usage error, said in one line before any test runs."""


class ResultsFile:
    """Each record is one `write` on an O_APPEND descriptor: complete lines survive a crash, and processes that
    share the file (xdist workers) never interleave inside a line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise UnwritableResults(f"--testreuse-results: cannot write {path}: {exc.strerror or exc}") from None

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())

    def close(self) -> None:
        os.close(self._fd)


class ResultsError(ValueError):
    """A results file that cannot be read: one line naming the file (and line)."""


def read_results(path: Path) -> list[dict[str, Any]]:
    """Every record in file order. A torn last line (the writer was killed mid-write, no newline) is dropped; any
    other malformed line is an error naming it, never skipped silently."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read results: {getattr(exc, 'strerror', None) or exc}") from None
    lines = text.splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not text.endswith("\n"):
                break
            raise ResultsError(f"{path}:{number}: not a JSON record ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ResultsError(f"{path}:{number}: a record is a JSON object")
        records.append(record)
    return records
