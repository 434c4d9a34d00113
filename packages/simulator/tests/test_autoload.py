"""The device exists right after `import torch` (torch.backends entry point), and without it via `import ringsim`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ringsim.backend


def run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    merged = {key: value for key, value in os.environ.items() if key != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**merged, **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_import_torch_alone_registers_ring() -> None:
    result = run(
        """
        import torch
        tensor = torch.empty(2, device="ring")
        print(tensor.device, torch.ring.device_count(), tensor.is_ring)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ring:0", "1", "True"]


def test_device_test_bases_include_privateuse1() -> None:
    result = run(
        """
        import torch
        from torch.testing._internal.common_device_type import PrivateUse1TestBase, get_device_type_test_bases
        from torch.testing._internal.common_utils import NATIVE_DEVICES
        print(PrivateUse1TestBase in get_device_type_test_bases(), "ring" in NATIVE_DEVICES)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


def test_import_ringsim_registers_when_autoload_is_off() -> None:
    script = """
        import torch
        try:
            torch.empty(1, device="ring")
        except RuntimeError:
            print("absent")
        import ringsim
        print(torch.empty(1, device="ring").device)
        """
    result = run(script, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["absent", "ring:0"]


def test_autoload_is_idempotent() -> None:
    ringsim.backend.autoload()
    ringsim.backend.autoload()
    import torch

    assert torch.empty(1, device="ring").device.type == "ring"


def test_compiling_without_the_compiler_names_it() -> None:
    """Inductor finds ring's codegen on `torch.ring`; with no compiler registered, that lookup names the package."""
    result = run(
        """
        import torch, ringsim
        torch.compile(lambda t: t.sin() + 1)(torch.ones(3))  # other devices compile as before
        try:
            torch.compile(lambda t: torch.softmax(t, -1))(torch.ones(2, 8, device="ring"))
        except Exception as error:
            print(str(error).splitlines()[1])
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "RuntimeError: torch.compile on ring needs its compiler: install tributary-compiler "
        "(or `import ring_inductor` where TORCH_DEVICE_BACKEND_AUTOLOAD=0)"
    )
