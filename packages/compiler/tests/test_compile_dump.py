"""The dump option writes each kernel's program and decisions; a dumped program runs as is; big rows use many cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ring_inductor import config
from ring_inductor.checking import compiled_run, float64_reference
from ring_inductor.tolerance import device_bound, excess


@pytest.fixture
def dump_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(config, "dump_dir", str(tmp_path))
    return tmp_path


def test_large_pointwise_splits_rows_across_cores_and_dumps(dump_dir: Path) -> None:
    x, y = torch.randn(2048, 256, dtype=torch.float16), torch.randn(2048, 256, dtype=torch.float16)
    fn = lambda x, y: x * y + 1  # noqa: E731
    out, kernels = compiled_run(fn, x, y)
    assert excess(out, float64_reference(fn, x, y), device_bound(torch.float16, "rounded", scale=16)) <= 0
    (program_file,) = [p for p in dump_dir.glob("ring_*.json") if not p.name.endswith(".decisions.json")]
    decisions = json.loads(program_file.with_suffix(".decisions.json").read_text())
    program = json.loads(program_file.read_text())
    assert program["name"] in kernels
    assert decisions["split"]["cores"] == len(program["cores"]) > 1
    assert decisions["split"]["rows_per_core"] * decisions["split"]["cores"] >= decisions["split"]["rows"]
    assert {op["kind"] for op in decisions["operands"]} == {"full"}


def test_reduction_with_broadcast_weight_splits_and_dumps(dump_dir: Path) -> None:
    x, w = torch.randn(1024, 512, dtype=torch.float16), torch.randn(512, dtype=torch.float16)
    fn = lambda x, w: torch.softmax(x * w, -1)  # noqa: E731
    out, _ = compiled_run(fn, x, w)
    assert excess(out, float64_reference(fn, x, w), device_bound(torch.float16, "normalization", k=512, scale=1)) <= 0
    (decisions_file,) = dump_dir.glob("*.decisions.json")
    decisions = json.loads(decisions_file.read_text())
    assert decisions["split"]["cores"] > 1
    assert decisions["split"]["chunk"] <= decisions["split"]["rows_per_core"]
    # the row maxima and sums stay in scratchpad: only x, w and the result touch device memory
    assert sorted(op["kind"] for op in decisions["operands"]) == ["col", "full", "full"]


def test_dumped_program_runs_on_the_simulator_cli(dump_dir: Path) -> None:
    compiled_run(lambda x: torch.exp(x).sum(-1), torch.randn(256, 128, dtype=torch.bfloat16))
    (program_file,) = [p for p in dump_dir.glob("ring_*.json") if not p.name.endswith(".decisions.json")]
    ringsim_cli = [sys.executable, "-c", "import sys; from ringsim.cli import main; sys.exit(main())"]
    run = subprocess.run([*ringsim_cli, "run", str(program_file), "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["cycles"]["total"] > 0


def test_environment_variable_turns_the_dump_on(tmp_path: Path) -> None:
    script = (
        "import torch, ring_inductor\n"
        "from ring_inductor.checking import compiled_run\n"
        "compiled_run(lambda x: torch.relu(x) * 2, torch.randn(64, 64))\n"
    )
    env = {**os.environ, "RING_INDUCTOR_DUMP": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    (decisions,) = tmp_path.glob("ring_*.decisions.json")
    assert json.loads(decisions.read_text())["split"]["rows"] == 4096
