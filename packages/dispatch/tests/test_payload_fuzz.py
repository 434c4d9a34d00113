"""Property-based fuzz of `crcr gate`: real-shaped payloads mutated (fields dropped or retyped, huge strings,
control characters, random JSON, random bytes) always end in exit 0 with one decision or exit 2 with exactly one
`error:` line, never a traceback, and never start a process."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from crcr.cli import main
from gate_support import fixtures, no_process_spawned, read_github_output, write_policy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from payload_mutations import mutate

FIXTURES = fixtures()
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    write_policy(folder, seconds=0)  # no label polling: nothing leaves the process
    return folder


def _gate(workdir: Path, raw: bytes) -> None:
    """Feed `raw` to `crcr gate` and check the outcome's shape."""
    (workdir / "payload.json").write_bytes(raw)
    outputs = workdir / "github_output"
    outputs.write_text("")
    out, err = io.StringIO(), io.StringIO()
    argv = ["gate", "--payload", str(workdir / "payload.json"), "--policy", str(workdir / "crcr.yaml"),
            "--github-api", "http://127.0.0.1:9"]  # fmt: skip
    environment = mock.patch.dict(os.environ, {"GITHUB_OUTPUT": str(outputs)})
    with environment, no_process_spawned(), redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    assert code in (0, 2)
    if code == 2:
        assert out.getvalue() == ""
        assert err.getvalue().startswith("error: ")
        assert err.getvalue().count("\n") == 1
        assert err.getvalue().endswith("\n")
        assert outputs.read_text() == ""
    else:
        assert err.getvalue() == ""
        decision = json.loads(out.getvalue())
        assert isinstance(decision["run"], bool)
        assert isinstance(decision["reason"], str)
        assert set(read_github_output(outputs.read_text())) == set(decision)


@SETTINGS
@given(name=st.sampled_from(sorted(FIXTURES)), rng=st.randoms(use_true_random=False))
def test_mutated_real_payloads(workdir: Path, name: str, rng: Any) -> None:
    _gate(workdir, mutate(FIXTURES[name], rng))


@SETTINGS
@given(raw=st.binary(max_size=2048))
def test_random_bytes(workdir: Path, raw: bytes) -> None:
    _gate(workdir, raw)


@SETTINGS
@given(name=st.sampled_from(sorted(FIXTURES)), value=JSON, where=st.sampled_from(["top", "payload", "pull_request"]))
def test_random_json_in_place_of_a_part(workdir: Path, name: str, value: Any, where: str) -> None:
    doc = FIXTURES[name] if where == "top" else json.loads(json.dumps(FIXTURES[name]))
    if where == "payload":
        doc["payload"] = value
    elif where == "pull_request":
        doc["payload"]["pull_request"] = value
    _gate(workdir, json.dumps(value if where == "top" else doc).encode())


def test_the_guard_catches_a_spawn() -> None:
    import subprocess

    with no_process_spawned(), pytest.raises(AssertionError, match="a process was started"):
        subprocess.run(["true"], check=False)
    with no_process_spawned(), pytest.raises(AssertionError, match="a process was started"):
        os.system("true")
