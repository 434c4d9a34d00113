"""tools/refresh_configs.py: the observation copy keeps every rule's location, so triage can rewrite the originals."""

from __future__ import annotations

import yaml
from refresh_configs import _as_mandatory

CONFIG = """\
test_suite_config:
  files:
    - path: ${TORCH_ROOT}/test/test_x.py
      tests:
        - names: [TestX::test_a]
          mode: xfail_strict
          reason: "device lacks aten::sort"
        - names: [TestX::test_b]
          mode: skip
          reason: "too slow"
"""


def test_observation_copy_keeps_every_line_and_runs_xfail_rules_as_mandatory() -> None:
    copy = _as_mandatory(CONFIG)
    assert len(copy.splitlines()) == len(CONFIG.splitlines())
    rules = yaml.safe_load(copy)["test_suite_config"]["files"][0]["tests"]
    assert [r["mode"] for r in rules] == ["mandatory_success", "skip"]
    assert "reason" not in rules[0]
    assert rules[1]["reason"] == "too slow"
