"""Hostile or broken input: one located error line and a non-zero exit, never a traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testreuse.cli import ExitCode, main
from testreuse.yamlmarks import MAX_DEPTH, MAX_NODES

BACKENDS = Path(__file__).resolve().parent / "backends"
LIST = [sys.executable, "-m", "testreuse", "list"]


def errors_of(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    """Run `testreuse validate ...` in-process; it must fail with one `error:` line per problem and no traceback."""
    code = main(["validate", *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert code == ExitCode.INVALID_CONFIG, captured
    lines = captured.err.splitlines()
    assert lines
    assert all(line.startswith("error: ") for line in lines), lines
    return [line.removeprefix("error: ") for line in lines]


def test_deep_nesting_is_refused_where_it_gets_too_deep(tmp_path: Path, capsys, torch_root: Path) -> None:
    config = tmp_path / "deep.yaml"
    config.write_text("test_suite_config:\n" + "".join(f"{'  ' * (i + 1)}k:\n" for i in range(3000)))
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root))
    assert line == f"{config}:{MAX_DEPTH}:{2 * MAX_DEPTH - 1}: invalid YAML: nesting deeper than {MAX_DEPTH} levels"


def test_flow_nesting_and_nesting_stacked_by_aliases_are_refused(tmp_path: Path, capsys, torch_root: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text("test_suite_config: " + "[" * 3000 + "]" * 3000 + "\n")
    (line,) = errors_of(capsys, str(flow), "--torch-root", str(torch_root))
    assert line.startswith(f"{flow}:1:")
    assert "nesting" in line  # libyaml's own limit may stop it first: "exceeded maximum nesting depth"
    stacked = tmp_path / "stacked.yaml"
    depth = MAX_DEPTH // 2
    stacked.write_text(
        f"a: &a {'[' * depth}{']' * depth}\nb: &b {'[' * depth}*a{']' * depth}\nc: {'[' * depth}*b{']' * depth}\n"
    )
    (line,) = errors_of(capsys, str(stacked), "--torch-root", str(torch_root))
    assert line.startswith(f"{stacked}:1:")
    assert line.endswith("after alias expansion")


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path, capsys, torch_root: Path) -> None:
    config = tmp_path / "self.yaml"
    config.write_text("test_suite_config:\n  labels: &a [*a]\n")
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root))
    assert line == f"{config}:2:11: invalid YAML: an alias refers to a node that contains it"


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path, capsys, torch_root: Path) -> None:
    levels = [f"l0: &l0 [{', '.join(['x'] * 9)}]"]
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    config = tmp_path / "bomb.yaml"
    config.write_text("\n".join(levels) + "\n")
    started = time.monotonic()
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root))
    assert time.monotonic() - started < 5
    assert line.startswith(f"{config}:")
    assert line.endswith(f"more than {MAX_NODES} nodes after alias expansion")


def test_a_capabilities_file_that_is_not_utf8_is_one_line(tmp_path: Path, capsys, torch_root: Path) -> None:
    (tmp_path / "caps.yaml").write_bytes(b"supported_dtypes: [{name: \xff\xfe}]\n")
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  global:\n    capabilities: {file: caps.yaml}\n")
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root))
    assert line.startswith(
        f"{config}:3:19: test_suite_config.global.capabilities.file: cannot read {tmp_path}/caps.yaml"
    )
    assert "can't decode byte 0xff" in line


@pytest.mark.parametrize(
    ("only", "expected"),
    [
        ("{}", ":5:72: test_suite_config.files[0].tests[0].only: an empty scope matches no case"),
        ("{ops: []}", ":5:78: test_suite_config.files[0].tests[0].only.ops: List should have at least 1 item"),
        ("{dtypes: [], ops: [add]}", ".only.dtypes: List should have at least 1 item"),
        ("{dtypes: [[]]}", ".only.dtypes[0]: [] is neither a dtype name nor a non-empty list of dtype names"),
        ("{dtypes: [[float32, nosuch]]}", ".only.dtypes[0]: 'nosuch' is not a torch dtype"),
    ],
)
def test_empty_scopes_are_refused(tmp_path: Path, capsys, torch_root: Path, only: str, expected: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_small.py\n      tests:\n"
        f"        - {{names: [TestSmall::test_op], mode: mandatory_success, only: {only}}}\n"
    )
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root))
    assert line.startswith(str(config))
    assert expected in line


def test_validate_runs_a_capabilities_command_only_when_asked(tmp_path: Path, capsys, torch_root: Path) -> None:
    marker = tmp_path / "ran"
    command = f'{sys.executable} -c \'open("{marker}", "w"); print("supported_dtypes: [{{name: float33}}]")\''
    config = tmp_path / "c.yaml"
    config.write_text(f"test_suite_config:\n  global:\n    capabilities:\n      command: >-\n        {command}\n")
    assert main(["validate", str(config), "--torch-root", str(torch_root)]) == ExitCode.OK
    assert f"note: capabilities command not run: {command}" in capsys.readouterr().out
    assert not marker.exists()
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root), "--run-capabilities")
    assert marker.exists()
    assert line.endswith("supported_dtypes[0].name: 'float33' is not a torch dtype")


def test_a_command_not_on_path_runs_as_this_interpreters_console_script(
    tmp_path: Path, capsys, torch_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    config = tmp_path / "c.yaml"
    args = [str(config), "--torch-root", str(torch_root), "--run-capabilities"]
    # `testreuse schema` prints a JSON object whose keys an export ignores: it runs, and exports nothing.
    config.write_text("test_suite_config:\n  global:\n    capabilities: {command: testreuse schema}\n")
    assert main(["validate", *args]) == ExitCode.OK, capsys.readouterr().err
    config.write_text("test_suite_config:\n  global:\n    capabilities: {command: testreuse schema --check none}\n")
    (ran,) = errors_of(capsys, *args)
    assert ran.endswith(
        "test_suite_config.global.capabilities.command: exited with 5: hint: run `testreuse schema --output none`"
    )
    config.write_text("test_suite_config:\n  global:\n    capabilities: {command: no-such-exporter --yaml}\n")
    (missing,) = errors_of(capsys, *args)
    assert missing == (
        f"{config}:3:19: test_suite_config.global.capabilities.command: cannot run: 'no-such-exporter' is not on PATH "
        f"and no console script of that name is installed for {sys.executable}"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"x = 1\0\n", "cannot parse upstream file test_small.py: source code string cannot contain null bytes"),
        (
            b"x = " + b"(" * 300 + b")" * 300 + b"\n",
            "cannot parse upstream file test_small.py: too many nested parentheses",
        ),
        (b"x = '\xff'\n", "cannot parse upstream file test_small.py: 'utf-8' codec can't decode byte 0xff"),
    ],
)
def test_an_unparsable_upstream_file_is_one_line(
    tmp_path: Path, capsys, torch_root: Path, source: bytes, message: str
) -> None:
    (torch_root / "test" / "test_small.py").write_bytes(source)
    config = tmp_path / "c.yaml"
    config.write_text("test_suite_config:\n  files: [{path: '${TORCH_ROOT}/test/test_small.py'}]\n")
    (line,) = errors_of(capsys, str(config), "--torch-root", str(torch_root))
    assert line.startswith(f"{config}:2:11: path: {message}")


def test_list_fails_naming_an_upstream_file_that_cannot_import(tmp_path: Path, torch_root: Path) -> None:
    (torch_root / "test" / "test_broken.py").write_text("import no_such_module_anywhere\n")
    config = tmp_path / "c.yaml"
    config.write_text(
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_small.py\n"
        "    - path: ${TORCH_ROOT}/test/test_broken.py\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(BACKENDS), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [*LIST, str(config), "--torch-root", str(torch_root), "--backend", "fallback_backend:load"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == ExitCode.COLLECTION_FAILED, done
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == (
        "error: 1 upstream file(s) failed to collect: test/test_broken.py (cannot import upstream file "
        f"{torch_root / 'test' / 'test_broken.py'}: ModuleNotFoundError: No module named 'no_such_module_anywhere')"
    )


def test_a_reasonless_xfail_warns_and_validate_strict_refuses_it(tmp_path: Path, capsys, torch_root: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "test_suite_config:\n  files:\n    - path: ${TORCH_ROOT}/test/test_small.py\n      tests:\n"
        "        - names: [TestSmall::test_plain]\n          mode: xfail\n"
        "        - names: [TestSmall::test_fill]  # a trailing comment is a reason\n          mode: xfail_strict\n"
    )
    args = [str(config), "--torch-root", str(torch_root)]
    assert main(["validate", *args]) == ExitCode.OK
    captured = capsys.readouterr()
    assert captured.out.startswith("ok: 1 config file(s)")
    assert captured.err.splitlines() == [
        f"warning: {config}:5:11: test_suite_config.files[0].tests[0]: mode xfail has no reason (no `reason:` or "
        "comment): its cases record 'none given'"
    ]
    (line,) = errors_of(capsys, *args, "--strict")
    assert line == (
        f"{config}:5:11: test_suite_config.files[0].tests[0]: mode xfail needs a reason: a `reason:` or a comment "
        "above the entry or on its lines"
    )
    done = subprocess.run(
        [sys.executable, "-m", "testreuse", "validate", *args, "--strict"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (ExitCode.INVALID_CONFIG, "", f"error: {line}\n")
