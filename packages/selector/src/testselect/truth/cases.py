"""The cases a device makes (testreuse's collection plan, `--testreuse-plan` JSON lines) and their split into
shards by case count, so one file of thousands of cases is spread over every shard."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def read_plan(path: Path) -> dict[str, dict[str, Any]]:
    """node id -> the case's facts (file, generic, op, dtypes, mode, rule, ...), as testreuse wrote them."""
    plan = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            facts = json.loads(line)
            plan[facts["nodeid"]] = facts
    return plan


def split_cases(cases: Sequence[str], shards: int) -> list[list[str]]:
    """Contiguous runs of `cases` whose sizes differ by one at most: in node-id order a shard keeps whole classes
    where it can, so it imports few files and sets each class up once."""
    size, extra = divmod(len(cases), shards)
    chunks, start = [], 0
    for number in range(shards):
        end = start + size + (number < extra)
        chunks.append(list(cases[start:end]))
        start = end
    return [chunk for chunk in chunks if chunk]
