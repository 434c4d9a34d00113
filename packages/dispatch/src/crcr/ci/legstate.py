"""What one leg folder says, however its leg ended.

A leg writes `leg-state.json` (which shard of which combination, how many tests it owns, when, where) before it
runs anything, its shard's results stream into `shard-N/results.jsonl` test by test, and `leg.json` is written last:
the leg finished. Both files are written whole, then renamed, so a leg killed while writing one leaves the previous
state, never half a file.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from pathlib import Path
from typing import Any

LEG = "leg.json"
STATE = "leg-state.json"


class LegError(Exception):
    """A prepared folder or a leg folder that cannot be used: one line naming it."""


def write_state(out: Path, combination: str, shard: int, tests: int) -> None:
    """The leg's claim on its shard, before it runs anything: a leg killed later is still known by it."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    state = {"combination": combination, "shard": shard, "tests": tests, "started": started,
             "pid": os.getpid(), "host": socket.gethostname()}  # fmt: skip
    write_json(out / STATE, state)


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
