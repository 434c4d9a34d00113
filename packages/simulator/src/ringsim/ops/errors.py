"""The one clear error for work the device does not do: it names the op, the dtype and the device."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ringsim.ops.registry import DEVICE, dtype_name


def unsupported_dtype(op: str, dtype: torch.dtype, supported: Iterable[torch.dtype]) -> NotImplementedError:
    """``ring: aten::add.Tensor is not supported for dtype float64 (supported: bfloat16, float16, float32)``."""
    names = ", ".join(sorted(dtype_name(d) for d in supported))
    return NotImplementedError(
        f"{DEVICE}: aten::{op} is not supported for dtype {dtype_name(dtype)} (supported: {names})"
    )


def unsupported_op(op: str) -> NotImplementedError:
    """``ring: aten::fft_r2c is not implemented on this device``."""
    return NotImplementedError(
        f"{DEVICE}: aten::{op} is not implemented on this device (see `ringsim capabilities` for the op set)"
    )
