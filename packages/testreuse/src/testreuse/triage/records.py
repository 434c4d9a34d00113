"""Reading a results record (`--testreuse-results`, JSON lines): the last record of each node id wins (a retry)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class RecordError(ValueError):
    """A results file that cannot be read, said in one line with the file and line."""


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every case's record in first-seen order; a malformed line is an error naming it, never skipped silently."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: cannot read results: {getattr(exc, 'strerror', None) or exc}") from None
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{path}:{number}: not a JSON record ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("nodeid"), str):
            raise RecordError(f"{path}:{number}: a record needs a string 'nodeid'")
        if not isinstance(record.get("outcome", ""), str) or not isinstance(record.get("failure", {}), dict):
            raise RecordError(f"{path}:{number}: 'outcome' must be a string and 'failure' an object")
        records[record["nodeid"]] = record
    return list(records.values())
