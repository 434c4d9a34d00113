"""Warnings attributed to the caller's line, as torch's C++ warnings are (``TORCH_WARN`` names the Python frame that
called into aten), so "warn once per location" filters count a warning per user call, not once per ringsim line."""

from __future__ import annotations

import pathlib
import sys
import warnings

_PACKAGE = str(pathlib.Path(__file__).resolve().parents[1])


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn `message` at the innermost frame outside ringsim."""
    frame = sys._getframe(1)
    level = 2  # stacklevel 1 is this function
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
