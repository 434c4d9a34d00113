"""Warnings attributed to the caller's line, as torch's C++ warnings are (``TORCH_WARN`` names the Python frame that
called into aten), so "warn once per location" filters count a warning per user call, not once per ringsim line."""

from __future__ import annotations

import pathlib
import sys
import warnings

import torch

_PACKAGE = str(pathlib.Path(__file__).resolve().parents[1])


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn `message` at the innermost frame outside ringsim."""
    frame = sys._getframe(1)
    level = 2  # stacklevel 1 is this function
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def resize_output(out: torch.Tensor, shape: tuple[int, ...]) -> None:
    """Resize an ``out=`` tensor to `shape` as torch's ``resize_output`` does: warning when it held elements."""
    if tuple(out.shape) == tuple(shape):
        return
    if out.numel():
        warn(
            f"An output with one or more elements was resized since it had shape {list(out.shape)}, which does not "
            f"match the required output shape {list(shape)}. This behavior is deprecated, and in a future PyTorch "
            "release outputs will not be resized unless they have zero elements. You can explicitly reuse an out "
            "tensor t by resizing it, inplace, to zero elements with t.resize_(0)."
        )
    out.resize_(shape)
