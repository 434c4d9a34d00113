"""Subcommands kept in their own modules: each module here defines `COMMAND`, a `testselect.command.Command`."""

from __future__ import annotations

import importlib
import pkgutil

from testselect.command import Command


def discovered() -> tuple[Command, ...]:
    """Every module's `COMMAND`, in module-name order (the order `testselect --help` lists them)."""
    found = []
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        found.append(importlib.import_module(f"{__name__}.{module}").COMMAND)
    return tuple(found)
