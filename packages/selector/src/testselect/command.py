"""What every `testselect` subcommand shares: its exit codes, its one-line usage error and its registration."""

from __future__ import annotations

import argparse
import enum
from collections.abc import Callable
from dataclasses import dataclass

from testselect.index.store import DEFAULT_STORE


class ExitCode(enum.IntEnum):
    OK = 0
    INCOMPLETE = 1  # index --strict skipped an unparsable file; similar or tests found nothing
    USAGE = 2  # bad input: one `error:` line


class CliError(Exception):
    """Bad input: printed as one `error:` line (and maybe a `hint:`), exit 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    setup: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=str(DEFAULT_STORE), help=f"the SQLite index (default: {DEFAULT_STORE})")
