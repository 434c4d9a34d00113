"""Compiled runs (`compile:` in a config) through torch's own switch, the one upstream's dynamo and inductor CI
shards use: with `PYTORCH_TEST_WITH_INDUCTOR=1` (or `_AOT_EAGER`, `_DYNAMO`) torch's `TestCase.run` wraps every test
in torch.compile, resets dynamo per test, and honours `skipIfTorchInductor` and its kin. The flags are read when
torch's test helpers are first imported, so they are set before any upstream file is collected. `dynamic: false`
keeps recompiles static, for a backend that compiles static shapes only."""

from __future__ import annotations

import os
import sys

from testreuse import torchbridge
from testreuse.loader import CompileSetting

#: torch's environment switch for each compiled mode (torch.testing._internal.common_utils reads it at import).
FLAGS = {
    "inductor": "PYTORCH_TEST_WITH_INDUCTOR",
    "aot_eager": "PYTORCH_TEST_WITH_AOT_EAGER",
    "dynamo": "PYTORCH_TEST_WITH_DYNAMO",
}
HELPERS = "torch.testing._internal.common_utils"


class CompileModeError(Exception):
    """The compiled mode cannot take effect in this process; one line saying why."""


def enable(setting: CompileSetting | None) -> None:
    """Set torch's flag for `setting` before torch's test helpers load. When they have already been imported (a
    conftest did), the flag must already be set, or the run would silently be eager."""
    if setting is None:
        return
    flag = FLAGS[setting.mode]
    if HELPERS in sys.modules and os.environ.get(flag) != "1":
        raise CompileModeError(
            f"{setting.location}: compile: {setting.mode} needs {flag}=1 before torch's test helpers are imported, "
            f"and something imported them first: set {flag}=1 in the environment"
        )
    os.environ[flag] = "1"
    if setting.dynamic is False:
        torchbridge.static_recompiles()


def mode_of_environment() -> str | None:
    """The compiled mode torch's flags already ask for, so results say how a run really ran."""
    return next((mode for mode, flag in FLAGS.items() if os.environ.get(flag) == "1"), None)
