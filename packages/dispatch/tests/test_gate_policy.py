"""configs/crcr.yaml: the shipped policy loads with the documented defaults; every bad one is one line
`file:line: field: message`, and `crcr gate` turns it into exit 2."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from crcr.cli import main
from crcr.gate.policy import PolicyError, load_policy
from gate_support import DEVICE, PAYLOADS, REPO, SHIPPED_POLICY


def test_the_shipped_policy() -> None:
    policy = load_policy(SHIPPED_POLICY)
    assert policy.device == DEVICE
    assert policy.combination == "primary"
    assert policy.branches == ("main", "release/*")
    assert policy.actions == ("opened", "reopened", "synchronize")
    assert policy.label == f"ciflow/crcr/{DEVICE}"
    assert policy.merged_label == "Merged"
    assert (policy.poll_seconds, policy.poll_interval, policy.fallback) == (60.0, 5.0, "skip")
    assert policy.tag_prefixes == (f"ciflow/crcr/{DEVICE}/",)


def test_an_empty_policy_takes_the_defaults_but_needs_a_device(tmp_path: Path) -> None:
    shutil.copytree(REPO / "configs" / "devices", tmp_path / "devices")
    (tmp_path / "crcr.yaml").write_text("{}\n")
    with pytest.raises(PolicyError, match=r"crcr\.yaml:1: device: required"):
        load_policy(tmp_path / "crcr.yaml")
    shipped = dataclasses.replace(load_policy(SHIPPED_POLICY), source=tmp_path / "crcr.yaml")
    assert load_policy(tmp_path / "crcr.yaml", DEVICE) == shipped


GOOD = f"device: {DEVICE}\nbranches: [main]\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "landed:\n  fallback: maybe\n", "4: landed.fallback: expected skip or run"),
        (GOOD + "landed:\n  poll:\n    seconds: -1\n", "5: landed.poll.seconds: must be at least 0"),
        (GOOD + "landed:\n  poll: {interval: 0}\n", "4: landed.poll.interval: must be at least 0.01"),
        (GOOD + "pull_request:\n  actoins: [opened]\n", "4: pull_request.actoins: unknown field"),
        (GOOD + "pull_request:\n  actions: opened\n", "4: pull_request.actions: expected a list of strings"),
        (GOOD + "push:\n  tag_prefixes: [ok, '']\n", "4: push.tag_prefixes[1]: expected a non-empty string"),
        (GOOD + "combination: ''\n", "3: combination: expected a non-empty string"),
        (GOOD + "colour: blue\n", ":3: colour: unknown field"),
        (GOOD + "push: [a]\n", "3: push: expected a mapping"),
        ("device: [unclosed\n", ":2:1: not YAML"),
        ("- a list\n", "1: top level: expected a mapping"),
        (GOOD + "pull_request: {label: 3}\n", "3: pull_request.label: expected a non-empty string"),
    ],
)
def test_a_bad_policy_is_one_line_with_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    shutil.copytree(REPO / "configs" / "devices", tmp_path / "devices")
    path = tmp_path / "crcr.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(info.value).startswith(f"{path}:{message}" if message[0].isdigit() else f"{path}{message}")
    assert "\n" not in str(info.value)


def test_an_unknown_device_names_the_profiles(tmp_path: Path) -> None:
    shutil.copytree(REPO / "configs" / "devices", tmp_path / "devices")
    (tmp_path / "crcr.yaml").write_text("device: nowhere\n")
    with pytest.raises(PolicyError, match=r"no device profile 'nowhere' \(profiles: "):
        load_policy(tmp_path / "crcr.yaml")


def test_crcr_gate_with_a_bad_policy_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "crcr.yaml").write_bytes(b"device: caf\xe9\n")
    assert main(["gate", "--payload", str(PAYLOADS / "push_main.json"), "--policy", str(tmp_path / "crcr.yaml")]) == 2
    assert capsys.readouterr() == ("", f"error: {tmp_path / 'crcr.yaml'}: not UTF-8 text\n")
