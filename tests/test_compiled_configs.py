"""tools/compiled_configs.py: the compiled variant's configs, written from an observed compiled run, list what
compiled and passed as mandatory and what the compiler refused with its cause, and run green as written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from compiled_configs import main, rules

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = ROOT / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
REFUSED = "InductorError: UnsupportedError: ring_inductor cannot compile aten.cat.default (float16): op masked"


def _record(generic: str, outcome: str, graphs: int = 1, op: str | None = None, dtype: str = "float16", **extra):
    return {"file": "test/test_x.py", "generic": generic, "dtypes": [dtype], "op": op, "outcome": outcome,
            "compiled_graphs": graphs, "nodeid": f"{generic}_{op}_{dtype}", **extra}  # fmt: skip


def test_each_case_is_listed_by_what_its_compiled_run_did() -> None:
    records = [
        _record("T::test_graphs", "passed", op="exp"),
        _record("T::test_graphs", "passed", op="abs"),
        _record("T::test_eager_only", "passed", graphs=0),
        _record("T::test_refused", "failed", failure={"message": REFUSED}),
        _record("T::test_wrong", "failed", failure={"message": "AssertionError: Tensor-likes are not close!"}),
        _record("T::test_mixed", "passed", op="exp"),
        _record("T::test_mixed", "passed", graphs=0, op="abs"),
    ]
    listed = rules(records)["test/test_x.py"]
    assert listed == [
        {"names": ["T::test_graphs"], "only": {"ops": ["abs", "exp"], "dtypes": ["float16"]},
         "mode": "mandatory_success"},
        {"names": ["T::test_refused"], "only": {"dtypes": ["float16"]}, "mode": "xfail_strict",
         "reason": "ring_inductor cannot compile aten.cat.default (float16): op masked"},
    ]  # fmt: skip


def test_a_folder_without_the_compile_setting_is_one_error_line(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path), "test/test_shape_ops.py"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no shared config" in err[0]


def test_a_missing_test_file_is_named(tmp_path: Path, capsys) -> None:
    shutil.copy(EMBEDDED / "configs-compile" / "00-ring-compile.yaml", tmp_path)
    assert main([str(tmp_path), "test/test_nothing_here.py", "--torch-root", str(EMBEDDED)]) == 2
    assert "test_nothing_here.py: no such test file" in capsys.readouterr().err


def test_written_configs_run_green_on_the_device(tmp_path: Path) -> None:
    shutil.copy(EMBEDDED / "configs-compile" / "00-ring-compile.yaml", tmp_path)
    tool = [sys.executable, str(ROOT / "tools" / "compiled_configs.py"), str(tmp_path), "test/test_shape_ops.py",
            "--torch-root", str(EMBEDDED), "-k", "flip or cat"]  # fmt: skip
    written = subprocess.run(tool, capture_output=True, text=True, timeout=600)
    assert written.returncode == 0, written.stderr
    config = yaml.safe_load((tmp_path / "test_shape_ops.yaml").read_text())["test_suite_config"]["files"][0]
    modes = {rule["mode"] for rule in config["tests"]}
    assert modes == {"mandatory_success", "xfail_strict"}, config
    assert any("op masked" in rule.get("reason", "") for rule in config["tests"])
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--testreuse-config", str(tmp_path),
         "--testreuse-device", "ring", "--torch-root", str(EMBEDDED), str(EMBEDDED / "test" / "test_shape_ops.py")],
        cwd=EMBEDDED, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
    assert " passed" in run.stdout
    assert " xfailed" in run.stdout
