"""`crcr gate` on a table of real-shaped dispatches: each decision, its reason and the SHA, through the CLI, with the
label race played out against a local GitHub API server whose labels appear late or never."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from crcr.cli import main
from gate_support import DEVICE, fixture, read_github_output, write_policy
from github_api import LocalGitHub

L3 = f"ciflow/crcr/{DEVICE}"
HEAD = "8f3b2c1d4e5f60718293a4b5c6d7e8f901234567"
MERGE = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
PR = 171234
TOKEN = "ghs_gate_test_token_0123456789"


def _pr(action: str, *, labels: tuple[str, ...] = (), base: str = "main", merged: bool = False, **pr: Any) -> dict:
    data = fixture("pr_opened")
    data["payload"]["action"] = action
    body = data["payload"]["pull_request"]
    body["labels"] += [{"id": 9000 + i, "name": name, "color": "ededed", "default": False} for i, name in
                       enumerate(labels)]  # fmt: skip
    body["base"]["ref"], body["merged"] = base, merged
    body["state"] = "closed" if action == "closed" else "open"
    body.update(pr)
    return data


def _push(ref: str, **fields: Any) -> dict:
    data = fixture("push_main")
    data["payload"] |= {"ref": ref, **fields}
    return data


# name -> (client_payload, labels the API shows later {delay: names}, run, reason fragment, sha)
CASES: dict[str, tuple[dict, dict[float, tuple[str, ...]], bool, str, str | None]] = {
    "opened with the label": (fixture("pr_opened_labelled"), {}, True,
                              f"pull request #{PR} (opened) into main carries the label {L3}", HEAD),
    "opened without the label": (fixture("pr_opened"), {}, False,
                                 f"pull request #{PR} (opened) does not carry the label {L3}", HEAD),
    "synchronize with the label": (_pr("synchronize", labels=(L3,)), {}, True, "(synchronize) into main carries", HEAD),
    "reopened with the label": (_pr("reopened", labels=(L3,)), {}, True, "(reopened) into main carries", HEAD),
    "edited with the label": (_pr("edited", labels=(L3,)), {}, False, "action edited is not gated", HEAD),
    "opened into release/2.14": (_pr("opened", labels=(L3,), base="release/2.14"), {}, True, "into release/2.14", HEAD),
    "opened into a non-release base": (_pr("opened", labels=(L3,), base="gh/octo-dev/12/base"), {}, False,
                                       f"pull request #{PR} targets gh/octo-dev/12/base, not a gated branch "
                                       "(main, release/*)", HEAD),
    "closed, merged": (_pr("closed", merged=True), {}, True, f"pull request #{PR} landed on main (merged)", MERGE),
    "closed, merged, no merge commit": (_pr("closed", merged=True, merge_commit_sha=None), {}, True, "(merged)", HEAD),
    "closed with the Merged label": (fixture("pr_closed_merged_label"), {}, True, "landed on main (label Merged)",
                                     MERGE),
    "closed, the label comes late": (fixture("pr_closed_unmerged"), {0.3: ("Merged",)}, True,
                                     "landed on main (label Merged appeared after", MERGE),
    "closed unmerged, the label never comes": (fixture("pr_closed_unmerged"), {0.0: ("open source",), 30: ("Merged",)},
                                               False, "closed unmerged without the label Merged after", MERGE),
    "closed into a non-release base": (_pr("closed", merged=True, base="viable/strict"), {}, False,
                                       "was closed on viable/strict, not a gated branch", MERGE),
    "push to main": (fixture("push_main"), {}, True, "push to main", MERGE),
    "push to release/2.14": (_push("refs/heads/release/2.14"), {}, True, "push to release/2.14", MERGE),
    "ciflow tag push": (fixture("push_ciflow_tag"), {}, True, f"ciflow tag {L3}/{PR} (pull request #{PR})", HEAD),
    "another ciflow tag": (_push("refs/tags/ciflow/trunk/171234"), {}, False, "is not a gated ciflow tag", MERGE),
    "a release tag": (_push("refs/tags/v2.14.0"), {}, False, "tag v2.14.0 is not a gated ciflow tag", MERGE),
    "branch deletion": (fixture("push_branch_deleted"), {}, False, "push deletes refs/heads/gh/octo-dev/12/head", None),
    "deletion by zero after": (_push("refs/heads/feature", after="0" * 40), {}, False, "push deletes", None),
    "push to a feature branch": (_push("refs/heads/fix-flip-dispatch"), {}, False,
                                 "push to fix-flip-dispatch, not a gated branch (main, release/*)", MERGE),
}  # fmt: skip


@pytest.fixture
def api() -> Iterator[LocalGitHub]:
    with LocalGitHub(token=TOKEN) as server:
        yield server


@pytest.fixture
def gate(tmp_path: Path, api: LocalGitHub, monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, dict | None, str]]:  # fmt: skip
    """Run `crcr gate` on a client_payload: (exit code, the decision or None, stderr)."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)

    def run(payload: dict | bytes, *, seconds: float = 1.0, fallback: str = "skip", extra: tuple = ()) -> tuple:
        policy = write_policy(tmp_path, seconds=seconds, fallback=fallback)
        path = tmp_path / "payload.json"
        path.write_bytes(payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        code = main(["gate", "--payload", str(path), "--policy", str(policy), "--github-api", api.url, *extra])
        out, err = capsys.readouterr()
        return code, json.loads(out) if out else None, err

    return run


@pytest.mark.parametrize("name", list(CASES))
def test_the_decision_and_its_reason(name: str, gate: Callable, api: LocalGitHub) -> None:
    payload, later, run, reason, sha = CASES[name]
    for delay, names in later.items():
        api.add_labels("pytorch/pytorch", PR, *names, after=delay)
    code, decision, err = gate(payload)
    assert (code, err) == (0, "")
    assert decision["run"] is run
    assert reason in decision["reason"]
    assert decision["sha"] == sha
    assert decision["combination"] == ("primary" if run else None)
    assert decision["delivery_id"] == payload["delivery_id"]
    assert decision["device"] == DEVICE
    assert list(decision) == sorted(decision)
    polled = [path for path, _ in api.requests if path.startswith(f"/repos/pytorch/pytorch/issues/{PR}/labels")]
    assert bool(polled) is bool(later), "only a closed PR with no sign of landing polls the labels"
    assert all(auth == f"Bearer {TOKEN}" for _, auth in api.requests)


def test_the_pr_facts_are_in_the_decision(gate: Callable) -> None:
    _, decision, _ = gate(fixture("pr_opened_labelled"))
    assert decision | {"reason": ""} == {
        "action": "opened", "base_ref": "main", "combination": "primary",
        "delivery_id": fixture("pr_opened")["delivery_id"], "device": DEVICE, "event": "pull_request", "pr": PR,
        "reason": "", "ref": None, "repository": "pytorch/pytorch", "run": True, "sha": HEAD,
    }  # fmt: skip


def test_the_label_race_fallback_run_says_so(gate: Callable) -> None:
    code, decision, _ = gate(fixture("pr_closed_unmerged"), seconds=0.3, fallback="run")
    assert code == 0
    assert decision["run"] is True
    assert decision["combination"] == "primary"
    assert decision["reason"].endswith("; fallback: run")


def test_polling_is_bounded(gate: Callable, api: LocalGitHub) -> None:
    _, decision, _ = gate(fixture("pr_closed_unmerged"), seconds=0.5)
    polls = len(api.requests)
    assert 2 <= polls <= 0.5 / 0.05 + 2
    assert f"({polls} poll(s)); fallback: skip" in decision["reason"]


def test_polling_off_decides_at_once(gate: Callable, api: LocalGitHub) -> None:
    _, decision, _ = gate(fixture("pr_closed_unmerged"), seconds=0)
    assert decision["reason"] == f"pull request #{PR} was closed unmerged without the label Merged; fallback: skip"
    assert api.requests == []


def test_a_refused_poll_ends_polling_and_is_named_without_the_token(
    gate: Callable, api: LocalGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_wrong_token")
    _, decision, _ = gate(fixture("pr_closed_unmerged"), seconds=5)
    assert len(api.requests) == 1
    assert "last poll failed: GET http://127.0.0.1:" in decision["reason"]
    assert "HTTP 401" in decision["reason"]
    assert "ghs_" not in decision["reason"]


def test_the_device_flag_changes_the_label(gate: Callable, tmp_path: Path) -> None:
    gate(fixture("push_main"))  # writes the policy and the device profiles beside it
    other = next(p.stem for p in sorted((tmp_path / "devices").glob("*.yaml")) if p.stem != DEVICE)
    code, decision, _ = gate(fixture("pr_opened_labelled"), extra=("--device", other))
    assert (code, decision["run"], decision["device"]) == (0, False, other)
    assert decision["reason"].endswith(f"does not carry the label ciflow/crcr/{other}")
    code, decision, err = gate(fixture("pr_opened_labelled"), extra=("--device", "no-such-device"))
    assert (code, decision) == (2, None)
    assert err.startswith("error: ")
    assert "no device profile 'no-such-device'" in err
    assert err.count("\n") == 1


def test_github_output_holds_every_field(gate: Callable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "github_output"
    out.write_text("earlier=kept\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    code, decision, _ = gate(fixture("push_ciflow_tag"))
    assert code == 0
    values = read_github_output(out.read_text())
    assert values.pop("earlier") == "kept"
    assert values == {k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
                      for k, v in decision.items()}  # fmt: skip
    assert values["run"] == "true"
    assert values["pr"] == str(PR)
