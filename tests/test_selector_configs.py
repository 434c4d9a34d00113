"""The configs `testselect select` generates for ring on the embedded tree are valid testreuse configs, checked by
testreuse's own CLI (the installed console script): testselect writes YAML as data and never imports testreuse."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = ROOT / "packages" / "testreuse" / "src" / "testreuse" / "upstream"
BIN = Path(sys.executable).parent


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, check=False)


def test_generated_configs_validate(tmp_path: Path) -> None:
    store, out, caps = tmp_path / "s.sqlite", tmp_path / "out", tmp_path / "caps.yaml"
    index = _run(BIN / "testselect", "index", "--torch-root", EMBEDDED, "--store", store)
    assert index.returncode == 0, index.stderr
    export = _run(BIN / "ringsim", "capabilities", "--format", "yaml")
    assert export.returncode == 0, export.stderr
    caps.write_text(export.stdout, encoding="utf-8")
    profile = ROOT / "configs" / "backend.yaml"
    select = _run(
        BIN / "testselect", "select", "--profile", profile, "--capabilities", caps, "--store", store, "--out", out
    )
    assert select.returncode == 0, select.stderr
    generated = sorted(p.name for p in out.iterdir())
    assert generated == sorted(p.stem + ".yaml" for p in (EMBEDDED / "test").glob("test_*.py"))
    for path in out.iterdir():
        for entry in yaml.safe_load(path.read_text())["test_suite_config"]["files"][0]["tests"]:
            assert entry["mode"] in {"mandatory_success", "xfail", "xfail_strict", "skip"}
            assert entry["reason"], entry
    # The device file stays the user's: testselect writes none, so the embedded one joins the generated ones.
    shutil.copy(EMBEDDED / "configs" / "00-ring-device.yaml", out)
    validate = _run(BIN / "testreuse", "validate", out)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert validate.stdout.startswith(f"ok: {len(generated) + 1} config file(s)"), validate.stdout
