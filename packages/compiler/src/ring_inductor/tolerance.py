"""The device's accuracy bound against a float64 reference, to check compiled results by.

It restates the simulator's published numerics table: with u the output dtype's unit roundoff, u32 float32's and
K the reduction length, `|device - reference| <= atol + rtol * |reference|` per class of computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

U32 = 2.0**-24
_UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: U32}


@dataclass(frozen=True)
class Bound:
    rtol: float
    atol: float


def device_bound(dtype: torch.dtype, kind: str, k: int = 1, scale: float = 1.0) -> Bound:
    """The bound of class `kind` (rounded, transcendental, reduction, matmul, normalization) for `dtype` outputs.

    `scale` is what the class's atol is scaled by: max|A| max|B| for matmul, the reduced magnitude otherwise.
    """
    u = _UNIT_ROUNDOFF[dtype]
    if kind == "rounded":
        return Bound(2 * u, 2 * u * 2**-10)
    if kind == "transcendental":
        return Bound(2 * u + 16 * U32, 2 * u * 2**-6 + 16 * U32)
    if kind == "reduction":
        return Bound(2 * u + k * U32, (2 * u + k * U32) * scale)
    if kind == "matmul":
        return Bound(2 * u + k * U32, (2 * u + k * U32) * k * scale)
    if kind == "normalization":
        return Bound(4 * u + k * U32, (4 * u + k * U32) * scale)
    raise ValueError(f"unknown numerics class {kind!r}")


def excess(actual: torch.Tensor, reference: torch.Tensor, bound: Bound) -> float:
    """How far the worst element exceeds the bound (<= 0 when every element is within it)."""
    got = actual.detach().cpu().double()
    allowed = bound.atol + bound.rtol * reference.abs()
    return float(((got - reference).abs() - allowed).max())


def max_relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """The worst element's error as a fraction of the reference's largest magnitude (what benchmarks print)."""
    return float((actual.detach().cpu().double() - reference).abs().max() / reference.abs().max())
