"""What a combination ran with, kept beside its results so `crcr reproduce` needs nothing of today's tree.

The run's configs can change and its third-party packages float (pytest, numpy, hypothesis resolve anew in each
environment), so each combination's work directory gets `pinned/`: its testreuse config folder and device profile
as they ran, the environment's third-party distributions as `name==version` lines, and `pins.json` (the limits it ran
under, the device and backend module, and the digests the run's inputs were keyed by). The wheels are pinned by the
record's sha256s already.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crcr.ci import envs
from crcr.ci.digest import tree_sha256
from crcr.ci.runner import Limits, Suite

PINNED = "pinned"
_PINNED_LINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[^\s;@]+$")


class PinError(Exception):
    """A combination's pins are missing or do not match what its run recorded: one line saying which."""


@dataclass(frozen=True)
class Pins:
    """A combination's pinned folder, read back."""

    folder: Path
    limits: Limits
    device: str
    backend: str
    passed: tuple[str, ...]  # host variables the profile passed on
    inputs: dict[str, Any]  # the digests its inputs were keyed by (crcr.ci.reuse.inputs)
    unpinned: tuple[str, ...]  # what the run could not pin by version

    @property
    def configs(self) -> Path:
        return self.folder / "configs"

    @property
    def profile(self) -> Path:
        found = sorted((self.folder / "profile" / "devices").glob("*.yaml"))
        return found[0] if found else self.folder / "profile" / "devices" / "missing.yaml"

    @property
    def requirements(self) -> Path:
        return self.folder / "requirements.txt"


def pin(
    workdir: Path, suite: Suite, profile: Path, inputs: dict[str, Any], limits: Limits, built: set[str], cache: Path
) -> list[str]:
    """Write `workdir/pinned/`; returns what could not be pinned by version (a distribution installed from a path or
    URL that is not one of the built wheels `built`)."""
    target = workdir / PINNED
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(suite.configs, target / "configs", ignore=shutil.ignore_patterns("__pycache__"))
    (target / "profile" / "devices").mkdir(parents=True)  # a configs folder of one profile, as load_profile reads
    shutil.copyfile(profile, target / "profile" / "devices" / profile.name)  # its own name: the digest covers it
    pinned, unpinned = _third_party(suite.python, built | {"torch"}, cache)
    (target / "requirements.txt").write_text("".join(f"{line}\n" for line in pinned), encoding="utf-8")
    document = {
        "limits": asdict(limits),
        "device": suite.device,
        "backend": suite.backend,
        "passed": list(suite.passed),
        "inputs": inputs,
        "unpinned": unpinned,
    }
    (target / "pins.json").write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return unpinned


def read_pins(workdir: Path) -> Pins:
    """`workdir/pinned/`, its config folder and profile checked against the digests the run recorded."""
    folder = workdir / PINNED
    try:
        document = json.loads((folder / "pins.json").read_text(encoding="utf-8"))
        limits = Limits(**document["limits"])
        pins = Pins(
            folder, limits, str(document["device"]), str(document["backend"]), tuple(document["passed"]),
            dict(document["inputs"]), tuple(document["unpinned"]),
        )  # fmt: skip
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise PinError(f"{folder}: no readable pins ({type(exc).__name__}: {exc})") from None
    if tree_sha256(pins.configs) != pins.inputs.get("configs"):
        raise PinError(f"{pins.configs}: differs from the config folder the run recorded")
    if tree_sha256(pins.profile) != pins.inputs.get("profile"):
        raise PinError(f"{pins.profile}: differs from the device profile the run recorded")
    return pins


def _third_party(python: Path, skip: set[str], cache: Path) -> tuple[list[str], list[str]]:
    """The environment's distributions other than `skip` as `name==version` lines, and those it cannot pin so."""
    done = subprocess.run(
        envs.uv(cache, "pip", "freeze", "--python", str(python)), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return [], [f"the environment's packages (uv pip freeze failed: {done.stderr.strip()[:200]})"]
    pinned, unpinned = [], []
    wanted = {envs.normalize_name(name) for name in skip}
    for line in done.stdout.splitlines():
        line = line.strip()
        name = re.split(r"[=@ ]", line, maxsplit=1)[0]
        if not line or envs.normalize_name(name) in wanted:
            continue
        (pinned if _PINNED_LINE.match(line) else unpinned).append(line)
    return sorted(pinned), sorted(unpinned)
