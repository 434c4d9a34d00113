"""The embedded test tree's configs, copied into a test's own folder, so a test runs a small slice of the upstream
tree on the device with the pipeline's runner."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from crcr.ci import runner
from crcr.ci.model import Candidate, Combination
from testreuse.loader import embedded_configs

DEVICE_CONFIG = "00-ring-device.yaml"
#: A primary combination with made-up candidates, for runs that skip the backend build.
COMBINATION = Combination(
    "primary",
    "primary",
    Candidate("backend", "HEAD", "a" * 12, "a" * 40),
    Candidate("core", "2.13.0", "2.13.0", "x" * 64),
    Candidate("suite", "embedded", "s" * 12, "s" * 64),
)


def config_folder(target: Path, *files: str) -> Path:
    """`target` holding the device config and the named embedded test-file configs."""
    target.mkdir(parents=True, exist_ok=True)
    for name in (DEVICE_CONFIG, *files):
        shutil.copy(embedded_configs() / name, target / name)
    return target


_BREAK_FLIP = """
import torch

_lib = torch.library.Library("aten", "IMPL")
_lib.impl("flip", lambda self, dims: self.clone(), "PrivateUse1")  # forgets to flip
"""


def broken_flip_env(folder: Path) -> dict[str, str]:
    """The environment of a backend change that breaks aten::flip on the device: a sitecustomize in `folder`, which
    every process of the suite loads, overrides flip's PrivateUse1 kernel with one that forgets to flip."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_BREAK_FLIP)
    return {"PYTHONPATH": str(folder)}


def ring_suite(configs: Path, **fields: object) -> runner.Suite:
    """The embedded suite on `ring`, in this test process's own environment."""
    return runner.Suite(Path(sys.executable), configs, None, "ring", **fields)  # type: ignore[arg-type]
