"""testreuse knows no device: no backend is named anywhere in its code (the embedded upstream tree aside)."""

from __future__ import annotations

import re
from pathlib import Path

import testreuse

DEVICE_NAMES = re.compile(r"\b(ring|ringsim|fallbackdev|cuda|openreg)\b", re.IGNORECASE)


def test_no_device_name_in_the_source() -> None:
    package = Path(testreuse.__file__).resolve().parent
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(package.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DEVICE_NAMES.search(line)
    ]
    assert found == []
