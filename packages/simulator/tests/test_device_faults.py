"""Injected device faults reach eager PyTorch code the way CI tooling will meet them: in a separate process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import torch  # autoload registers the device and its kernels
    from ringsim.faults import TransientDeviceError

    x = torch.arange(64, dtype=torch.float32)
    a = x.to("ring")
    first = (a + 1).cpu()                 # kernel 1
    try:
        second = (a * 2).cpu()            # kernel 2
    except TransientDeviceError as error:
        print("transient:", error)
        raise SystemExit(3)
    print("first ok:", torch.equal(first, x + 1))
    print("second ok:", torch.equal(second, x * 2))
    """
)


def run(fault: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RINGSIM_FAULT": fault}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=timeout)


def test_abort_kills_the_process_at_the_nth_kernel() -> None:
    result = run("abort@2")
    assert result.returncode == -signal.SIGABRT
    assert "first ok" not in result.stdout


def test_transient_raises_a_transient_device_error() -> None:
    result = run("transient@2")
    assert result.returncode == 3
    assert result.stdout.startswith("transient:")


def test_wrong_gives_a_wrong_result_at_the_nth_kernel_only() -> None:
    result = run("wrong@2")
    assert result.returncode == 0, result.stderr
    assert "first ok: True" in result.stdout
    assert "second ok: False" in result.stdout


def test_hang_is_killed_by_a_timeout() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run("hang@1", timeout=20)
