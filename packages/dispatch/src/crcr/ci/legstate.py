"""What one leg folder says, however its leg ended.

A leg writes `leg-state.json` (which shard of which combination, how many tests it owns, when, where) before it
runs anything, its shard's results stream into `shard-N/results.jsonl` test by test, and `leg.json` is written last:
the leg finished. A leg killed part-way (cancelled, timed out, its runner lost) still uploads what it had, so a
folder is `complete` (its leg.json reads), killed (only its state file reads: its streamed results stand), or
unreadable (neither does, or it is no leg of the run at all). Both files are written whole, then renamed, so a leg
killed while writing one leaves the previous state, never half a file.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crcr.ci import runner
from crcr.ci.model import ShardResult, TestOutcome, from_json

LEG = "leg.json"
STATE = "leg-state.json"


class LegError(Exception):
    """A prepared folder or a leg folder that cannot be used: one line naming it."""


@dataclass(frozen=True)
class LegFolder:
    """One leg folder as merge sees it: `combination` is "" when nothing in it says whose leg it is."""

    folder: Path
    combination: str = ""
    shard: int = 0
    complete: bool = False
    shards: list[ShardResult] = field(default_factory=list)  # complete: the leg's own results
    tests: list[TestOutcome] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # killed: the last streamed record per test
    started: str = ""
    problem: str = ""  # killed: why its leg.json does not count; unreadable: why neither file does


def write_state(out: Path, combination: str, shard: int, tests: int) -> None:
    """The leg's claim on its shard, before it runs anything: a leg killed later is still known by it."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    state = {"combination": combination, "shard": shard, "tests": tests, "started": started,
             "pid": os.getpid(), "host": socket.gethostname()}  # fmt: skip
    write_json(out / STATE, state)


def read_folder(folder: Path) -> LegFolder:
    """The folder's leg: complete when its leg.json reads, killed when only its state file does, else unreadable."""
    try:
        state = _identified(folder / STATE)
    except LegError as exc:
        state, unread = {}, str(exc)
    started = str(state.get("started", ""))
    try:
        leg = _identified(folder / LEG)
        shards = [from_json(ShardResult, s) for s in leg["shards"]]
        tests = [from_json(TestOutcome, t) for t in leg["tests"]]
    except LegError as exc:
        problem = f"{folder}: no {LEG}" if not (folder / LEG).exists() else str(exc)
    except (KeyError, TypeError, AttributeError) as exc:
        problem = f"{folder / LEG}: not a leg's result ({exc})"
    else:
        return LegFolder(folder, leg["combination"], leg["shard"], True, shards, tests, started=started)
    if not state:
        return LegFolder(folder, problem=f"{problem}; {unread}")
    results = folder / f"shard-{state['shard']}" / "results.jsonl"
    try:
        records = {r["nodeid"]: r for r in runner.read_records(results) if r.get("outcome") != "deselected"}
    except OSError as exc:
        problem += f"; {results}: cannot read: {exc.strerror or exc}"
        records = {}
    return LegFolder(folder, state["combination"], state["shard"], records=records, started=started, problem=problem)


def pick(candidates: list[LegFolder]) -> tuple[LegFolder | None, list[LegFolder]]:
    """The folder that speaks for a shard reported more than once (a re-run attempt), and the others: a complete
    one before a killed one, then the one with most results, then the latest started, then by folder name."""
    ranked = sorted(candidates, key=lambda f: (f.complete, len(f.records), f.started, str(f.folder)), reverse=True)
    return (ranked[0], ranked[1:]) if ranked else (None, [])


def _identified(path: Path) -> dict[str, Any]:
    data = read_json(path)
    named = isinstance(data.get("combination"), str) and data["combination"]
    if not named or not isinstance(data.get("shard"), int):
        raise LegError(f"{path}: not a leg's file (combination and shard missing)")
    return data


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`, or a LegError naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LegError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LegError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LegError(f"{path}: expected a JSON object")
    return data


def write_json(path: Path, data: Any) -> None:
    """Written whole, then renamed: a process killed mid-write leaves the old file or none, never half of one."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    scratch.replace(path)
