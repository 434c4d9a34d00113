"""Import an upstream test file straight from its path without writing anything next to it (no __pycache__)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path


class ReadOnlySourceLoader(importlib.machinery.SourceFileLoader):
    """A source loader that never caches bytecode, so the upstream tree stays byte-identical."""

    def set_data(self, path: str, data: bytes, *, _mode: int = 0o666) -> None:
        return None


def import_upstream(path: Path) -> types.ModuleType:
    """Import `path` as a top-level module named after the file, as `python test/test_x.py` would see its siblings.

    The file's directory goes on sys.path (in memory only) because upstream test files import their neighbours.
    """
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None:
        if Path(getattr(existing, "__file__", "") or "").resolve() == path.resolve():
            return existing
        raise ImportError(f"a different module named {name!r} is already imported ({existing.__file__})")
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    loader = ReadOnlySourceLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
