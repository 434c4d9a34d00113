"""The numbers torch's comparison failures carry (`assert_close`, `assertEqual`): how many elements differ, the
greatest absolute and relative differences, and the tolerances they were held to (none for an exact comparison)."""

from __future__ import annotations

import math
import re

_MISMATCHED = re.compile(r"Mismatched elements: (\d+) / (\d+)")
_DIFFERENCE = re.compile(
    r"(?:Greatest )?(absolute|relative) difference: (\S+?)(?: at index \([^)]*\))?(?: \(up to (\S+) allowed\))?$",
    re.IGNORECASE | re.MULTILINE,
)


def mismatch(text: str) -> dict[str, float | int]:
    """The figures of a comparison failure's message; empty when the text is not one. An exact comparison (no
    `up to ... allowed`) is held to 0."""
    facts: dict[str, float | int] = {}
    found = _MISMATCHED.search(text)
    if found:
        facts["mismatched"], facts["elements"] = int(found.group(1)), int(found.group(2))
    for kind, value, allowed in _DIFFERENCE.findall(text):
        prefix = "abs" if kind.lower() == "absolute" else "rel"
        facts[f"max_{prefix}"] = _number(value)
        facts[f"{prefix}_allowed"] = _number(allowed) if allowed else 0.0
    return facts


def _number(text: str) -> float:
    try:
        return float(text.rstrip(".,"))
    except ValueError:
        return math.nan
