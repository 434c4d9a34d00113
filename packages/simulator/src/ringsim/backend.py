"""Registers the Ring-32 simulator with torch as the privateuse1 device "ring".

torch calls `autoload()` through the `torch.backends` entry point while `import torch` runs, so the
device exists before torch.testing._internal decides which device test bases to instantiate.
"""

from __future__ import annotations

import torch

from ringsim import torchbridge

BACKEND_NAME = "ring"
_registered = False


def autoload() -> None:
    """Renames privateuse1, loads the native runtime and installs torch.ring; safe to call repeatedly."""
    global _registered
    if _registered:
        return
    if torchbridge.privateuse1_backend_name() != BACKEND_NAME:
        torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    import ringsim._C  # noqa: F401 - loading it registers the allocator, guard, hooks and storage kernels
    from ringsim import device_module

    torchbridge.register_device_module(BACKEND_NAME, device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    from ringsim.ops import register

    register()  # the compute kernels, and the one-line error for every op the device does not run
    _registered = True
