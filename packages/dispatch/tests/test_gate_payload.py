"""Every malformed client_payload is one `error:` line naming the field, exit 2, nothing on stdout: wrong types,
missing fields, bad shapes, hostile strings, oversized input, input that is not JSON or not UTF-8."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crcr.cli import main
from crcr.gate.payload import MAX_BYTES, valid_ref
from gate_support import fixture, write_policy


def _set(name: str, path: str, value: Any) -> bytes:
    data = fixture(name)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is KeyError:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return json.dumps(data).encode()


PR, PUSH = "pr_opened_labelled", "push_main"
P = "payload.pull_request"
CASES = {
    "base ref not a string": (_set(PR, f"{P}.base.ref", 7), f"{P}.base.ref: expected a string"),
    "head sha missing": (_set(PR, f"{P}.head.sha", KeyError), f"{P}.head.sha: required (a string)"),
    "head sha short": (_set(PR, f"{P}.head.sha", "8f3b2c1"), f"{P}.head.sha: not the shape of a 40-hex sha"),
    "head sha upper case": (_set(PR, f"{P}.head.sha", "A" * 40), f"{P}.head.sha: not the shape of a 40-hex sha"),
    "merged not a bool": (_set(PR, f"{P}.merged", "false"), f"{P}.merged: expected true or false"),
    "number a bool": (_set(PR, "payload.number", True), "payload.number: expected a positive integer"),
    "numbers differ": (_set(PR, f"{P}.number", 1), f"{P}.number: differs from payload.number"),
    "title with a newline": (_set(PR, f"{P}.title", "fix\nrun=true"), f"{P}.title: holds a control character"),
    "title with NUL": (_set(PR, f"{P}.title", "fix\x00"), f"{P}.title: holds a control character"),
    "title with a line separator": (_set(PR, f"{P}.title", "a\u2028b"), f"{P}.title: holds a line separator"),
    "title of 100k characters": (_set(PR, f"{P}.title", "t" * 60_000), f"{P}.title: expected 1 to 1024 characters"),
    "label with an escape": (_set(PR, f"{P}.labels.2.name", "ciflow\x1b[2J"),
                             f"{P}.labels[2].name: holds a control character"),
    "label not an object": (_set(PR, f"{P}.labels.0", "Merged"), f"{P}.labels[0]: expected an object"),
    "labels not a list": (_set(PR, f"{P}.labels", {"name": "x"}), f"{P}.labels: expected a list"),
    "too many labels": (_set(PR, f"{P}.labels", [{"name": f"l{i}"} for i in range(101)]),
                        f"{P}.labels: more than 100 entries"),
    "branch with ..": (_set(PR, f"{P}.head.ref", "a..b"), f"{P}.head.ref: not a valid git ref name"),
    "branch with a space": (_set(PR, f"{P}.base.ref", "main; rm -rf /"), f"{P}.base.ref: not a valid git ref name"),
    "branch with a bidi override": (_set(PR, f"{P}.head.ref", "fix\u202egnp"),
                                    f"{P}.head.ref: holds a bidirectional override"),
    "branch of 300 characters": (_set(PR, f"{P}.head.ref", "b" * 300), f"{P}.head.ref: expected 1 to 255 characters"),
    "empty base ref": (_set(PR, f"{P}.base.ref", ""), f"{P}.base.ref: expected 1 to 255 characters, got 0"),
    "head repo not an object": (_set(PR, f"{P}.head.repo", []), f"{P}.head.repo: expected an object"),
    "repository name": (_set(PR, "payload.repository.full_name", "../etc"),
                        "payload.repository.full_name: not the shape of owner/name"),
    "action with capitals": (_set(PR, "payload.action", "Opened"),
                             "payload.action: not the shape of a lower-case word"),
    "unknown event type": (_set(PR, "event_type", "issues"), "event_type: expected pull_request or push"),
    "delivery id with a slash": (_set(PR, "delivery_id", "a/b"), "delivery_id: not the shape of a delivery id"),
    "payload a list": (_set(PR, "payload", []), "payload: expected an object"),
    "push ref outside refs/": (_set(PUSH, "payload.ref", "main"), "payload.ref: expected refs/heads/... or refs/tags/"),
    "push ref ending in .lock": (_set(PUSH, "payload.ref", "refs/heads/x.lock"), "payload.ref: not a valid git ref"),
    "push after missing": (_set(PUSH, "payload.after", KeyError), "payload.after: required (a string)"),
    "push deleted a string": (_set(PUSH, "payload.deleted", "no"), "payload.deleted: expected true or false"),
    "lone surrogate": (json.dumps(fixture(PR)).replace('"opened"', '"op\\ud800ened"', 1).encode(),
                       "payload.action: holds a lone surrogate"),
    "over the cap": (json.dumps(fixture(PR) | {"pad": "x" * MAX_BYTES}).encode(),
                     "client_payload: more than 65,536 bytes (GitHub's client_payload cap)"),
    "not JSON": (b'{"event_type": ', "client_payload: not JSON: Expecting value at line 1 column 16"),
    "NaN": (b'{"event_type": NaN}', "client_payload: not JSON: NaN is not JSON"),
    "a huge integer": (b'{"n": ' + b"9" * 5000 + b"}", "client_payload: not JSON: Exceeds the limit"),
    "nested too deeply": (b"[" * 50_000, "client_payload: not JSON: nested too deeply"),
    "not UTF-8": (b'{"event_type": "\xff"}', "client_payload: not UTF-8 text"),
    "top level a list": (b"[]", "client_payload: expected an object"),
    "empty": (b"", "client_payload: not JSON: Expecting value at line 1 column 1"),
}  # fmt: skip


@pytest.fixture
def gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[[bytes], tuple[int, str, str]]:
    policy = write_policy(tmp_path, seconds=0)

    def run(raw: bytes) -> tuple[int, str, str]:
        (tmp_path / "payload.json").write_bytes(raw)
        code = main(["gate", "--payload", str(tmp_path / "payload.json"), "--policy", str(policy)])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize("name", list(CASES))
def test_a_malformed_payload_is_one_line_naming_the_field(name: str, gate: Callable) -> None:
    raw, message = CASES[name]
    code, out, err = gate(raw)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {message}")
    assert err.count("\n") == 1
    assert err.endswith("\n")


def test_unknown_extra_fields_are_fine(gate: Callable) -> None:
    data = fixture(PR)
    data["payload"]["pull_request"]["something_new"] = {"nested": ["\x00 anything"]}
    data["payload"]["installation"] = {"id": 1}
    code, out, _ = gate(json.dumps(data).encode())
    assert code == 0
    assert json.loads(out)["run"] is True


def test_the_contract_fields_alone_are_enough(gate: Callable) -> None:
    sha = "8f3b2c1d4e5f60718293a4b5c6d7e8f901234567"
    pr = {"number": 9, "head": {"sha": sha, "repo": {"full_name": "octo/pytorch"}}, "base": {"ref": "main"},
          "labels": [{"name": "Merged"}], "merged": False, "merge_commit_sha": None}  # fmt: skip
    webhook = {"action": "closed", "number": 9, "pull_request": pr, "repository": {"full_name": "pytorch/pytorch"}}
    code, out, _ = gate(json.dumps({"event_type": "pull_request", "delivery_id": "d-1", "payload": webhook}).encode())
    assert code == 0
    assert (json.loads(out)["run"], json.loads(out)["sha"]) == (True, sha)
    push = {"ref": "refs/heads/main", "before": "0" * 40, "after": sha, "repository": {"full_name": "pytorch/pytorch"}}
    code, out, _ = gate(json.dumps({"event_type": "push", "delivery_id": "d-2", "payload": push}).encode())
    assert (code, json.loads(out)["run"]) == (0, True)


def test_a_deleted_fork_is_a_null_head_repo(gate: Callable) -> None:
    code, out, _ = gate(_set(PR, f"{P}.head.repo", None))
    assert code == 0
    assert json.loads(out)["run"] is True


def test_exactly_the_cap_is_read(gate: Callable) -> None:
    text = json.dumps(fixture(PUSH))
    code, _, _ = gate((text + " " * (MAX_BYTES - len(text))).encode())
    assert code == 0


def test_the_payload_from_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    policy = write_policy(tmp_path, seconds=0)
    raw = json.dumps(fixture(PUSH)).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    assert main(["gate", "--payload", "-", "--policy", str(policy)]) == 0
    assert json.loads(capsys.readouterr().out)["reason"] == "push to main"


def test_a_missing_payload_file_is_one_line(gate: Callable, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    policy = write_policy(tmp_path, seconds=0)
    assert main(["gate", "--payload", str(tmp_path / "none.json"), "--policy", str(policy)]) == 2
    assert (
        capsys.readouterr().err == f"error: --payload: cannot read {str(tmp_path / 'none.json')!r}: "
        "No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("name", "valid"),
    [("main", True), ("release/2.14", True), ("gh/user/1/head", True), ("refs/tags/ciflow/x/1", True),
     ("a..b", False), ("-rf", False), ("a/", False), ("/a", False), ("a//b", False), ("a.lock", False),
     ("a/.b", False), ("a@{1}", False), ("@", False), ("a b", False), ("a~1", False), ("a^", False), ("a:b", False),
     ("a?", False), ("a*", False), ("a[", False), ("a\\b", False), ("a\x7f", False), ("", False), ("x" * 256, False)],
)  # fmt: skip
def test_ref_names_follow_git_check_ref_format(name: str, valid: bool) -> None:
    assert valid_ref(name) is valid
