"""What the gate's tests and the fuzz benchmark share: the committed payloads, a policy to point the gate at, a
reader of GITHUB_OUTPUT files as GitHub reads them, and a guard that fails on any attempt to start a process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PAYLOADS = HERE / "payloads"
SHIPPED_POLICY = REPO / "configs" / "crcr.yaml"
DEVICE = yaml.safe_load(SHIPPED_POLICY.read_text())["device"]


def fixture(name: str) -> dict[str, Any]:
    """A committed real-shaped client_payload, as data (a fresh copy each call)."""
    return json.loads((PAYLOADS / f"{name}.json").read_text())


def fixtures() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(PAYLOADS.glob("*.json"))}


def write_policy(folder: Path, *, seconds: float, interval: float = 0.05, fallback: str = "skip") -> Path:
    """The shipped policy with its label polling and fallback changed, beside a copy of the device profiles."""
    shutil.copytree(REPO / "configs" / "devices", folder / "devices", dirs_exist_ok=True)
    data = yaml.safe_load(SHIPPED_POLICY.read_text())
    data["landed"] |= {"poll": {"seconds": seconds, "interval": interval}, "fallback": fallback}
    path = folder / "crcr.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def read_github_output(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the runner parses it: `name=value` lines and `name<<DELIMITER` ... `DELIMITER` blocks."""
    values, lines = {}, iter(text.split("\n"))
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            else:
                raise AssertionError(f"unterminated heredoc for {name}")
            values[name] = "\n".join(body)
        elif line:
            name, value = line.split("=", 1)
            values[name] = value
    return values


class SpawnAttempt(AssertionError):
    """Something tried to start a process."""


@contextlib.contextmanager
def no_process_spawned() -> Iterator[None]:
    """Make every way of starting a process (subprocess, os.system/popen/spawn*/exec*/fork) raise SpawnAttempt."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise SpawnAttempt("a process was started")

    names = [(subprocess, "Popen")] + [
        (os, name) for name in dir(os)
        if name in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp")
        or name.startswith(("spawn", "exec"))
    ]  # fmt: skip
    saved = [(module, name, getattr(module, name)) for module, name in names]
    for module, name, _ in saved:
        setattr(module, name, refuse)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
