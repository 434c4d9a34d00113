"""Each injected fault does what CI tooling must survive: abort, hang, a transient error, a wrong result."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from ringsim import faults
from ringsim.engine import launch

NEG = {
    "format": "ringsim-program/1",
    "name": "neg_64",
    "buffers": {"x": {"dtype": "float16", "shape": [64]}, "y": {"dtype": "float16", "shape": [64]}},
    "cores": [
        {
            "core": 0,
            "tiles": {"a": {"offset": 0, "dtype": "float16", "shape": [64]}},
            "instructions": [
                {"op": "dma_in", "buffer": "x", "offset": 0, "tile": "a"},
                {"op": "compute", "fn": "neg", "inputs": ["a"], "output": "a"},
                {"op": "dma_out", "tile": "a", "buffer": "y", "offset": 0},
            ],
        }
    ],
}

CHILD = textwrap.dedent(
    """
    import torch
    from ringsim.engine import launch
    program = {program!r}
    x, y = torch.ones(64, dtype=torch.float16), torch.zeros(64, dtype=torch.float16)
    for number in range(1, 4):
        launch(program, {{"x": x, "y": y}})
        print("survived kernel", number, flush=True)
    """
).format(program=NEG)


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    faults.clear()
    yield
    faults.clear()


def buffers() -> dict[str, torch.Tensor]:
    return {"x": torch.arange(64, dtype=torch.float16), "y": torch.zeros(64, dtype=torch.float16)}


def child(fault: str) -> subprocess.Popen[str]:
    env = {**os.environ, faults.ENV_VAR: fault}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_no_fault_by_default() -> None:
    bound = buffers()
    launch(NEG, bound)
    assert torch.equal(bound["y"], -bound["x"])


def test_transient_raises_at_the_nth_kernel_only() -> None:
    at = faults.kernels_launched() + 2
    faults.inject("transient", at)
    bound = buffers()
    launch(NEG, bound)
    with pytest.raises(faults.TransientDeviceError, match=f"injected fault 'transient' at kernel {at}"):
        launch(NEG, bound)
    launch(NEG, bound)
    assert torch.equal(bound["y"], -bound["x"])


def test_wrong_corrupts_the_written_result_deterministically() -> None:
    faults.inject("wrong", faults.kernels_launched() + 1)
    bound = buffers()
    launch(NEG, bound)
    expected = -bound["x"]
    assert not torch.equal(bound["y"], expected)
    assert bound["y"][0].item() == expected[0].item() + 1
    assert torch.equal(bound["y"][1:], expected[1:])


def test_abort_kills_the_process_with_sigabrt() -> None:
    process = child("abort@2")
    out, err = process.communicate(timeout=300)
    assert process.returncode == -signal.SIGABRT
    assert out.split("\n")[0] == "survived kernel 1"
    assert "survived kernel 2" not in out
    assert "injected fault 'abort' at kernel 2" in err


def test_hang_blocks_until_killed() -> None:
    process = child("hang@1")
    seen = _wait_for_line(process, "injected fault 'hang' at kernel 1", timeout=300)
    time.sleep(1.0)
    still_running = process.poll() is None
    process.kill()
    process.communicate(timeout=60)
    assert seen
    assert still_running
    assert process.returncode == -signal.SIGKILL


def _wait_for_line(process: subprocess.Popen[str], text: str, timeout: float) -> bool:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=1.0):
                line = process.stderr.readline()
                if text in line:
                    return True
                if not line:
                    return False
    return False


@pytest.mark.parametrize("spec", ["explode@1", "abort", "abort@0", "hang@x", "abort@1,wrong@1"])
def test_bad_specs_give_one_line_naming_the_variable(spec: str) -> None:
    with pytest.raises(faults.FaultConfigError) as caught:
        faults.parse_spec(spec)
    message = str(caught.value)
    assert message.startswith(f"{faults.ENV_VAR}: ")
    assert "\n" not in message


def test_env_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    at = faults.kernels_launched() + 1
    monkeypatch.setenv(faults.ENV_VAR, f"transient@{at}, wrong@{at + 1}")
    faults.load_env()
    with pytest.raises(faults.TransientDeviceError):
        launch(NEG, buffers())


@pytest.mark.parametrize(("kind", "at"), [("melt", 1), ("abort", 0)])
def test_inject_refuses_bad_arguments(kind: Any, at: int) -> None:
    with pytest.raises(faults.FaultConfigError):
        faults.inject(kind, at)
