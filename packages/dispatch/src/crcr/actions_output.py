"""GitHub Actions step outputs, written so that no value can forge another output.

Every output uses the `name<<DELIMITER` form with a fresh random delimiter (as actions/toolkit does): a value holding
newlines or a `name=value` line stays inside its own heredoc, and a value that contains the delimiter is refused.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")

#: What an output value may be; None is written as "", booleans as "true"/"false" (what `if:` expressions compare).
Value = str | int | bool | None


class OutputError(Exception):
    """Outputs that cannot be written: a bad name, a value holding the delimiter, or an unwritable file."""


def render(value: Value) -> str:
    """The text GitHub sees for one value."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_outputs(values: Mapping[str, Value], path: str | None = None) -> bool:
    """Append `values` to the file named by `path` (default: `$GITHUB_OUTPUT`); False when there is no such file."""
    target = path if path is not None else os.environ.get("GITHUB_OUTPUT", "")
    if not target:
        return False
    chunks = []
    for name, value in values.items():
        if not _NAME.fullmatch(name):
            raise OutputError(f"GITHUB_OUTPUT: {name!r:.60}: not an output name")
        text, delimiter = render(value), f"ghadelimiter_{secrets.token_hex(16)}"
        if delimiter in text:
            raise OutputError(f"GITHUB_OUTPUT: {name}: the value holds the delimiter")
        chunks.append(f"{name}<<{delimiter}\n{text}\n{delimiter}\n")
    try:
        with open(target, "a", encoding="utf-8", newline="\n") as handle:
            handle.write("".join(chunks))
    except OSError as exc:
        raise OutputError(f"GITHUB_OUTPUT: cannot write: {exc.strerror or type(exc).__name__}") from None
    return True
