"""A results record as triage reads it: one record per node id (the last wins: a retry), with the fields triage
relies on checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testreuse.results import ResultsError, read_results


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every case's last record, in first-seen order; a record without the fields triage needs is an error."""
    records: dict[str, dict[str, Any]] = {}
    for number, record in enumerate(read_results(path), 1):
        if not isinstance(record.get("nodeid"), str):
            raise ResultsError(f"{path}: record {number}: a record needs a string 'nodeid'")
        if not isinstance(record.get("outcome", ""), str) or not isinstance(record.get("failure", {}), dict):
            raise ResultsError(f"{path}: record {number}: 'outcome' must be a string and 'failure' an object")
        records[record["nodeid"]] = record
    return list(records.values())
