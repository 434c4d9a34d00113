"""The results folder of a truth run (`run-R-shard-K-A.jsonl` from testreuse, `run-R-crashed.jsonl` from the driver):
which cases already have a record, the next run number, and the record of a case its pytest process died in."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

from testselect.refine.records import read_records

_RUN = re.compile(r"^run-(\d+)-")


def _run_number(path: Path) -> int:
    found = _RUN.match(path.name)
    return int(found.group(1)) if found else 0


def results_files(results: Path) -> list[Path]:
    """Every results file, oldest run first: what `testselect score --truth` is given."""
    return sorted(results.glob("run-*.jsonl"), key=lambda p: (_run_number(p), p.name))


def recorded(results: Path) -> dict[str, str]:
    """node id -> the outcome of its last record. A torn last line (its writer was killed) is no record."""
    done = {}
    for path in results_files(results):
        for record in read_records(path):
            done[record.nodeid] = record.outcome
    return done


def next_run(results: Path) -> int:
    """One more than the highest run number in the folder: a resumed run never appends to a killed writer's file."""
    return max((_run_number(p) for p in results.glob("run-*")), default=0) + 1


def complete_lines(path: Path) -> int:
    """Records a shard has written so far (progress), without parsing them."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def last_started(path: Path) -> tuple[str, float] | None:
    """The node id and start time of the last case the plugin saw start, if any."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:  # torn by the death
            continue
        return entry["nodeid"], entry["started"]
    return None


def crash_record(facts: dict[str, Any], returncode: int, shard: int, duration: float) -> dict[str, Any]:
    """testreuse's record of a dead worker (`outcome: crashed`, `signal` or `exit`, `failure.message`) for a case
    whose whole pytest process died in it."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        death, how = {"signal": name}, f"killed by {name}"
    else:
        death, how = {"exit": str(returncode)}, f"exited with status {returncode}"
    message = f"the pytest process of shard {shard} {how} during this case (recorded by testselect truth)"
    return {**facts, "outcome": "crashed", "duration": round(duration, 4), **death, "failure": {"message": message}}


def append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
