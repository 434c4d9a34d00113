"""The explain/dump option: each compiled kernel's program and decisions, written for review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ring_inductor import config


def write(name: str, program: dict[str, Any] | None, decisions: dict[str, Any]) -> None:
    """Writes `<name>.json` (unless no program was built) and `<name>.decisions.json` under `config.dump_dir`,
    when it is set."""
    if not config.dump_dir:
        return
    directory = Path(config.dump_dir)
    directory.mkdir(parents=True, exist_ok=True)
    if program is not None:
        (directory / f"{name}.json").write_text(json.dumps(program, indent=1) + "\n")
    (directory / f"{name}.decisions.json").write_text(json.dumps(decisions, indent=1, sort_keys=True) + "\n")
