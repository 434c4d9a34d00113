"""The pipeline names no device: every device-specific fact lives in a profile under configs/devices/, so a second
privateuse1 backend needs a profile, not a branch in the code or the workflows."""

from __future__ import annotations

import re
from pathlib import Path

import crcr
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PROFILES = sorted((REPO / "configs" / "devices").glob("*.yaml"))


def _device_words() -> set[str]:
    words = set()
    for profile in PROFILES:
        data = yaml.safe_load(profile.read_text())
        words |= {profile.stem, data["device"]}
        words |= {re.split(r"[\[<>=;: ]", r)[0] for r in data.get("requirements", [])}
        words |= {str(data.get("backend", "")).split(":")[0]} - {""}
    return words - {"tributary-testreuse"}  # the test-reuse plugin is every device's, not one device's


@pytest.mark.skipif(not PROFILES, reason="no device profiles beside this package (run from the repository)")
def test_no_device_name_in_the_pipeline_or_the_workflows() -> None:
    words = _device_words()
    assert {"ring", "fallbackdev"} <= words
    sources = sorted(Path(crcr.__file__).parent.rglob("*.py")) + sorted((REPO / "workflows").glob("*.yml"))
    found = []
    for path in sources:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            hits = {w for w in words if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", line)}
            found += [f"{path.name}:{number}: {w}" for w in sorted(hits)]
    assert found == []
