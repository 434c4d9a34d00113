"""`ringsim run`: the breakdown for a good program, one `error:` line and a non-zero exit for anything else."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pathlib
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ringsim import faults
from ringsim.cli import ExitCode, main

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = json.loads((EXAMPLES / "add_fp16.json").read_text())


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def write(directory: pathlib.Path, content: str | bytes, name: str = "program.json") -> pathlib.Path:
    path = directory / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def assert_one_error_line(code: int, err: str) -> None:
    assert code != ExitCode.OK
    assert code != ExitCode.INTERNAL_ERROR, err
    assert err.startswith("error: ")
    assert err.count("\n") == 1, err


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.json")), ids=lambda path: path.stem)
def test_examples_run(example: pathlib.Path) -> None:
    code, out, err = run_cli("run", str(example))
    assert (code, err) == (ExitCode.OK, "")
    for line in ("compute", "memory", "communication", "roofline bound", "device memory", "achieved"):
        assert line in out


def test_json_report_is_deterministic_and_complete() -> None:
    path = str(EXAMPLES / "add_fp16.json")
    code, out, _ = run_cli("run", path, "--json")
    assert code == ExitCode.OK
    assert run_cli("run", path, "--json")[1] == out
    report = json.loads(out)
    assert report["bytes"] == {"read": 2 * 2 * 4096 * 2, "written": 2 * 4096 * 2, "ring": 0}
    assert set(report["cycles"]) == {"total", "compute", "memory", "communication", "roofline_bound"}
    assert set(report["cores"]) == {"0", "1"}


def test_cores_report_lists_each_core() -> None:
    code, out, _ = run_cli("run", str(EXAMPLES / "add_fp16.json"), "--cores-report")
    assert code == ExitCode.OK
    rows = [line.split() for line in out.splitlines() if line.strip().split(" ")[0] in {"0", "1"}]
    assert [row[0] for row in rows] == ["0", "1"]


def test_help_lists_exit_codes() -> None:
    code, out, _ = run_cli("--help")
    assert code == ExitCode.OK
    for exit_code in ExitCode:
        assert f"{exit_code.value}  {exit_code.name.lower().replace('_', ' ')}" in out


def test_usage_errors() -> None:
    assert run_cli("run")[0] == ExitCode.USAGE_ERROR
    assert run_cli("frobnicate")[0] == ExitCode.USAGE_ERROR


def test_missing_file(tmp_path: pathlib.Path) -> None:
    code, _, err = run_cli("run", str(tmp_path / "absent.json"))
    assert_one_error_line(code, err)
    assert "absent.json: cannot read" in err


def test_invalid_json_names_line_and_column(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, '{\n  "format": "ringsim-program/1",\n  "name": oops\n}')
    code, _, err = run_cli("run", str(path))
    assert_one_error_line(code, err)
    assert f"{path}:3:11: invalid JSON" in err


def test_not_utf8(tmp_path: pathlib.Path) -> None:
    code, _, err = run_cli("run", str(write(tmp_path, b"\xff\xfe{")))
    assert_one_error_line(code, err)


def test_validation_error_names_core_and_instruction(tmp_path: pathlib.Path) -> None:
    document = copy.deepcopy(EXAMPLE)
    document["cores"][1]["instructions"][1]["offset"] = 100
    path = write(tmp_path, json.dumps(document))
    code, _, err = run_cli("run", str(path))
    assert_one_error_line(code, err)
    assert err.startswith(f"error: {path}: core 1 instruction 1 (dma_in): buffer offset 100 is not aligned")


def test_debug_shows_the_traceback(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "[")
    with pytest.raises(Exception, match="invalid JSON"):
        run_cli("--debug", "run", str(path))


def test_transient_device_error_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV_VAR, f"transient@{faults.kernels_launched() + 1}")
    try:
        code, _, err = run_cli("run", str(EXAMPLES / "add_fp16.json"))
    finally:
        faults.clear()
    assert code == ExitCode.DEVICE_ERROR
    assert_one_error_line(code, err)
    assert "injected fault 'transient'" in err


def test_bad_fault_env_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV_VAR, "explode@1")
    try:
        code, _, err = run_cli("run", str(EXAMPLES / "add_fp16.json"))
    finally:
        faults.clear()
    assert code == ExitCode.USAGE_ERROR
    assert err.startswith(f"error: {faults.ENV_VAR}: invalid fault 'explode@1': expected KIND@N")
    assert err.count("\n") == 1


# -- fuzz: whatever the file holds, one error line and an exit code, never a traceback ----------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=24,
)
SCALARS = [None, True, 0, 1, -1, 7, 64, 100, 127, 128, 4096, 10**12, 1.5]
NAMES = ["", "a", "x", "zz", "float64", "int64", "bool", "add", "mm", "sum", "copy", "cast", "_softmax", "dma_in"]
REPLACEMENTS = st.sampled_from([*SCALARS, *NAMES, "send", "recv", "barrier", [], [0], [64, 64], {}, {"a": 1}])


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


@st.composite
def mutated_programs(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(EXAMPLE)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths[1:]))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        value = copy.deepcopy(draw(REPLACEMENTS | JSON_VALUES))  # sampled lists are shared objects: never alias them
        if action == "replace":
            parent[path[-1]] = value
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "attrs", "init", "tiles", "op"]))] = value
        else:
            parent.append(value)
    return document


def _run_content(content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = write(pathlib.Path(directory), content)
        code, out, err = run_cli("run", str(path))
    if code == ExitCode.OK:
        assert err == ""
        assert "cycles" in out
    else:
        assert_one_error_line(code, err)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_programs())
def test_fuzz_mutated_programs(document: Any) -> None:
    _run_content(json.dumps(document))


@settings(max_examples=100, deadline=None)
@given(JSON_VALUES)
def test_fuzz_random_json(document: Any) -> None:
    _run_content(json.dumps(document))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_fuzz_random_bytes(content: str | bytes) -> None:
    _run_content(content)


def test_capabilities_is_wired() -> None:
    code, out, err = run_cli("capabilities", "--format", "json")
    assert (code, err) == (ExitCode.OK, "")
    assert json.loads(out)
