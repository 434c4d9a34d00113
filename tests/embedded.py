"""The embedded test tree's configs, copied into a test's own folder, so a test runs a small slice of the upstream
tree on the device with the pipeline's runner."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from crcr.ci import runner
from testreuse.loader import embedded_configs

DEVICE_CONFIG = "00-ring-device.yaml"


def config_folder(target: Path, *files: str) -> Path:
    """`target` holding the device config and the named embedded test-file configs."""
    target.mkdir(parents=True, exist_ok=True)
    for name in (DEVICE_CONFIG, *files):
        shutil.copy(embedded_configs() / name, target / name)
    return target


def ring_suite(configs: Path, **fields: object) -> runner.Suite:
    """The embedded suite on `ring`, in this test process's own environment."""
    return runner.Suite(Path(sys.executable), configs, None, "ring", **fields)  # type: ignore[arg-type]
