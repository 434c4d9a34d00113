"""The truth's testreuse configs: one per upstream file, every case `mandatory_success`.

No device file is written: with no `global` capabilities testreuse narrows nothing, so every case the device
instantiates runs (a config with a capability export would hide the very cases the truth must show).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from testselect.select.plan import config_name


def render(path: str) -> str:
    """The config for `test/<path>`: no rules, every unlisted case mandatory."""
    return (
        f"# Upstream test/{path}: every case mandatory_success, no capability filter (written by `testselect truth`).\n"
        "test_suite_config:\n"
        "  files:\n"
        f"    - path: {json.dumps('${TORCH_ROOT}/test/' + path)}\n"
        "      unlisted_test_mode: mandatory_success\n"
    )


def write_configs(paths: Iterable[str], out: Path) -> None:
    """One config per path under test/ into `out`, rewritten each run (their text depends on the path alone)."""
    out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        (out / config_name(path)).write_text(render(path), encoding="utf-8")
