"""A second, minimal privateuse1 device for testreuse's own tests: ``fallbackdev``.

testreuse must work on any privateuse1 backend, so its tests do not run against the reference device alone.
This one is deliberately generic: a small C++ extension (``csrc/``) gives tensors real host-memory storage
(two devices, a device guard, PrivateUse1 hooks) and implements only allocation, view and copy kernels
(``empty.memory_format``, ``empty_strided``, ``as_strided``, ``view``, ``_reshape_alias``, ``view_as_real``,
``view_as_complex``, ``unfold``, ``resize_``, ``set_``, ``_copy_from``, ``_copy_from_and_resize``,
``_local_scalar_dense``); every other operator runs through a boxed CPU fallback that copies the arguments to
the CPU, runs the CPU kernel and copies results back. Random numbers therefore come from the CPU generator.

The extension is compiled with ``torch.utils.cpp_extension.load`` on first use into
``$TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``), once per machine and torch version; later
loads reuse the build. Concurrent loads (pytest-xdist workers) serialise on a lock file in the build
directory, so exactly one of them compiles.

The device must exist before anything imports ``torch.testing._internal``, which decides at import time which
device types get test classes. Three ways to get it there:

- call :func:`load` first thing, e.g. at the top of a conftest or a plugin;
- name this module as a pytest plugin, ``pytest -p fallback_backend`` with this directory on ``PYTHONPATH``
  (or ``-p tests.backends.fallback_backend`` from the package root), which loads it in ``pytest_configure``;
- give the module path to an option that imports a backend module and calls its ``load()``.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import sys
from types import ModuleType

import pytest
import torch
import torch.utils.cpp_extension

DEVICE_NAME = "fallbackdev"
SOURCE_DIR = pathlib.Path(__file__).resolve().parent / "csrc"
SOURCES = ("runtime.cpp", "kernels.cpp", "module.cpp")
_TEST_MACHINERY = "torch.testing._internal.common_device_type"


class BackendLoadError(RuntimeError):
    """The fallback device cannot be registered in this process."""


def build_directory() -> pathlib.Path:
    """Where the extension is compiled: one directory per torch build, shared by every process that loads it."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or pathlib.Path.home() / ".cache" / "torch_extensions"
    tag = torch.__version__.replace("+", "_").replace(".", "_")
    return pathlib.Path(root) / f"{DEVICE_NAME}_torch{tag}_py{sys.version_info.major}{sys.version_info.minor}"


def _compile() -> ModuleType:
    """Build (or reuse) the extension while holding an exclusive lock, so parallel workers build it once."""
    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # torch's own build baton outlives a build that was killed; nobody else is building while we hold the lock.
        (directory / "lock").unlink(missing_ok=True)
        return torch.utils.cpp_extension.load(
            name=f"{DEVICE_NAME}_C",
            sources=[str(SOURCE_DIR / source) for source in SOURCES],
            build_directory=str(directory),
            extra_cflags=["-O1"],
            verbose=False,
        )


class _DeviceContext:
    """``torch.fallbackdev.device(d)``: ``d`` is the current device inside the ``with`` block (storage moves use it)."""

    def __init__(self, device: torch.device | str | int | None) -> None:
        index = device if isinstance(device, int) or device is None else torch.device(device).index
        self.index = -1 if index is None else index
        self.previous = -1

    def __enter__(self) -> None:
        module = getattr(torch, DEVICE_NAME)
        self.previous = module.current_device()
        if self.index >= 0:
            module.set_device(self.index)

    def __exit__(self, *exc_info: object) -> None:
        getattr(torch, DEVICE_NAME).set_device(self.previous)


def _add_python_api(extension: ModuleType) -> None:
    """The parts of the device module that are Python objects; random ops draw from the CPU generator."""
    extension.device = _DeviceContext
    extension.get_rng_state = lambda device=DEVICE_NAME: torch.get_rng_state()
    extension.set_rng_state = lambda new_state, device=DEVICE_NAME: torch.set_rng_state(new_state)


def load() -> str:
    """Register the fallback device in this process (idempotent) and return its device name."""
    registered = torch._C._get_privateuse1_backend_name()
    if registered == DEVICE_NAME and hasattr(torch, DEVICE_NAME):
        return DEVICE_NAME
    if registered != "privateuseone":
        raise BackendLoadError(f"privateuse1 is already registered as {registered!r}; cannot load {DEVICE_NAME!r}")
    if _TEST_MACHINERY in sys.modules:
        raise BackendLoadError(
            f"{_TEST_MACHINERY} was imported before the {DEVICE_NAME!r} device was loaded; "
            "load the backend first or no test class is instantiated for it"
        )
    extension = _compile()
    _add_python_api(extension)
    torch.utils.rename_privateuse1_backend(DEVICE_NAME)
    torch._register_device_module(DEVICE_NAME, extension)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    return DEVICE_NAME


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """As a ``-p`` plugin: register the device before any plugin or test module imports torch's test machinery."""
    load()
