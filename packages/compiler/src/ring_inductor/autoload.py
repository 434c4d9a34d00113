"""ring_inductor's `torch.backends` entry point: torch.compile on ring tensors after `import torch` alone.

torch runs `autoload()` while `import torch` runs, as it does the device's own. Registering then would import
Inductor into every process that imports torch, so `autoload()` only waits for Inductor: when the first compile
imports `torch._inductor.compile_fx`, ring_inductor registers right after it, before any graph is lowered.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

#: The Inductor module every compile imports before it decomposes and lowers a graph.
TRIGGER = "torch._inductor.compile_fx"


def register_now() -> None:
    """Registers ring_inductor with Inductor. A compiler that cannot load must not break other devices' compiles:
    it warns in one line, and a ring compile then fails naming the compiler."""
    try:
        from ring_inductor.register import register

        register()
    except ImportError as missing:
        warnings.warn(f"ring_inductor not registered, torch.compile cannot target ring: {missing}", stacklevel=2)


class _RegisterAfter(importlib.abc.Loader):
    """The trigger's own loader, then the registration."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ...: what inspect and tracebacks ask
        return getattr(self.loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        register_now()


class _AwaitInductor(importlib.abc.MetaPathFinder):
    """Finds nothing itself: hands the trigger's spec, found by the path finder, a loader that registers after it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TRIGGER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisterAfter(spec.loader)
        return spec


def autoload() -> None:
    """Registers ring_inductor with the first compile (at once if Inductor is already imported); idempotent."""
    if TRIGGER in sys.modules:
        register_now()
    elif not any(isinstance(finder, _AwaitInductor) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AwaitInductor())
