"""Making an operand contiguous and stick-aligned before a kernel reads it.

A permuted view of a contiguous, stick-aligned tensor (``w.t()`` in ``linear``, ``x.transpose(1, 2)``) is
restickified on the device: one core loads the base, permutes it on the scratchpad and writes a contiguous copy.
Other layouts (slices, misaligned starts) and bases too large for one scratchpad go through the copy kernel.
"""

from __future__ import annotations

from typing import Any

import torch

from ringsim import engine, runtime
from ringsim.ops.programs import SCRATCHPAD, STICK, Operand, Step, row_program

_PROGRAMS: dict[Any, dict[str, Any]] = {}


def _permutation(t: torch.Tensor) -> list[int] | None:
    """The dims order that makes `t` a contiguous tensor, if `t` is a permutation of one."""
    perm = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    base = t.permute(perm)
    return perm if base.is_contiguous() else None


def contiguous(t: torch.Tensor) -> torch.Tensor:
    """A contiguous, stick-aligned tensor with `t`'s values."""
    if t.is_contiguous():
        return t.clone()  # only the start is misaligned
    perm = _permutation(t)
    if perm is None or t.data_ptr() % STICK or 2 * t.numel() * t.element_size() + 2 * STICK > SCRATCHPAD:
        return t.contiguous()
    base = t.permute(perm)
    inverse = [perm.index(d) for d in range(t.dim())]
    key = ("restickify", t.dtype, tuple(base.shape), tuple(inverse))
    program = _PROGRAMS.get(key)
    if program is None:
        operands = [
            Operand("x", t.dtype, tuple(base.shape), split=False),
            Operand("out", t.dtype, tuple(t.shape), split=False, role="out"),
        ]
        program = _PROGRAMS[key] = row_program(
            "restickify", 1, operands, [Step("permute", ("x",), ("out",), {"dims": inverse})]
        )
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    engine.launch(program, {"x": runtime.host_view(base), "out": runtime.host_view(out)}, key=key)
    return out
